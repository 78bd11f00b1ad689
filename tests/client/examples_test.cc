// Every file in client/examples parses, strictly (no unknown fields), into
// the request type of its RPC, and every RPC has an example.
#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/cli/message_io.h"
#include "client/cli/planner_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace cli {
namespace {

// Runfiles are laid out like the workspace, and tests run at its root.
constexpr char kExamples[] = "client/examples/";

struct Example {
  std::string file;
  const google::protobuf::Descriptor* type;
};

// "PartitionGraph" -> "partition_graph".
std::string SnakeCase(const std::string& camel_case) {
  std::string snake;
  for (char c : camel_case) {
    if (absl::ascii_isupper(c) && !snake.empty()) snake.push_back('_');
    snake.push_back(absl::ascii_tolower(c));
  }
  return snake;
}

// One example request per method of the service, <snake_case>.json, and the
// graph the partition example plans.
std::vector<Example> Examples() {
  std::vector<Example> examples;
  for (const std::string& name : PlannerMethodNames()) {
    examples.push_back({SnakeCase(name) + ".json", (*FindPlannerMethod(name))->input_type()});
  }
  examples.push_back({"graph_mlp.json", v1::Graph::descriptor()});
  return examples;
}

TEST(ExamplesTest, EachParsesIntoItsType) {
  for (const Example& example : Examples()) {
    std::unique_ptr<google::protobuf::Message> message =
        NewMessage(example.type);
    std::istringstream no_stdin;
    const absl::Status status = ReadMessageFile(
        absl::StrCat(kExamples, example.file), no_stdin, message.get());
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_GT(message->ByteSizeLong(), 0u) << example.file;
  }
}

TEST(ExamplesTest, EveryMethodHasAnExampleOfItsRequestType) {
  const std::vector<Example> examples = Examples();
  for (const std::string& name : PlannerMethodNames()) {
    const std::string file = SnakeCase(name) + ".json";
    const google::protobuf::Descriptor* request_type =
        (*FindPlannerMethod(name))->input_type();
    const auto example =
        std::find_if(examples.begin(), examples.end(),
                     [&](const Example& e) { return e.file == file; });
    ASSERT_NE(example, examples.end())
        << "no example " << file << " for " << name;
    EXPECT_EQ(example->type, request_type) << file;
  }
}

TEST(ExamplesTest, MlpGraphIsThePartitionExamplesGraph) {
  std::istringstream no_stdin;
  v1::Graph graph;
  ASSERT_TRUE(ReadMessageFile(absl::StrCat(kExamples, "graph_mlp.json"),
                              no_stdin, &graph)
                  .ok());
  v1::PartitionGraphRequest request;
  ASSERT_TRUE(ReadMessageFile(absl::StrCat(kExamples, "partition_graph.json"),
                              no_stdin, &request)
                  .ok());
  EXPECT_EQ(graph.SerializeAsString(), request.graph().SerializeAsString());
  EXPECT_EQ(graph.nodes_size(), 12);
  EXPECT_EQ(request.devices().devices_size(), 3);
  EXPECT_EQ(request.config().mode(), v1::PartitionerConfig::SIZE_BASED);
}

}  // namespace
}  // namespace cli
}  // namespace partplan

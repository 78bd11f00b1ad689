// PartitionGraphSerialized and the plan by name it writes from a plan by
// node index (SerializeResponseWithNames): byte for byte protobuf's
// serialisation of the response PartitionGraph fills, with names and with
// indices, over every partitioner fixture and over plans whose varints take
// more than one byte.
#include "planner/plan_with_names.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "planner/entry_points.h"
#include "tests/planner/fixture_files.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

// Expects PartitionGraphSerialized's bytes for `request` to be the
// serialisation of what PartitionGraph fills, both ways of naming nodes;
// returns whether the request planned.
bool ExpectSameBytesAsTheMessage(v1::PartitionGraphRequest request) {
  bool planned = false;
  for (const v1::NodeReferences references :
       {v1::NODE_REFERENCES_NAMES, v1::NODE_REFERENCES_INDICES}) {
    SCOPED_TRACE(v1::NodeReferences_Name(references));
    request.set_node_references(references);
    v1::PartitionGraphResponse message;
    const absl::Status message_status =
        PartitionGraph(request, InputLimits(), CancellationToken(), &message);
    std::string bytes;
    const absl::Status bytes_status = PartitionGraphSerialized(
        request, request.graph(), InputLimits(), CancellationToken(), &bytes);
    EXPECT_EQ(bytes_status, message_status);
    if (!message_status.ok() || !bytes_status.ok()) continue;
    planned = true;
    v1::PartitionGraphResponse parsed;
    if (!parsed.ParseFromString(bytes)) {
      ADD_FAILURE() << "the bytes do not parse";
      continue;
    }
    // The two calls timed themselves.
    message.mutable_plan()->mutable_summary()->set_planner_seconds(
        parsed.plan().summary().planner_seconds());
    EXPECT_EQ(bytes, message.SerializeAsString());
  }
  return planned;
}

class PlanWithNamesFixtureTest : public ::testing::TestWithParam<std::string> {};
TEST_P(PlanWithNamesFixtureTest, SerializesAsTheMessageWould) {
  ExpectSameBytesAsTheMessage(LoadFixtureRequest<v1::PartitionGraphRequest>(GetParam()));
}
INSTANTIATE_TEST_SUITE_P(Fixtures, PlanWithNamesFixtureTest,
                         ::testing::ValuesIn(FixturePathsUnder(PartitionerFixtureDirs())),
                         FixturePathCaseName);

// A chain of `length` nodes with names of `name_length` characters, each
// node alone in its partition: partition ids and assignments past 127,
// and names past 127 bytes, take varints of two bytes.
v1::PartitionGraphRequest ManySmallPartitions(int length, int name_length) {
  TestGraph graph;
  graph.Placeholder("x", 1);
  std::string previous = "x";
  for (int i = 0; i < length; ++i) {
    std::string name = absl::StrCat("n", i, "_");
    name.resize(std::max<size_t>(name.size(), name_length), 'a');
    graph.Op(name, {previous}, 100, 50);
    previous = name;
  }
  graph.Output({previous});
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = graph.Build();
  for (int d = 0; d < length; ++d) {
    v1::Device* device = request.mutable_devices()->add_devices();
    device->set_name(absl::StrCat("gpu", d));
    device->set_logical_id(d);
    device->set_available_memory_bytes(200);  // one node and its input each
  }
  request.mutable_config()->set_mode(v1::PartitionerConfig::SIZE_BASED);
  return request;
}

TEST(PlanWithNamesTest, WritesLongVarintsAsProtobufDoes) {
  for (const int name_length : {1, 130, 20000}) {
    SCOPED_TRACE(name_length);
    EXPECT_TRUE(ExpectSameBytesAsTheMessage(ManySmallPartitions(300, name_length)));
  }
}

TEST(PlanWithNamesTest, ErrorsAreThoseOfPartitionGraph) {
  v1::PartitionGraphRequest request = ManySmallPartitions(3, 4);
  request.mutable_devices()->mutable_devices(0)->set_available_memory_bytes(-1);
  EXPECT_FALSE(ExpectSameBytesAsTheMessage(request));
  request = ManySmallPartitions(3, 4);
  request.set_node_references(static_cast<v1::NodeReferences>(9));
  std::string bytes;
  const absl::Status status = PartitionGraphSerialized(request, request.graph(), InputLimits(),
                                                       CancellationToken(), &bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace partplan

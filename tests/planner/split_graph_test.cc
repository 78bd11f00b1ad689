#include "planner/split/split_graph.h"

#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "planner/base/status_util.h"
#include "planner/wire/split_graph_response.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::SplitGraphRequest Request(const std::vector<std::pair<std::string, int>>& assignments) {
  v1::SplitGraphRequest request;
  *request.mutable_graph() = TestGraph()
                                 .Placeholder("x", 1)
                                 .GetAttr("w", 1)
                                 .Module("layer.0.fc", {"x", "w"}, 1, 1)
                                 .Op("relu", {"layer.0.fc"}, 1, 1)
                                 .Module("layer.1.fc", {"relu", "x"}, 1, 1)
                                 .Output({"layer.1.fc", "relu"})
                                 .Build();
  for (const auto& [node, partition] : assignments) {
    v1::NodePartition* assignment = request.add_assignments();
    assignment->set_node(node);
    assignment->set_partition(partition);
  }
  return request;
}

absl::StatusOr<v1::SplitGraphResponse> Split(const v1::SplitGraphRequest& request) {
  CancellationToken token;
  return SplitGraph(request, InputLimits(), token);
}

std::vector<std::string> Strings(const google::protobuf::RepeatedPtrField<std::string>& s) {
  return {s.begin(), s.end()};
}

TEST(SplitGraphTest, DescribesSubmodulesCallsAndQualifiedNames) {
  absl::StatusOr<v1::SplitGraphResponse> response =
      Split(Request({{"layer.0.fc", 0}, {"relu", 0}, {"layer.1.fc", 1}}));
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->submodules_size(), 2);
  const v1::Submodule& first = response->submodules(0);
  EXPECT_EQ(first.name(), "submod_0");
  EXPECT_THAT(Strings(first.nodes()), ElementsAre("layer.0.fc", "relu"));
  EXPECT_THAT(Strings(first.inputs()), ElementsAre("x", "w"));
  // relu is used by submod_1 first, then by the output.
  EXPECT_THAT(Strings(first.outputs()), ElementsAre("relu"));
  EXPECT_THAT(Strings(first.dependents()), ElementsAre("submod_1"));
  EXPECT_THAT(Strings(response->submodules(1).depends_on()), ElementsAre("submod_0"));
  EXPECT_THAT(Strings(response->base_graph(1).arguments()), ElementsAre("submod_0", "x"));
  EXPECT_THAT(Strings(response->base_graph(1).results()), ElementsAre("submod_1"));
  ASSERT_EQ(response->qualname_map_size(), 2);
  EXPECT_EQ(response->qualname_map(0).split_name(), "submod_0.layer_0_fc");
  EXPECT_EQ(response->qualname_map(0).original_name(), "layer.0.fc");
  EXPECT_THAT(Strings(response->output_values()), ElementsAre("submod_1", "submod_0"));
}

// Graph inputs may take the names split_module gives its submodules; the
// calls then get the next free submod_<n>, as torch.fx's _Namespace does.
TEST(SplitGraphTest, SubmoduleNamesSkipNamesTakenByGraphInputs) {
  v1::SplitGraphRequest request;
  *request.mutable_graph() = TestGraph()
                                 .Placeholder("submod_0", 1)
                                 .Placeholder("submod_1", 1)
                                 .Placeholder("submod_3", 1)
                                 .Op("a", {"submod_0"}, 1, 1)
                                 .Op("b", {"submod_1"}, 1, 1)
                                 .Op("c", {"submod_3"}, 1, 1)
                                 .Output({"a", "b", "c"})
                                 .Build();
  for (const auto& [node, partition] :
       std::vector<std::pair<std::string, int>>{{"a", 0}, {"b", 1}, {"c", 2}}) {
    v1::NodePartition* assignment = request.add_assignments();
    assignment->set_node(node);
    assignment->set_partition(partition);
  }
  absl::StatusOr<v1::SplitGraphResponse> response = Split(request);
  ASSERT_TRUE(response.ok()) << response.status();
  // Three roots, built last first: partition 2 takes the free submod_2;
  // partition 1 skips submod_1..3 to submod_4; partition 0 then skips
  // submod_0..4 to submod_5.
  ASSERT_EQ(response->submodules_size(), 3);
  EXPECT_EQ(response->submodules(0).name(), "submod_2");
  EXPECT_EQ(response->submodules(1).name(), "submod_4");
  EXPECT_EQ(response->submodules(2).name(), "submod_5");
  EXPECT_THAT(Strings(response->output_values()), ElementsAre("submod_5", "submod_4", "submod_2"));
}

// 20k graph inputs named submod_0..submod_19999 and 20k partitions: naming
// stays near-linear (it walked the taken names again for every partition:
// minutes of CPU that no deadline stopped).
TEST(SplitGraphTest, ManySubmoduleNamesTakenByGraphInputsAreSkippedQuickly) {
  constexpr int kCount = 20000;
  TestGraph graph;
  for (int i = 0; i < kCount; ++i) graph.Placeholder("submod_" + std::to_string(i), 1);
  for (int i = 0; i < kCount; ++i) graph.Op("op_" + std::to_string(i), {"submod_" + std::to_string(i)}, 1, 1);
  v1::SplitGraphRequest request;
  *request.mutable_graph() = graph.Output({"op_0"}).Build();
  for (int i = 0; i < kCount; ++i) {
    v1::NodePartition* assignment = request.add_assignments();
    assignment->set_node("op_" + std::to_string(i));
    assignment->set_partition(i);
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::SplitGraphResponse> response = Split(request);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->submodules_size(), kCount);
  // Built last first: partition 19999 takes submod_20000, 19998 submod_20001, ...
  EXPECT_EQ(response->submodules(0).name(), "submod_20000");
  EXPECT_EQ(response->submodules(kCount - 1).name(), "submod_" + std::to_string(2 * kCount - 1));
}

struct BadAssignmentCase {
  std::string name;
  std::vector<std::pair<std::string, int>> assignments;
  std::string field;
  std::string message;
};

class BadAssignmentTest : public ::testing::TestWithParam<BadAssignmentCase> {};

TEST_P(BadAssignmentTest, IsInvalidArgumentNamingTheField) {
  absl::StatusOr<v1::SplitGraphResponse> response = Split(Request(GetParam().assignments));
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InvalidFieldPath(response.status()).value_or("<none>"), GetParam().field);
  EXPECT_THAT(std::string(response.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    AllChecks, BadAssignmentTest,
    ::testing::ValuesIn(std::vector<BadAssignmentCase>{
        {"UnknownNode", {{"layer.0.fc", 0}, {"nope", 0}}, "assignments[1].node",
         "no node is called 'nope'"},
        {"GraphInput", {{"x", 0}}, "assignments[0].node", "'x' is a PLACEHOLDER"},
        {"Twice", {{"relu", 0}, {"relu", 1}}, "assignments[1].node", "assigned twice"},
        {"Missing", {{"layer.0.fc", 0}, {"relu", 0}}, "assignments",
         "node 'layer.1.fc' (graph.nodes[4]) has no partition"},
        {"Cycle", {{"layer.0.fc", 0}, {"relu", 1}, {"layer.1.fc", 0}}, "assignments",
         "cycle exists between partitions: partitions 0, 1"},
    }),
    [](const ::testing::TestParamInfo<BadAssignmentCase>& info) { return info.param.name; });

// The server sends SplitGraph's response as SplitGraphSerialized writes it,
// without building it as messages: those bytes must be protobuf's own
// serialisation of the response (fields in number order, empty singular
// strings left out), in pieces of any size. A chain of modules with long
// names and targets, each in a partition of its own, makes lengths and
// partition ids past one byte of varint; the partitions count down through
// zero, which protobuf leaves out, to negative ids of ten bytes.
TEST(SplitGraphTest, SerializedIsProtobufsSerialization) {
  TestGraph graph;
  graph.Placeholder("x", 1);
  std::string previous = "x";
  v1::SplitGraphRequest request;
  for (int i = 0; i < 300; ++i) {
    const std::string name = absl::StrCat("layers.", i, ".", std::string(130, 'a'));
    graph.Module(name, {previous}, 1, 1);  // its target is its name
    previous = name;
    v1::NodePartition* assignment = request.add_assignments();
    assignment->set_node(previous);
    assignment->set_partition(150 - i);
  }
  graph.Output({previous});
  *request.mutable_graph() = graph.Build();
  const absl::StatusOr<v1::SplitGraphResponse> message = Split(request);
  ASSERT_TRUE(message.ok()) << message.status();
  ASSERT_EQ(message->submodules_size(), 300);
  ASSERT_EQ(message->qualname_map_size(), 300);
  absl::Cord bytes;
  ASSERT_TRUE(
      SplitGraphSerialized(request, request.graph(), InputLimits(), CancellationToken(), &bytes)
          .ok());
  EXPECT_EQ(std::string(bytes), message->SerializeAsString());
  const absl::StatusOr<CompactGraph> imported =
      ImportGraph(request.graph(), InputLimits(), CancellationToken());
  ASSERT_TRUE(imported.ok()) << imported.status();
  const absl::StatusOr<std::vector<int32_t>> partition_of =
      PartitionOfNodes(*imported, request.assignments(), CancellationToken());
  ASSERT_TRUE(partition_of.ok()) << partition_of.status();
  const absl::StatusOr<GraphSplit> split = SplitGraphPlan(
      *imported, *partition_of, request.keep_original_order(), CancellationToken());
  ASSERT_TRUE(split.ok()) << split.status();
  for (const size_t piece_bytes : {0, 1, 2, 7, 64, 100000}) {
    SCOPED_TRACE(piece_bytes);
    absl::Cord pieces("left from before");
    ASSERT_TRUE(
        SerializeSplitGraphResponse(*imported, *split, CancellationToken(), &pieces, piece_bytes)
            .ok());
    EXPECT_EQ(std::string(pieces), std::string(bytes));
  }
}

}  // namespace
}  // namespace partplan

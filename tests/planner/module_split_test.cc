#include "planner/split/module_split.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ModuleSplitTest : public ::testing::Test {
 protected:
  absl::StatusOr<ModuleSplit> Split(const v1::Graph& proto, const std::vector<int32_t>& parts,
                                    bool keep_original_order = false) {
    proto_ = proto;
    absl::StatusOr<CompactGraph> graph = ImportGraph(proto_, InputLimits(), token_);
    if (!graph.ok()) return graph.status();
    graph_.emplace(std::move(*graph));
    return SplitModule(*graph_, parts, keep_original_order, "assignments", token_);
  }
  std::vector<std::string> Names(const std::vector<NodeId>& ids) {
    std::vector<std::string> names;
    for (NodeId v : ids) names.emplace_back(graph_->name(v));
    return names;
  }

  CancellationToken token_;
  v1::Graph proto_;
  absl::optional<CompactGraph> graph_;
};

// x -> a -> {b, c} -> d(b, c) -> output(d, a)
v1::Graph Fork() {
  return TestGraph()
      .Placeholder("x", 1)
      .Op("a", {"x"}, 1, 1)
      .Op("b", {"a"}, 1, 1)
      .Op("c", {"a", "x"}, 1, 1)
      .Op("d", {"b", "c"}, 1, 1)
      .Output({"d", "a"})
      .Build();
}

TEST_F(ModuleSplitTest, OrdersInputsAndOutputsByFirstCrossPartitionUse) {
  //                                x   a  b  c  d  output
  absl::StatusOr<ModuleSplit> split = Split(Fork(), {-1, 0, 1, 1, 2, -1});
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->partitions.size(), 3);
  const SplitPartition& p0 = split->partitions[0];
  const SplitPartition& p1 = split->partitions[1];
  const SplitPartition& p2 = split->partitions[2];
  EXPECT_THAT(Names(p0.inputs), ElementsAre("x"));
  EXPECT_THAT(Names(p0.outputs), ElementsAre("a"));
  EXPECT_THAT(Names(p1.nodes), ElementsAre("b", "c"));
  EXPECT_THAT(Names(p1.inputs), ElementsAre("a", "x"));
  EXPECT_THAT(Names(p1.outputs), ElementsAre("b", "c"));
  EXPECT_THAT(Names(p2.inputs), ElementsAre("b", "c"));
  EXPECT_THAT(split->construction_order, ElementsAre(0, 1, 2));
  // p0's single output is used by submod_1 and the graph output.
  EXPECT_EQ(p0.submodule_name, "submod_0");
  EXPECT_THAT(p0.dag_output_names, ElementsAre("submod_1", "output"));
  // p1 returns a tuple: unpacked by getitem nodes.
  EXPECT_THAT(p1.result_names, ElementsAre("getitem", "getitem_1"));
  EXPECT_THAT(p1.dag_output_names, ElementsAre("getitem", "getitem_1"));
  EXPECT_THAT(p2.argument_names, ElementsAre("getitem", "getitem_1"));
  EXPECT_THAT(p2.dag_output_names, ElementsAre("submod_2"));
}

TEST_F(ModuleSplitTest, TopologicalOrderPopsTheLastReadyPartitionFirst) {
  // Two independent roots (p5 holds a, p7 holds b), both read by p9.
  v1::Graph graph = TestGraph()
                        .Placeholder("x", 1)
                        .Op("a", {"x"}, 1, 1)
                        .Op("b", {"x"}, 1, 1)
                        .Op("c", {"a", "b"}, 1, 1)
                        .Output({"c"})
                        .Build();
  absl::StatusOr<ModuleSplit> split = Split(graph, {-1, 5, 7, 9, -1});
  ASSERT_TRUE(split.ok()) << split.status();
  // split_module keeps roots on a stack: the last root (7) is built first.
  EXPECT_THAT(split->construction_order, ElementsAre(1, 0, 2));
  EXPECT_EQ(split->partitions[1].submodule_name, "submod_7");

  split = Split(graph, {-1, 5, 7, 9, -1}, /*keep_original_order=*/true);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_THAT(split->construction_order, ElementsAre(0, 1, 2));
}

TEST_F(ModuleSplitTest, GeneratedNamesAvoidGraphInputNames) {
  v1::Graph graph = TestGraph()
                        .Placeholder("getitem", 1)
                        .Placeholder("submod_1", 1)
                        .Op("a", {"getitem"}, 1, 1)
                        .Op("b", {"a", "submod_1"}, 1, 1)
                        .Op("c", {"a", "b"}, 1, 1)
                        .Op("d", {"c", "a"}, 1, 1)
                        .Output({"d"})
                        .Build();
  absl::StatusOr<ModuleSplit> split = Split(graph, {-1, -1, 0, 0, 1, 1, -1});
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_THAT(split->partitions[0].result_names, ElementsAre("getitem_1", "getitem_2"));
  EXPECT_EQ(split->partitions[1].submodule_name, "submod_2");
}

TEST_F(ModuleSplitTest, CycleBetweenPartitionsIsInvalidArgument) {
  v1::Graph graph = TestGraph()
                        .Placeholder("x", 1)
                        .Op("a", {"x"}, 1, 1)
                        .Op("b", {"a"}, 1, 1)
                        .Op("c", {"b"}, 1, 1)
                        .Output({"c"})
                        .Build();
  absl::StatusOr<ModuleSplit> split = Split(graph, {-1, 0, 1, 0, -1});
  EXPECT_EQ(split.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InvalidFieldPath(split.status()).value_or(""), "assignments");
  EXPECT_THAT(std::string(split.status().message()),
              HasSubstr("cycle exists between partitions: partitions 0, 1"));
}

TEST_F(ModuleSplitTest, KeepOriginalOrderRefusesAnOrderReadingLaterPartitions) {
  v1::Graph graph = TestGraph()
                        .Placeholder("x", 1)
                        .Op("a", {"x"}, 1, 1)
                        .Op("b", {"x"}, 1, 1)
                        .Op("c", {"b"}, 1, 1)
                        .Output({"a", "c"})
                        .Build();
  // p0 = {a, c} reads b from p1, which appears after it.
  absl::StatusOr<ModuleSplit> split = Split(graph, {-1, 0, 1, 0, -1}, true);
  EXPECT_EQ(split.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(split.status().message()), HasSubstr("keep_original_order"));
}

}  // namespace
}  // namespace partplan

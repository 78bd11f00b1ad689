// StageModel: live bytes at every cut and stage memory, worked out by hand.
#include "planner/pipeline/stage_model.h"

#include "gtest/gtest.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/pipeline/pipeline_test_graphs.h"

namespace partplan {
namespace {

// x (placeholder, 10 B) -> a (100/10) -> b (200/20) -> c = h(b, x) (300/30),
// w (get_attr, 5 B) read by c too; output returns c and a.
v1::Graph SkipGraph() {
  TestGraphBuilder b;
  b.Placeholder("x", 10);
  b.Function("a", {"x"}, 100, 10);
  b.Function("b", {"a"}, 200, 20);
  b.GetAttr("w", 5);
  b.Function("c", {"b", "x", "w"}, 300, 30);
  b.Output({"c", "a"});
  return b.graph();
}

TEST(StageModelTest, ItemsAreTheNodesButPlaceholdersAndOutput) {
  const v1::Graph proto = SkipGraph();
  CancellationToken token;
  const CompactGraph graph = *ImportGraph(proto, InputLimits(), token);
  const StageModel model(graph);
  ASSERT_EQ(model.num_items(), 4);
  EXPECT_EQ(graph.name(model.item(0)), "a");
  EXPECT_EQ(graph.name(model.item(2)), "w");
  EXPECT_EQ(model.position(graph.Find("x")), -1);
  EXPECT_EQ(model.position(graph.Find("c")), 3);
  EXPECT_EQ(model.position(graph.output_node()), -1);
}

TEST(StageModelTest, LiveBytesCountEveryValueMadeBeforeAndReadAtOrAfterTheCut) {
  const v1::Graph proto = SkipGraph();
  CancellationToken token;
  const CompactGraph graph = *ImportGraph(proto, InputLimits(), token);
  const StageModel model(graph);
  // Cut 0: x (read by a and c). Cut 1: x, a (read by b and the output).
  // Cut 2: x, a (output), b. Cut 3: x, a, b, w. Cut 4 (after c): a, c, for
  // the output.
  EXPECT_EQ(model.LiveBytes(0), 10);
  EXPECT_EQ(model.LiveBytes(1), 10 + 10);
  EXPECT_EQ(model.LiveBytes(2), 10 + 10 + 20);
  EXPECT_EQ(model.LiveBytes(3), 10 + 10 + 20 + 5);
  EXPECT_EQ(model.LiveBytes(4), 10 + 30);
}

TEST(StageModelTest, StageMemoryIsItemTotalsPlusLiveInValues) {
  const v1::Graph proto = SkipGraph();
  CancellationToken token;
  const CompactGraph graph = *ImportGraph(proto, InputLimits(), token);
  const StageModel model(graph);
  EXPECT_EQ(model.StageMemoryBytes(0, 4), 100 + 200 + 5 + 300 + 10);
  EXPECT_EQ(model.StageMemoryBytes(1, 2), 200 + 20);
  // c's stage receives x, a (carried to the output), b and w.
  EXPECT_EQ(model.StageMemoryBytes(3, 4), 300 + 45);
  // Memory never shrinks as a stage grows at either end.
  for (int32_t b = 0; b < 4; ++b) {
    for (int32_t e = b + 1; e <= 4; ++e) {
      if (b > 0) {
        EXPECT_GE(model.StageMemoryBytes(b - 1, e), model.StageMemoryBytes(b, e));
      }
      if (e < 4) {
        EXPECT_GE(model.StageMemoryBytes(b, e + 1), model.StageMemoryBytes(b, e));
      }
    }
  }
}

TEST(StageModelTest, UnreadValuesAreNeverLive) {
  TestGraphBuilder b;
  b.Placeholder("unused", 1000);
  b.Placeholder("x", 10);
  b.Function("dead", {"x"}, 50, 50);
  b.Function("y", {"x"}, 20, 20);
  b.Output({"y"});
  const v1::Graph proto = b.graph();
  CancellationToken token;
  const CompactGraph graph = *ImportGraph(proto, InputLimits(), token);
  const StageModel model(graph);
  EXPECT_EQ(model.LiveBytes(0), 10);
  EXPECT_EQ(model.LiveBytes(1), 10);
  EXPECT_EQ(model.LiveBytes(2), 20);
}

}  // namespace
}  // namespace partplan

// NodeSetMemory: torch.fx's memory of a node set, against the sum written out
// (each node's size plus its inputs' outputs outside the set), on random
// graphs with wide nodes (reading tens of inputs, some twice) and random
// sets, small ones below a wide node's input count and large ones above.
#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "planner/fx/partition.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

int64_t WrittenOut(const CompactGraph& graph, const std::vector<NodeId>& nodes) {
  std::vector<bool> in_set(graph.num_nodes(), false);
  for (NodeId v : nodes) in_set[v] = true;
  int64_t bytes = 0;
  for (NodeId v : nodes) {
    bytes += graph.total_bytes(v);
    for (NodeId u : graph.inputs(v)) {
      if (!in_set[u]) bytes += graph.output_bytes(u);
    }
  }
  return bytes;
}

TEST(NodeSetMemoryTest, MatchesTheSumWrittenOut) {
  std::mt19937 random(5);
  for (int trial = 0; trial < 60; ++trial) {
    TestGraph builder;
    std::vector<std::string> names;
    for (int i = 0; i < 40; ++i) {
      names.push_back(absl::StrCat("x", i));
      builder.Placeholder(names.back(), 1 + random() % 100);
    }
    for (int i = 0; i < 60; ++i) {
      // Every fifth node reads 20 to 60 earlier nodes, some of them twice.
      const int reads = i % 5 == 0 ? 20 + random() % 41 : 1 + random() % 3;
      std::vector<std::string> inputs;
      for (int k = 0; k < reads; ++k) inputs.push_back(names[random() % names.size()]);
      names.push_back(absl::StrCat("op", i));
      const int64_t output = 1 + random() % 100;
      builder.Op(names.back(), inputs, output + random() % 1000, output);
    }
    builder.Output({names.back()});
    const v1::Graph message = builder.Build();
    const CompactGraph graph =
        ImportGraph(message, InputLimits(), CancellationToken(absl::InfiniteFuture())).value();
    NodeSetMemory memory(graph);
    for (int set = 0; set < 40; ++set) {
      std::vector<NodeId> all(graph.num_nodes() - 1);  // not the output
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), random);
      const size_t size = set % 2 == 0 ? 1 + random() % 6 : 1 + random() % all.size();
      std::vector<NodeId> nodes(all.begin(), all.begin() + size);
      EXPECT_EQ(memory.Compute(nodes), WrittenOut(graph, nodes))
          << "trial " << trial << ", a set of " << size;
    }
  }
}

}  // namespace
}  // namespace partplan

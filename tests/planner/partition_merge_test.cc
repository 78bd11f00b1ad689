#include "planner/partition_merge.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/graph_import.h"
#include "planner/partition.h"
#include "planner/status_util.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

using ::testing::ElementsAre;

CompactGraph Import(const v1::Graph& graph) {
  CancellationToken token;
  absl::StatusOr<CompactGraph> imported = ImportGraph(graph, InputLimits(), token);
  EXPECT_TRUE(imported.ok()) << imported.status();
  return *std::move(imported);
}

// torch.fx's combine_partitions_based_on_size as torch.fx computes it: each
// round sorts the group by memory, recomputes every partition's level from
// the graph's edges and each candidate's memory from the union's nodes.
// Partitions are node lists in graph order, in list order.
class ReferenceMerge {
 public:
  ReferenceMerge(const CompactGraph& graph, const PartitionSet& set)
      : graph_(graph), memory_(graph) {
    for (const Partition& partition : set.partitions) list_.push_back(partition.nodes);
    built_ = list_;
  }

  // Merges within the group of `group_ids` (ids in `set`); returns the
  // group's node lists after, in order.
  std::vector<std::vector<NodeId>> Combine(const std::vector<int32_t>& group_ids,
                                           int64_t device_memory) {
    std::vector<std::vector<NodeId>> group;
    for (int32_t p : group_ids) group.push_back(built_[p]);
    while (group.size() > 1) {
      std::vector<std::vector<NodeId>> by_memory = group;
      std::stable_sort(by_memory.begin(), by_memory.end(),
                       [&](const auto& a, const auto& b) { return Memory(a) < Memory(b); });
      const std::vector<NodeId>& smallest = by_memory.front();
      const int32_t smallest_level = Level(smallest);
      bool merged = false;
      for (size_t i = by_memory.size() - 1; i >= 1 && !merged; --i) {
        const std::vector<NodeId>& candidate = by_memory[i];
        const std::vector<NodeId> both = Union(candidate, smallest);
        if (std::abs(Level(candidate) - smallest_level) <= 1 && Memory(both) <= device_memory) {
          Erase(list_, candidate);
          Erase(list_, smallest);
          list_.push_back(both);
          const std::vector<NodeId> gone = smallest;
          Erase(group, candidate);
          Erase(group, gone);
          group.push_back(both);
          merged = true;
        }
      }
      if (!merged) break;
    }
    return group;
  }

  const std::vector<std::vector<NodeId>>& list() const { return list_; }
  int64_t Memory(const std::vector<NodeId>& nodes) { return memory_.Compute(nodes); }

 private:
  static std::vector<NodeId> Union(const std::vector<NodeId>& a, const std::vector<NodeId>& b) {
    std::vector<NodeId> both;
    std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
    return both;
  }
  static void Erase(std::vector<std::vector<NodeId>>& lists, std::vector<NodeId> nodes) {
    lists.erase(std::find(lists.begin(), lists.end(), nodes));
  }

  // The longest path to `nodes`' partition from one with no parents, over
  // the partition DAG of the whole list, by relaxing every edge until
  // nothing changes.
  int32_t Level(const std::vector<NodeId>& nodes) {
    std::vector<int32_t> partition_of(graph_.num_nodes(), -1);
    for (int32_t p = 0; p < static_cast<int32_t>(list_.size()); ++p) {
      for (NodeId v : list_[p]) {
        if (graph_.is_op_node(v)) partition_of[v] = p;
      }
    }
    std::vector<int32_t> level(list_.size(), 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (NodeId u = 0; u < graph_.num_nodes(); ++u) {
        for (NodeId v : graph_.users(u)) {
          const int32_t from = partition_of[u];
          const int32_t to = partition_of[v];
          if (from >= 0 && to >= 0 && from != to && level[to] < level[from] + 1) {
            level[to] = level[from] + 1;
            changed = true;
          }
        }
      }
    }
    return level[std::find(list_.begin(), list_.end(), nodes) - list_.begin()];
  }

  const CompactGraph& graph_;
  NodeSetMemory memory_;
  std::vector<std::vector<NodeId>> built_;
  std::vector<std::vector<NodeId>> list_;
};

// A random torch.fx-like graph: placeholders and get_attrs up front, then
// call_* nodes reading one to three earlier nodes (mostly recent ones).
v1::Graph RandomGraph(std::mt19937& random, int num_ops) {
  TestGraph graph;
  std::vector<std::string> inputs;
  const int num_inputs = 1 + static_cast<int>(random() % 4);
  for (int i = 0; i < num_inputs; ++i) {
    const std::string name = absl::StrCat("in", i);
    if (i % 2 == 0) {
      graph.Placeholder(name, 16 + random() % 200);
    } else {
      graph.GetAttr(name, 16 + random() % 200);
    }
    inputs.push_back(name);
  }
  std::vector<std::string> ops;
  for (int i = 0; i < num_ops; ++i) {
    std::vector<std::string> args;
    const int num_args = 1 + static_cast<int>(random() % 3);
    for (int a = 0; a < num_args; ++a) {
      std::string arg;
      if (ops.empty() || random() % 5 == 0) {
        arg = inputs[random() % inputs.size()];
      } else {
        const int back = static_cast<int>(random() % std::min<size_t>(ops.size(), 6));
        arg = ops[ops.size() - 1 - back];
      }
      if (std::find(args.begin(), args.end(), arg) == args.end()) args.push_back(arg);
    }
    const int64_t output = 8 + random() % 100;
    const std::string name = absl::StrCat("op", i);
    graph.Op(name, args, output + random() % 300, output);
    ops.push_back(name);
  }
  graph.Output({ops.back()});
  return graph.Build();
}

// Cuts the call_* nodes into consecutive partitions of random length, as
// sparse_nn's walk does, and deals them into two groups at random.
PartitionSet RandomCuts(std::mt19937& random, const CompactGraph& graph,
                        std::vector<int32_t> groups[2]) {
  PartitionBuilder builder(graph);
  int32_t current = -1;
  int remaining = 0;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (!graph.is_op_node(v)) continue;
    if (remaining == 0) {
      current = builder.NewPartition();
      groups[random() % 2].push_back(current);
      remaining = 1 + static_cast<int>(random() % 4);
    }
    builder.AddNode(v, current);
    --remaining;
  }
  return std::move(builder).Finish();
}

TEST(PartitionMergerTest, MatchesTorchFxRoundByRoundOnRandomGraphs) {
  std::mt19937 random(20261123);
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE(absl::StrCat("trial ", trial));
    const CompactGraph graph = Import(RandomGraph(random, 8 + static_cast<int>(random() % 60)));
    std::vector<int32_t> groups[2];
    PartitionSet set = RandomCuts(random, graph, groups);
    ReferenceMerge reference(graph, set);
    // From tight (few merges) to loose (most partitions merge).
    int64_t largest = 0;
    for (const Partition& partition : set.partitions) {
      largest = std::max(largest, partition.memory_bytes);
    }
    const int64_t device_memory = largest + static_cast<int64_t>(random() % 4000);

    PartitionMerger merger(graph, set);
    CancellationToken token;
    for (std::vector<int32_t>& group : groups) {
      const std::vector<std::vector<NodeId>> expected = reference.Combine(group, device_memory);
      ASSERT_TRUE(merger.CombineBySize(group, device_memory, token).ok());
      ASSERT_EQ(group.size(), expected.size());
      for (size_t i = 0; i < group.size(); ++i) {
        EXPECT_EQ(merger.memory_bytes(group[i]), reference.Memory(expected[i]));
      }
    }
    std::vector<int32_t> index_of;
    const PartitionSet merged = std::move(merger).Finish(index_of);
    ASSERT_EQ(merged.partitions.size(), reference.list().size());
    for (size_t p = 0; p < merged.partitions.size(); ++p) {
      EXPECT_EQ(merged.partitions[p].nodes, reference.list()[p]) << "partition " << p;
      EXPECT_EQ(merged.partitions[p].memory_bytes, reference.Memory(reference.list()[p]));
      for (NodeId v : merged.partitions[p].nodes) {
        if (graph.is_op_node(v)) {
          EXPECT_EQ(merged.partition_of[v], static_cast<int32_t>(p));
        }
      }
    }
  }
}

// A chain of partitions: merging two of them shortens every path after
// them, so each later partition's level drops by one.
TEST(PartitionMergerTest, AMergeMovesTheLevelsOfLaterPartitions) {
  const CompactGraph graph = Import(TestGraph()
                                        .Placeholder("x", 10)
                                        .Op("a", {"x"}, 10, 10)
                                        .Op("b", {"a"}, 10, 10)
                                        .Op("c", {"b"}, 10, 10)
                                        .Op("d", {"c"}, 10, 10)
                                        .Output({"d"})
                                        .Build());
  PartitionBuilder builder(graph);
  for (NodeId v = 1; v <= 4; ++v) builder.AddNode(v, builder.NewPartition());
  PartitionMerger merger(graph, std::move(builder).Finish());
  EXPECT_EQ(merger.level(3), 3);
  // Only a and b fit together; a is the smallest (it copies x in).
  std::vector<int32_t> group = {0, 1};
  CancellationToken token;
  ASSERT_TRUE(merger.CombineBySize(group, 40, token).ok());
  ASSERT_EQ(group.size(), 1u);
  EXPECT_EQ(merger.level(group[0]), 0);
  EXPECT_EQ(merger.level(2), 1);
  EXPECT_EQ(merger.level(3), 2);
  // The union went to the end of the list.
  std::vector<int32_t> index_of;
  const PartitionSet merged = std::move(merger).Finish(index_of);
  ASSERT_EQ(merged.partitions.size(), 3u);
  EXPECT_THAT(merged.partitions[2].nodes, ElementsAre(0, 1, 2));
  EXPECT_EQ(merged.partitions[2].memory_bytes, 30);  // x, a, b; nothing read from outside
  EXPECT_THAT(merged.partitions[0].parents, ElementsAre(2));
}

TEST(PartitionMergerTest, StopsWhenCancelled) {
  const CompactGraph graph = Import(TestGraph()
                                        .Placeholder("x", 10)
                                        .Op("a", {"x"}, 10, 10)
                                        .Op("b", {"x"}, 10, 10)
                                        .Output({"b"})
                                        .Build());
  PartitionBuilder builder(graph);
  builder.AddNode(1, builder.NewPartition());
  builder.AddNode(2, builder.NewPartition());
  PartitionMerger merger(graph, std::move(builder).Finish());
  std::vector<int32_t> group = {0, 1};
  CancellationToken token;
  token.Cancel();
  EXPECT_EQ(merger.CombineBySize(group, 1000, token).code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace partplan

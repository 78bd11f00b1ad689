#include "planner/fx/partition_merge.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "planner/fx/partition.h"
#include "planner/graph/graph_import.h"
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
// Partitions are node lists, known by their index in `store_` (the
// builder's partitions first, then each union as it is made), so that two
// partitions with the same nodes (two empty ones) stay apart.
class ReferenceMerge {
 public:
  ReferenceMerge(const CompactGraph& graph, const PartitionSet& set)
      : graph_(graph), memory_(graph) {
    for (const Partition& partition : set.partitions) {
      list_.push_back(static_cast<int>(store_.size()));
      store_.push_back(partition.nodes);
    }
  }

  // Merges within the group of `group_ids` (ids in `set`); returns the
  // group after, in order.
  std::vector<int> Combine(const std::vector<int32_t>& group_ids, int64_t device_memory) {
    std::vector<int> group(group_ids.begin(), group_ids.end());
    while (group.size() > 1) {
      std::vector<int> by_memory = group;
      std::stable_sort(by_memory.begin(), by_memory.end(),
                       [&](int a, int b) { return Memory(a) < Memory(b); });
      const int smallest = by_memory.front();
      const std::vector<int32_t> level = Levels();
      bool merged = false;
      for (size_t i = by_memory.size() - 1; i >= 1 && !merged; --i) {
        const int candidate = by_memory[i];
        std::vector<NodeId> both;
        std::set_union(store_[candidate].begin(), store_[candidate].end(), store_[smallest].begin(),
                       store_[smallest].end(), std::back_inserter(both));
        if (std::abs(level[candidate] - level[smallest]) <= 1 &&
            memory_.Compute(both) <= device_memory) {
          const int id = static_cast<int>(store_.size());
          store_.push_back(std::move(both));
          for (std::vector<int>* list : {&list_, &group}) {
            Erase(*list, candidate);
            Erase(*list, smallest);
            list->push_back(id);
          }
          merged = true;
        }
      }
      if (!merged) break;
    }
    return group;
  }

  const std::vector<NodeId>& nodes(int id) const { return store_[id]; }
  const std::vector<int>& list() const { return list_; }
  int64_t Memory(int id) { return memory_.Compute(store_[id]); }
  // The longest path to each partition of the list from one with no
  // parents, by relaxing every edge until nothing changes.
  std::vector<int32_t> Levels() const {
    std::vector<int32_t> partition_of(graph_.num_nodes(), -1);
    for (int id : list_) {
      for (NodeId v : store_[id]) {
        if (graph_.is_op_node(v)) partition_of[v] = id;
      }
    }
    std::vector<int32_t> level(store_.size(), 0);
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
    return level;
  }

 private:
  static void Erase(std::vector<int>& ids, int id) {
    ids.erase(std::find(ids.begin(), ids.end(), id));
  }

  const CompactGraph& graph_;
  NodeSetMemory memory_;
  std::vector<std::vector<NodeId>> store_;
  std::vector<int> list_;
};

// What the random graphs and cuts look like.
struct RandomShape {
  int max_inputs;         // placeholders and get_attrs
  int input_percent;      // of arguments that read an input
  int long_edge_percent;  // of the others that read any earlier node, not a recent one
  bool tied_sizes;        // sizes of 0, 8 or 16 bytes only: many equal memories
  int max_cut;            // call_* nodes per partition, at most
  bool alternate_groups;  // partitions dealt to the groups in turn, as sparse_nn's walk does
  int empty_percent;      // chance of an empty partition before each cut
};

// A random torch.fx-like graph: inputs up front, then call_* nodes reading
// one to four earlier nodes.
v1::Graph RandomGraph(std::mt19937& random, int num_ops, const RandomShape& shape) {
  const auto size = [&](int64_t least, int64_t spread) -> int64_t {
    return shape.tied_sizes ? 8 * static_cast<int64_t>(random() % 3)
                            : least + static_cast<int64_t>(random() % spread);
  };
  TestGraph graph;
  std::vector<std::string> inputs;
  const int num_inputs = 1 + static_cast<int>(random() % shape.max_inputs);
  for (int i = 0; i < num_inputs; ++i) {
    const std::string name = absl::StrCat("in", i);
    if (random() % 2 == 0) {
      graph.Placeholder(name, size(16, 200));
    } else {
      graph.GetAttr(name, size(16, 200));
    }
    inputs.push_back(name);
  }
  std::vector<std::string> ops;
  for (int i = 0; i < num_ops; ++i) {
    std::vector<std::string> args;
    const int num_args = 1 + static_cast<int>(random() % 4);
    for (int a = 0; a < num_args; ++a) {
      std::string arg;
      if (ops.empty() || static_cast<int>(random() % 100) < shape.input_percent) {
        arg = inputs[random() % inputs.size()];
      } else if (static_cast<int>(random() % 100) < shape.long_edge_percent) {
        arg = ops[random() % ops.size()];
      } else {
        arg = ops[ops.size() - 1 - random() % std::min<size_t>(ops.size(), 6)];
      }
      if (std::find(args.begin(), args.end(), arg) == args.end()) args.push_back(arg);
    }
    const int64_t output = size(8, 100);
    const std::string name = absl::StrCat("op", i);
    graph.Op(name, args, output + size(0, 300), output);
    ops.push_back(name);
  }
  graph.Output({ops.back()});
  return graph.Build();
}

// Cuts the call_* nodes into consecutive partitions, as sparse_nn's walk
// does, and deals them into two groups.
PartitionSet RandomCuts(std::mt19937& random, const CompactGraph& graph, const RandomShape& shape,
                        std::vector<int32_t> groups[2]) {
  PartitionBuilder builder(graph);
  int32_t current = -1;
  int remaining = 0;
  int group = 0;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (!graph.is_op_node(v)) continue;
    if (remaining == 0) {
      if (static_cast<int>(random() % 100) < shape.empty_percent) {
        groups[random() % 2].push_back(builder.NewPartition());
      }
      current = builder.NewPartition();
      group = shape.alternate_groups ? 1 - group : static_cast<int>(random() % 2);
      groups[group].push_back(current);
      remaining = 1 + static_cast<int>(random() % shape.max_cut);
    }
    builder.AddNode(v, current);
    --remaining;
  }
  return *std::move(builder).Finish(CancellationToken());
}

// Both groups merged by PartitionMerger and by the reference: the same
// groups, memories and levels (of every partition, in the group or not),
// then the same list.
void ExpectSameMerges(const RandomShape& shape, uint32_t seed, int trials) {
  std::mt19937 random(seed);
  for (int trial = 0; trial < trials; ++trial) {
    SCOPED_TRACE(absl::StrCat("seed ", seed, ", trial ", trial));
    const CompactGraph graph =
        Import(RandomGraph(random, 8 + static_cast<int>(random() % 60), shape));
    std::vector<int32_t> groups[2];
    const PartitionSet set = RandomCuts(random, graph, shape, groups);
    // From tight (few merges) to loose (most partitions merge).
    int64_t largest = 0;
    int64_t total = 0;
    for (const Partition& partition : set.partitions) {
      largest = std::max(largest, partition.memory_bytes);
      total += partition.memory_bytes;
    }
    const int64_t device_memory = largest + static_cast<int64_t>(random() % (1 + total));
    ReferenceMerge reference(graph, set);
    PartitionMerger merger = *PartitionMerger::Create(graph, set, CancellationToken());
    const std::vector<int32_t> initial_levels = reference.Levels();
    for (int32_t h = 0; h < static_cast<int32_t>(set.partitions.size()); ++h) {
      ASSERT_EQ(merger.level(h), initial_levels[h]) << "partition " << h;
    }
    CancellationToken token;
    for (int g = 0; g < 2; ++g) {
      const std::vector<int> expected = reference.Combine(groups[g], device_memory);
      ASSERT_TRUE(merger.CombineBySize(groups[g], device_memory, token).ok());
      ASSERT_EQ(groups[g].size(), expected.size());
      const std::vector<int32_t> levels = reference.Levels();
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(merger.memory_bytes(groups[g][i]), reference.Memory(expected[i]));
        EXPECT_EQ(merger.level(groups[g][i]), levels[expected[i]]) << "group " << g << ", " << i;
      }
      if (g == 0) {
        // The other group's partitions are not merged yet: their handles
        // are their ids.
        for (int32_t h : groups[1]) EXPECT_EQ(merger.level(h), levels[h]) << "partition " << h;
      }
    }
    std::vector<int32_t> index_of;
    const PartitionSet merged = *std::move(merger).Finish(index_of, CancellationToken());
    ASSERT_EQ(merged.partitions.size(), reference.list().size());
    for (size_t p = 0; p < merged.partitions.size(); ++p) {
      const int id = reference.list()[p];
      EXPECT_EQ(merged.partitions[p].nodes, reference.nodes(id)) << "partition " << p;
      EXPECT_EQ(merged.partitions[p].memory_bytes, reference.Memory(id));
      for (NodeId v : merged.partitions[p].nodes) {
        if (graph.is_op_node(v)) {
          EXPECT_EQ(merged.partition_of[v], static_cast<int32_t>(p));
        }
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(PartitionMergerTest, MatchesTorchFxRoundByRoundOnRandomGraphs) {
  ExpectSameMerges({4, 20, 0, false, 4, false, 0}, 20261123, 300);
}
TEST(PartitionMergerTest, MatchesTorchFxWithInputsSharedAcrossPartitions) {
  ExpectSameMerges({12, 40, 0, false, 4, false, 0}, 2, 200);
}
TEST(PartitionMergerTest, MatchesTorchFxWithLongEdgesThatMoveLevels) {
  ExpectSameMerges({4, 20, 40, false, 4, false, 0}, 3, 200);
  ExpectSameMerges({8, 30, 30, false, 1, true, 0}, 9, 200);
}
TEST(PartitionMergerTest, MatchesTorchFxWithTiedMemories) {
  ExpectSameMerges({6, 30, 20, true, 4, false, 0}, 4, 200);
  ExpectSameMerges({3, 20, 30, true, 2, true, 0}, 7, 200);
}
// Many inputs, tied sizes, one node a partition: unions often become the
// smallest partition, and what they can share with a candidate decides
// which candidates are tried.
TEST(PartitionMergerTest, MatchesTorchFxWhenUnionsShareInputs) {
  ExpectSameMerges({12, 60, 10, true, 1, false, 0}, 101, 100);
  ExpectSameMerges({12, 50, 10, false, 1, false, 0}, 1101, 100);
}
TEST(PartitionMergerTest, MatchesTorchFxWithEmptyPartitions) {
  ExpectSameMerges({4, 20, 20, false, 3, false, 20}, 8, 200);
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
  PartitionMerger merger = *PartitionMerger::Create(
      graph, *std::move(builder).Finish(CancellationToken()), CancellationToken());
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
  const PartitionSet merged = *std::move(merger).Finish(index_of, CancellationToken());
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
  PartitionMerger merger = *PartitionMerger::Create(
      graph, *std::move(builder).Finish(CancellationToken()), CancellationToken());
  std::vector<int32_t> group = {0, 1};
  CancellationToken token;
  token.Cancel();
  EXPECT_EQ(merger.CombineBySize(group, 1000, token).code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace partplan

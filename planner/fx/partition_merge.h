// PartitionMerger: torch.fx's combine_partitions_based_on_size (torch 1.13,
// as sparse_nn uses it) on the partitions of a PartitionSet, in time that
// depends on what each merge changes rather than on the graph's size.
//
// Within a group of partitions, each round takes the one with the least
// memory (the earliest in the group's order among equals) and merges it
// into the partition of most memory (the latest among equals) whose level
// in the partition DAG (its longest path from a partition with no parents)
// is within one of its own and whose union with it fits `device_memory`.
// The union goes to the end of the partition list and of the group. Rounds
// stop when the smallest partition merges with none.
//
// torch.fx recomputes every level and the union's memory from its nodes for
// each candidate, and this file's first version recomputed the levels from
// the graph's nodes every round: O(P x (N + E)) for P partitions. Here the
// partition DAG is built once, with the bytes each of its edges carries, so
// that a candidate's merged memory is two memories, the edges between the
// two and the graph inputs both hold (O(1) plus the smaller input set).
// Levels are kept up to date after each merge, with each partition's count
// of parents one level below it, so that a partition's level is worked out
// again from all its parents only when the last of those moves away. A
// merge costs, times log P: the DAG edges and inputs of the side with fewer
// (the other's are kept); the other side's children only if the union's
// level differs from that side's; and the descendants whose level moves.
// That last term is all later partitions when a merge shortens a chain of
// partitions, so a chain merged one partition at a time is O(P^2); merging
// into a hub of many parents or children is not. A round tries candidates
// from the most memory down, starting at the most that could fit beside the
// smallest partition if they shared all it can share (its inputs' sizes and
// its DAG edges' bytes; torch.fx tries every candidate), so what it tries
// and rejects are those that do not fit only for what they fail to share.
//
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionMerger merger,
//                             PartitionMerger::Create(graph, std::move(set), token));
//   PARTPLAN_RETURN_IF_ERROR(merger.CombineBySize(dense_group, memory, token));
//   std::vector<int32_t> index_of;
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionSet merged, std::move(merger).Finish(index_of, token));
//
// Create and Finish poll the token by nodes, edges and partitions.
#ifndef PARTPLAN_PLANNER_FX_PARTITION_MERGE_H_
#define PARTPLAN_PLANNER_FX_PARTITION_MERGE_H_

#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/fx/partition.h"
#include "planner/graph/graph.h"

namespace partplan {

class PartitionMerger {
 public:
  // Takes the partitions of `set` (from PartitionBuilder: node lists with
  // the inputs each reads, torch.fx's memory, partition_of; partition ids
  // in an order where parents come first, as builders create them). Their
  // handles are their ids in `set`. The token's status when it fires
  // first.
  static absl::StatusOr<PartitionMerger> Create(const CompactGraph& graph, PartitionSet set,
                                                const CancellationToken& token);

  // Merges within `group` (handles of live partitions, in torch.fx's list
  // order for that group), which is left holding the group's partitions
  // after the merges, in list order.
  absl::Status CombineBySize(std::vector<int32_t>& group, int64_t device_memory,
                             const CancellationToken& token);

  int64_t memory_bytes(int32_t handle) const { return parts_[handle].memory_bytes; }
  // A live partition's level in the partition DAG.
  int32_t level(int32_t handle) const { return parts_[handle].level; }
  // The id a live partition has in the list now (O(P); for messages).
  int32_t IdOf(int32_t handle) const;

  // The live partitions in list order, with node lists in graph order,
  // partition_of and links; `index_of` maps live handles to their ids.
  absl::StatusOr<PartitionSet> Finish(std::vector<int32_t>& index_of,
                                      const CancellationToken& token) &&;

 private:
  struct Unbuilt {};
  PartitionMerger(const CompactGraph& graph, PartitionSet set, Unbuilt)
      : graph_(graph), built_(std::move(set.partitions)), built_of_(std::move(set.partition_of)) {}
  // The constructor's work (parts, DAG, levels), polling `token`.
  absl::Status Build(const CancellationToken& token);

  struct Part {
    int64_t memory_bytes = 0;
    // The most its union with any partition can take off the two
    // memories: its inputs' sizes and the bytes on its DAG edges.
    int64_t shareable_bytes = 0;
    int32_t level = 0;
    // How many parents are one level below it (its level's witnesses): a
    // level drops only when the last of them does, and is only then
    // computed again from every parent.
    int32_t critical_parents = 0;
    // Changes to its parents' levels not yet applied (old, new; kNoLevel
    // for a parent removed or added), while it waits in UpdateLevels.
    std::vector<std::pair<int32_t, int32_t>> parent_changes;
    // Where its current entry in order_ is (a merge appends a new one); -1
    // once merged away.
    int64_t list_position = 0;
    // Whether it is in the group being combined, and its place there
    // (later is larger; kept after it leaves, for the group's final order).
    bool grouped = false;
    int64_t group_place = 0;
    // Partition DAG edges: bytes each carries (the output size of an input,
    // once per node reading it in the child).
    absl::flat_hash_map<int32_t, int64_t> children;
    absl::flat_hash_map<int32_t, int64_t> parents;
    // The placeholders and get_attrs it holds.
    absl::flat_hash_set<NodeId> inputs;
  };
  // A group member, ordered as torch.fx's stable sort by memory orders it.
  using GroupKey = std::tuple<int64_t, int64_t, int32_t>;  // memory, place, handle
  using GroupSet = absl::btree_set<GroupKey>;

  // What the union of a and b takes off their two memories: the inputs
  // both hold, and the bytes on the DAG edges between them.
  struct Overlap {
    int64_t shared_input_bytes = 0;
    int64_t edge_bytes = 0;
  };
  Overlap OverlapOf(int32_t a, int32_t b) const;
  // torch.fx's calculate_mem_bytes_needed(a, b).
  int64_t MergedMemory(int32_t a, int32_t b) const;
  // Merges `a` and `b`; returns the handle of the union, which is one of
  // theirs (the one with more DAG edges) and goes to the end of the list.
  int32_t Merge(int32_t a, int32_t b);
  // Moves `dead`'s DAG edges to `kept`, dropping those between the two.
  void MoveEdges(int32_t dead, int32_t kept);
  // Sets the level of `kept`, the union of itself and `dead`, and records
  // for their children what changed among their parents. The union's
  // edges must not have moved yet.
  void LevelTheUnion(int32_t kept, int32_t dead);
  // Records that a parent of `child` went from level `before` to `after`
  // (kNoLevel: no such parent) and queues the child.
  void NoteParentChange(int32_t child, int32_t before, int32_t after);
  // Settles the queued partitions in topological order, as far as levels
  // change.
  void UpdateLevels();
  // `handle`'s level and critical parents from all its parents.
  void LevelFromParents(int32_t handle);
  void SetLevel(int32_t handle, int32_t level);
  void Append(int32_t handle);
  // The live handle a builder's partition is part of (union-find).
  int32_t Find(int32_t built);

  GroupKey KeyOf(int32_t handle) const {
    return {parts_[handle].memory_bytes, parts_[handle].group_place, handle};
  }
  void AddToGroup(int32_t handle, int64_t place);
  void RemoveFromGroup(int32_t handle);
  void EraseFromLevel(int32_t handle);

  const CompactGraph& graph_;
  std::vector<Partition> built_;      // the builder's partitions (node lists)
  std::vector<int32_t> built_of_;     // per call_* node, its partition in built_
  std::vector<int32_t> merged_into_;  // by handle: itself while live (union-find)
  std::vector<Part> parts_;           // by handle; merged-away ones stay, unused
  std::vector<int32_t> order_;        // handles in list order; stale entries too
  // The group being combined: all its members, and those of each level.
  GroupSet group_;
  std::vector<GroupSet> group_by_level_;  // by level (at most P - 1)
  // UpdateLevels' work list: whether a handle is in it, and by level.
  std::vector<char> queued_;
  std::vector<std::vector<int32_t>> waiting_;
  int32_t lowest_waiting_ = 0;
  int32_t highest_waiting_ = -1;
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_PARTITION_MERGE_H_

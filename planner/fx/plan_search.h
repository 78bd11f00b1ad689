// Helpers for planners that search over candidate plans the way torch.fx's
// cost_aware and kl_based modes do: a plan as a list of node sets, rebuilt
// into a PartitionSet, re-mapped onto devices, and costed with torch.fx's
// accounting.
//
//   PartitionList parts = ...;                        // node sets, list order
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionSet set, BuildPartitionSet(graph, parts, token));
//   PARTPLAN_ASSIGN_OR_RETURN(bool mapped, RemapAll(graph, devices, token, &set));
//   PARTPLAN_ASSIGN_OR_RETURN(double cost, TorchFxCost(graph, devices, set, token));
#ifndef PARTPLAN_PLANNER_FX_PLAN_SEARCH_H_
#define PARTPLAN_PLANNER_FX_PLAN_SEARCH_H_

#include <vector>

#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/fx/partition.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

// Partitions as torch.fx's list holds them: sorted node sets, in list order
// (graph inputs included, as copied in).
using PartitionList = std::vector<std::vector<NodeId>>;

// The partitions of `parts`, with memory, partition_of and links; no devices.
// The token's status when it fires (polled by work done).
absl::StatusOr<PartitionSet> BuildPartitionSet(const CompactGraph& graph,
                                               const PartitionList& parts,
                                               const CancellationToken& token);

// Clears every partition's devices and maps them all again, best fit in
// list order; a partition that fits nowhere stops the mapping and leaves the
// rest unplaced, as in torch.fx. Returns whether every partition was placed.
absl::StatusOr<bool> RemapAll(const CompactGraph& graph, const DeviceList& devices,
                              const CancellationToken& token, PartitionSet* set);

// torch.fx's cost of a plan: its critical-path latency with torch.fx's
// transfer accounting; infinity when the partitions form a cycle, and
// INVALID_ARGUMENT naming the figure when finite figures give an infinite
// time (EstimatePlanLatency).
absl::StatusOr<double> TorchFxCost(const CompactGraph& graph, const DeviceList& devices,
                                   const PartitionSet& set, const CancellationToken& token);

// Longest-path depth of each partition in the partition DAG (what
// torch.fx's get_bfs_level_partition ends up assigning).
std::vector<int32_t> PartitionLevels(const PartitionSet& set);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_PLAN_SEARCH_H_

// AotPartition: torch.fx's `aot_based` mode, the caller's own plan.
//
// The caller gives the partition of every call_* node (graph inputs may be
// given too; those read by a partition are copied in anyway) and the
// devices of every partition. Partitions are numbered 0..P-1 by the caller;
// their memory is torch.fx's used_mem_bytes of their node sets. As in
// torch.fx, memory is not checked against the devices.
//
// Deliberate differences from torch 1.13, which trusts the maps: every
// call_* node must be assigned exactly once, ids must be 0..P-1 with
// devices for each, devices must exist (INVALID_ARGUMENT naming the entry
// otherwise); and parents and children are filled in (torch.fx leaves them
// empty in this mode).
//
// The node lists cost O(N + E) for N nodes and E edges: they are made in
// graph order by one pass over the graph, without a sort; and a list in
// graph order (as a plan's assignments are) is matched to the nodes without
// hashing its names.
//
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionerOptions options,
//                             PartitionerOptionsFromConfig(config, graph, devices, token));
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionSet set, AotPartition(graph, options.aot, token));
#ifndef PARTPLAN_PLANNER_FX_AOT_PARTITIONER_H_
#define PARTPLAN_PLANNER_FX_AOT_PARTITIONER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/fx/partition.h"
#include "planner/graph/graph.h"

namespace partplan {

// The caller's plan, resolved against the graph and the inventory
// (PartitionerOptionsFromConfig in partitioner_options.h checks it).
struct AotAssignment {
  // Per partition 0..P-1, its devices' logical ids, each once.
  std::vector<std::vector<int32_t>> partition_devices;
  // Per node, the partition an entry gives it, or -1 (each node once).
  std::vector<int32_t> partition_of;
};

// The partitions of `assignment`: INVALID_ARGUMENT when a call_* node has no
// partition (on config.node_partitions) or a partition has no node (on
// config.partition_devices). Polls `token` by work done (nodes and edges);
// its status when it fires.
absl::StatusOr<PartitionSet> AotPartition(const CompactGraph& graph,
                                          const AotAssignment& assignment,
                                          const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_AOT_PARTITIONER_H_

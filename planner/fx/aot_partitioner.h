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
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionSet set,
//                             AotPartition(graph, devices, request.config(), token));
#ifndef PARTPLAN_PLANNER_FX_AOT_PARTITIONER_H_
#define PARTPLAN_PLANNER_FX_AOT_PARTITIONER_H_

#include "absl/status/statusor.h"
#include "partplan/v1/plan.pb.h"
#include "planner/base/cancellation.h"
#include "planner/fx/partition.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

// Polls `token` by work done (entries, nodes, edges); its status when it
// fires.
absl::StatusOr<PartitionSet> AotPartition(const CompactGraph& graph, const DeviceList& devices,
                                          const v1::PartitionerConfig& config,
                                          const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_AOT_PARTITIONER_H_

// SizeBasedPartition: torch.fx's `size_based` mode (torch 1.13 semantics).
//
// Walks the call_* nodes in graph order. A partition takes the first unused
// device (inventory order) whose memory fits its first node, then keeps
// taking nodes while they fit the room left; when a node does not fit, the
// next partition opens on the next device that fits it. Once every device
// has a partition, each remaining node gets a partition of its own, and
// those are placed best-fit by MapPartitionsToDevices (device_mapping.h).
//
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionSet set,
//                             SizeBasedPartition(graph, devices, token));
//
// Runs in O((nodes + edges) + devices log devices). Fails with
// FAILED_PRECONDITION when a node is larger than every unused device.
#ifndef PARTPLAN_PLANNER_FX_SIZE_BASED_PARTITIONER_H_
#define PARTPLAN_PLANNER_FX_SIZE_BASED_PARTITIONER_H_

#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/fx/partition.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

absl::StatusOr<PartitionSet> SizeBasedPartition(const CompactGraph& graph,
                                                const DeviceList& devices,
                                                const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_SIZE_BASED_PARTITIONER_H_

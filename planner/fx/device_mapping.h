// MapPartitionsToDevices: places the partitions that have no device yet
// (torch.fx's get_device_to_partitions_mapping).
//
// Partitions already placed are charged to their devices first (their full
// memory). Each unplaced partition, in id order, then goes to the device with
// the least memory left that still fits it (best fit; ties keep the order of
// the previous round, as torch.fx's stable sort does). On a device already
// holding partitions, a partition needs only its nodes' total sizes plus the
// inputs that device does not hold yet.
//
// Deliberate difference from torch 1.13: an exact fit is accepted (torch
// requires strictly more room than needed, so a partition that fills a
// device exactly is refused there).
//
//   std::vector<DeviceLoad> loads;
//   PARTPLAN_RETURN_IF_ERROR(MapPartitionsToDevices(graph, devices, &set, &loads));
//
// Cost: O(devices log devices + sum over unplaced partitions of
// (inputs x devices tried)). FAILED_PRECONDITION when a partition fits no
// device, naming it.
#ifndef PARTPLAN_PLANNER_FX_DEVICE_MAPPING_H_
#define PARTPLAN_PLANNER_FX_DEVICE_MAPPING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/fx/partition.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

// What a plan charges to one device (inventory order).
struct DeviceLoad {
  int64_t used_bytes = 0;
  std::vector<int32_t> partitions;  // ascending
};

// Charges each placed partition's full memory to each of its devices
// (torch.fx's get_device_partition_stats); unplaced partitions are skipped.
// Polls `token` per partition and device id; its status when it fires.
absl::StatusOr<std::vector<DeviceLoad>> ChargePlacedPartitions(const DeviceList& devices,
                                                               const PartitionSet& set,
                                                               const CancellationToken& token);

// What each device holds under the plan `set` (its final placement, replicas
// included): the distinct nodes of the partitions placed on it, each counted
// once at its total size, plus each value they read from elsewhere, once at
// its output size (NodeSetMemory of their union; a device with one partition
// holds that partition's memory_bytes). An input shared by two partitions on
// one device is therefore counted once. The placement's fit test (torch.fx's)
// never counts less than this, so a placed plan never shows a device over its
// available memory. The union of the partitions most devices (of those with
// two or more) hold is priced once, and each device from it by the nodes it
// holds beyond it and those of it it lacks: each partition's nodes and
// inputs are passed over min(holders, 1 + devices not holding it) times,
// plus the placement's size, so a partition every device holds costs one
// pass.
absl::StatusOr<std::vector<DeviceLoad>> DeviceHoldings(const CompactGraph& graph,
                                                       const DeviceList& devices,
                                                       const PartitionSet& set,
                                                       const CancellationToken& token);

absl::Status MapPartitionsToDevices(const CompactGraph& graph, const DeviceList& devices,
                                    const CancellationToken& token, PartitionSet* set,
                                    std::vector<DeviceLoad>* loads);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_DEVICE_MAPPING_H_

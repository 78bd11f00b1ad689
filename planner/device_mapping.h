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
#ifndef PARTPLAN_PLANNER_DEVICE_MAPPING_H_
#define PARTPLAN_PLANNER_DEVICE_MAPPING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "planner/cancellation.h"
#include "planner/devices.h"
#include "planner/graph.h"
#include "planner/partition.h"

namespace partplan {

// What a plan charges to one device (inventory order).
struct DeviceLoad {
  int64_t used_bytes = 0;
  std::vector<int32_t> partitions;  // ascending
};

// Charges each placed partition's full memory to each of its devices
// (torch.fx's get_device_partition_stats); unplaced partitions are skipped.
std::vector<DeviceLoad> ChargePlacedPartitions(const DeviceList& devices,
                                               const PartitionSet& set);

absl::Status MapPartitionsToDevices(const CompactGraph& graph, const DeviceList& devices,
                                    const CancellationToken& token, PartitionSet* set,
                                    std::vector<DeviceLoad>* loads);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_DEVICE_MAPPING_H_

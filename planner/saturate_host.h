// SaturateHost: torch.fx's `saturate_host`, replicating a plan onto idle
// devices.
//
// In rounds, while twice the used devices plus the replicas so far fit in
// the inventory: every used device (inventory order) takes the smallest
// idle device that holds all its partitions (their full memory); a round
// that cannot find one for every used device is dropped and ends the
// search. Each replica's logical id is then appended to the partitions of
// the device it copies. A plan with no placed partition is left as it is
// (torch.fx loops forever there).
//
//   SaturateHost(devices, &set, &loads);
//
// O(rounds x used devices x log devices).
#ifndef PARTPLAN_PLANNER_SATURATE_HOST_H_
#define PARTPLAN_PLANNER_SATURATE_HOST_H_

#include <vector>

#include "planner/device_mapping.h"
#include "planner/devices.h"
#include "planner/partition.h"

namespace partplan {

void SaturateHost(const DeviceList& devices, PartitionSet* set, std::vector<DeviceLoad>* loads);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_SATURATE_HOST_H_

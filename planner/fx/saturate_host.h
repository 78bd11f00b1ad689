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
// The answer is bounded: a round appends one device id per placement of a
// partition (P, the partitions' device ids before), so D rounds could
// append D x P ids (an AOT_BASED plan of 10^4 partitions on one device,
// copied to 65,535 others: 6.5 x 10^8). Rounds stop before the ids they
// append would pass `max_device_ids`, by default kMaxSaturateDeviceIds,
// InputLimits' default max_values: no more ids than the argument values
// of the largest graph a request may hold. (torch.fx has no such bound.)
//
//   PARTPLAN_RETURN_IF_ERROR(SaturateHost(devices, token, &set));
//
// Cost: O(D log D + R), D devices and R <= max_device_ids the device ids it
// appends (the replicas times the partitions of the devices they copy, the
// size of the answer). The idle devices are one ordered set kept across rounds: a round
// takes at most one device per used device, and there are at most
// D / used devices rounds, so all rounds together take at most D devices.
// torch.fx rebuilds the idle list every round, O(D^2) with one used device.
// Polls `token` in every loop, at most kPollInterval steps apart; on
// CANCELLED or DEADLINE_EXCEEDED `*set` is unspecified.
#ifndef PARTPLAN_PLANNER_FX_SATURATE_HOST_H_
#define PARTPLAN_PLANNER_FX_SATURATE_HOST_H_

#include <cstdint>

#include "absl/status/status.h"
#include "planner/base/cancellation.h"
#include "planner/base/limits.h"
#include "planner/fx/partition.h"
#include "planner/graph/devices.h"

namespace partplan {

// The most device ids SaturateHost appends to a plan by default.
inline constexpr int64_t kMaxSaturateDeviceIds = InputLimits().max_values;

absl::Status SaturateHost(const DeviceList& devices, const CancellationToken& token,
                          PartitionSet* set, int64_t max_device_ids = kMaxSaturateDeviceIds);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_SATURATE_HOST_H_

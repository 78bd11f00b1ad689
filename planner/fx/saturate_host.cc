#include "planner/fx/saturate_host.h"

#include <set>
#include <utility>
#include <vector>

#include "planner/base/status_util.h"

namespace partplan {

absl::Status SaturateHost(const DeviceList& devices, const CancellationToken& token,
                          PartitionSet* set, int64_t max_device_ids) {
  const int num_devices = devices.size();
  // Work done since the token was last polled, in steps of O(log D) at
  // most: every loop below adds to it, so a poll comes within
  // kPollInterval steps wherever the time goes.
  int64_t unpolled = 0;
  const auto poll = [&](int64_t steps) {
    unpolled += steps;
    if (unpolled < CancellationToken::kPollInterval) return absl::OkStatus();
    unpolled = 0;
    return token.Check();
  };
  // torch.fx's get_device_partition_stats: each device is charged the full
  // memory of every partition placed on it.
  std::vector<std::vector<int32_t>> partitions_on(num_devices);
  std::vector<int64_t> charged(num_devices, 0);
  int64_t ids_per_round = 0;  // a round appends one id per placement
  for (int32_t p = 0; p < static_cast<int32_t>(set->partitions.size()); ++p) {
    for (int32_t logical_id : set->partitions[p].logical_device_ids) {
      PARTPLAN_RETURN_IF_ERROR(poll(1));
      ++ids_per_round;
      const int d = devices.IndexOf(logical_id);
      partitions_on[d].push_back(p);
      charged[d] += set->partitions[p].memory_bytes;
    }
  }
  std::vector<int> used;
  for (int d = 0; d < num_devices; ++d) {
    if (!partitions_on[d].empty()) used.push_back(d);
  }
  if (used.empty()) return absl::OkStatus();

  // Idle devices (neither used nor a replica) by (memory, inventory
  // position): lower_bound finds the smallest that fits, the first among
  // equals, as torch.fx's min() over its idle list in inventory order picks.
  std::set<std::pair<int64_t, int>> idle;
  {
    std::vector<bool> is_used(num_devices, false);
    for (int d : used) is_used[d] = true;
    for (int d = 0; d < num_devices; ++d) {
      PARTPLAN_RETURN_IF_ERROR(poll(1));
      if (!is_used[d]) idle.emplace_hint(idle.end(), devices[d].available_memory_bytes, d);
    }
  }
  std::vector<std::pair<int, int>> replicas;  // (replica, original), in order
  std::vector<std::pair<int, int>> round;     // this round's, kept only if complete
  int64_t ids_appended = 0;
  while (2 * used.size() + replicas.size() <= static_cast<size_t>(num_devices) &&
         ids_per_round <= max_device_ids - ids_appended) {
    round.clear();
    for (int original : used) {
      PARTPLAN_RETURN_IF_ERROR(poll(1));
      auto it = idle.lower_bound({charged[original], -1});
      if (it == idle.end()) break;
      round.emplace_back(it->second, original);
      idle.erase(it);
    }
    if (round.size() != used.size()) break;  // torch.fx drops the round and stops
    replicas.insert(replicas.end(), round.begin(), round.end());
    ids_appended += ids_per_round;
  }
  // The answer: every replica's id on each partition of its original. It
  // is replicas x partitions long (an AOT plan with every partition on one
  // device copies them all to every idle device), so it is polled too.
  for (const auto& [replica, original] : replicas) {
    PARTPLAN_RETURN_IF_ERROR(poll(1 + static_cast<int64_t>(partitions_on[original].size())));
    for (int32_t p : partitions_on[original]) {
      set->partitions[p].logical_device_ids.push_back(devices[replica].logical_id);
    }
  }
  return absl::OkStatus();
}

}  // namespace partplan

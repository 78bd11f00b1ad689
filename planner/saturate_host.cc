#include "planner/saturate_host.h"

#include <set>
#include <utility>

namespace partplan {

void SaturateHost(const DeviceList& devices, PartitionSet* set, std::vector<DeviceLoad>* loads) {
  const int num_devices = devices.size();
  // torch.fx's get_device_partition_stats: each device is charged the full
  // memory of every partition placed on it.
  std::vector<std::vector<int32_t>> partitions_on(num_devices);
  std::vector<int64_t> charged(num_devices, 0);
  for (int32_t p = 0; p < static_cast<int32_t>(set->partitions.size()); ++p) {
    for (int32_t logical_id : set->partitions[p].logical_device_ids) {
      const int d = devices.IndexOf(logical_id);
      partitions_on[d].push_back(p);
      charged[d] += set->partitions[p].memory_bytes;
    }
  }
  std::vector<int> used;
  for (int d = 0; d < num_devices; ++d) {
    if (!partitions_on[d].empty()) used.push_back(d);
  }
  if (used.empty()) return;

  std::vector<bool> taken(num_devices, false);  // used, or a replica
  for (int d : used) taken[d] = true;
  std::vector<std::pair<int, int>> replicas;  // (replica, original), in order
  while (2 * used.size() + replicas.size() <= static_cast<size_t>(num_devices)) {
    // Idle devices by (memory, inventory position): the smallest that fits,
    // the first among equals, as torch.fx's min() picks.
    std::set<std::pair<int64_t, int>> idle;
    for (int d = 0; d < num_devices; ++d) {
      if (!taken[d]) idle.emplace(devices[d].available_memory_bytes, d);
    }
    std::vector<std::pair<int, int>> round;
    for (int original : used) {
      auto it = idle.lower_bound({charged[original], -1});
      if (it == idle.end()) break;
      round.emplace_back(it->second, original);
      idle.erase(it);
    }
    if (round.size() != used.size()) break;
    for (const auto& [replica, original] : round) {
      taken[replica] = true;
      replicas.emplace_back(replica, original);
    }
  }
  for (const auto& [replica, original] : replicas) {
    for (int32_t p : partitions_on[original]) {
      set->partitions[p].logical_device_ids.push_back(devices[replica].logical_id);
    }
    (*loads)[replica].used_bytes = (*loads)[original].used_bytes;
    (*loads)[replica].partitions = (*loads)[original].partitions;
  }
}

}  // namespace partplan

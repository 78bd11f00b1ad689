#include "planner/fx/device_mapping.h"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

// Which devices hold which nodes, to charge a partition's inputs once per
// device. A node is held by the device of its partition and, for the
// placeholders and get_attrs read by partitions on several devices, by
// those too: the first holder of each node is an array entry, the others a
// hash set. Placing a partition then writes its nodes in order, where a hash
// set per device missed the cache on every insert of a large graph, and
// KL_BASED places the partitions anew for every swap it tries.
class HeldNodes {
 public:
  HeldNodes(int32_t num_nodes, int num_devices)
      : first_holder_(num_nodes, -1), nodes_held_(num_devices, 0) {}

  void Add(int device, absl::Span<const NodeId> nodes) {
    for (const NodeId v : nodes) {
      if (first_holder_[v] == device) continue;
      if (first_holder_[v] < 0) {
        first_holder_[v] = device;
      } else if (!other_holders_.insert(Key(v, device)).second) {
        continue;
      }
      ++nodes_held_[device];
    }
  }

  bool Holds(int device, NodeId v) const {
    return first_holder_[v] == device || (first_holder_[v] >= 0 && !other_holders_.empty() &&
                                          other_holders_.contains(Key(v, device)));
  }

  bool HoldsAny(int device) const { return nodes_held_[device] > 0; }

 private:
  static uint64_t Key(NodeId v, int device) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(v)) << 32) | static_cast<uint32_t>(device);
  }

  std::vector<int32_t> first_holder_;            // by node; -1 when no device holds it
  std::vector<int64_t> nodes_held_;              // by device
  absl::flat_hash_set<uint64_t> other_holders_;  // (node, device) but the first
};

}  // namespace

absl::StatusOr<std::vector<DeviceLoad>> ChargePlacedPartitions(const DeviceList& devices,
                                                               const PartitionSet& set,
                                                               const CancellationToken& token) {
  std::vector<DeviceLoad> loads(devices.size());
  int64_t work = 0;
  for (int32_t p = 0; p < static_cast<int32_t>(set.partitions.size()); ++p) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    for (int32_t logical_id : set.partitions[p].logical_device_ids) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      DeviceLoad& load = loads[devices.IndexOf(logical_id)];
      load.used_bytes += set.partitions[p].memory_bytes;
      load.partitions.push_back(p);
    }
  }
  return loads;
}

absl::StatusOr<std::vector<DeviceLoad>> DeviceHoldings(const CompactGraph& graph,
                                                       const DeviceList& devices,
                                                       const PartitionSet& set,
                                                       const CancellationToken& token) {
  // Which partitions each device holds, in id order; what they hold is
  // counted anew below.
  PARTPLAN_ASSIGN_OR_RETURN(std::vector<DeviceLoad> loads,
                            ChargePlacedPartitions(devices, set, token));
  int64_t work = 0;
  NodeSetMemory memory(graph);
  std::vector<int32_t> seen(graph.num_nodes(), -1);  // the device that last took each node
  std::vector<NodeId> held;
  for (int d = 0; d < devices.size(); ++d) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    DeviceLoad& load = loads[d];
    // A partition lists each device once, but a saturated plan may repeat one.
    load.partitions.erase(std::unique(load.partitions.begin(), load.partitions.end()),
                          load.partitions.end());
    if (load.partitions.empty()) continue;
    if (load.partitions.size() == 1) {
      load.used_bytes = set.partitions[load.partitions.front()].memory_bytes;
      continue;
    }
    held.clear();
    int64_t held_inputs = 0;  // what memory.Compute(held) will pass over
    for (int32_t p : load.partitions) {
      PARTPLAN_RETURN_IF_ERROR(
          token.CheckWork(1 + static_cast<int64_t>(set.partitions[p].nodes.size()), &work));
      for (NodeId v : set.partitions[p].nodes) {
        if (seen[v] == d) continue;
        held_inputs += static_cast<int64_t>(graph.inputs(v).size());
        seen[v] = d;
        held.push_back(v);
      }
    }
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(held_inputs, &work));
    load.used_bytes = memory.Compute(held);
  }
  return loads;
}

absl::Status MapPartitionsToDevices(const CompactGraph& graph, const DeviceList& devices,
                                    const CancellationToken& token, PartitionSet* set,
                                    std::vector<DeviceLoad>* loads) {
  const int num_devices = devices.size();
  PARTPLAN_ASSIGN_OR_RETURN(*loads, ChargePlacedPartitions(devices, *set, token));
  std::vector<int32_t> unplaced;
  for (int32_t p = 0; p < static_cast<int32_t>(set->partitions.size()); ++p) {
    if (set->partitions[p].logical_device_ids.empty()) unplaced.push_back(p);
  }
  if (unplaced.empty()) return absl::OkStatus();

  // Steps of the loops below, polled by: one partition may try every
  // device and price itself on each, so polls go by the devices tried and
  // the nodes and inputs priced, not by partitions.
  int64_t work = 0;
  std::vector<int64_t> room(num_devices);
  HeldNodes held(graph.num_nodes(), num_devices);
  for (int d = 0; d < num_devices; ++d) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    room[d] = devices[d].available_memory_bytes - (*loads)[d].used_bytes;
    for (int32_t p : (*loads)[d].partitions) {
      PARTPLAN_RETURN_IF_ERROR(
          token.CheckWork(1 + static_cast<int64_t>(set->partitions[p].nodes.size()), &work));
      held.Add(d, set->partitions[p].nodes);
    }
  }
  auto place = [&](int32_t p, int d, int64_t bytes) {
    Partition& partition = set->partitions[p];
    room[d] -= bytes;
    (*loads)[d].used_bytes += bytes;
    (*loads)[d].partitions.push_back(p);
    held.Add(d, partition.nodes);
  };

  // Devices ordered by (room left, order key, device). A device whose room
  // shrinks takes a key above all others, so among equal rooms it sorts
  // last: the order torch.fx's repeated stable sort produces.
  std::set<std::tuple<int64_t, int64_t, int>> by_room;
  std::vector<int64_t> order_key(num_devices);
  for (int d = 0; d < num_devices; ++d) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    order_key[d] = d;
    by_room.emplace(room[d], d, d);
  }
  int64_t next_key = num_devices;

  std::vector<int32_t> stamp(graph.num_nodes(), -1);  // marks the partition's own nodes
  for (size_t i = 0; i < unplaced.size(); ++i) {
    const int32_t p = unplaced[i];
    Partition& partition = set->partitions[p];
    // Stamping and placing (held.Add) pass over the partition's nodes.
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(1 + 2 * static_cast<int64_t>(partition.nodes.size()), &work));
    for (NodeId v : partition.nodes) stamp[v] = p;
    int chosen = -1;
    int64_t chosen_bytes = 0;
    for (const auto& [left, key, d] : by_room) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      int64_t bytes = partition.memory_bytes;
      if (held.HoldsAny(d)) {
        bytes = 0;
        for (NodeId v : partition.nodes) {
          PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
          bytes += graph.total_bytes(v);
          for (NodeId u : graph.inputs(v)) {
            PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
            if (stamp[u] != p && !held.Holds(d, u)) bytes += graph.output_bytes(u);
          }
        }
      }
      if (bytes <= left) {
        chosen = d;
        chosen_bytes = bytes;
        break;
      }
    }
    if (chosen < 0) {
      const int64_t most_room = by_room.empty() ? 0 : std::get<0>(*by_room.rbegin());
      const std::string needs = absl::StrCat(
          "cannot place every partition on a device: partition ", p, " (first node '",
          graph.name(partition.nodes.front()), "') needs ", partition.memory_bytes, " bytes");
      // The partitions placed before hold copies of the graph inputs they
      // read, which can take a device past its memory.
      return absl::FailedPreconditionError(
          most_room >= 0
              ? absl::StrCat(needs, " and the device with the most room left has ", most_room)
              : absl::StrCat(needs, " and every device is already over its memory with the ",
                             "partitions placed before it (the least full by ", -most_room,
                             " bytes)"));
    }
    partition.logical_device_ids.push_back(devices[chosen].logical_id);
    if (chosen_bytes == 0) {  // room unchanged: the device keeps its place
      place(p, chosen, 0);
      continue;
    }
    by_room.erase({room[chosen], order_key[chosen], chosen});
    place(p, chosen, chosen_bytes);
    order_key[chosen] = next_key++;
    by_room.emplace(room[chosen], order_key[chosen], chosen);
  }
  for (DeviceLoad& load : *loads) {
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(1 + static_cast<int64_t>(load.partitions.size()), &work));
    std::sort(load.partitions.begin(), load.partitions.end());
  }
  return absl::OkStatus();
}

}  // namespace partplan

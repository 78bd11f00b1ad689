#include "planner/fx/device_mapping.h"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
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

// NodeSetMemory of the union of partitions' nodes, for many unions that
// share most of their partitions (SPARSE_NN puts the dense partitions on
// every device). The union of a base set of partitions is priced once; a
// union is then priced from it by the nodes it adds and the nodes of base
// partitions it lacks (and holds through no other partition), touching only
// those nodes and their inputs:
//
//   memory(S) = sum over v in S of total(v) + sum over u in inputs(v), u not in S, of output(u)
//
// Adding a node v adds its total and its inputs outside S, and takes away
// output(v) once for each read of v by a node of S. Removing one is the
// reverse. The reads of v by base nodes are counted once (base_reads_);
// those by removed nodes are taken off per union.
class UnionPricer {
 public:
  UnionPricer(const CompactGraph& graph, const PartitionSet& set)
      : graph_(graph),
        set_(set),
        base_listings_(graph.num_nodes(), 0),
        base_reads_(graph.num_nodes(), 0),
        taken_(graph.num_nodes(), -1),
        missing_(graph.num_nodes()),
        removed_reads_(graph.num_nodes()) {}

  // `base`: partition ids, ascending.
  absl::Status SetBase(std::vector<int32_t> base, const CancellationToken& token, int64_t* work) {
    base_ = std::move(base);
    std::vector<NodeId> nodes;
    for (int32_t p : base_) {
      PARTPLAN_RETURN_IF_ERROR(
          token.CheckWork(1 + static_cast<int64_t>(set_.partitions[p].nodes.size()), work));
      for (NodeId v : set_.partitions[p].nodes) {
        if (base_listings_[v]++ == 0) nodes.push_back(v);
      }
    }
    base_bytes_ = 0;
    for (NodeId v : nodes) {
      PARTPLAN_RETURN_IF_ERROR(
          token.CheckWork(1 + static_cast<int64_t>(graph_.inputs(v).size()), work));
      base_bytes_ += graph_.total_bytes(v);
      for (NodeId u : graph_.inputs(v)) {
        ++base_reads_[u];
        if (base_listings_[u] == 0) base_bytes_ += graph_.output_bytes(u);
      }
    }
    return absl::OkStatus();
  }

  // NodeSetMemory of the union of `partitions` (ascending, distinct) for a
  // caller that numbers its unions 0, 1, ... (`key`), each priced once.
  absl::StatusOr<int64_t> Price(int32_t key, absl::Span<const int32_t> partitions,
                                const CancellationToken& token, int64_t* work) {
    added_.clear();
    removed_.clear();
    // The walks below pass over both lists of partition ids.
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(
        static_cast<int64_t>(base_.size()) + static_cast<int64_t>(partitions.size()), work));
    int64_t inputs = 0;  // what the pricing below passes over
    // Partitions beyond the base: their nodes are held; those outside the
    // base's union are added.
    auto next = base_.begin();
    for (int32_t p : partitions) {
      while (next != base_.end() && *next < p) ++next;
      if (next != base_.end() && *next == p) continue;
      PARTPLAN_RETURN_IF_ERROR(
          token.CheckWork(1 + static_cast<int64_t>(set_.partitions[p].nodes.size()), work));
      for (NodeId v : set_.partitions[p].nodes) {
        if (taken_[v] == key) continue;
        taken_[v] = key;
        if (base_listings_[v] == 0) {
          added_.push_back(v);
          inputs += static_cast<int64_t>(graph_.inputs(v).size());
        }
      }
    }
    // Base partitions it lacks: a node of theirs is removed when no held
    // partition lists it, i.e. every base partition listing it is missing.
    auto held = partitions.begin();
    for (int32_t q : base_) {
      while (held != partitions.end() && *held < q) ++held;
      if (held != partitions.end() && *held == q) continue;
      PARTPLAN_RETURN_IF_ERROR(
          token.CheckWork(1 + static_cast<int64_t>(set_.partitions[q].nodes.size()), work));
      for (NodeId r : set_.partitions[q].nodes) {
        if (taken_[r] == key) continue;
        if (Bump(key, &missing_[r]) == base_listings_[r]) {
          removed_.push_back(r);
          inputs += static_cast<int64_t>(graph_.inputs(r).size());
        }
      }
    }
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(inputs, work));

    int64_t bytes = base_bytes_;
    for (NodeId r : removed_) {
      bytes -= graph_.total_bytes(r);
      for (NodeId u : graph_.inputs(r)) {
        if (base_listings_[u] == 0) bytes -= graph_.output_bytes(u);
        Bump(key, &removed_reads_[u]);
      }
    }
    for (NodeId v : added_) {
      bytes += graph_.total_bytes(v);
      for (NodeId u : graph_.inputs(v)) {
        if (!Holds(key, u)) bytes += graph_.output_bytes(u);
      }
    }
    // Reads of an added or removed node by the base nodes still held, which
    // charged its output before (added) or now must (removed). Reads by
    // added nodes were priced above against the union itself.
    for (NodeId v : added_) bytes -= graph_.output_bytes(v) * ReadsByKeptBase(key, v);
    for (NodeId r : removed_) bytes += graph_.output_bytes(r) * ReadsByKeptBase(key, r);
    return bytes;
  }

 private:
  // A per-node counter valid for one union: `key` says which.
  struct Counter {
    int32_t key = -1;
    int32_t count = 0;
  };

  static int32_t Bump(int32_t key, Counter* counter) {
    if (counter->key != key) *counter = {key, 0};
    return ++counter->count;
  }

  static int32_t CountOf(int32_t key, const Counter& counter) {
    return counter.key == key ? counter.count : 0;
  }

  bool Removed(int32_t key, NodeId v) const {
    return base_listings_[v] > 0 && taken_[v] != key &&
           CountOf(key, missing_[v]) == base_listings_[v];
  }

  bool Holds(int32_t key, NodeId v) const {
    return taken_[v] == key || (base_listings_[v] > 0 && !Removed(key, v));
  }

  int64_t ReadsByKeptBase(int32_t key, NodeId v) const {
    return static_cast<int64_t>(base_reads_[v]) - CountOf(key, removed_reads_[v]);
  }

  const CompactGraph& graph_;
  const PartitionSet& set_;
  std::vector<int32_t> base_;           // partition ids, ascending
  int64_t base_bytes_ = 0;              // NodeSetMemory of the base's union
  std::vector<int32_t> base_listings_;  // by node: listings in base partitions
  std::vector<int32_t> base_reads_;     // by node: reads by the base's union
  std::vector<int32_t> taken_;          // by node: the union whose extra partitions list it
  std::vector<Counter> missing_;        // by node: its listings in missing base partitions
  std::vector<Counter> removed_reads_;  // by node: reads by removed nodes
  std::vector<NodeId> added_;
  std::vector<NodeId> removed_;
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
  // How many devices holding two partitions or more hold each partition.
  std::vector<int32_t> holders(set.partitions.size(), 0);
  int32_t shared_devices = 0;
  for (int d = 0; d < devices.size(); ++d) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    DeviceLoad& load = loads[d];
    // A partition lists each device once, but a saturated plan may repeat one.
    load.partitions.erase(std::unique(load.partitions.begin(), load.partitions.end()),
                          load.partitions.end());
    if (load.partitions.size() == 1) {
      load.used_bytes = set.partitions[load.partitions.front()].memory_bytes;
    }
    if (load.partitions.size() < 2) continue;
    ++shared_devices;
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(static_cast<int64_t>(load.partitions.size()), &work));
    for (int32_t p : load.partitions) ++holders[p];
  }
  if (shared_devices == 0) return loads;

  // The base: the partitions most of those devices hold. Each device is then
  // priced from the base's union by what it holds beyond it and what of it
  // it lacks, so a partition costs min(holders, others) passes over its
  // nodes, not one per holder.
  std::vector<int32_t> base;
  for (int32_t p = 0; p < static_cast<int32_t>(holders.size()); ++p) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    if (2 * static_cast<int64_t>(holders[p]) > shared_devices) base.push_back(p);
  }
  UnionPricer pricer(graph, set);
  PARTPLAN_RETURN_IF_ERROR(pricer.SetBase(std::move(base), token, &work));
  for (int d = 0; d < devices.size(); ++d) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    if (loads[d].partitions.size() < 2) continue;
    PARTPLAN_ASSIGN_OR_RETURN(loads[d].used_bytes,
                              pricer.Price(d, loads[d].partitions, token, &work));
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

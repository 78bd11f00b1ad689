#include "planner/fx/partitioner_options.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"
#include "planner/graph/name_index.h"

namespace partplan {
namespace {


using NodePartitions = google::protobuf::RepeatedPtrField<v1::NodePartition>;

// Finds the node each config.node_partitions entry names, for entries 0, 1,
// 2, ... in turn.
//
// A list made from a plan (PartitionPlan.assignments) names the call_* nodes
// in graph order, so each entry is first compared with the call_* node after
// the previous entry's: a hit costs one string comparison, where the name
// index costs a hash and, on a large graph, a cache miss. A list in another
// order misses; once most of a block of entries has missed, the next block is
// looked up in the index with every slot prefetched ahead instead (as
// HashAhead does), and guessing resumes after a block that would have hit.
class EntryNodeLocator {
 public:
  EntryNodeLocator(const CompactGraph& graph, const NodePartitions& entries)
      : graph_(graph), entries_(entries), guess_(OpNodeAfter(-1)) {}

  // The node entries[i] names, or -1.
  NodeId Locate(int i) {
    if (i % kBlock == 0) StartBlock(i);
    const std::string& name = entries_[i].node();
    NodeId v;
    if (prefetched_) {
      v = graph_.Find(name, hashes_[i % kBlock]);
    } else if (guess_ < graph_.num_nodes() && graph_.name(guess_) == name) {
      v = guess_;
    } else {
      v = graph_.Find(name);
    }
    if (v != guess_) ++misses_;
    // Each call_* node is located once (a second time is an error), so the
    // scans of OpNodeAfter cover each run of input nodes once: O(N) in all.
    if (v >= 0 && graph_.is_op_node(v)) guess_ = OpNodeAfter(v);
    return v;
  }

 private:
  static constexpr int kBlock = 64;

  void StartBlock(int first) {
    prefetched_ = 2 * misses_ > kBlock;
    misses_ = 0;
    if (!prefetched_) return;
    const int end = std::min(first + kBlock, entries_.size());
    for (int i = first; i < end; ++i) {
      hashes_[i % kBlock] = NameIndex::Hash(entries_[i].node());
      graph_.name_index().Prefetch(hashes_[i % kBlock]);
    }
  }

  // The first call_* node after v (num_nodes() if none).
  NodeId OpNodeAfter(NodeId v) const {
    do {
      ++v;
    } while (v < graph_.num_nodes() && !graph_.is_op_node(v));
    return v;
  }

  const CompactGraph& graph_;
  const NodePartitions& entries_;
  NodeId guess_;
  bool prefetched_ = false;
  int misses_ = 0;  // in the current block
  uint64_t hashes_[kBlock];
};

// The index of the first entry before `before` that names `name`.
int EarlierEntry(const NodePartitions& entries, int before, const std::string& name) {
  for (int j = 0; j < before; ++j) {
    if (entries[j].node() == name) return j;
  }
  return -1;  // not reached: the caller found one
}


// Resolves AOT_BASED's node_partitions and partition_devices.
absl::StatusOr<AotAssignment> ResolveAotAssignment(const v1::PartitionerConfig& config,
                                                   const CompactGraph& graph,
                                                   const DeviceList& devices,
                                                   const CancellationToken& token) {
  const int num_partitions = config.partition_devices_size();
  AotAssignment assignment;
  assignment.partition_devices.resize(num_partitions);

  int64_t work = 0;  // steps of the loops below, for the token's polls
  std::vector<bool> has_devices(num_partitions, false);
  // The entry (partition_devices index) that last listed each device: each
  // device once per entry.
  std::vector<int> listed_by(devices.size(), -1);
  for (int i = 0; i < num_partitions; ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    const v1::PartitionDevices& entry = config.partition_devices(i);
    const std::string at = absl::StrCat("config.partition_devices[", i, "]");
    if (entry.partition() < 0 || entry.partition() >= num_partitions) {
      return InvalidFieldError(
          absl::StrCat(at, ".partition"),
          absl::StrCat("partition ids must be 0..", num_partitions - 1, " (one entry each), got ",
                       entry.partition()));
    }
    if (has_devices[entry.partition()]) {
      return InvalidFieldError(absl::StrCat(at, ".partition"),
                               absl::StrCat("partition ", entry.partition(), " is listed twice"));
    }
    has_devices[entry.partition()] = true;
    // Each device once: a device listed twice would be charged the
    // partition twice (and its load could overflow).
    for (int k = 0; k < entry.logical_device_ids_size(); ++k) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      const int d = devices.IndexOf(entry.logical_device_ids(k));
      if (d < 0) {
        return InvalidFieldError(absl::StrCat(at, ".logical_device_ids[", k, "]"),
                                 absl::StrCat("no device has logical id ",
                                              entry.logical_device_ids(k)));
      }
      if (listed_by[d] == i) {
        return InvalidFieldError(absl::StrCat(at, ".logical_device_ids[", k, "]"),
                                 absl::StrCat("device ", entry.logical_device_ids(k),
                                              " is listed twice for partition ", entry.partition()));
      }
      listed_by[d] = i;
    }
    assignment.partition_devices[entry.partition()] = {entry.logical_device_ids().begin(),
                                                        entry.logical_device_ids().end()};
  }

  // The partition each entry gives its node.
  std::vector<int32_t>& partition_of = assignment.partition_of;
  partition_of.assign(graph.num_nodes(), -1);
  const NodePartitions& entries = config.node_partitions();
  EntryNodeLocator locator(graph, entries);
  for (int i = 0; i < entries.size(); ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    const v1::NodePartition& entry = entries[i];
    // Made only for an error: one string per entry would cost more than the lookup.
    const auto at = [i] { return absl::StrCat("config.node_partitions[", i, "]"); };
    const NodeId v = locator.Locate(i);
    if (v < 0) {
      return InvalidFieldError(absl::StrCat(at(), ".node"),
                               absl::StrCat("no node is called '", entry.node(), "'"));
    }
    if (v == graph.output_node()) {
      return InvalidFieldError(absl::StrCat(at(), ".node"), "the OUTPUT node has no partition");
    }
    if (partition_of[v] >= 0) {
      return InvalidFieldError(
          absl::StrCat(at(), ".node"),
          absl::StrCat("node '", entry.node(), "' is already assigned by ",
                       "config.node_partitions[", EarlierEntry(entries, i, entry.node()), "]"));
    }
    if (entry.partition() < 0 || entry.partition() >= num_partitions) {
      return InvalidFieldError(
          absl::StrCat(at(), ".partition"),
          absl::StrCat("partition ", entry.partition(),
                       " has no config.partition_devices entry (ids are 0..",
                       num_partitions - 1, ")"));
    }
    partition_of[v] = entry.partition();
  }

  return assignment;
}

}  // namespace

absl::string_view PartitionerModeName(PartitionerMode mode) {
  switch (mode) {
    case PartitionerMode::kSizeBased:
      return "size_based";
    case PartitionerMode::kSparseNn:
      return "sparse_nn";
    case PartitionerMode::kCostAware:
      return "cost_aware";
    case PartitionerMode::kKlBased:
      return "kl_based";
    case PartitionerMode::kAotBased:
      return "aot_based";
  }
  return "unknown";
}

absl::Status CheckPartitionable(const CompactGraph& graph, const DeviceList& devices) {
  if (devices.empty()) {
    return InvalidFieldError("devices.devices", "no devices: the inventory lists no device");
  }
  if (graph.num_op_nodes() == 0) {
    return InvalidFieldError("graph.nodes",
                             "no partition since no operations: the graph has no call_module, "
                             "call_function or call_method node");
  }
  return absl::OkStatus();
}

absl::StatusOr<PartitionerOptions> PartitionerOptionsFromConfig(const v1::PartitionerConfig& config,
                                                                const CompactGraph& graph,
                                                                const DeviceList& devices,
                                                                const CancellationToken& token) {
  PartitionerOptions options;
  switch (config.mode()) {
    case v1::PartitionerConfig::MODE_UNSPECIFIED:
    case v1::PartitionerConfig::SIZE_BASED:
      options.mode = PartitionerMode::kSizeBased;
      break;
    case v1::PartitionerConfig::SPARSE_NN:
      options.mode = PartitionerMode::kSparseNn;
      break;
    case v1::PartitionerConfig::COST_AWARE:
      options.mode = PartitionerMode::kCostAware;
      break;
    case v1::PartitionerConfig::KL_BASED:
      options.mode = PartitionerMode::kKlBased;
      break;
    case v1::PartitionerConfig::AOT_BASED:
      options.mode = PartitionerMode::kAotBased;
      break;
    default:
      return InvalidFieldError("config.mode",
                               absl::StrCat("unknown partitioner mode ", config.mode()));
  }
  options.saturate_host = config.saturate_host();
  PARTPLAN_RETURN_IF_ERROR(CheckPartitionable(graph, devices));
  if (options.mode == PartitionerMode::kAotBased) {
    PARTPLAN_ASSIGN_OR_RETURN(options.aot, ResolveAotAssignment(config, graph, devices, token));
  }
  return options;
}

}  // namespace partplan

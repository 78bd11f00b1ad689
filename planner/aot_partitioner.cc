#include "planner/aot_partitioner.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/status_util.h"

namespace partplan {

absl::StatusOr<PartitionSet> AotPartition(const CompactGraph& graph, const DeviceList& devices,
                                          const v1::PartitionerConfig& config) {
  const int num_partitions = config.partition_devices_size();
  PartitionSet set;
  set.partitions.resize(num_partitions);
  set.partition_of.assign(graph.num_nodes(), -1);

  std::vector<bool> has_devices(num_partitions, false);
  for (int i = 0; i < num_partitions; ++i) {
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
    std::vector<bool> listed(devices.size(), false);
    for (int k = 0; k < entry.logical_device_ids_size(); ++k) {
      const int d = devices.IndexOf(entry.logical_device_ids(k));
      if (d < 0) {
        return InvalidFieldError(absl::StrCat(at, ".logical_device_ids[", k, "]"),
                                 absl::StrCat("no device has logical id ",
                                              entry.logical_device_ids(k)));
      }
      if (listed[d]) {
        return InvalidFieldError(absl::StrCat(at, ".logical_device_ids[", k, "]"),
                                 absl::StrCat("device ", entry.logical_device_ids(k),
                                              " is listed twice for partition ", entry.partition()));
      }
      listed[d] = true;
    }
    set.partitions[entry.partition()].logical_device_ids = {entry.logical_device_ids().begin(),
                                                            entry.logical_device_ids().end()};
  }

  std::vector<int32_t> given(graph.num_nodes(), -1);  // the entry naming each node
  const auto& entries = config.node_partitions();
  HashAhead hashes(graph.name_index(), entries.size(),
                   [&](int64_t i) -> const std::string& { return entries[i].node(); });
  for (int i = 0; i < entries.size(); ++i) {
    const v1::NodePartition& entry = entries[i];
    // Made only for an error: one string per entry would cost more than the lookup.
    const auto at = [i] { return absl::StrCat("config.node_partitions[", i, "]"); };
    const NodeId v = graph.Find(entry.node(), hashes.Next(i));
    if (v < 0) {
      return InvalidFieldError(absl::StrCat(at(), ".node"),
                               absl::StrCat("no node is called '", entry.node(), "'"));
    }
    if (v == graph.output_node()) {
      return InvalidFieldError(absl::StrCat(at(), ".node"), "the OUTPUT node has no partition");
    }
    if (given[v] >= 0) {
      return InvalidFieldError(absl::StrCat(at(), ".node"),
                               absl::StrCat("node '", entry.node(), "' is already assigned by ",
                                            "config.node_partitions[", given[v], "]"));
    }
    given[v] = i;
    if (entry.partition() < 0 || entry.partition() >= num_partitions) {
      return InvalidFieldError(
          absl::StrCat(at(), ".partition"),
          absl::StrCat("partition ", entry.partition(),
                       " has no config.partition_devices entry (ids are 0..",
                       num_partitions - 1, ")"));
    }
    Partition& partition = set.partitions[entry.partition()];
    partition.nodes.push_back(v);
    if (graph.is_op_node(v)) {
      set.partition_of[v] = entry.partition();
      // torch.fx's add_node copies in the graph inputs the node reads.
      for (NodeId u : graph.inputs(v)) {
        if (graph.is_input_node(u)) partition.nodes.push_back(u);
      }
    }
  }
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (graph.is_op_node(v) && given[v] < 0) {
      return InvalidFieldError("config.node_partitions",
                               absl::StrCat("node '", graph.name(v), "' (graph.nodes[", v,
                                            "]) has no partition"));
    }
  }
  NodeSetMemory memory(graph);
  for (int p = 0; p < num_partitions; ++p) {
    std::vector<NodeId>& nodes = set.partitions[p].nodes;
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    if (nodes.empty()) {
      return InvalidFieldError(absl::StrCat("config.partition_devices"),
                               absl::StrCat("partition ", p, " has no nodes"));
    }
    set.partitions[p].memory_bytes = memory.Compute(nodes);
  }
  LinkPartitions(graph, &set);
  return set;
}

}  // namespace partplan

#include "planner/wire/partition_plan.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "planner/base/status_util.h"

namespace partplan {

absl::Status WritePartitionPlan(const CompactGraph& graph, const DeviceList& devices,
                                const PartitionerPlan& planned, const CancellationToken& token,
                                v1::PartitionPlan* out_plan) {
  const PartitionSet& set = planned.set;
  const ModuleSplit& split = planned.split;
  const PlanLatency& latency = planned.latency;
  const std::vector<DeviceLoad>& loads = planned.holdings;
  v1::PartitionPlan& plan = *out_plan;
  plan.Clear();
  int64_t work = 0;
  google::protobuf::RepeatedField<int32_t>& partition_of = *plan.mutable_partition_by_node_index();
  partition_of.Reserve(graph.num_nodes());
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    partition_of.AddAlreadyReserved(std::max(set.partition_of[v], -1));
  }
  // Split-module inputs and outputs, by partition id.
  std::vector<const SplitPartition*> split_of(set.partitions.size(), nullptr);
  for (const SplitPartition& part : split.partitions) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    split_of[part.partition] = &part;
  }

  int64_t max_bytes = 0;
  int64_t cross_bytes = 0;
  for (int32_t p = 0; p < static_cast<int32_t>(set.partitions.size()); ++p) {
    const Partition& partition = set.partitions[p];
    size_t entries = partition.nodes.size() + partition.logical_device_ids.size() +
                     partition.parents.size() + partition.children.size();
    if (split_of[p] != nullptr) entries += split_of[p]->inputs.size() + split_of[p]->outputs.size();
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(1 + static_cast<int64_t>(entries), &work));
    v1::Partition* out = plan.add_partitions();
    out->set_id(p);
    out->mutable_node_indices()->Add(partition.nodes.begin(), partition.nodes.end());
    if (split_of[p] != nullptr) {
      graph.AppendNames(split_of[p]->inputs, out->mutable_inputs());
      graph.AppendNames(split_of[p]->outputs, out->mutable_outputs());
      for (NodeId u : split_of[p]->inputs) {
        if (graph.is_op_node(u)) cross_bytes += graph.output_bytes(u);
      }
    }
    out->set_memory_bytes(partition.memory_bytes);
    out->set_latency_seconds(latency.partition_seconds[p]);
    *out->mutable_logical_device_ids() = {partition.logical_device_ids.begin(),
                                          partition.logical_device_ids.end()};
    *out->mutable_parents() = {partition.parents.begin(), partition.parents.end()};
    *out->mutable_children() = {partition.children.begin(), partition.children.end()};
    max_bytes = std::max(max_bytes, partition.memory_bytes);
  }
  for (int32_t i : split.construction_order) {
    const SplitPartition& part = split.partitions[i];
    const Partition& partition = set.partitions[part.partition];
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(
        1 + static_cast<int64_t>(part.argument_names.size() + part.dag_output_names.size() +
                                 partition.logical_device_ids.size()),
        &work));
    v1::DagNode* node = plan.add_dag();
    node->set_submodule(part.submodule_name);
    node->set_partition(part.partition);
    *node->mutable_input_nodes() = {part.argument_names.begin(), part.argument_names.end()};
    *node->mutable_output_nodes() = {part.dag_output_names.begin(),
                                     part.dag_output_names.end()};
    *node->mutable_logical_device_ids() = {partition.logical_device_ids.begin(),
                                           partition.logical_device_ids.end()};
    node->set_size_bytes(partition.memory_bytes);
  }
  int devices_used = 0;
  for (int d = 0; d < devices.size(); ++d) {
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(1 + static_cast<int64_t>(loads[d].partitions.size()), &work));
    v1::DeviceUsage* usage = plan.add_device_usage();
    usage->set_logical_id(devices[d].logical_id);
    usage->set_name(devices[d].name);
    usage->set_used_bytes(loads[d].used_bytes);
    usage->set_available_bytes(devices[d].available_memory_bytes);
    *usage->mutable_partitions() = {loads[d].partitions.begin(), loads[d].partitions.end()};
    if (!loads[d].partitions.empty()) ++devices_used;
  }
  v1::PlanSummary* summary = plan.mutable_summary();
  summary->set_planner(planned.planner);
  summary->set_node_count(graph.num_nodes());
  summary->set_op_node_count(graph.num_op_nodes());
  summary->set_partition_count(static_cast<int32_t>(set.partitions.size()));
  summary->set_devices_used(devices_used);
  summary->set_graph_total_bytes(graph.graph_total_bytes());
  summary->set_max_partition_bytes(max_bytes);
  summary->set_cross_partition_bytes(cross_bytes);
  summary->set_critical_path_latency_seconds(latency.critical_path_seconds);
  *summary->mutable_notes() = {planned.notes.begin(), planned.notes.end()};
  summary->set_bound(planned.bound);
  return absl::OkStatus();
}

}  // namespace partplan

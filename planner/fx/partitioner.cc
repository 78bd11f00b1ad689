#include "planner/fx/partitioner.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"
#include "planner/fx/aot_partitioner.h"
#include "planner/fx/cost_aware_partitioner.h"
#include "planner/fx/device_mapping.h"
#include "planner/fx/kl_partitioner.h"
#include "planner/fx/latency.h"
#include "planner/fx/partition.h"
#include "planner/fx/saturate_host.h"
#include "planner/fx/size_based_partitioner.h"
#include "planner/fx/sparse_nn_partitioner.h"
#include "planner/split/module_split.h"

namespace partplan {
namespace {

// torch.fx's find_single_partition: every node but the output, on the
// device with the most memory (the first such in inventory order).
absl::StatusOr<PartitionSet> SinglePartition(const CompactGraph& graph, const DeviceList& devices,
                                             const CancellationToken& token) {
  int largest = 0;
  for (int d = 1; d < devices.size(); ++d) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(d));
    if (devices[d].available_memory_bytes > devices[largest].available_memory_bytes) largest = d;
  }
  PartitionSet set;
  set.partitions.emplace_back();
  Partition& partition = set.partitions.back();
  set.partition_of.assign(graph.num_nodes(), -1);
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(v));
    if (v == graph.output_node()) continue;
    partition.nodes.push_back(v);
    if (graph.is_op_node(v)) set.partition_of[v] = 0;
  }
  partition.memory_bytes = graph.graph_total_bytes();
  partition.logical_device_ids.push_back(devices[largest].logical_id);
  return set;
}

// Sum of device memory, saturating instead of overflowing.
int64_t TotalMemory(const DeviceList& devices) {
  int64_t total = 0;
  for (const DeviceSpec& device : devices.devices()) {
    if (__builtin_add_overflow(total, device.available_memory_bytes, &total)) {
      return std::numeric_limits<int64_t>::max();
    }
  }
  return total;
}

// The token is polled by the names, ids and entries written.
absl::Status ToProto(const CompactGraph& graph, const DeviceList& devices, const PartitionSet& set,
                     const std::vector<DeviceLoad>& loads, const ModuleSplit& split,
                     const PlanLatency& latency, absl::string_view planner,
                     v1::NodeReferences node_references, const CancellationToken& token,
                     v1::PartitionPlan* out_plan) {
  v1::PartitionPlan& plan = *out_plan;
  plan.Clear();
  int64_t work = 0;
  const bool by_name = node_references == v1::NODE_REFERENCES_NAMES;
  if (by_name) {
    plan.mutable_assignments()->Reserve(graph.num_op_nodes());
    for (NodeId v = 0; v < graph.num_nodes(); ++v) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      if (set.partition_of[v] < 0) continue;
      v1::NodePartition* assignment = plan.add_assignments();
      const absl::string_view name = graph.name(v);
      assignment->set_node(name.data(), name.size());
      assignment->set_partition(set.partition_of[v]);
    }
  } else {
    google::protobuf::RepeatedField<int32_t>& partition_of =
        *plan.mutable_partition_by_node_index();
    partition_of.Reserve(graph.num_nodes());
    for (NodeId v = 0; v < graph.num_nodes(); ++v) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      partition_of.AddAlreadyReserved(std::max(set.partition_of[v], -1));
    }
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
    if (by_name) {
      graph.AppendNames(partition.nodes, out->mutable_nodes());
    } else {
      out->mutable_node_indices()->Add(partition.nodes.begin(), partition.nodes.end());
    }
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
  summary->set_planner(std::string(planner));
  summary->set_node_count(graph.num_nodes());
  summary->set_op_node_count(graph.num_op_nodes());
  summary->set_partition_count(static_cast<int32_t>(set.partitions.size()));
  summary->set_devices_used(devices_used);
  summary->set_graph_total_bytes(graph.graph_total_bytes());
  summary->set_max_partition_bytes(max_bytes);
  summary->set_cross_partition_bytes(cross_bytes);
  summary->set_critical_path_latency_seconds(latency.critical_path_seconds);
  return absl::OkStatus();
}

}  // namespace

absl::Status PartitionGraphPlan(const CompactGraph& graph, const DeviceList& devices,
                                const v1::PartitionerConfig& config,
                                v1::NodeReferences node_references, const CancellationToken& token,
                                v1::PartitionPlan* plan) {
  if (!v1::PartitionerConfig::Mode_IsValid(config.mode())) {
    return InvalidFieldError("config.mode", absl::StrCat("unknown partitioner mode ", config.mode()));
  }
  PARTPLAN_RETURN_IF_ERROR(CheckNodeReferences(node_references));
  if (devices.empty()) {
    return InvalidFieldError("devices.devices", "no devices: the inventory lists no device");
  }
  if (graph.num_op_nodes() == 0) {
    return InvalidFieldError("graph.nodes",
                             "no partition since no operations: the graph has no call_module, "
                             "call_function or call_method node");
  }
  v1::PartitionerConfig::Mode mode = config.mode();
  if (mode == v1::PartitionerConfig::MODE_UNSPECIFIED) mode = v1::PartitionerConfig::SIZE_BASED;
  const std::string planner =
      absl::AsciiStrToLower(absl::StrCat("partitioner/", v1::PartitionerConfig::Mode_Name(mode)));

  int64_t largest_memory = 0;
  for (const DeviceSpec& device : devices.devices()) {
    largest_memory = std::max(largest_memory, device.available_memory_bytes);
  }
  PartitionSet set;
  // MapPartitionsToDevices' charges, which nothing reads after it: the plan
  // reports DeviceHoldings of the final placement.
  std::vector<DeviceLoad> loads;
  if (mode == v1::PartitionerConfig::AOT_BASED) {
    PARTPLAN_ASSIGN_OR_RETURN(set, AotPartition(graph, devices, config, token));
  } else if (graph.graph_total_bytes() <= largest_memory) {
    PARTPLAN_ASSIGN_OR_RETURN(set, SinglePartition(graph, devices, token));
  } else if (graph.graph_total_bytes() > TotalMemory(devices)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "devices have not enough memory for the graph: it needs ", graph.graph_total_bytes(),
        " bytes and the ", devices.size(), " devices have ", TotalMemory(devices),
        " bytes together"));
  } else {
    switch (mode) {
      case v1::PartitionerConfig::SIZE_BASED: {
        PARTPLAN_ASSIGN_OR_RETURN(set, SizeBasedPartition(graph, devices, token));
        PARTPLAN_RETURN_IF_ERROR(MapPartitionsToDevices(graph, devices, token, &set, &loads));
        break;
      }
      case v1::PartitionerConfig::SPARSE_NN: {
        for (int d = 1; d < devices.size(); ++d) {
          if (devices[d].available_memory_bytes != devices[0].available_memory_bytes) {
            return InvalidFieldError(
                absl::StrCat("devices.devices[", d, "].available_memory_bytes"),
                absl::StrCat("SPARSE_NN needs devices of the same memory size: devices[0] has ",
                             devices[0].available_memory_bytes, " bytes, devices[", d, "] has ",
                             devices[d].available_memory_bytes));
          }
        }
        PARTPLAN_ASSIGN_OR_RETURN(set, SparseNnPartition(graph, devices, token));
        // A graph without embedding nodes leaves its partitions unplaced
        // (torch.fx crashes there): place them best fit.
        PARTPLAN_RETURN_IF_ERROR(MapPartitionsToDevices(graph, devices, token, &set, &loads));
        break;
      }
      case v1::PartitionerConfig::COST_AWARE: {
        PARTPLAN_ASSIGN_OR_RETURN(set, CostAwarePartition(graph, devices, {}, token));
        // torch.fx keeps a plan whose last mapping left partitions on no
        // device; a plan here places them all, or says which cannot be.
        PARTPLAN_RETURN_IF_ERROR(MapPartitionsToDevices(graph, devices, token, &set, &loads));
        break;
      }
      case v1::PartitionerConfig::KL_BASED: {
        PARTPLAN_ASSIGN_OR_RETURN(set, KlPartition(graph, devices, {}, token));
        PARTPLAN_RETURN_IF_ERROR(MapPartitionsToDevices(graph, devices, token, &set, &loads));
        break;
      }
      default:  // AOT_BASED was handled above; Mode_IsValid ruled out the rest.
        return absl::InternalError(absl::StrCat("unhandled partitioner mode ", mode));
    }
  }
  if (config.saturate_host()) {
    PARTPLAN_RETURN_IF_ERROR(SaturateHost(devices, token, &set));
  }
  return DescribePlan(
      graph, devices, set, planner,
      mode == v1::PartitionerConfig::AOT_BASED ? "config.node_partitions" : "config",
      node_references, token, plan);
}

absl::Status DescribePlan(const CompactGraph& graph, const DeviceList& devices,
                          const PartitionSet& set, absl::string_view planner,
                          absl::string_view assignment_field,
                          v1::NodeReferences node_references, const CancellationToken& token,
                          v1::PartitionPlan* plan) {
  PARTPLAN_ASSIGN_OR_RETURN(ModuleSplit split,
                            SplitModule(graph, set.partition_of, /*keep_original_order=*/false,
                                        assignment_field, token));
  PARTPLAN_ASSIGN_OR_RETURN(const PlanLatency latency,
                            EstimatePlanLatency(graph, devices, set, token));
  PARTPLAN_ASSIGN_OR_RETURN(const std::vector<DeviceLoad> loads,
                            DeviceHoldings(graph, devices, set, token));
  return ToProto(graph, devices, set, loads, split, latency, planner, node_references, token, plan);
}

}  // namespace partplan

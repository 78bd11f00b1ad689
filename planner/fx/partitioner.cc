#include "planner/fx/partitioner.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

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

}  // namespace

absl::StatusOr<PartitionerPlan> PartitionGraphPlan(const CompactGraph& graph,
                                                   const DeviceList& devices,
                                                   const PartitionerOptions& options,
                                                   const CancellationToken& token) {
  PARTPLAN_RETURN_IF_ERROR(CheckPartitionable(graph, devices));
  const std::string planner = absl::StrCat("partitioner/", PartitionerModeName(options.mode));

  int64_t largest_memory = 0;
  for (const DeviceSpec& device : devices.devices()) {
    largest_memory = std::max(largest_memory, device.available_memory_bytes);
  }
  PartitionSet set;
  // MapPartitionsToDevices' charges, which nothing reads after it: the plan
  // reports DeviceHoldings of the final placement.
  std::vector<DeviceLoad> loads;
  if (options.mode == PartitionerMode::kAotBased) {
    PARTPLAN_ASSIGN_OR_RETURN(set, AotPartition(graph, options.aot, token));
  } else if (graph.graph_total_bytes() <= largest_memory) {
    PARTPLAN_ASSIGN_OR_RETURN(set, SinglePartition(graph, devices, token));
  } else if (graph.graph_total_bytes() > TotalMemory(devices)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "devices have not enough memory for the graph: it needs ", graph.graph_total_bytes(),
        " bytes and the ", devices.size(), " devices have ", TotalMemory(devices),
        " bytes together"));
  } else {
    switch (options.mode) {
      case PartitionerMode::kSizeBased: {
        PARTPLAN_ASSIGN_OR_RETURN(set, SizeBasedPartition(graph, devices, token));
        PARTPLAN_RETURN_IF_ERROR(MapPartitionsToDevices(graph, devices, token, &set, &loads));
        break;
      }
      case PartitionerMode::kSparseNn: {
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
      case PartitionerMode::kCostAware: {
        PARTPLAN_ASSIGN_OR_RETURN(set, CostAwarePartition(graph, devices, {}, token));
        // torch.fx keeps a plan whose last mapping left partitions on no
        // device; a plan here places them all, or says which cannot be.
        PARTPLAN_RETURN_IF_ERROR(MapPartitionsToDevices(graph, devices, token, &set, &loads));
        break;
      }
      case PartitionerMode::kKlBased: {
        PARTPLAN_ASSIGN_OR_RETURN(set, KlPartition(graph, devices, {}, token));
        PARTPLAN_RETURN_IF_ERROR(MapPartitionsToDevices(graph, devices, token, &set, &loads));
        break;
      }
      case PartitionerMode::kAotBased:  // handled above
        break;
    }
  }
  if (options.saturate_host) {
    PARTPLAN_RETURN_IF_ERROR(SaturateHost(devices, token, &set));
  }
  const bool partitioned = set.partitions.size() > 1;
  PARTPLAN_ASSIGN_OR_RETURN(
      PartitionerPlan plan,
      DescribePartitions(
          graph, devices, std::move(set), planner,
          options.mode == PartitionerMode::kAotBased ? "config.node_partitions" : "config",
          token));
  const bool minimises_latency =
      options.mode == PartitionerMode::kKlBased || options.mode == PartitionerMode::kCostAware;
  if (minimises_latency && partitioned && plan.latency.critical_path_seconds == 0) {
    plan.notes.push_back(absl::StrCat(
        options.mode == PartitionerMode::kKlBased ? "KL_BASED" : "COST_AWARE",
        " minimises the critical path's latency, and every latency here is 0 (no node has a "
        "latency, or FLOPs with the devices' compute_flops_per_second, or bytes with their "
        "memory_bandwidth_bytes_per_second, and transfers are free): it had nothing to "
        "minimise, so this is the plan its start gives",
        options.mode == PartitionerMode::kKlBased ? " (SIZE_BASED's partitions)" : "",
        ". Give node latencies (the exporter measures them) or device throughputs."));
  }
  return plan;
}

absl::StatusOr<PartitionerPlan> DescribePartitions(const CompactGraph& graph,
                                                   const DeviceList& devices, PartitionSet set,
                                                   absl::string_view planner,
                                                   absl::string_view assignment_field,
                                                   const CancellationToken& token) {
  PartitionerPlan plan;
  PARTPLAN_ASSIGN_OR_RETURN(plan.split,
                            SplitModule(graph, set.partition_of, /*keep_original_order=*/false,
                                        assignment_field, token));
  PARTPLAN_ASSIGN_OR_RETURN(plan.latency, EstimatePlanLatency(graph, devices, set, token));
  PARTPLAN_ASSIGN_OR_RETURN(plan.holdings, DeviceHoldings(graph, devices, set, token));
  plan.planner = std::string(planner);
  plan.set = std::move(set);
  return plan;
}

}  // namespace partplan

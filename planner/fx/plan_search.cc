#include "planner/fx/plan_search.h"

#include <algorithm>
#include <limits>

#include "planner/base/status_util.h"
#include "planner/fx/device_mapping.h"
#include "planner/fx/latency.h"

namespace partplan {

absl::StatusOr<PartitionSet> BuildPartitionSet(const CompactGraph& graph,
                                               const PartitionList& parts,
                                               const CancellationToken& token) {
  PartitionSet set;
  set.partition_of.assign(graph.num_nodes(), -1);
  set.partitions.resize(parts.size());
  NodeSetMemory memory(graph);
  int64_t work = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    // A partition costs its nodes and their inputs (NodeSetMemory).
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(1 + static_cast<int64_t>(parts[p].size()), &work));
    set.partitions[p].nodes = parts[p];
    set.partitions[p].memory_bytes = memory.Compute(parts[p]);
    for (NodeId v : parts[p]) {
      if (graph.is_op_node(v)) set.partition_of[v] = static_cast<int32_t>(p);
    }
  }
  PARTPLAN_RETURN_IF_ERROR(LinkPartitions(graph, token, &set));
  return set;
}

absl::StatusOr<bool> RemapAll(const CompactGraph& graph, const DeviceList& devices,
                              const CancellationToken& token, PartitionSet* set) {
  for (Partition& partition : set->partitions) partition.logical_device_ids.clear();
  std::vector<DeviceLoad> loads;
  const absl::Status status = MapPartitionsToDevices(graph, devices, token, set, &loads);
  if (status.code() == absl::StatusCode::kFailedPrecondition) return false;
  PARTPLAN_RETURN_IF_ERROR(status);
  return true;
}

absl::StatusOr<double> TorchFxCost(const CompactGraph& graph, const DeviceList& devices,
                                   const PartitionSet& set, const CancellationToken& token) {
  LatencyOptions options;
  options.charge_shared_graph_inputs = true;
  absl::StatusOr<PlanLatency> latency = EstimatePlanLatency(graph, devices, set, token, options);
  if (latency.ok()) return latency->critical_path_seconds;
  // A cycle is a property of the trial, which the search skips; a time
  // beyond the largest double names the request's figure that gives it,
  // and no other plan of these figures would fare better in torch.fx's sums.
  if (latency.status().code() == absl::StatusCode::kInvalidArgument &&
      !InvalidFieldPath(latency.status()).has_value()) {
    return std::numeric_limits<double>::infinity();
  }
  return latency.status();
}

std::vector<int32_t> PartitionLevels(const PartitionSet& set) {
  const int32_t n = static_cast<int32_t>(set.partitions.size());
  std::vector<int32_t> level(n, 0), waiting(n);
  std::vector<int32_t> ready;
  for (int32_t p = 0; p < n; ++p) {
    waiting[p] = static_cast<int32_t>(set.partitions[p].parents.size());
    if (waiting[p] == 0) ready.push_back(p);
  }
  while (!ready.empty()) {
    const int32_t p = ready.back();
    ready.pop_back();
    for (int32_t c : set.partitions[p].children) {
      level[c] = std::max(level[c], level[p] + 1);
      if (--waiting[c] == 0) ready.push_back(c);
    }
  }
  return level;
}

}  // namespace partplan

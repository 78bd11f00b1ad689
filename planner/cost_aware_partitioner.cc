#include "planner/cost_aware_partitioner.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/device_mapping.h"
#include "planner/latency.h"
#include "planner/status_util.h"

namespace partplan {
namespace {

constexpr double kInfinite = std::numeric_limits<double>::infinity();

// Partitions as torch.fx's list holds them: node sets in list order.
using PartitionList = std::vector<std::vector<NodeId>>;

// A PartitionSet for `parts`, linked, without devices.
PartitionSet ToSet(const CompactGraph& graph, const PartitionList& parts) {
  PartitionSet set;
  set.partition_of.assign(graph.num_nodes(), -1);
  set.partitions.resize(parts.size());
  NodeSetMemory memory(graph);
  for (size_t p = 0; p < parts.size(); ++p) {
    set.partitions[p].nodes = parts[p];
    set.partitions[p].memory_bytes = memory.Compute(parts[p]);
    for (NodeId v : parts[p]) {
      if (graph.is_op_node(v)) set.partition_of[v] = static_cast<int32_t>(p);
    }
  }
  LinkPartitions(graph, &set);
  return set;
}

// torch.fx's cost of a plan: its critical path with torch.fx's transfer
// accounting, or infinity when the partitions form a cycle.
absl::StatusOr<double> Cost(const CompactGraph& graph, const DeviceList& devices,
                            const PartitionSet& set, const CancellationToken& token) {
  absl::StatusOr<PlanLatency> latency =
      EstimatePlanLatency(graph, devices, set, token, {.charge_shared_graph_inputs = true});
  if (latency.ok()) return latency->critical_path_seconds;
  if (latency.status().code() == absl::StatusCode::kInvalidArgument) return kInfinite;
  return latency.status();
}

// Clears every partition's devices and maps them all again (best fit, in
// list order); a partition that fits nowhere stops the mapping, leaving
// the rest unplaced, as in torch.fx. Returns whether all were placed.
absl::StatusOr<bool> Remap(const CompactGraph& graph, const DeviceList& devices,
                           const CancellationToken& token, PartitionSet* set) {
  for (Partition& partition : set->partitions) partition.logical_device_ids.clear();
  std::vector<DeviceLoad> loads;
  const absl::Status status = MapPartitionsToDevices(graph, devices, token, set, &loads);
  if (status.code() == absl::StatusCode::kFailedPrecondition) return false;
  PARTPLAN_RETURN_IF_ERROR(status);
  return true;
}

// Longest-path depth of each partition (torch.fx's bfs_level).
std::vector<int32_t> Levels(const PartitionSet& set) {
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

// torch.fx's combine_two_partitions: the union goes last.
PartitionList Merge(const PartitionList& parts, size_t i, size_t j) {
  PartitionList merged;
  merged.reserve(parts.size() - 1);
  for (size_t p = 0; p < parts.size(); ++p) {
    if (p != i && p != j) merged.push_back(parts[p]);
  }
  std::vector<NodeId> both;
  std::set_union(parts[i].begin(), parts[i].end(), parts[j].begin(), parts[j].end(),
                 std::back_inserter(both));
  merged.push_back(std::move(both));
  return merged;
}

bool Contains(const std::vector<int32_t>& sorted, int32_t x) {
  return std::binary_search(sorted.begin(), sorted.end(), x);
}

}  // namespace

absl::Status CostAwareOptions::CheckAndSetup() const {
  if (max_exact_nodes <= 0) {
    return absl::InvalidArgumentError("max_exact_nodes must be positive");
  }
  return absl::OkStatus();
}

absl::StatusOr<PartitionSet> CostAwarePartition(const CompactGraph& graph,
                                                const DeviceList& devices,
                                                const CostAwareOptions& options,
                                                const CancellationToken& token) {
  PARTPLAN_RETURN_IF_ERROR(options.CheckAndSetup());
  if (graph.num_op_nodes() > options.max_exact_nodes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "COST_AWARE searches all pairs of partitions and takes graphs of at most ",
        options.max_exact_nodes, " call_* nodes; this one has ", graph.num_op_nodes(),
        ". Use SIZE_BASED or KL_BASED for larger graphs"));
  }
  // One partition per call_* node, with the graph inputs it reads.
  PartitionList parts;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (!graph.is_op_node(v)) continue;
    std::vector<NodeId> nodes = {v};
    for (NodeId u : graph.inputs(v)) {
      if (graph.is_input_node(u)) nodes.push_back(u);
    }
    std::sort(nodes.begin(), nodes.end());
    parts.push_back(std::move(nodes));
  }
  PartitionSet current = ToSet(graph, parts);
  std::vector<int32_t> level = Levels(current);

  while (true) {
    PARTPLAN_RETURN_IF_ERROR(token.Check());
    // The current plan's cost, with the devices the last round mapped
    // (none before the first round, so every transfer counts).
    PARTPLAN_ASSIGN_OR_RETURN(double best_cost, Cost(graph, devices, current, token));
    if (parts.size() == 1) break;
    size_t best_i = 0, best_j = 0;
    bool found = false;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      for (size_t j = i + 1; j < parts.size(); ++j) {
        const Partition& pi = current.partitions[i];
        const bool adjacent = Contains(pi.parents, static_cast<int32_t>(j)) ||
                              Contains(pi.children, static_cast<int32_t>(j));
        if (std::abs(level[i] - level[j]) > 1 && !adjacent) continue;
        PartitionSet trial = ToSet(graph, Merge(parts, i, j));
        PARTPLAN_ASSIGN_OR_RETURN(const bool mapped, Remap(graph, devices, token, &trial));
        if (!mapped) continue;
        PARTPLAN_ASSIGN_OR_RETURN(const double cost, Cost(graph, devices, trial, token));
        if (cost <= best_cost) {
          best_cost = cost;
          best_i = i;
          best_j = j;
          found = true;
        }
      }
    }
    if (found) parts = Merge(parts, best_i, best_j);
    current = ToSet(graph, parts);
    level = Levels(current);
    PARTPLAN_RETURN_IF_ERROR(Remap(graph, devices, token, &current).status());
    if (!found) break;
  }
  return current;
}

}  // namespace partplan

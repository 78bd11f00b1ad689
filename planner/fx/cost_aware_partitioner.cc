#include "planner/fx/cost_aware_partitioner.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"
#include "planner/fx/plan_search.h"

namespace partplan {
namespace {

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
  PARTPLAN_ASSIGN_OR_RETURN(PartitionSet current, BuildPartitionSet(graph, parts, token));
  std::vector<int32_t> level = PartitionLevels(current);

  while (true) {
    PARTPLAN_RETURN_IF_ERROR(token.Check());
    // The current plan's cost, with the devices the last round mapped
    // (none before the first round, so every transfer counts).
    PARTPLAN_ASSIGN_OR_RETURN(double best_cost, TorchFxCost(graph, devices, current, token));
    if (parts.size() == 1) break;
    size_t best_i = 0, best_j = 0;
    bool found = false;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      for (size_t j = i + 1; j < parts.size(); ++j) {
        const Partition& pi = current.partitions[i];
        const bool adjacent = Contains(pi.parents, static_cast<int32_t>(j)) ||
                              Contains(pi.children, static_cast<int32_t>(j));
        if (std::abs(level[i] - level[j]) > 1 && !adjacent) continue;
        PARTPLAN_ASSIGN_OR_RETURN(PartitionSet trial,
                                  BuildPartitionSet(graph, Merge(parts, i, j), token));
        PARTPLAN_ASSIGN_OR_RETURN(const bool mapped, RemapAll(graph, devices, token, &trial));
        if (!mapped) continue;
        PARTPLAN_ASSIGN_OR_RETURN(const double cost, TorchFxCost(graph, devices, trial, token));
        if (cost <= best_cost) {
          best_cost = cost;
          best_i = i;
          best_j = j;
          found = true;
        }
      }
    }
    if (found) parts = Merge(parts, best_i, best_j);
    PARTPLAN_ASSIGN_OR_RETURN(current, BuildPartitionSet(graph, parts, token));
    level = PartitionLevels(current);
    PARTPLAN_RETURN_IF_ERROR(RemapAll(graph, devices, token, &current).status());
    if (!found) break;
  }
  return current;
}

}  // namespace partplan

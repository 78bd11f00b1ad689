#include "planner/kl_partitioner.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "planner/device_mapping.h"
#include "planner/plan_search.h"
#include "planner/size_based_partitioner.h"
#include "planner/status_util.h"

namespace partplan {
namespace {

constexpr double kInfinite = std::numeric_limits<double>::infinity();

bool Has(const std::vector<NodeId>& sorted, NodeId v) {
  return std::binary_search(sorted.begin(), sorted.end(), v);
}

// torch.fx's Partition.add_node: v and the graph inputs it reads.
void AddNode(const CompactGraph& graph, NodeId v, std::vector<NodeId>& part) {
  std::vector<NodeId> added = {v};
  for (NodeId u : graph.inputs(v)) {
    if (graph.is_input_node(u)) added.push_back(u);
  }
  std::sort(added.begin(), added.end());
  std::vector<NodeId> merged;
  std::set_union(part.begin(), part.end(), added.begin(), added.end(),
                 std::back_inserter(merged));
  part = std::move(merged);
}

// torch.fx's Partition.remove_node: v, and the graph inputs it read that no
// node left in the partition reads.
void RemoveNode(const CompactGraph& graph, NodeId v, std::vector<NodeId>& part) {
  part.erase(std::lower_bound(part.begin(), part.end(), v));
  for (NodeId u : graph.inputs(v)) {
    if (!graph.is_input_node(u) || !Has(part, u)) continue;
    const auto users = graph.users(u);
    if (std::none_of(users.begin(), users.end(), [&](NodeId w) { return Has(part, w); })) {
      part.erase(std::lower_bound(part.begin(), part.end(), u));
    }
  }
}

// Moves v from p0 to p1 and, when n1 >= 0, n1 from p1 to p0 (torch.fx's
// swap_nodes, in its order).
PartitionList Swap(const CompactGraph& graph, const PartitionList& parts, NodeId v, NodeId n1,
                   size_t p0, size_t p1) {
  PartitionList result = parts;
  RemoveNode(graph, v, result[p0]);
  AddNode(graph, v, result[p1]);
  if (n1 >= 0) {
    AddNode(graph, n1, result[p0]);
    RemoveNode(graph, n1, result[p1]);
  }
  return result;
}

// Whether v reads from or feeds a call_* node of partition p (other than
// its own).
bool Touches(const CompactGraph& graph, const PartitionSet& set, NodeId v, int32_t p) {
  for (NodeId u : graph.inputs(v)) {
    if (set.partition_of[u] == p) return true;
  }
  for (NodeId w : graph.users(v)) {
    if (set.partition_of[w] == p) return true;
  }
  return false;
}

}  // namespace

absl::Status KlOptions::CheckAndSetup() const {
  if (max_exhaustive_nodes < 0 || max_boundary_trials < 0 || max_boundary_work < 0) {
    return absl::InvalidArgumentError("KlOptions limits must not be negative");
  }
  return absl::OkStatus();
}

absl::StatusOr<PartitionSet> KlPartition(const CompactGraph& graph, const DeviceList& devices,
                                         const KlOptions& options,
                                         const CancellationToken& token) {
  PARTPLAN_RETURN_IF_ERROR(options.CheckAndSetup());
  PARTPLAN_ASSIGN_OR_RETURN(PartitionSet current, SizeBasedPartition(graph, devices, token));
  std::vector<DeviceLoad> loads;
  PARTPLAN_RETURN_IF_ERROR(MapPartitionsToDevices(graph, devices, token, &current, &loads));
  PartitionList parts;
  for (const Partition& partition : current.partitions) parts.push_back(partition.nodes);
  PARTPLAN_ASSIGN_OR_RETURN(double cost, TorchFxCost(graph, devices, current, token));

  const bool exhaustive = graph.num_op_nodes() <= options.max_exhaustive_nodes;
  const int64_t trial_work = graph.num_nodes() + graph.num_edges();
  int64_t trials_left =
      exhaustive ? std::numeric_limits<int64_t>::max()
                 : std::min<int64_t>(options.max_boundary_trials,
                                     std::max<int64_t>(1, options.max_boundary_work / trial_work));
  for (NodeId v = 0; v < graph.num_nodes() && trials_left > 0; ++v) {
    if (!graph.is_op_node(v)) continue;
    const int32_t p0 = current.partition_of[v];
    if (!exhaustive && current.partitions.size() > 1) {
      bool on_boundary = false;
      for (int32_t p = 0; p < static_cast<int32_t>(parts.size()) && !on_boundary; ++p) {
        on_boundary = p != p0 && Touches(graph, current, v, p);
      }
      if (!on_boundary) continue;
    }
    double best_cost = kInfinite;
    PartitionSet best;
    PartitionList best_parts;
    for (int32_t p1 = 0; p1 < static_cast<int32_t>(parts.size()); ++p1) {
      if (p1 == p0) continue;
      if (!exhaustive && !Touches(graph, current, v, p1)) continue;
      std::vector<NodeId> partners = {-1};  // -1: move v alone
      for (NodeId n1 : parts[p1]) {
        if (!graph.is_op_node(n1)) continue;
        if (!exhaustive && !Touches(graph, current, n1, p0)) continue;
        partners.push_back(n1);
      }
      for (NodeId n1 : partners) {
        if (trials_left-- <= 0) break;
        PARTPLAN_RETURN_IF_ERROR(token.Check());
        PartitionList trial_parts = Swap(graph, parts, v, n1, p0, p1);
        PartitionSet trial = BuildPartitionSet(graph, trial_parts);
        PARTPLAN_ASSIGN_OR_RETURN(const bool mapped, RemapAll(graph, devices, token, &trial));
        if (!mapped) continue;
        PARTPLAN_ASSIGN_OR_RETURN(const double trial_cost,
                                  TorchFxCost(graph, devices, trial, token));
        if (trial_cost < best_cost) {
          best_cost = trial_cost;
          best = std::move(trial);
          best_parts = std::move(trial_parts);
        }
      }
    }
    if (best_cost < cost) {
      cost = best_cost;
      current = std::move(best);
      parts = std::move(best_parts);
    }
  }
  // Drop partitions emptied by moves (graph inputs alone run nothing).
  PartitionList kept;
  for (std::vector<NodeId>& nodes : parts) {
    if (std::any_of(nodes.begin(), nodes.end(), [&](NodeId v) { return graph.is_op_node(v); })) {
      kept.push_back(std::move(nodes));
    }
  }
  current = BuildPartitionSet(graph, kept);
  PARTPLAN_RETURN_IF_ERROR(RemapAll(graph, devices, token, &current).status());
  return current;
}

}  // namespace partplan

#include "planner/fx/kl_partitioner.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "planner/base/status_util.h"
#include "planner/fx/device_mapping.h"
#include "planner/fx/plan_search.h"
#include "planner/fx/size_based_partitioner.h"

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

// Whether v reads from or feeds a call_* node of partition p; adds the
// edges it looks at to *visits.
bool Touches(const CompactGraph& graph, const PartitionSet& set, NodeId v, int32_t p,
             int64_t* visits) {
  *visits += static_cast<int64_t>(graph.inputs(v).size() + graph.users(v).size());
  for (NodeId u : graph.inputs(v)) {
    if (set.partition_of[u] == p) return true;
  }
  for (NodeId w : graph.users(v)) {
    if (set.partition_of[w] == p) return true;
  }
  return false;
}

// The partitions other than v's own that v reads from or feeds, ascending
// (the order the exhaustive pass tries them in).
void NeighbourPartitions(const CompactGraph& graph, const PartitionSet& set, NodeId v,
                         std::vector<int32_t>* out) {
  out->clear();
  const int32_t own = set.partition_of[v];
  for (auto nodes : {graph.inputs(v), graph.users(v)}) {
    for (NodeId u : nodes) {
      const int32_t q = set.partition_of[u];
      if (q >= 0 && q != own) out->push_back(q);
    }
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
}

// An upper bound on the work of a trial that ends with `trial`, in node,
// edge and device visits: copying the partitions and rebuilding them,
// costing the plan (every node and edge), and placing it again
// (MapPartitionsToDevices), which may pass over every device for each
// partition and prices partition i, nodes and inputs, on each device that
// already holds a partition (at most one per partition before it) and on
// the one it takes. The bound is met on the plans SIZE_BASED makes, whose
// full devices sort first by room left. torch.fx's shared-input charge adds
// a partition's graph inputs once per parent.
absl::StatusOr<int64_t> TrialWork(const CompactGraph& graph, int num_devices,
                                  const PartitionSet& trial, const CancellationToken& token) {
  int64_t work = graph.num_nodes() + graph.num_edges() + num_devices;
  int64_t counted = 0;
  for (size_t i = 0; i < trial.partitions.size(); ++i) {
    const Partition& partition = trial.partitions[i];
    int64_t visits = 1;
    int64_t graph_inputs = 0;
    for (NodeId v : partition.nodes) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(++counted));
      visits += 1 + static_cast<int64_t>(graph.inputs(v).size());
      if (graph.is_input_node(v)) ++graph_inputs;
    }
    const int64_t holders = std::min<int64_t>(static_cast<int64_t>(i) + 1, num_devices);
    work += visits + num_devices + holders * visits +
            static_cast<int64_t>(partition.parents.size()) * graph_inputs;
  }
  return work;
}

}  // namespace

absl::Status KlOptions::CheckAndSetup() const {
  if (max_exhaustive_nodes < 0 || max_boundary_trials < 0 || max_work < 0) {
    return absl::InvalidArgumentError("KlOptions limits must not be negative");
  }
  return absl::OkStatus();
}

absl::StatusOr<PartitionSet> KlPartition(const CompactGraph& graph, const DeviceList& devices,
                                         const KlOptions& options,
                                         const CancellationToken& token, KlStats* stats) {
  PARTPLAN_RETURN_IF_ERROR(options.CheckAndSetup());
  KlStats local_stats;
  KlStats& spent = stats != nullptr ? *stats : local_stats;
  spent = KlStats();
  PARTPLAN_ASSIGN_OR_RETURN(PartitionSet current, SizeBasedPartition(graph, devices, token));
  std::vector<DeviceLoad> loads;
  PARTPLAN_RETURN_IF_ERROR(MapPartitionsToDevices(graph, devices, token, &current, &loads));
  PartitionList parts;
  for (const Partition& partition : current.partitions) parts.push_back(partition.nodes);
  PARTPLAN_ASSIGN_OR_RETURN(double cost, TorchFxCost(graph, devices, current, token));

  // Takes `units` from the budget, or marks it spent when they do not fit.
  const auto spend = [&](int64_t units) {
    if (spent.out_of_work || units > options.max_work - spent.work) {
      spent.out_of_work = true;
      return false;
    }
    spent.work += units;
    return true;
  };
  const bool exhaustive = graph.num_op_nodes() <= options.max_exhaustive_nodes;
  int64_t trials_left =
      exhaustive ? std::numeric_limits<int64_t>::max() : options.max_boundary_trials;
  std::vector<int32_t> targets;  // the partitions v is tried in
  std::vector<NodeId> partners;  // -1: move v alone
  int64_t visited = 0;           // nodes and edges looked at, for polling
  for (NodeId v = 0; v < graph.num_nodes() && trials_left > 0 && !spent.out_of_work; ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(v));
    if (!graph.is_op_node(v)) continue;
    const int32_t p0 = current.partition_of[v];
    if (exhaustive) {
      targets.clear();
      for (int32_t p = 0; p < static_cast<int32_t>(parts.size()); ++p) {
        if (p != p0) targets.push_back(p);
      }
    } else {
      NeighbourPartitions(graph, current, v, &targets);  // empty: not on a boundary
    }
    double best_cost = kInfinite;
    PartitionSet best;
    PartitionList best_parts;
    for (int32_t p1 : targets) {
      if (trials_left <= 0 || spent.out_of_work) break;
      partners.assign(1, -1);
      int64_t scan = 0;
      for (NodeId n1 : parts[p1]) {
        ++scan;
        PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(visited++));
        if (!graph.is_op_node(n1)) continue;
        if (!exhaustive && !Touches(graph, current, n1, p0, &scan)) continue;
        partners.push_back(n1);
      }
      if (!spend(scan)) break;
      for (NodeId n1 : partners) {
        if (trials_left <= 0) break;
        PARTPLAN_RETURN_IF_ERROR(token.Check());
        PartitionList trial_parts = Swap(graph, parts, v, n1, p0, p1);
        PARTPLAN_ASSIGN_OR_RETURN(PartitionSet trial, BuildPartitionSet(graph, trial_parts, token));
        PARTPLAN_ASSIGN_OR_RETURN(const int64_t trial_work,
                                  TrialWork(graph, devices.size(), trial, token));
        if (!spend(trial_work)) break;
        --trials_left;
        ++spent.trials;
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
  PARTPLAN_ASSIGN_OR_RETURN(current, BuildPartitionSet(graph, kept, token));
  PARTPLAN_RETURN_IF_ERROR(RemapAll(graph, devices, token, &current).status());
  return current;
}

}  // namespace partplan

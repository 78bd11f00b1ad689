// KlPartition: torch.fx's `kl_based` mode, without its defects.
//
// Starts from the SIZE_BASED plan (placed best fit), then takes the call_*
// nodes in graph order once, as torch.fx does: for each, tries moving it to
// every other partition and swapping it with every call_* node there, and
// applies the trial with the lowest critical-path latency if it is lower
// than the current one. A trial that creates a cycle between partitions or
// no longer maps onto the devices is skipped. Trials are costed with
// torch.fx's accounting (latency.h: charge_shared_graph_inputs).
//
// Deliberate differences from torch 1.13, whose kl_based (a) compares the
// last trial's cost instead of the best one's, (b) looks nodes up in the
// node -> partition map computed before any swap, so a moved node can end
// up in two partitions, and (c) splits the module by that stale map: here
// each node's current partition is used, the best trial is compared, and
// the returned plan is the one searched. Partitions emptied by moves are
// dropped.
//
// Cost: each trial is O(N + E + P x devices). Graphs of up to
// `max_exhaustive_nodes` call_* nodes try every node and partner (O(N^2)
// trials); larger ones try only nodes on a partition boundary with the
// partitions they touch and their boundary partners, at most
// `max_boundary_trials` trials and `max_boundary_work` node and edge visits
// in all (so at most a few hundred milliseconds whatever the graph size).
//
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionSet set,
//                             KlPartition(graph, devices, {}, token));
#ifndef PARTPLAN_PLANNER_KL_PARTITIONER_H_
#define PARTPLAN_PLANNER_KL_PARTITIONER_H_

#include "absl/status/statusor.h"
#include "planner/cancellation.h"
#include "planner/devices.h"
#include "planner/graph.h"
#include "planner/partition.h"

namespace partplan {

struct KlOptions {
  // Graphs with at most this many call_* nodes get the exhaustive pass.
  int max_exhaustive_nodes = 128;
  // Trials of the boundary pass on larger graphs...
  int max_boundary_trials = 512;
  // ...and node and edge visits they may spend together.
  int64_t max_boundary_work = 100'000'000;

  absl::Status CheckAndSetup() const;
};

absl::StatusOr<PartitionSet> KlPartition(const CompactGraph& graph, const DeviceList& devices,
                                         const KlOptions& options,
                                         const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_KL_PARTITIONER_H_

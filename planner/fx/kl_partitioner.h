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
// Cost. A trial rebuilds, re-places and re-costs the whole plan. With N
// nodes, E edges, P partitions and D devices, placing it again
// (MapPartitionsToDevices) may pass over every device for each partition,
// and prices partition i on each device that already holds one, at most
// min(i + 1, D) of them: O(N + E + P x D + min(P, D) x (N + E)) a trial.
// The search is bounded by `max_work`, which counts each trial at that
// bound computed from its own partitions (TrialWork in the .cc), plus the
// nodes and edges visited to find candidates; the search stops before a
// trial it cannot pay for. Graphs of up to `max_exhaustive_nodes` call_*
// nodes try every node and partner (O(N^2) trials, within the budget);
// larger ones try only nodes on a partition boundary with the partitions
// they touch and their boundary partners, at most `max_boundary_trials`
// trials. Outside the budget: the SIZE_BASED plan and its placement, the
// final placement and one pass over the nodes and edges, so the search
// takes a few hundred milliseconds at most in an optimised build, whatever
// N, E, P and D. The token is polled before every trial and every
// kPollInterval nodes or candidates visited; within a trial, the placement
// polls as MapPartitionsToDevices does.
//
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionSet set,
//                             KlPartition(graph, devices, {}, token));
#ifndef PARTPLAN_PLANNER_FX_KL_PARTITIONER_H_
#define PARTPLAN_PLANNER_FX_KL_PARTITIONER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/fx/partition.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

struct KlOptions {
  // Graphs with at most this many call_* nodes get the exhaustive pass.
  int max_exhaustive_nodes = 128;
  // Trials of the boundary pass on larger graphs...
  int max_boundary_trials = 512;
  // ...and the work units (node, edge, device and partition-on-device
  // visits, see above) the search may spend in all, either pass.
  int64_t max_work = 100'000'000;

  absl::Status CheckAndSetup() const;
};

// What a search spent, for tests and benchmarks.
struct KlStats {
  int64_t trials = 0;  // trials run (re-placed and costed)
  int64_t work = 0;    // work units charged, at most KlOptions::max_work
  bool out_of_work = false;  // the budget stopped the search
};

// `stats`, when given, is overwritten with what the search spent.
absl::StatusOr<PartitionSet> KlPartition(const CompactGraph& graph, const DeviceList& devices,
                                         const KlOptions& options,
                                         const CancellationToken& token,
                                         KlStats* stats = nullptr);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_KL_PARTITIONER_H_

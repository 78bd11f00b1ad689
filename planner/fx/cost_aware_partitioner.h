// CostAwarePartition: torch.fx's `cost_aware` mode, reproduced.
//
// Starts from one partition per call_* node and repeatedly merges the pair
// of partitions whose merge gives the lowest critical-path latency, as long
// as it is not higher than the current one (ties go to the later pair, as
// torch.fx's `<=` does). Two partitions may merge when their DAG levels
// differ by at most one or one feeds the other, and the merge creates no
// cycle and still maps onto the devices (best fit). Trials are costed with
// torch.fx's own accounting (latency.h: charge_shared_graph_inputs), so the
// search takes torch.fx's decisions and ends at its plan; that plan is then
// reported with partplan's accounting, which is never higher.
//
// Each round tries every pair, each trial costing O(N + E + P x devices):
// O(P^3 (N + E)) in all for P call_* nodes. The search therefore runs only
// up to `max_exact_nodes` call_* nodes (torch.fx, enumerating every path,
// is slower still there); above it, FAILED_PRECONDITION says so.
//
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionSet set,
//                             CostAwarePartition(graph, devices, {}, token));
#ifndef PARTPLAN_PLANNER_FX_COST_AWARE_PARTITIONER_H_
#define PARTPLAN_PLANNER_FX_COST_AWARE_PARTITIONER_H_

#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/fx/partition.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

struct CostAwareOptions {
  // Most call_* nodes the pairwise search takes on.
  int max_exact_nodes = 128;

  absl::Status CheckAndSetup() const;
};

absl::StatusOr<PartitionSet> CostAwarePartition(const CompactGraph& graph,
                                                const DeviceList& devices,
                                                const CostAwareOptions& options,
                                                const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_COST_AWARE_PARTITIONER_H_

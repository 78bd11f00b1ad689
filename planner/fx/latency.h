// EstimatePlanLatency: torch.fx's latency model of a partitioned graph, in
// linear time.
//
// A node's latency is its own (Node.latency) or, when absent, derived on
// its partition's first device: compute = FLOPs / the device's FLOP/s, and
// memory = (its total bytes + its inputs' output bytes) / the device's
// memory bandwidth (each 0 when the figure is missing). A node costs
// max(compute, memory). A partition's latency is its longest path of
// call_* nodes; the graph's is the longest path through the partition DAG,
// adding for each edge the bytes the child reads from the parent (each
// value once) over the bandwidth between their devices, and nothing when
// both run on the same devices or the bandwidth is 0 (free transfers).
//
// torch.fx enumerates every path (exponential on residual graphs, with
// recursion as deep as the graph); this is one pass in topological order.
//
//   PARTPLAN_ASSIGN_OR_RETURN(PlanLatency latency,
//                             EstimatePlanLatency(graph, devices, set, token));
#ifndef PARTPLAN_PLANNER_FX_LATENCY_H_
#define PARTPLAN_PLANNER_FX_LATENCY_H_

#include <vector>

#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/fx/partition.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

struct LatencyOptions {
  // torch.fx's get_comm_latency_between also charges, on a parent -> child
  // edge, the graph inputs (placeholders, get_attrs) the child reads that
  // are copied into the parent too. They never travel between partitions,
  // so partplan's reports leave them out; the searches that reproduce
  // torch.fx's decisions (cost_aware) turn this on.
  bool charge_shared_graph_inputs = false;
};

struct PlanLatency {
  // Longest internal path of each partition, in seconds.
  std::vector<double> partition_seconds;
  // Longest path through the partition DAG with transfers, in seconds.
  double critical_path_seconds = 0;
};

// INVALID_ARGUMENT when the partitions depend on each other in a cycle, or
// when finite figures give a time beyond the largest double (naming the
// device figure, the node, or `devices` for a transfer).
absl::StatusOr<PlanLatency> EstimatePlanLatency(const CompactGraph& graph,
                                                const DeviceList& devices,
                                                const PartitionSet& set,
                                                const CancellationToken& token,
                                                const LatencyOptions& options = {});

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_LATENCY_H_

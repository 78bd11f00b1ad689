// A model given as a graph (the exporter's, with NodeTraining costs and
// saved-activation bytes) for the parallelize search. A graph says nothing
// of how to split its operators, so it has no tensor parallelism (t = 1);
// each micro-batch is the samples its tensors were traced with; each
// configuration's chain comes from the training planner's own edge
// (training/training_chain.h) on a pipeline of the configuration's ranks,
// and that planner chooses recompute per stage.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const GraphModel model, GraphModelOf(graph, 8, token));
//   std::vector<TrainingDevice> devices;
//   PARTPLAN_ASSIGN_OR_RETURN(TransformerChain chain,
//       BuildGraphChain(model, options, candidate, ranks, &devices, token));
#ifndef PARTPLAN_PLANNER_PARALLELIZE_GRAPH_COSTS_H_
#define PARTPLAN_PLANNER_PARALLELIZE_GRAPH_COSTS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"
#include "planner/parallelize/parallelize_problem.h"
#include "planner/parallelize/transformer_costs.h"
#include "planner/training/stage_search.h"

namespace partplan {

struct GraphModel {
  const CompactGraph* graph = nullptr;
  int batch_size = 1;  // samples one micro-batch holds
  int items = 0;       // nodes to place: all but placeholders and the output
  // One micro-batch's forward + backward + weight gradient, in units of
  // work (seconds when `in_seconds`, else FLOPs), and the least share of
  // an item's work its forward is.
  double work = 0;
  double forward_share = 1;
  double parameters = 0;  // elements, tied ones once
  bool in_seconds = false;
};

absl::StatusOr<GraphModel> GraphModelOf(const CompactGraph& graph, int batch_size,
                                        const CancellationToken& token);

// The chain of `candidate` (t = 1) on `links` (one per pipeline rank):
// the training planner's, each item's backward plus ZeRO-2's and ZeRO-3's
// per-micro-batch exchanges of its parameters; `*devices` the ranks as the
// training planner takes them (speeds: compute_efficiency x peak FLOP/s for
// a graph of FLOPs, 1 for one of latencies, taken as measured on the
// cluster's devices).
absl::StatusOr<TransformerChain> BuildGraphChain(const GraphModel& model,
                                                 const ParallelizeOptions& options,
                                                 const ParallelCandidate& candidate,
                                                 const std::vector<RankLinks>& links,
                                                 std::vector<TrainingDevice>* devices,
                                                 const CancellationToken& token);

// A transformer's graph given with its summary: the saved-activation bytes
// the exporter measured (each item's, as PlanTraining counts them),
// attributed to the embedding, each of the `layers` layers and the head,
// per sequence (the graph holds `batch_size`). The layers are the modules
// of one list, `<prefix>.<i>.` in call_module targets with i = 0..l-1 (the
// prefix with the most call_modules among those that have exactly those
// indices); an item belongs to the layer of the last such module before
// it (or is one), to the embedding before the first, and to the head from
// the first other call_module after the last layer's. INVALID_ARGUMENT on
// `graph` when no such list is found.
absl::StatusOr<MeasuredActivations> MeasureLayerActivations(const CompactGraph& graph, int layers,
                                                            int batch_size,
                                                            const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PARALLELIZE_GRAPH_COSTS_H_

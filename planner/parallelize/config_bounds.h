// Bounds on a configuration before its stages are planned (parallel_search.h
// says how the search uses them): a lower bound on its step from totals, and
// whether no layout can fit its devices' memory.
//
//   const double bound = LowerBound(problem, graph, candidate, layout);  // -1: cannot fit
//   if (ActivationsCannotFit(problem, measured, candidate, layout)) ...
#ifndef PARTPLAN_PLANNER_PARALLELIZE_CONFIG_BOUNDS_H_
#define PARTPLAN_PLANNER_PARALLELIZE_CONFIG_BOUNDS_H_

#include "planner/parallelize/cluster_layout.h"
#include "planner/parallelize/graph_costs.h"
#include "planner/parallelize/parallelize_problem.h"
#include "planner/parallelize/transformer_costs.h"
#include "planner/training/device_memory.h"

namespace partplan {

// The training planner's memory options of configuration `c`.
TrainingMemoryOptions MemoryOptionsOf(const ParallelizeOptions& options,
                                      const ParallelCandidate& c);

// Whether no layout of `c` can fit its ranks' memory, by a bound cheaper
// than planning: at its first backward, rank r holds n_r micro-batches of
// every layer it has (1F1B and ZB-H1: min(p - r, B) from their warm-up;
// GPipe: B; interleaved: at least one of each chunk). A rank of x_r layers
// then needs x_r (s + n_r a) bytes, s a layer's model states and a the
// least a layer saves; spreading the l layers over the ranks as evenly as
// that allows leaves the fullest needing at least l / sum_r 1/(s + n_r a).
bool ActivationsCannotFit(const ParallelizeProblem& problem, const MeasuredActivations* measured,
                          const ParallelCandidate& c, const Layout& layout);

// The least step any plan of `c` can take (parallel_search.h), or -1 when
// its model states alone overflow the memory of every rank; for a graph
// model (`graph` not null), from the graph's totals.
double LowerBound(const ParallelizeProblem& problem, const GraphModel* graph,
                  const ParallelCandidate& c, const Layout& layout);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PARALLELIZE_CONFIG_BOUNDS_H_

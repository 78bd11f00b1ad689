// SearchParallelConfigs: every configuration of tensor (t), pipeline (p)
// and data (d) parallelism, micro-batch size, schedule (and virtual stages),
// ZeRO stage and layer recompute for a transformer on a cluster, each one's
// pipeline stages planned by the training planner (stage_search.h) on the
// costs of transformer_costs.h, ranked by the predicted step.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const ParallelizeProblem problem,
//                             ParallelizeProblemFromRequest(request));
//   PARTPLAN_ASSIGN_OR_RETURN(const ParallelSearchResult result,
//                             SearchParallelConfigs(problem, token));
//   result.configs[0];   // the fastest configuration that fits
//
// The lattice: t divides the heads, the hidden size and the MLP width, and
// tensor groups are t devices of one host (any t free devices in order when
// tensor parallelism may cross hosts); p is at most the layers and the
// groups; d divides the global batch G and p d is at most the groups;
// b divides G / d; every schedule asked for (one schedule when p = 1), with
// v from 2 to max_chunks_per_device for interleaved 1F1B where p v stages
// fit the items and p divides the micro-batches; every ZeRO stage asked for
// (one when d = 1); every recompute asked for.
//
// Best first, by bounds. Each configuration gets a lower bound on its step
// from totals alone: the busiest device works at least the micro-batches'
// work over the ranks' total speed; the rank holding ceil(l / p) layers
// works them and then exchanges their gradients; for schedules whose every
// device's last op is followed by its micro-batch's backward through the
// stages before it (GPipe, 1F1B) or whose first op waits for the forwards
// before it (ZB-H1), the least over every real-valued split of the work of
// max_k(phi S_k + B w_k), which is phi W / (1 - (1 - phi/B)^p); for
// interleaved 1F1B, a layer's work on each first-chunk stage before a
// device. Configurations whose model states alone overflow the largest
// memory on the rank holding ceil(l / p) layers are dropped, and so, before
// planning, are those whose states and activations in flight cannot fit
// (ActivationsCannotFit). The rest are planned in order of their bound
// until the bound passes the step of the last configuration to return; the
// rest cannot beat it. Plans while ranking are the training planner's first
// plans searched within kLatticeSearchNodes; the configurations returned are
// planned again within max_search_nodes, and say whether the layout is
// proven optimal.
//
// Cost: the lattice is enumerated in passes of at most kCandidatesPerPass
// configurations held at once (O(1) each), so memory stays bounded; each
// configuration planned costs the training planner's search on l + 2 items.
#ifndef PARTPLAN_PLANNER_PARALLELIZE_PARALLEL_SEARCH_H_
#define PARTPLAN_PLANNER_PARALLELIZE_PARALLEL_SEARCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/parallelize/parallelize_problem.h"
#include "planner/parallelize/transformer_costs.h"
#include "planner/training/stage_search.h"

namespace partplan {

inline constexpr int64_t kCandidatesPerPass = int64_t{1} << 16;

// Where a configuration's step goes on the device that ends it, seconds.
struct StepParts {
  double compute = 0;
  double tensor = 0;
  double zero = 0;
  double idle = 0;
  double data_parallel = 0;
};

struct ParallelConfigResult {
  ParallelCandidate candidate;
  TrainingStagePlan plan;
  // The step: the pipeline's, or when later a rank's end plus its exposed
  // gradient exchange.
  double step_seconds = 0;
  double tokens_per_second = 0;  // 0 for a graph model
  double samples_per_second = 0;
  double model_flops_utilization = 0;
  StepParts parts;
  int fullest_rank = 0;                   // the rank with the highest peak memory
  std::vector<double> rank_memory_bytes;  // each rank's memory (its smallest device's)
  // Per pipeline rank, per replica, the tensor group's devices.
  std::vector<std::vector<std::vector<ClusterDevice>>> rank_groups;
  // For a graph model: each item's node.
  std::vector<int32_t> item_nodes;
  int layout = 0;  // the search's index of its (t, p, d) layout
};

struct ParallelSearchResult {
  std::vector<ParallelConfigResult> configs;  // best first
  int64_t candidates = 0;
  int64_t pruned_by_memory = 0;
  int64_t planned = 0;
  int64_t pruned_by_bound = 0;
};

// FAILED_PRECONDITION when no configuration fits, saying what came closest;
// the token's status when it fires.
absl::StatusOr<ParallelSearchResult> SearchParallelConfigs(const ParallelizeProblem& problem,
                                                           const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PARALLELIZE_PARALLEL_SEARCH_H_

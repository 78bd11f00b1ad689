// PlanTrainingStages: contiguous pipeline stages for a training step that
// minimise the simulated step time (schedule.h) with every device within its
// memory (device_memory.h); among the fastest, the fewest bytes crossing the
// cuts. Per stage it also chooses recompute.
//
//   TrainingChain chain = ...;   // items in graph order, costs per micro-batch
//   StageSearchOptions options;
//   options.schedule = Options(PipelineSchedule::k1F1B, /*devices=*/4, /*B=*/8);
//   PARTPLAN_ASSIGN_OR_RETURN(const TrainingStagePlan plan,
//       PlanTrainingStages(options, chain, devices, token));
//   plan.cuts;            // stage k holds items [cuts[k], cuts[k + 1])
//   plan.proven_optimal;  // else plan.lower_bound bounds the optimum
//
// Why a search and not a dynamic program. GPipe's step decomposes (see
// schedule.h), but 1F1B's, the interleaved one's and ZB-H1's do not: the
// step is the longest path through the schedule's dependency graph, a
// maximum of many sums of stage costs, and which sum is longest depends on
// every stage at once. So the planner is a depth-first branch and bound over
// the cuts, stage by stage, exact because it only discards what a lower
// bound proves no better than the best plan found:
//   - a prefix of stages fixes those stages' costs; the step is monotone in
//     every cost, so simulating the schedule with the prefix's costs and
//     zero for the rest bounds every completion from below;
//   - device d's first op cannot start before the first micro-batch's
//     forwards through stages 0..d-1 and their transfers, it then works
//     B * (its stages' F + B + W), and after its last op -- a backward of
//     stage c -- the gradient still crosses stages c-1..0;
//   - the items left go to the devices left, so one of them works at least
//     their total over the devices' total speed;
//   - for GPipe, its own form (schedule.h): sum(F + B) + (B - 1)(max F +
//     max B), with the chosen stages' costs and, for the rest, their work
//     over the fastest remaining device and over all remaining speed.
// A search that stops at its bound returns, besides its least unexplored
// bound, the last two computed for the whole problem, from totals alone.
// The first plan comes from a bottleneck balance (bisection on the busiest
// device's time, each device greedily taking what fits) improved by moving
// single cuts while the simulated step improves; a tight one prunes most of
// the tree. Recompute only lowers memory and never speeds a stage, so a
// stage recomputes only when it does not fit otherwise (with one chunk per
// device, where each stage's memory is its own, that choice is made at the
// stage; with several, per device once all its chunks are known).
//
// Cost: O(n log n) to set up, O(n + P v B) per search node, and at most
// `max_search_nodes` nodes: in the worst case the tree is every way to cut
// (n - 1 choose Pv - 1). A search that stops at that bound returns its best
// plan with proven_optimal false and the least bound of what it left
// unexplored. tests/planner/training/stage_search_test checks the plans
// against trying every cut and recompute choice, 3,000 instances a schedule.
#ifndef PARTPLAN_PLANNER_TRAINING_STAGE_SEARCH_H_
#define PARTPLAN_PLANNER_TRAINING_STAGE_SEARCH_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/training/device_memory.h"
#include "planner/training/schedule.h"
#include "planner/training/shared_saves.h"

namespace partplan {

// One item of the pipeline (a graph node in graph order), per micro-batch.
// Costs are work: seconds on a device of speed 1, or FLOPs.
struct TrainingItem {
  double forward = 0;
  double backward_input = 0;
  double backward_weight = 0;
  // Every storage the item saves for its backward, those other items save
  // too included (see TrainingChain::shared_saves).
  int64_t saved_activation_bytes = 0;
  int64_t parameters = 0;
  // The backward's working set while this item's backward runs.
  int64_t transient_bytes = 0;
};

enum class StagePlacement { kAny, kFirst, kLast, kAlone };

// Parameters several items share, as a tied input embedding and output
// head do. Each stage holding any of `items` keeps a copy (its weights,
// gradients and optimizer state, by the memory options); unless the items
// must share one stage, the copies' gradients are then all-reduced when the
// step's backward ends on the devices holding them: 2 (n - 1) / n x
// parameters x gradient bytes per parameter over the slowest link of the
// pipeline's ring, for n devices (Megatron-LM all-reduces its tied
// embedding between the first and last stage so).
struct TiedParameters {
  std::vector<int> items;  // ascending, distinct
  int64_t parameters = 0;  // not counted in the items' own parameters
  bool same_stage = false;
};

struct TrainingChain {
  std::vector<TrainingItem> items;
  // Bytes crossing cut c, just before item c, per micro-batch: n + 1
  // entries (the first is what the pipeline's first stage receives).
  std::vector<int64_t> live_bytes;
  // Empty, or one per item.
  std::vector<StagePlacement> placement;
  std::vector<TiedParameters> tied;
  // Storages saved by more than one item, as consecutive savers: a stage
  // holding both items of a pair keeps the storage once; stages on either
  // side of a cut between them each keep a copy (shared_saves.h).
  std::vector<SharedSave> shared_saves;
};

struct TrainingDevice {
  std::string name;  // for messages; empty: its index
  double speed = 1;  // work per second
  double memory_bytes = std::numeric_limits<double>::infinity();
  // Bytes per second to the next device in pipeline order (device d to
  // d + 1, the last to the first for interleaved chunks); infinity: free.
  double link_bytes_per_second = std::numeric_limits<double>::infinity();
};

enum class RecomputeChoice { kAuto, kNever, kAlways };

struct StageSearchOptions {
  ScheduleOptions schedule;
  TrainingMemoryOptions memory;
  RecomputeChoice recompute = RecomputeChoice::kAuto;
  // The search's effort: each end tried for a stage is a node, and each
  // simulation of a partial plan a node per 64 ops it runs. 0: no search,
  // the first plan only (never proven optimal).
  int64_t max_search_nodes = int64_t{1} << 16;
  // Whether FAILED_PRECONDITION names the device short the most at the
  // closest plan (a bisection over the memory allowance, some tens of
  // reachability passes); a caller that tries many problems and only needs
  // to know which fit turns it off.
  bool explain_no_plan = true;
  // Whether the first plan is improved by moving single cuts before the
  // search (a simulation per move tried); a caller ranking many problems
  // by their first plans turns it off.
  bool improve_first_plan = true;

  // INVALID_ARGUMENT naming the field unless the schedule and memory options
  // pass their checks, max_search_nodes >= 0, `chain` has at least P * v
  // items, finite non-negative costs and sizes, n + 1 live_bytes and, when
  // given, one placement per item, and `devices` has P entries with positive
  // finite speeds, memory >= 0 and positive link rates.
  absl::Status CheckAndSetup(const TrainingChain& chain,
                             const std::vector<TrainingDevice>& devices) const;
};

struct TrainingStagePlan {
  // P * v + 1 entries: stage k holds items [cuts[k], cuts[k + 1]).
  std::vector<int> cuts;
  std::vector<bool> recompute;  // per stage
  StageCosts costs;             // seconds, per stage and link
  std::vector<StageFootprint> footprints;
  PipelineTimeline timeline;
  std::vector<DeviceMemory> memory;  // per device
  // The schedule's end or, when later, the end of a tied all-reduce.
  double step_seconds = 0;
  // Per chain.tied group, its all-reduce (0 when one device holds it).
  std::vector<double> tied_allreduce_seconds;
  int64_t crossing_bytes = 0;  // live_bytes of the inner cuts, summed
  bool proven_optimal = false;
  double lower_bound = 0;  // on the optimal step; step_seconds when proven
  int64_t search_nodes = 0;
};

// FAILED_PRECONDITION when no plan fits: naming the device short the most,
// and by how many bytes, in the plan that comes closest (with one chunk per
// device: the least largest shortfall over every cut and recompute choice;
// with several: the closest found by bisection on a memory allowance, with
// the search for problems up to 4,096 items x stages, which is that least
// where each search finishes, else among the greedy first plans, and never
// worse than the nodes spread evenly), or saying the pins cannot be met.
// INVALID_ARGUMENT from CheckAndSetup; the token's status when it fires.
absl::StatusOr<TrainingStagePlan> PlanTrainingStages(const StageSearchOptions& options,
                                                     const TrainingChain& chain,
                                                     const std::vector<TrainingDevice>& devices,
                                                     const CancellationToken& token);

// Whether `cuts` make non-empty stages that meet the chain's pins and keep
// each same_stage group of tied items in one stage.
bool CutsMeetPins(const TrainingChain& chain, int stages, const std::vector<int>& cuts);

// Evaluates many cuts of one problem, its tables (prefix sums, range
// maxima, the schedule's order) built once: what a report's what-ifs need.
//
//   PARTPLAN_ASSIGN_OR_RETURN(auto evaluator,
//       TrainingStagesEvaluator::Create(options, chain, devices, token));
//   PARTPLAN_ASSIGN_OR_RETURN(TrainingStagePlan moved,
//       evaluator->Evaluate(cuts, recompute, token));   // O(P v B)
//
// The options, chain and devices must outlive the evaluator.
class TrainingStagesEvaluator {
 public:
  // INVALID_ARGUMENT from CheckAndSetup; the token's status.
  static absl::StatusOr<std::unique_ptr<TrainingStagesEvaluator>> Create(
      const StageSearchOptions& options, const TrainingChain& chain,
      const std::vector<TrainingDevice>& devices, const CancellationToken& token);
  ~TrainingStagesEvaluator();

  // The plan's costs, footprints, timeline and memory for given cuts and
  // recompute choices (the planner's own evaluation; the cuts need not meet
  // the pins). INVALID_ARGUMENT naming `cuts` or `recompute` when they are
  // not P v + 1 ascending cuts from 0 to n and P v choices.
  absl::StatusOr<TrainingStagePlan> Evaluate(const std::vector<int>& cuts,
                                             const std::vector<bool>& recompute,
                                             const CancellationToken& token) const;

 private:
  class Tables;
  TrainingStagesEvaluator(const StageSearchOptions& options, const TrainingChain& chain,
                          const std::vector<TrainingDevice>& devices);
  const StageSearchOptions& options_;
  const TrainingChain& chain_;
  std::unique_ptr<Tables> tables_;
};

// One evaluation (TrainingStagesEvaluator's, the tables built for it).
absl::StatusOr<TrainingStagePlan> EvaluateTrainingStages(
    const StageSearchOptions& options, const TrainingChain& chain,
    const std::vector<TrainingDevice>& devices, const std::vector<int>& cuts,
    const std::vector<bool>& recompute, const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_TRAINING_STAGE_SEARCH_H_

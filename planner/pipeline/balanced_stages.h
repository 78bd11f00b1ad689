// PlanBalancedStages: the optimal split of a pipeline into exactly K
// contiguous, non-empty stages on K given devices, in O(K * n) time at
// worst and, with pruning, close to O(n) on balanced inputs.
//
//   std::vector<StageDevice> devices = {{"gpu0", int64_t{16} << 30, 312e12},
//                                       {"gpu1", int64_t{8} << 30, 125e12}};
//   PARTPLAN_ASSIGN_OR_RETURN(StagePlan plan,
//                             PlanBalancedStages(model, work, devices, token));
//   // Stage s holds items [plan.cuts[s], plan.cuts[s + 1]) and runs on devices[s].
//
// The problem. Items 0..n-1 of a StageModel (stage_model.h) carry work
// w_i >= 0; devices 0..K-1, in pipeline order, have memory M_s and speed
// v_s > 0 (work per second). Stage s is a non-empty item range
// [c_s, c_{s+1}), 0 = c_0 < c_1 < ... < c_K = n, on device s. Its time is
// W(c_s, c_{s+1}) / v_s (W: the range's work) and its memory,
// StageMemoryBytes(c_s, c_{s+1}), must not exceed M_s. The plan minimises
// the slowest stage's time T; among the plans reaching the least T, it
// minimises the bytes crossing the cuts, sum of LiveBytes(c_s) for 0<s<K,
// skip connections included.
//
// Why a probe is not enough. The classic method bisects on T and checks
// each T greedily, every device taking as many items as it can. That check
// is exact when a stage may be empty or when every item fits every device,
// but not for exactly K non-empty stages on unequal devices: with items
// [x, y, B, z], B too big for device 1, devices 0 and 2 large, greedy gives
// device 0 [x, y, B] (or, capped to leave an item per later device, [x, y],
// after which device 1 cannot take B), yet [x] [y] [B, z] fits. The set of
// feasible stage ends is then not an interval, and a bisection on reals
// only approximates T anyway. So this planner is a dynamic program, made
// linear per stage.
//
// Pass 1, the least bottleneck. F_s(j), the best slowest-stage time of
// items [0, j) on devices 0..s, satisfies
//   F_s(j) = min over i in [L_s(j), j) of max(F_{s-1}(i), W(i, j) / v_s),
// where L_s(j) is the least start whose stage [i, j) fits M_s. This is the
// definition (max is monotone, so optimal prefixes compose). To evaluate
// it in amortised O(1) per j:
//   - L_s(j) never decreases as j grows (memory grows with the stage at
//     either end), so one pointer tracks it;
//   - of two candidate starts i < i', if F_{s-1}(i) >= F_{s-1}(i'), i is
//     never better (its stage is also at least as slow) and leaves the
//     window first: drop it. The kept candidates have F increasing and
//     stage time non-increasing, so max(F, time) is least where they cross:
//     at the first candidate k with F >= time, the optimum is
//     min(F_k, time_{k-1});
//   - as j grows every stage time grows, so that crossing only moves to
//     later candidates; a pointer follows it, pulled back only to a newly
//     appended candidate (at most once per pop): O(n) per stage.
// T* = F_{K-1}(n) is exactly one of the stage times, no tolerance.
//
// Pass 2, the fewest crossing bytes at T*. With T* fixed, stage [i, j) on
// device s is allowed when it fits M_s and W(i, j) / v_s <= T*; the least
// allowed start again never decreases with j. The bytes crossing a cut
// depend on the cut alone, so
//   G_s(j) = min over allowed i of G_{s-1}(i) + LiveBytes(i)   (s > 0)
// is a sliding-window minimum (a monotone deque), O(n) per stage. The
// chosen start of every (s, j) is needed to walk the plan back; those rows
// are kept for about sqrt(K) stages at a time and recomputed from a row
// saved every sqrt(K) stages, so memory is O(n sqrt(K)) and time stays
// O(n K) (pass 2 runs twice). Among equal plans the earliest cuts win.
//
// Pruning, which keeps both passes exact. A greedy probe (each device in
// turn takes as many items as it may within T, leaving one per later
// device) either fails or finds a real plan, so the least T at which it
// succeeds -- found by bisection, O(K log n) per probe -- is an upper bound
// T+ >= T*. Pass 1 then only considers stages within T+, and pass 2 only
// stages within T*. Within a time limit, stage s can only end in a band:
// at most as far as greedy reaches from the left, and at least as early as
// greedy must start from the right (both greedy reaches are exact when
// stages may be empty, so they bound every plan with non-empty stages).
// Each layer visits only its band and the previous one, so on inputs
// where the probe is near-optimal (every balanced pipeline of similar
// devices) a layer costs about n/K + band width instead of n. The worst
// case stays O(K * n): with no useful bound a band is every end.
//
// Stage times come from prefix sums of the work in double precision, the
// same numbers in both passes and in the report (StageTimes), so the plan
// is optimal for exactly the times it reports; for integer work below
// 2^53 those are exact. tests/planner/pipeline compares the planner with
// exhaustive search on random graphs.
//
// FAILED_PRECONDITION, with the reason, when no plan exists: fewer items
// than stages, an item that fits no device on its own, devices that hold
// the items in order only if some stage stays empty, or too little memory
// in all. CANCELLED / DEADLINE_EXCEEDED when the token fires.
#ifndef PARTPLAN_PLANNER_PIPELINE_BALANCED_STAGES_H_
#define PARTPLAN_PLANNER_PIPELINE_BALANCED_STAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "planner/base/cancellation.h"
#include "planner/pipeline/stage_model.h"

namespace partplan {

// The device of one stage.
struct StageDevice {
  // For messages.
  std::string name;
  // Memory the stage may use, in bytes; positive.
  int64_t memory_bytes = 0;
  // Work done per second; positive and finite (1 when work is in seconds).
  double speed = 1;
};

// Stage times from prefix sums of per-item work; shared by the planner, the
// report and the tests so that all compare the very same numbers.
class StageTimes {
 public:
  StageTimes(absl::Span<const double> work, absl::Span<const StageDevice> devices);

  // Time of items [begin, end) on device s.
  double Time(int s, int32_t begin, int32_t end) const {
    return (work_before_[end] - work_before_[begin]) / speed_[s];
  }

 private:
  std::vector<double> work_before_;
  std::vector<double> speed_;
};

struct StagePlan {
  // K + 1 positions: stage s holds items [cuts[s], cuts[s + 1]).
  std::vector<int32_t> cuts;
  // The slowest stage's time, T*.
  double bottleneck = 0;
  // Sum of LiveBytes over the K - 1 inner cuts.
  int64_t crossing_bytes = 0;
};

// `work` has one entry per item of `model`, finite and not negative, with a
// finite sum; `devices` is not empty. See above for the errors.
absl::StatusOr<StagePlan> PlanBalancedStages(const StageModel& model, absl::Span<const double> work,
                                             absl::Span<const StageDevice> devices,
                                             const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PIPELINE_BALANCED_STAGES_H_

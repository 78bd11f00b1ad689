// SuffixBound (internal to stage_search): with one chunk per device, a
// lower bound on the step of every way to finish a plan from each stage and
// start, by dynamic program; and the plan attaining the bound, a seed.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const SuffixBound suffix,
//                             SuffixBound::Compute(options, table, token));
//   suffix.At(0, 0);   // no plan's step is below this
#ifndef PARTPLAN_PLANNER_TRAINING_SUFFIX_BOUND_H_
#define PARTPLAN_PLANNER_TRAINING_SUFFIX_BOUND_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/base/status_util.h"
#include "planner/training/stage_search.h"
#include "planner/training/stage_table.h"

namespace partplan {
namespace stage_search_internal {

// With one chunk per device, a lower bound on the step of every way to
// finish a plan, computed for every stage and start by a dynamic program.
// Device j (stage j) cannot start before S_j = sum over i < j of (F_i +
// t_i), works B * busy_j, and (unless the schedule ends devices on a W)
// then waits for the gradient to cross back: G_j = sum over i < j of (B_i +
// t_i). So step >= max over j of S_j + G_j + B * busy_j, and for stages
// k.. started at item e, with S_k and G_k fixed by the stages before,
//   D(k, e) = min over ends x of max(B * busy_k(e, x),
//                                    c_k(e, x) + D(k + 1, x)),
//   c_k = F_k + t_k (+ B_k + t_k with the gradient tail),
// bounds the rest: step >= S_k + G_k + D(k, e). For 1F1B, B * busy_k is
// replaced by the larger of it and the chain through device k's first and
// last backward, (B - P + k + 1) X_k + 2 (the rest's work over its fastest
// device), X_k the stage's F + B (see Stage). Each stage takes its
// fastest choice that fits (more only adds time), ends where the pins
// allow. For fixed e, B * busy_k grows with x, and of two ends the earlier
// is better when its c + D is no larger; so the useful ends, kept in a
// deque as e falls (the window of ends that fit slides left), have c + D
// falling as busy rises, and the best is where they cross: a binary
// search. O(P n log n) time, O(P n) memory.
class SuffixBound {
 public:
  SuffixBound() = default;

  static absl::StatusOr<SuffixBound> Compute(const StageSearchOptions& options,
                                             const StageTable& table,
                                             const CancellationToken& token) {
    SuffixBound bound;
    const int stages = table.stages();
    const int n = table.items();
    bound.tail_ = !table.split_weight();
    bound.fastest_from_.assign(stages + 1, 0);
    for (int k = stages - 1; k >= 0; --k) {
      bound.fastest_from_[k] = std::max(bound.fastest_from_[k + 1], table.speed(k));
    }
    bound.values_.assign(stages + 1, std::vector<double>(n + 1, kInfinity));
    bound.values_[stages][n] = 0;
    bound.end_.assign(stages, std::vector<int>(n + 1, -1));
    bound.recompute_.assign(stages, std::vector<bool>(n + 1, false));
    int64_t work = 0;
    for (int k = stages - 1; k >= 0; --k) {
      PARTPLAN_RETURN_IF_ERROR(bound.Stage(options, table, k, token, &work));
    }
    return bound;
  }

  // The bound on stages `stage`.. started at item `begin`, to add to
  // S + G; infinity when they cannot be made.
  double At(int stage, int begin) const { return values_[stage][begin]; }
  // Whether the gradient tail G is part of it.
  bool has_tail() const { return tail_; }

  // The plan that attains D(0, 0): a plan whose step is often close to it,
  // to seed the search. Empty when there is none; its stages may not fit
  // where recompute's window was widened.
  std::vector<int> Plan(std::vector<bool>* recompute) const {
    const int stages = static_cast<int>(end_.size());
    std::vector<int> cuts(stages + 1, 0);
    recompute->assign(stages, false);
    for (int k = 0; k < stages; ++k) {
      const int end = end_[k][cuts[k]];
      if (end < 0 || !std::isfinite(values_[k][cuts[k]])) return {};
      cuts[k + 1] = end;
      (*recompute)[k] = recompute_[k][cuts[k]];
    }
    return cuts;
  }

 private:
  // One recompute choice's ends for stage k: x in [low, high] as e falls.
  // A deque in an array: ends are only pushed at the front, so the front
  // walks down from the array's end. Ends increase from front to back, psi
  // strictly falls.
  struct Window {
    Window(int capacity, bool recompute)
        : recompute(recompute), ends(capacity), psi(capacity), front(capacity), back(capacity) {}
    bool empty() const { return front == back; }
    int size() const { return back - front; }
    bool recompute;
    int lowest_added = std::numeric_limits<int>::max();
    std::vector<int> ends;
    std::vector<double> psi;
    int front;  // the first used slot
    int back;   // one past the last
  };

  absl::Status Stage(const StageSearchOptions& options, const StageTable& table, int k,
                     const CancellationToken& token, int64_t* work) {
    const int stages = table.stages();
    const int n = table.items();
    const double micro_batches = options.schedule.micro_batches;
    const double speed = table.speed(k);
    const std::vector<double>& next = values_[k + 1];
    std::vector<double>& out = values_[k];
    // c_k(e, x) + D(k + 1, x) = psi(x) - phi(e), and busy_k(e, x).
    const auto phi = [&](int x, bool recompute) {
      const double forward = table.ForwardBefore(x) * (1 + (tail_ && recompute ? 1 : 0));
      const double gradient =
          tail_ ? table.InputBefore(x) + (table.split_weight() ? 0.0 : table.WeightBefore(x))
                : 0.0;
      return (forward + gradient) / speed;
    };
    const auto psi = [&](int x, bool recompute) {
      const double transfer = x < n ? table.Transfer(k, x) * (tail_ ? 2 : 1) : 0.0;
      return phi(x, recompute) + transfer + next[x];
    };
    // B * busy_k(e, x) = work(x) - work(e), from prefix sums per choice.
    std::vector<double> work_plain(n + 1), work_recompute(n + 1);
    for (int x = 0; x <= n; ++x) {
      const double both = table.InputBefore(x) + table.WeightBefore(x);
      work_plain[x] = micro_batches * (table.ForwardBefore(x) + both) / speed;
      work_recompute[x] = micro_batches * (2 * table.ForwardBefore(x) + both) / speed;
    }
    // 1F1B: device k runs P - k forwards before its first backward, which
    // waits for micro-batch 0's round trip through the stages after it; its
    // last backward waits for the last micro-batch's. Along that chain
    //   step >= S_k + G_k + 2 sum_{i>k} X_i + (B - P + k + 1) X_k,
    // X_i a stage's F + B, when B >= P - k + 1 (so that a backward comes
    // between the two). The stages after k take at least their work over
    // the fastest of their devices. Kept where it rises with the stage's end
    // ((B - P + k + 1) X_k grows faster than the rest shrinks), as the
    // search needs.
    const double chain_times = micro_batches - options.schedule.devices + k + 1;  // B - P + k + 1
    const double rest_speed = k + 1 < stages ? fastest_from_[k + 1] : kInfinity;
    const bool chain =
        options.schedule.schedule == PipelineSchedule::k1F1B && chain_times >= 2 &&
        chain_times >= 2 * speed / rest_speed;
    // With m = B - P + k + 1: m X_k(e, x) + 2 rest(x) = chained(x) - (m / B)
    // work(e), by choice: chained(x) = (m / B) work(x) + 2 (T(n) - T(x)) /
    // rest_speed, T the
    // items' work before x (0 at x = n, where nothing is left).
    std::vector<double> chained_plain, chained_recompute;
    const double per_work = chain_times / micro_batches;
    if (chain) {
      chained_plain.resize(n + 1);
      chained_recompute.resize(n + 1);
      const auto total_work = [&](int x) {
        return table.ForwardBefore(x) + table.InputBefore(x) + table.WeightBefore(x);
      };
      for (int x = 0; x <= n; ++x) {
        const double rest = x < n ? 2 * (total_work(n) - total_work(x)) / rest_speed : 0.0;
        chained_plain[x] = per_work * work_plain[x] + rest;
        chained_recompute[x] = per_work * work_recompute[x] + rest;
      }
    }
    const auto busy = [&](int e, int x, bool recompute) {
      const std::vector<double>& work = recompute ? work_recompute : work_plain;
      const double own = work[x] - work[e];
      if (!chain) return own;
      const std::vector<double>& chained = recompute ? chained_recompute : chained_plain;
      return std::max(own, chained[x] - per_work * work[e]);
    };
    // The best end in a window for start e: the crossing of busy (rising)
    // and psi - phi(e) (falling) along the deque.
    const auto best_in = [&](const Window& window, int e) -> std::pair<double, int> {
      if (window.empty()) return {kInfinity, -1};
      const double offset = phi(e, window.recompute);
      int lo = window.front, hi = window.back;
      while (lo < hi) {  // the first end whose busy is at least its c + D
        const int mid = lo + (hi - lo) / 2;
        if (busy(e, window.ends[mid], window.recompute) >= window.psi[mid] - offset) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      std::pair<double, int> best = {kInfinity, -1};
      if (lo < window.back) best = {busy(e, window.ends[lo], window.recompute), window.ends[lo]};
      if (lo > window.front && window.psi[lo - 1] - offset < best.first) {
        best = {window.psi[lo - 1] - offset, window.ends[lo - 1]};
      }
      return best;
    };
    // Moves a window to [low, high]; both only fall as e falls.
    const auto slide = [&](Window* window, int low, int high) {
      while (!window->empty() && window->ends[window->back - 1] > high) --window->back;
      for (int x = std::min(window->lowest_added - 1, high); x >= low; --x) {
        const double value = psi(x, window->recompute);
        if (!std::isfinite(value) || table.Forbidden(x)) continue;
        while (!window->empty() && window->psi[window->front] >= value) ++window->front;
        if (window->empty()) window->front = window->back = static_cast<int>(window->ends.size());
        --window->front;
        window->ends[window->front] = x;
        window->psi[window->front] = value;
      }
      window->lowest_added = std::min(window->lowest_added, low);
    };

    const std::vector<bool> choices = RecomputeChoices(options.recompute);
    const bool has_plain = choices.front() == false;
    // When the largest stage fits without recompute, every stage does, and
    // recompute would only add time.
    const bool has_recompute =
        choices.back() == true && !(has_plain && table.StageFits(k, k == 0 ? 0 : 1, n, false));
    // Recomputing, a stage holds its inputs, which need not grow as its
    // start falls, so the last end that fits need not fall with it. The
    // window takes the most of it over later starts instead: more ends,
    // a lower bound still.
    std::vector<int> recompute_reach(n + 1, 0);
    if (has_recompute) {
      for (int e = 0; e < n; ++e) {
        PARTPLAN_RETURN_IF_ERROR(token.CheckEvery((*work)++));
        const int good =
            LastFitting(e + 1, n, [&](int end) { return table.StageFits(k, e, end, true); });
        recompute_reach[e] = e > 0 ? std::max(recompute_reach[e - 1], good) : good;
      }
    }
    Window plain(n + 1, false), recomputed(n + 1, true);
    int plain_reach = n;  // the last end that fits without recompute
    const int last_start = k == 0 ? 0 : n - (stages - k);
    for (int e = last_start; e >= (k == 0 ? 0 : 1); --e) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery((*work)++));
      int low = 0, high = 0;
      if (!table.EndRange(k, e, &low, &high)) continue;
      while (plain_reach > e && !table.StageFits(k, e, plain_reach, false)) --plain_reach;
      double best = kInfinity;
      const auto take = [&](double value, int end, bool recompute) {
        if (value < best) {
          best = value;
          end_[k][e] = end;
          recompute_[k][e] = recompute;
        }
      };
      if (high - low <= 1 || low > e + 1) {
        // A pinned stage, the last or the first: its few ends directly.
        for (int x = low; x <= high; ++x) {
          if (table.Forbidden(x)) continue;
          for (const bool recompute : choices) {
            if (!table.StageFits(k, e, x, recompute)) continue;
            take(std::max(busy(e, x, recompute), psi(x, recompute) - phi(e, recompute)), x,
                 recompute);
            break;
          }
        }
      } else {
        if (has_plain) {
          slide(&plain, low, std::min(high, plain_reach));
          const auto [value, end] = best_in(plain, e);
          take(value, end, false);
        }
        if (has_recompute) {
          slide(&recomputed, low, std::min(high, recompute_reach[e]));
          const auto [value, end] = best_in(recomputed, e);
          take(value, end, true);
        }
      }
      out[e] = best;
    }
    return absl::OkStatus();
  }

  bool tail_ = true;
  std::vector<double> fastest_from_;  // the fastest device of stages k..
  std::vector<std::vector<double>> values_;  // D(k, e)
  std::vector<std::vector<int>> end_;        // the end attaining it
  std::vector<std::vector<bool>> recompute_;
};

}  // namespace stage_search_internal
}  // namespace partplan

#endif  // PARTPLAN_PLANNER_TRAINING_SUFFIX_BOUND_H_

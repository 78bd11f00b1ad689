#include "planner/pipeline/balanced_stages.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "planner/status_util.h"

namespace partplan {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// A prefix that no plan reaches, in pass 2.
constexpr int64_t kUnreachable = std::numeric_limits<int64_t>::max();
// Byte sums saturate just below kUnreachable: no real graph gets there.
constexpr int64_t kSaturated = kUnreachable - 1;

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum) || sum > kSaturated) return kSaturated;
  return sum;
}

// The least start of an allowed stage [start, end) on one device, as `end`
// grows: a stage is allowed when it fits the device's memory and takes at
// most `time_limit`. Both only grow with the stage, so the least start
// never decreases and one pointer serves a whole sweep.
class StageWindow {
 public:
  StageWindow(const StageModel& model, const StageTimes& times, int device,
              int64_t memory_bytes, double time_limit)
      : model_(model),
        times_(times),
        device_(device),
        memory_bytes_(memory_bytes),
        time_limit_(time_limit) {}

  // The least allowed start of a stage ending at `end` (== end: none).
  int32_t Start(int32_t end) {
    while (start_ < end && !Allowed(start_, end)) ++start_;
    return start_;
  }

 private:
  bool Allowed(int32_t begin, int32_t end) const {
    return model_.StageMemoryBytes(begin, end) <= memory_bytes_ &&
           times_.Time(device_, begin, end) <= time_limit_;
  }

  const StageModel& model_;
  const StageTimes& times_;
  const int device_;
  const int64_t memory_bytes_;
  const double time_limit_;
  int32_t start_ = 0;
};

class BalancedStagePlanner {
 public:
  BalancedStagePlanner(const StageModel& model, const StageTimes& times,
                       absl::Span<const StageDevice> devices, const CancellationToken& token)
      : model_(model),
        times_(times),
        devices_(devices),
        token_(token),
        n_(model.num_items()),
        k_(static_cast<int>(devices.size())) {}

  // Pass 1: T*, or +infinity when no plan fits the devices' memory.
  absl::StatusOr<double> LeastBottleneck() {
    std::vector<double> row(n_ + 1, kInfinity);
    std::vector<double> next(n_ + 1);
    row[0] = 0;  // no stage yet: items [0, 0) covered at no cost
    for (int s = 0; s < k_; ++s) {
      PARTPLAN_RETURN_IF_ERROR(BottleneckLayer(s, row, &next));
      row.swap(next);
    }
    return row[n_];
  }

  // Pass 2 and the walk back: the cuts of the plan with the fewest crossing
  // bytes among those whose stages all take at most `bottleneck`.
  absl::StatusOr<std::vector<int32_t>> FewestCrossingCuts(double bottleneck) {
    const int block = std::max(1, static_cast<int>(std::ceil(std::sqrt(k_))));
    std::vector<std::vector<int64_t>> checkpoints;  // the row entering stage t * block
    std::vector<int64_t> row(n_ + 1, kUnreachable);
    std::vector<int64_t> next(n_ + 1);
    row[0] = 0;
    for (int s = 0; s < k_; ++s) {
      if (s % block == 0) checkpoints.push_back(row);
      PARTPLAN_RETURN_IF_ERROR(CrossingLayer(s, bottleneck, row, &next, nullptr));
      row.swap(next);
    }
    if (row[n_] == kUnreachable) {
      return absl::InternalError("balanced stages: no plan within the least bottleneck");
    }
    std::vector<int32_t> cuts(k_ + 1, 0);
    cuts[k_] = n_;
    std::vector<std::vector<int32_t>> start_of(block, std::vector<int32_t>(n_ + 1, -1));
    for (int t = static_cast<int>(checkpoints.size()) - 1; t >= 0; --t) {
      const int first = t * block;
      const int last = std::min(k_, first + block);
      row = std::move(checkpoints[t]);
      checkpoints.pop_back();
      for (int s = first; s < last; ++s) {
        PARTPLAN_RETURN_IF_ERROR(CrossingLayer(s, bottleneck, row, &next, &start_of[s - first]));
        row.swap(next);
      }
      for (int s = last - 1; s >= first; --s) cuts[s] = start_of[s - first][cuts[s + 1]];
    }
    return cuts;
  }

  // Why no plan fits (pass 1 found none): FAILED_PRECONDITION.
  absl::Status Infeasible() const {
    int largest = 0;
    for (int s = 1; s < k_; ++s) {
      if (devices_[s].memory_bytes > devices_[largest].memory_bytes) largest = s;
    }
    for (int32_t i = 0; i < n_; ++i) {
      const int64_t alone = model_.StageMemoryBytes(i, i + 1);
      if (alone > devices_[largest].memory_bytes) {
        const NodeId v = model_.item(i);
        return absl::FailedPreconditionError(absl::StrCat(
            "node '", model_.graph().name(v), "' (graph.nodes[", v, "]) needs ", alone,
            " bytes as a stage of its own (", model_.graph().total_bytes(v),
            " of its own and ", model_.LiveBytes(i), " of values live into it), more than the ",
            "largest device, '", devices_[largest].name, "', has (",
            devices_[largest].memory_bytes, " bytes)"));
      }
    }
    // With stages allowed to stay empty, each device taking as many items as
    // fit is exact (a sub-range of a fitting stage fits).
    int32_t reach = 0;
    for (int s = 0; s < k_; ++s) {
      const int32_t begin = reach;
      while (reach < n_ && model_.StageMemoryBytes(begin, reach + 1) <= devices_[s].memory_bytes) {
        ++reach;
      }
    }
    if (reach < n_) {
      const NodeId v = model_.item(reach);
      return absl::FailedPreconditionError(absl::StrCat(
          "the ", k_, " devices' memory, taken in pipeline order, holds at most the first ",
          reach, " of the ", n_, " nodes to place: node '", model_.graph().name(v),
          "' (graph.nodes[", v, "]) and the rest are left over"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "the ", n_, " nodes fit the ", k_, " devices' memory in pipeline order only if some ",
        "device gets no stage: no split into exactly ", k_,
        " non-empty contiguous stages has every stage within its device's memory"));
  }

 private:
  // F_s from F_{s-1} (`prev`), see the header.
  absl::Status BottleneckLayer(int s, const std::vector<double>& prev, std::vector<double>* cur) {
    PARTPLAN_RETURN_IF_ERROR(token_.Check());
    std::fill(cur->begin(), cur->end(), kInfinity);
    StageWindow window(model_, times_, s, devices_[s].memory_bytes, kInfinity);
    candidates_.clear();
    size_t head = 0;      // candidates_[head..] are in the window
    size_t crossing = 0;  // first candidate whose F is not below its stage time
    for (int32_t end = s + 1; end <= n_ - (k_ - 1 - s); ++end) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(++iterations_));
      const int32_t newest = end - 1;
      if (prev[newest] < kInfinity) {
        while (candidates_.size() > head && prev[candidates_.back()] >= prev[newest]) {
          candidates_.pop_back();
        }
        candidates_.push_back(newest);
        crossing = std::min(crossing, candidates_.size() - 1);
      }
      const int32_t start = window.Start(end);
      while (head < candidates_.size() && candidates_[head] < start) ++head;
      crossing = std::max(crossing, head);
      while (crossing < candidates_.size() &&
             prev[candidates_[crossing]] < times_.Time(s, candidates_[crossing], end)) {
        ++crossing;
      }
      double best = kInfinity;
      if (crossing < candidates_.size()) best = prev[candidates_[crossing]];
      if (crossing > head) best = std::min(best, times_.Time(s, candidates_[crossing - 1], end));
      (*cur)[end] = best;
    }
    return absl::OkStatus();
  }

  // G_s from G_{s-1} (`prev`), see the header; `start_of` (optional) gets
  // the chosen start of every reachable end.
  absl::Status CrossingLayer(int s, double bottleneck, const std::vector<int64_t>& prev,
                             std::vector<int64_t>* cur, std::vector<int32_t>* start_of) {
    PARTPLAN_RETURN_IF_ERROR(token_.Check());
    std::fill(cur->begin(), cur->end(), kUnreachable);
    StageWindow window(model_, times_, s, devices_[s].memory_bytes, bottleneck);
    // The cost of starting stage s at i: the prefix's plus the cut's bytes
    // (stage 0 starts at 0, where nothing is cut).
    auto cost = [&](int32_t i) {
      return i == 0 ? prev[i] : SaturatingAdd(prev[i], model_.LiveBytes(i));
    };
    candidates_.clear();
    size_t head = 0;
    for (int32_t end = s + 1; end <= n_ - (k_ - 1 - s); ++end) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(++iterations_));
      const int32_t newest = end - 1;
      if (prev[newest] != kUnreachable) {
        const int64_t newest_cost = cost(newest);
        // Strictly greater: among equal costs the earliest start stays.
        while (candidates_.size() > head && cost(candidates_.back()) > newest_cost) {
          candidates_.pop_back();
        }
        candidates_.push_back(newest);
      }
      const int32_t start = window.Start(end);
      while (head < candidates_.size() && candidates_[head] < start) ++head;
      if (head == candidates_.size()) continue;
      (*cur)[end] = cost(candidates_[head]);
      if (start_of != nullptr) (*start_of)[end] = candidates_[head];
    }
    return absl::OkStatus();
  }

  const StageModel& model_;
  const StageTimes& times_;
  const absl::Span<const StageDevice> devices_;
  const CancellationToken& token_;
  const int32_t n_;
  const int k_;
  std::vector<int32_t> candidates_;  // the monotone deque of a layer
  int64_t iterations_ = 0;
};

}  // namespace

StageTimes::StageTimes(absl::Span<const double> work, absl::Span<const StageDevice> devices)
    : work_before_(work.size() + 1, 0) {
  for (size_t i = 0; i < work.size(); ++i) work_before_[i + 1] = work_before_[i] + work[i];
  speed_.reserve(devices.size());
  for (const StageDevice& device : devices) speed_.push_back(device.speed);
}

absl::StatusOr<StagePlan> PlanBalancedStages(const StageModel& model,
                                             absl::Span<const double> work,
                                             absl::Span<const StageDevice> devices,
                                             const CancellationToken& token) {
  if (devices.empty() || static_cast<int64_t>(work.size()) != model.num_items()) {
    return absl::InvalidArgumentError(
        absl::StrCat("balanced stages: ", work.size(), " work entries for ", model.num_items(),
                     " items and ", devices.size(), " devices"));
  }
  const int k = static_cast<int>(devices.size());
  if (model.num_items() < k) {
    return absl::FailedPreconditionError(
        absl::StrCat("the graph has ", model.num_items(),
                     " nodes to place in stages (call_module, call_function, call_method and "
                     "get_attr nodes), fewer than the ",
                     k, " stages asked for; every stage needs at least one"));
  }
  const StageTimes times(work, devices);
  BalancedStagePlanner planner(model, times, devices, token);
  PARTPLAN_ASSIGN_OR_RETURN(const double bottleneck, planner.LeastBottleneck());
  if (bottleneck == kInfinity) return planner.Infeasible();
  StagePlan plan;
  PARTPLAN_ASSIGN_OR_RETURN(plan.cuts, planner.FewestCrossingCuts(bottleneck));
  plan.bottleneck = bottleneck;
  for (int s = 1; s < k; ++s) {
    plan.crossing_bytes = SaturatingAdd(plan.crossing_bytes, model.LiveBytes(plan.cuts[s]));
  }
  return plan;
}

}  // namespace partplan

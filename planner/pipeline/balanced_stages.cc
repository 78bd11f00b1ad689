#include "planner/pipeline/balanced_stages.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "planner/base/status_util.h"

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

// Whether stage [begin, end), begin < end, may run on device s: it fits
// the device's memory and takes at most `time_limit`. Both only fail more
// as the stage grows at either end.
class StageRule {
 public:
  StageRule(const StageModel& model, const StageTimes& times, absl::Span<const StageDevice> devices)
      : model_(model), times_(times), devices_(devices) {}

  bool Allowed(int s, int32_t begin, int32_t end, double time_limit) const {
    return model_.StageMemoryBytes(begin, end) <= devices_[s].memory_bytes &&
           times_.Time(s, begin, end) <= time_limit;
  }

  // The furthest end of an allowed stage starting at `begin` (`begin`
  // itself when item `begin` alone is not allowed).
  int32_t FurthestEnd(int s, int32_t begin, double time_limit) const {
    int32_t lo = begin;  // allowed (or empty)
    int32_t hi = model_.num_items();
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo + 1) / 2;
      if (Allowed(s, begin, mid, time_limit)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }

  // The earliest start of an allowed stage ending at `end` (`end` itself
  // when item `end - 1` alone is not allowed).
  int32_t EarliestStart(int s, int32_t end, double time_limit) const {
    int32_t lo = 0;
    int32_t hi = end;  // allowed (or empty)
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo) / 2;
      if (Allowed(s, mid, end, time_limit)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return lo;
  }

 private:
  const StageModel& model_;
  const StageTimes& times_;
  const absl::Span<const StageDevice> devices_;
};

// The least start of an allowed stage as its end grows, which never
// decreases: one pointer serves a whole sweep.
class StageWindow {
 public:
  StageWindow(const StageRule& rule, int device, double time_limit, int32_t first_start)
      : rule_(rule), device_(device), time_limit_(time_limit), start_(first_start) {}

  // The least allowed start of a stage ending at `end` (== end: none).
  int32_t Start(int32_t end) {
    while (start_ < end && !rule_.Allowed(device_, start_, end, time_limit_)) ++start_;
    return start_;
  }

 private:
  const StageRule& rule_;
  const int device_;
  const double time_limit_;
  int32_t start_;
};

// The ends that stage s may have in a plan whose stages all take at most
// some time: [lo, hi] (empty when lo > hi).
struct Band {
  int32_t lo = 0;
  int32_t hi = -1;
};

// A row of a dynamic program over stage ends, stored for one band only;
// ends outside it read as unreached.
template <typename T>
class BandRow {
 public:
  void Reset(Band band, T unreached) {
    lo_ = band.lo;
    unreached_ = unreached;
    values_.assign(band.hi >= band.lo ? band.hi - band.lo + 1 : 0, unreached);
  }
  T Get(int32_t end) const {
    return end < lo_ || end >= lo_ + static_cast<int32_t>(values_.size()) ? unreached_
                                                                          : values_[end - lo_];
  }
  void Set(int32_t end, T value) { values_[end - lo_] = value; }

 private:
  int32_t lo_ = 0;
  T unreached_{};
  std::vector<T> values_;
};

class BalancedStagePlanner {
 public:
  BalancedStagePlanner(const StageModel& model, const StageTimes& times,
                       absl::Span<const StageDevice> devices, const CancellationToken& token)
      : model_(model),
        rule_(model, times, devices),
        times_(times),
        devices_(devices),
        token_(token),
        n_(model.num_items()),
        k_(static_cast<int>(devices.size())) {}

  // An upper bound on T*: the least time (to 1e-9, by bisection) for which
  // the greedy probe finds a plan, or +infinity when it finds none at all.
  // Each success of the probe is a real plan, so the bound holds.
  double UpperBound() const {
    double hi = 0;  // no stage takes longer than all items on the slowest device
    for (int s = 0; s < k_; ++s) hi = std::max(hi, times_.Time(s, 0, n_));
    if (!GreedyProbe(hi)) return kInfinity;
    double lo = 0;
    for (int step = 0; step < 100 && hi - lo > hi * 1e-9; ++step) {
      const double mid = lo + (hi - lo) / 2;
      if (GreedyProbe(mid)) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    return hi;
  }

  // The band of every stage's end among plans whose stages all take at
  // most `time_limit`: ends a plan can reach from the left and complete to
  // the right. Greedy reaches, exact when stages may be empty, bound both
  // sides, so no plan with non-empty stages falls outside. nullopt when a
  // band is empty (no such plan).
  absl::optional<std::vector<Band>> Bands(double time_limit) const {
    std::vector<Band> bands(k_);
    int32_t reach = 0;
    for (int s = 0; s < k_; ++s) {
      const int32_t last = n_ - (k_ - 1 - s);  // one item left per later stage
      reach = std::min(rule_.FurthestEnd(s, reach, time_limit), last);
      bands[s].hi = reach;
    }
    int32_t start = n_;
    for (int s = k_ - 1; s >= 0; --s) {
      bands[s].lo = std::max(s + 1, start);
      if (bands[s].lo > bands[s].hi) return absl::nullopt;
      if (s > 0) start = rule_.EarliestStart(s, bands[s].lo, time_limit);
    }
    return bands;
  }

  // Pass 1: T*, or +infinity when no plan fits the devices' memory. Only
  // plans within `upper_bound` (at least T*) are searched.
  absl::StatusOr<double> LeastBottleneck(double upper_bound) {
    const absl::optional<std::vector<Band>> bands = Bands(upper_bound);
    if (!bands.has_value()) return kInfinity;
    BandRow<double> row;
    BandRow<double> next;
    row.Reset(Band{0, 0}, kInfinity);
    row.Set(0, 0);  // no stage yet: items [0, 0) covered at no cost
    Band previous{0, 0};
    for (int s = 0; s < k_; ++s) {
      PARTPLAN_RETURN_IF_ERROR(BottleneckLayer(s, upper_bound, previous, (*bands)[s], row, &next));
      std::swap(row, next);
      previous = (*bands)[s];
    }
    return row.Get(n_);
  }

  // Pass 2 and the walk back: the cuts of the plan with the fewest crossing
  // bytes among those whose stages all take at most `bottleneck`.
  absl::StatusOr<std::vector<int32_t>> FewestCrossingCuts(double bottleneck) {
    const absl::optional<std::vector<Band>> found = Bands(bottleneck);
    if (!found.has_value()) {
      return absl::InternalError("balanced stages: no band within the least bottleneck");
    }
    const std::vector<Band>& bands = *found;
    auto previous_band = [&bands](int s) { return s == 0 ? Band{0, 0} : bands[s - 1]; };
    const int block = std::max(1, static_cast<int>(std::ceil(std::sqrt(k_))));
    std::vector<BandRow<int64_t>> checkpoints;  // the row entering stage t * block
    BandRow<int64_t> row;
    BandRow<int64_t> next;
    row.Reset(Band{0, 0}, kUnreachable);
    row.Set(0, 0);
    for (int s = 0; s < k_; ++s) {
      if (s % block == 0) checkpoints.push_back(row);
      PARTPLAN_RETURN_IF_ERROR(
          CrossingLayer(s, bottleneck, previous_band(s), bands[s], row, &next, nullptr));
      std::swap(row, next);
    }
    if (row.Get(n_) == kUnreachable) {
      return absl::InternalError("balanced stages: no plan within the least bottleneck");
    }
    std::vector<int32_t> cuts(k_ + 1, 0);
    cuts[k_] = n_;
    std::vector<BandRow<int32_t>> start_of(block);
    for (int t = static_cast<int>(checkpoints.size()) - 1; t >= 0; --t) {
      const int first = t * block;
      const int last = std::min(k_, first + block);
      row = std::move(checkpoints[t]);
      checkpoints.pop_back();
      for (int s = first; s < last; ++s) {
        PARTPLAN_RETURN_IF_ERROR(CrossingLayer(s, bottleneck, previous_band(s), bands[s], row,
                                               &next, &start_of[s - first]));
        std::swap(row, next);
      }
      for (int s = last - 1; s >= first; --s) cuts[s] = start_of[s - first].Get(cuts[s + 1]);
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
            " bytes as a stage of its own (", model_.graph().total_bytes(v), " of its own and ",
            model_.LiveBytes(i), " of values live into it), more than the largest device, '",
            devices_[largest].name, "', has (", devices_[largest].memory_bytes, " bytes)"));
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
          "the ", k_, " devices' memory, taken in pipeline order, holds at most the first ", reach,
          " of the ", n_, " nodes to place: node '", model_.graph().name(v), "' (graph.nodes[", v,
          "]) and the rest are left over"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "the ", n_, " nodes fit the ", k_, " devices' memory in pipeline order only if some ",
        "device gets no stage: no split into exactly ", k_,
        " non-empty contiguous stages has every stage within its device's memory"));
  }

 private:
  // The greedy probe: each device in turn takes as many items as it may in
  // `time_limit`, leaving one for every later device. A success is a plan.
  bool GreedyProbe(double time_limit) const {
    int32_t begin = 0;
    for (int s = 0; s < k_; ++s) {
      const int32_t end = std::min(rule_.FurthestEnd(s, begin, time_limit), n_ - (k_ - 1 - s));
      if (end <= begin) return false;
      begin = end;
    }
    return begin == n_;
  }

  // F_s (ends in `band`) from F_{s-1} (`prev`, ends in `previous`), see the
  // header. Candidate starts before band.lo - 1 enter the deque first.
  absl::Status BottleneckLayer(int s, double time_limit, Band previous, Band band,
                               const BandRow<double>& prev, BandRow<double>* cur) {
    PARTPLAN_RETURN_IF_ERROR(token_.Check());
    cur->Reset(band, kInfinity);
    StageWindow window(rule_, s, time_limit, previous.lo);
    candidates_.clear();
    size_t head = 0;      // candidates_[head..] are in the window
    size_t crossing = 0;  // first candidate whose F is not below its stage time
    for (int32_t end = previous.lo + 1; end <= band.hi; ++end) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(++iterations_));
      const int32_t newest = end - 1;
      const double newest_f = prev.Get(newest);
      if (newest_f < kInfinity) {
        while (candidates_.size() > head && prev.Get(candidates_.back()) >= newest_f) {
          candidates_.pop_back();
        }
        candidates_.push_back(newest);
        crossing = std::min(crossing, candidates_.size() - 1);
      }
      if (end < band.lo) continue;
      const int32_t start = window.Start(end);
      while (head < candidates_.size() && candidates_[head] < start) ++head;
      crossing = std::max(crossing, head);
      while (crossing < candidates_.size() &&
             prev.Get(candidates_[crossing]) < times_.Time(s, candidates_[crossing], end)) {
        ++crossing;
      }
      double best = kInfinity;
      if (crossing < candidates_.size()) best = prev.Get(candidates_[crossing]);
      if (crossing > head) best = std::min(best, times_.Time(s, candidates_[crossing - 1], end));
      cur->Set(end, best);
    }
    return absl::OkStatus();
  }

  // G_s (ends in `band`) from G_{s-1}, see the header; `start_of`
  // (optional) gets the chosen start of every reachable end.
  absl::Status CrossingLayer(int s, double bottleneck, Band previous, Band band,
                             const BandRow<int64_t>& prev, BandRow<int64_t>* cur,
                             BandRow<int32_t>* start_of) {
    PARTPLAN_RETURN_IF_ERROR(token_.Check());
    cur->Reset(band, kUnreachable);
    if (start_of != nullptr) start_of->Reset(band, -1);
    StageWindow window(rule_, s, bottleneck, previous.lo);
    // The cost of starting stage s at i: the prefix's plus the cut's bytes
    // (stage 0 starts at 0, where nothing is cut).
    auto cost = [&](int32_t i) {
      return i == 0 ? prev.Get(i) : SaturatingAdd(prev.Get(i), model_.LiveBytes(i));
    };
    candidates_.clear();
    size_t head = 0;
    for (int32_t end = previous.lo + 1; end <= band.hi; ++end) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(++iterations_));
      const int32_t newest = end - 1;
      if (prev.Get(newest) != kUnreachable) {
        const int64_t newest_cost = cost(newest);
        // Strictly greater: among equal costs the earliest start stays.
        while (candidates_.size() > head && cost(candidates_.back()) > newest_cost) {
          candidates_.pop_back();
        }
        candidates_.push_back(newest);
      }
      if (end < band.lo) continue;
      const int32_t start = window.Start(end);
      while (head < candidates_.size() && candidates_[head] < start) ++head;
      if (head == candidates_.size()) continue;
      cur->Set(end, cost(candidates_[head]));
      if (start_of != nullptr) start_of->Set(end, candidates_[head]);
    }
    return absl::OkStatus();
  }

  const StageModel& model_;
  const StageRule rule_;
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

absl::StatusOr<StagePlan> PlanBalancedStages(const StageModel& model, absl::Span<const double> work,
                                             absl::Span<const StageDevice> devices,
                                             const CancellationToken& token) {
  if (devices.empty() || static_cast<int64_t>(work.size()) != model.num_items()) {
    return absl::InvalidArgumentError(absl::StrCat("balanced stages: ", work.size(),
                                                   " work entries for ", model.num_items(),
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
  PARTPLAN_ASSIGN_OR_RETURN(const double bottleneck, planner.LeastBottleneck(planner.UpperBound()));
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

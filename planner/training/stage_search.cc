#include "planner/training/stage_search.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

bool FiniteNonNegative(double x) { return std::isfinite(x) && x >= 0; }

// Two step times closer than this are the same time, and the plan crossing
// fewer bytes wins: it absorbs the rounding of sums taken in another order.
double Tolerance(double seconds) { return 1e-9 * std::max(1.0, std::abs(seconds)); }

struct Candidate {
  double step = kInfinity;
  int64_t bytes = std::numeric_limits<int64_t>::max();
  std::vector<int> cuts;
  std::vector<bool> recompute;
};

bool Better(double step, int64_t bytes, const Candidate& than) {
  if (!std::isfinite(than.step)) return std::isfinite(step);
  const double tolerance = Tolerance(than.step);
  if (step < than.step - tolerance) return true;
  return step <= than.step + tolerance && bytes < than.bytes;
}

// Range maximum in O(1) after O(n log n) set-up.
class RangeMax {
 public:
  // Polls `token` per level; its status goes to `*status` when it fires.
  RangeMax(std::vector<int64_t> values, const CancellationToken& token, absl::Status* status) {
    const size_t n = values.size();
    levels_.push_back(std::move(values));
    for (size_t width = 2; width <= n; width *= 2) {
      *status = token.Check();
      if (!status->ok()) return;
      const std::vector<int64_t>& below = levels_.back();
      std::vector<int64_t> level(n - width + 1);
      for (size_t i = 0; i < level.size(); ++i) {
        level[i] = std::max(below[i], below[i + width / 2]);
      }
      levels_.push_back(std::move(level));
    }
  }
  // The most of [begin, end), begin < end.
  int64_t Max(int begin, int end) const {
    int level = 0;
    while ((2 << level) <= end - begin) ++level;
    return std::max(levels_[level][begin], levels_[level][end - (1 << level)]);
  }

 private:
  std::vector<std::vector<int64_t>> levels_;
};

// The recompute choices a stage may take, fastest first.
std::vector<bool> RecomputeChoices(RecomputeChoice choice) {
  switch (choice) {
    case RecomputeChoice::kNever:
      return {false};
    case RecomputeChoice::kAlways:
      return {true};
    case RecomputeChoice::kAuto:
      break;
  }
  return {false, true};
}

// Everything about the instance the search looks up, in O(1) per stage but
// for memory (O(v B), a walk over the device's ops).
class StageTable {
 public:
  // Check status() before use: the token's when it fired while building.
  StageTable(const StageSearchOptions& options, const TrainingChain& chain,
             const std::vector<TrainingDevice>& devices, const CancellationToken& token)
      : options_(options),
        chain_(chain),
        devices_(devices),
        n_(static_cast<int>(chain.items.size())),
        stages_(options.schedule.stages()),
        order_(ScheduleOrder(options.schedule)),
        transient_(Transients(chain, token, &status_)),
        shared_(static_cast<int>(chain.items.size()), chain.shared_saves),
        split_weight_(options.schedule.schedule == PipelineSchedule::kZeroBubbleH1) {
    if (!status_.ok()) return;
    per_parameter_ = options.memory.BytesPerParameter();
    for (int d = 0; d < options.schedule.devices; ++d) {
      in_flight_.push_back(InFlightOf(options.schedule, order_[d], options.memory));
    }
    forward_.assign(n_ + 1, 0);
    input_.assign(n_ + 1, 0);
    weight_.assign(n_ + 1, 0);
    saved_.assign(n_ + 1, 0);
    parameters_.assign(n_ + 1, 0);
    for (int i = 0; i < n_; ++i) {
      status_ = token.CheckEvery(i);
      if (!status_.ok()) return;
      const TrainingItem& item = chain.items[i];
      forward_[i + 1] = forward_[i] + item.forward;
      input_[i + 1] = input_[i] + item.backward_input;
      weight_[i + 1] = weight_[i] + item.backward_weight;
      saved_[i + 1] = saved_[i] + item.saved_activation_bytes;
      parameters_[i + 1] = parameters_[i] + item.parameters;
    }
    // After its last op, a device waits for the gradient to cross the
    // stages below that op's stage: only when that op is a backward.
    tail_stage_.assign(options.schedule.devices, -1);
    for (int d = 0; d < options.schedule.devices; ++d) {
      const PipelineOp& last = order_[d].back();
      if (last.kind == PipelineOpKind::kBackward) tail_stage_[d] = last.stage;
    }
    // Cuts inside a group of tied items that must share a stage.
    forbidden_.assign(n_ + 1, false);
    for (const TiedParameters& group : chain.tied) {
      if (!group.same_stage || group.items.empty()) continue;
      for (int c = group.items.front() + 1; c <= group.items.back(); ++c) forbidden_[c] = true;
    }
    ring_rate_ = kInfinity;
    if (options.schedule.devices > 1) {
      for (const TrainingDevice& device : devices) {
        ring_rate_ = std::min(ring_rate_, device.link_bytes_per_second);
      }
    }
    alone_from_.assign(n_ + 1, n_);
    if (!chain.placement.empty()) {
      for (int i = 0; i < n_; ++i) {
        if (chain.placement[i] == StagePlacement::kFirst) first_ = std::max(first_, i);
        if (chain.placement[i] == StagePlacement::kLast) last_ = std::min(last_, i);
      }
      for (int i = n_ - 1; i >= 0; --i) {
        alone_from_[i] = chain.placement[i] == StagePlacement::kAlone ? i : alone_from_[i + 1];
      }
    }
  }

  const absl::Status& status() const { return status_; }
  int items() const { return n_; }
  bool one_chunk() const { return options_.schedule.chunks_per_device == 1; }
  // Prefix sums of the items' work before item x.
  double ForwardBefore(int x) const { return forward_[x]; }
  double InputBefore(int x) const { return input_[x]; }
  double WeightBefore(int x) const { return weight_[x]; }
  int stages() const { return stages_; }
  int device_of(int stage) const { return options_.schedule.DeviceOf(stage); }
  bool split_weight() const { return split_weight_; }
  int tail_stage(int device) const { return tail_stage_[device]; }
  double speed(int stage) const { return devices_[device_of(stage)].speed; }

  // Work (not seconds) of items [begin, end): forward and backward.
  double Work(int begin, int end) const {
    return forward_[end] - forward_[begin] + input_[end] - input_[begin] + weight_[end] -
           weight_[begin];
  }

  // The stage's seconds per micro-batch: F; B with the recomputed forward,
  // and with W unless the schedule runs W apart; W.
  void Costs(int stage, int begin, int end, bool recompute, double* forward, double* backward,
             double* weight) const {
    const double speed = this->speed(stage);
    *forward = (forward_[end] - forward_[begin]) / speed;
    *backward = (input_[end] - input_[begin]) / speed + (recompute ? *forward : 0.0);
    *weight = (weight_[end] - weight_[begin]) / speed;
    if (!split_weight_) {
      *backward += *weight;
      *weight = 0;
    }
  }
  // Seconds to move what crosses the cut at `end`, after `stage`.
  double Transfer(int stage, int end) const {
    const double rate = devices_[device_of(stage)].link_bytes_per_second;
    return std::isinf(rate) ? 0.0 : static_cast<double>(chain_.live_bytes[end]) / rate;
  }
  int64_t LiveBytes(int cut) const { return chain_.live_bytes[cut]; }

  StageFootprint Footprint(int begin, int end, bool recompute) const {
    StageFootprint footprint;
    footprint.parameters = parameters_[end] - parameters_[begin];
    for (const TiedParameters& group : chain_.tied) {
      if (HoldsAny(group, begin, end)) footprint.parameters += group.parameters;
    }
    footprint.saved_activation_bytes = saved_[end] - saved_[begin] - shared_.Within(begin, end);
    footprint.input_bytes = chain_.live_bytes[begin];
    footprint.transient_bytes = transient_.Max(begin, end);
    footprint.recompute = recompute;
    return footprint;
  }

  // The ends the pins allow for stage `stage` starting at `begin`, as
  // [*low, *high]; false when there are none.
  bool EndRange(int stage, int begin, int* low, int* high) const {
    *low = stage == stages_ - 1 ? n_ : begin + 1;
    *high = n_ - (stages_ - 1 - stage);
    if (stage == 0) *low = std::max(*low, first_ + 1);
    if (stage > 0 && begin <= first_) return false;
    if (stage < stages_ - 1) *high = std::min(*high, last_);
    const int alone = alone_from_[begin];
    if (alone == begin) {
      *high = std::min(*high, begin + 1);
    } else {
      *high = std::min(*high, alone);
    }
    return *low <= *high;
  }

  // Whether complete cuts make non-empty stages that meet the pins.
  bool Allowed(const std::vector<int>& cuts) const {
    for (int k = 0; k < stages_; ++k) {
      int low = 0, high = 0;
      if (!EndRange(k, cuts[k], &low, &high)) return false;
      if (cuts[k + 1] < low || cuts[k + 1] > high || forbidden_[cuts[k + 1]]) return false;
    }
    return true;
  }
  // Whether a stage may end at `end`: not inside a group of tied items
  // that must share a stage (the pins are EndRange's).
  bool Forbidden(int end) const { return forbidden_[end]; }

  // The step of a plan whose schedule ends at `step` with devices ending at
  // `device_end`: later when a tied all-reduce ends later (see
  // TiedParameters). Fills `per_group` when given.
  double StepWithAllReduce(double step, const std::vector<double>& device_end,
                           const std::vector<int>& cuts, std::vector<double>* per_group) const {
    if (per_group != nullptr) per_group->assign(chain_.tied.size(), 0);
    for (size_t g = 0; g < chain_.tied.size(); ++g) {
      const TiedParameters& group = chain_.tied[g];
      if (group.same_stage || std::isinf(ring_rate_)) continue;
      std::vector<bool> holds(options_.schedule.devices, false);
      double last_end = 0;
      int holders = 0;
      for (int k = 0; k < stages_; ++k) {
        const int d = device_of(k);
        if (holds[d] || !HoldsAny(group, cuts[k], cuts[k + 1])) continue;
        holds[d] = true;
        ++holders;
        last_end = std::max(last_end, device_end[d]);
      }
      if (holders < 2) continue;
      const double bytes = static_cast<double>(group.parameters) * options_.memory.gradient_bytes;
      const double seconds = 2.0 * (holders - 1) / holders * bytes / ring_rate_;
      if (per_group != nullptr) (*per_group)[g] = seconds;
      step = std::max(step, last_end + seconds);
    }
    return step;
  }

  // The device's peak with the footprints given (the others' zero).
  double DevicePeak(int device, const std::vector<StageFootprint>& footprints) const {
    if (one_chunk()) return StagePeak(device, footprints[device]);
    return MemoryOfDevice(options_.schedule, device, order_[device], options_.memory, footprints)
        .peak_bytes;
  }
  bool DeviceFits(int device, const std::vector<StageFootprint>& footprints) const {
    return DevicePeak(device, footprints) <= devices_[device].memory_bytes;
  }
  // With one chunk per device: the fastest recompute choice with which
  // stage [begin, end) fits (0 none, 1 full), or -1.
  int FastestFitting(int stage, int begin, int end) const {
    for (const bool recompute : RecomputeChoices(options_.recompute)) {
      if (StageFits(stage, begin, end, recompute)) return recompute ? 1 : 0;
    }
    return -1;
  }
  // With one chunk per device: stage [begin, end)'s peak on its device.
  double StagePeakOf(int stage, int begin, int end, bool recompute) const {
    return StagePeak(stage, Footprint(begin, end, recompute));
  }
  // With one chunk per device: whether stage [begin, end) fits its device.
  bool StageFits(int stage, int begin, int end, bool recompute) const {
    return StagePeak(stage, Footprint(begin, end, recompute)) <=
           devices_[device_of(stage)].memory_bytes;
  }

 private:
  // MemoryOfDevice's peak of a device running one stage, in O(1).
  double StagePeak(int stage, const StageFootprint& footprint) const {
    const InFlightCounts& counts = in_flight_[device_of(stage)];
    const double held = static_cast<double>(footprint.recompute ? footprint.input_bytes
                                                                : footprint.saved_activation_bytes);
    const double working =
        static_cast<double>(footprint.transient_bytes) +
        (footprint.recompute ? static_cast<double>(footprint.saved_activation_bytes) : 0.0);
    // Summed in MemoryOfDevice's order, so that both agree to the byte.
    const double parameters = static_cast<double>(footprint.parameters);
    return parameters * per_parameter_.weights + parameters * per_parameter_.gradients +
           parameters * per_parameter_.optimizer +
           std::max(counts.at_forward * held, counts.at_backward * held + working);
  }

  static bool HoldsAny(const TiedParameters& group, int begin, int end) {
    const auto first = std::lower_bound(group.items.begin(), group.items.end(), begin);
    return first != group.items.end() && *first < end;
  }

  static RangeMax Transients(const TrainingChain& chain, const CancellationToken& token,
                             absl::Status* status) {
    std::vector<int64_t> values;
    values.reserve(chain.items.size());
    for (const TrainingItem& item : chain.items) values.push_back(item.transient_bytes);
    return RangeMax(std::move(values), token, status);
  }

  absl::Status status_;  // first: the members built after it report to it
  const StageSearchOptions& options_;
  const TrainingChain& chain_;
  const std::vector<TrainingDevice>& devices_;
  const int n_;
  const int stages_;
  const std::vector<std::vector<PipelineOp>> order_;
  const RangeMax transient_;
  const SharedSaveSums shared_;
  const bool split_weight_;
  std::vector<double> forward_, input_, weight_;
  std::vector<int64_t> saved_, parameters_;
  std::vector<int> tail_stage_;
  ModelStateBytes per_parameter_;
  std::vector<InFlightCounts> in_flight_;  // per device
  int first_ = -1;                // the last item pinned to the first stage
  int last_ = std::numeric_limits<int>::max();  // the first pinned to the last
  std::vector<int> alone_from_;   // the first item at or after i that is alone
  std::vector<bool> forbidden_;   // per cut, inside a same_stage tied group
  double ring_rate_ = kInfinity;  // the slowest link of the pipeline's ring
};

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
// bounds the rest: step >= S_k + G_k + D(k, e). Each stage takes its
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
    const auto busy = [&](int e, int x, bool recompute) {
      const std::vector<double>& work = recompute ? work_recompute : work_plain;
      return work[x] - work[e];
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
        int good = e, bad = n + 1;
        while (bad - good > 1) {
          const int mid = good + (bad - good) / 2;
          (table.StageFits(k, e, mid, true) ? good : bad) = mid;
        }
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
  std::vector<std::vector<double>> values_;  // D(k, e)
  std::vector<std::vector<int>> end_;        // the end attaining it
  std::vector<std::vector<bool>> recompute_;
};

// The branch and bound. Stages are chosen in order; costs_ and footprints_
// hold the chosen stages' entries and zeros beyond.
class Search {
 public:
  // `suffix` may be null (several chunks per device).
  Search(const StageSearchOptions& options, const StageTable& table, const SuffixBound* suffix,
         const CancellationToken& token)
      : options_(options),
        table_(table),
        suffix_(suffix),
        token_(token),
        choices_(RecomputeChoices(options.recompute)),
        simulator_(options.schedule) {
    const int stages = table.stages();
    const int devices = options.schedule.devices;
    costs_.forward.assign(stages, 0);
    costs_.backward.assign(stages, 0);
    if (table.split_weight()) costs_.weight.assign(stages, 0);
    costs_.transfer.assign(stages - 1, 0);
    footprints_.assign(stages, StageFootprint{});
    cuts_.assign(stages + 1, 0);
    cuts_[stages] = table.items();
    recompute_.assign(stages, false);
    speed_from_.assign(stages + 1, 0);
    std::vector<bool> counted(devices, false);
    for (int k = stages - 1; k >= 0; --k) {
      const int d = table.device_of(k);
      speed_from_[k] = speed_from_[k + 1] + (counted[d] ? 0.0 : table.speed(k));
      counted[d] = true;
    }
    last_stage_of_device_.assign(devices, 0);
    for (int k = 0; k < stages; ++k) last_stage_of_device_[table.device_of(k)] = k;
    device_busy_.assign(devices, 0);
    device_start_.assign(devices, 0);
    ops_per_simulation_ = int64_t{3} * stages * options.schedule.micro_batches;
    start_.assign(stages + 1, 0);
    gradient_.assign(stages + 1, 0);
  }

  const Candidate& best() const { return best_; }
  int64_t nodes() const { return nodes_; }
  bool exhausted() const { return exhausted_; }
  double least_unexplored() const { return least_unexplored_; }

  // Evaluates complete cuts and recompute choices, keeping them when they
  // fit and beat the best plan.
  absl::Status Offer(const std::vector<int>& cuts, const std::vector<bool>& recompute) {
    const int stages = table_.stages();
    if (!table_.Allowed(cuts)) return absl::OkStatus();
    StageCosts costs;
    costs.forward.resize(stages);
    costs.backward.resize(stages);
    if (table_.split_weight()) costs.weight.resize(stages);
    costs.transfer.resize(stages - 1);
    std::vector<StageFootprint> footprints(stages);
    int64_t bytes = 0;
    for (int k = 0; k < stages; ++k) {
      double weight = 0;
      table_.Costs(k, cuts[k], cuts[k + 1], recompute[k], &costs.forward[k], &costs.backward[k],
                   &weight);
      if (table_.split_weight()) costs.weight[k] = weight;
      if (k + 1 < stages) {
        costs.transfer[k] = table_.Transfer(k, cuts[k + 1]);
        bytes += table_.LiveBytes(cuts[k + 1]);
      }
      footprints[k] = table_.Footprint(cuts[k], cuts[k + 1], recompute[k]);
    }
    for (int d = 0; d < options_.schedule.devices; ++d) {
      if (!table_.DeviceFits(d, footprints)) return absl::OkStatus();
    }
    if (Prunes(DeviceBound(costs), bytes)) return absl::OkStatus();
    PARTPLAN_ASSIGN_OR_RETURN(const double schedule_end, simulator_.StepSeconds(costs, token_));
    const double step =
        table_.StepWithAllReduce(schedule_end, simulator_.device_end(), cuts, nullptr);
    if (Better(step, bytes, best_)) {
      best_.step = step;
      best_.bytes = bytes;
      best_.cuts = cuts;
      best_.recompute = recompute;
    }
    return absl::OkStatus();
  }

  absl::Status Run() {
    return Extend(0, 0, 0, suffix_ != nullptr ? suffix_->At(0, 0) : 0.0);
  }

  // The most over devices of their first op's earliest start, their work
  // (B times their stages' F + B + W) and, when their last op is a
  // backward, the gradient's way back to stage 0: a lower bound on the
  // step, in O(P v).
  double DeviceBound(const StageCosts& costs) const {
    const int stages = table_.stages();
    const double micro_batches = options_.schedule.micro_batches;
    std::vector<double> start(stages, 0), gradient(stages, 0), busy(options_.schedule.devices, 0);
    for (int k = 0; k < stages; ++k) {
      const double weight = costs.weight.empty() ? 0.0 : costs.weight[k];
      busy[table_.device_of(k)] += costs.forward[k] + costs.backward[k] + weight;
      if (k + 1 < stages) {
        start[k + 1] = start[k] + costs.forward[k] + costs.transfer[k];
        gradient[k + 1] = gradient[k] + costs.backward[k] + costs.transfer[k];
      }
    }
    double bound = 0;
    for (int d = 0; d < options_.schedule.devices; ++d) {
      const int tail = table_.tail_stage(d);
      bound = std::max(bound, start[d] + micro_batches * busy[d] + (tail >= 0 ? gradient[tail] : 0));
    }
    return bound;
  }

 private:
  struct Child {
    int end;
    bool recompute;
    double bound;
  };

  // Stages 0..stage-1 are chosen and end at `begin`; `bytes` cross their
  // cuts. start_[k] is the earliest stage k's first forward can start, and
  // gradient_[k] the least time a gradient takes from stage k's input back
  // through stages k-1..0 (both over the chosen stages).
  absl::Status Extend(int stage, int begin, int64_t bytes, double node_bound) {
    PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(nodes_));
    int low = 0;
    int high = 0;
    if (!table_.EndRange(stage, begin, &low, &high)) return absl::OkStatus();
    std::vector<Child> children;
    PARTPLAN_RETURN_IF_ERROR(Children(stage, begin, bytes, node_bound, low, high, &children));
    std::sort(children.begin(), children.end(),
              [](const Child& a, const Child& b) { return a.bound < b.bound; });
    for (const Child& child : children) {
      PARTPLAN_RETURN_IF_ERROR(Descend(stage, begin, bytes, child));
    }
    return absl::OkStatus();
  }

  // The ends and recompute choices of stage `stage` worth trying, with a
  // bound on the step of every plan through them.
  absl::Status Children(int stage, int begin, int64_t bytes, double node_bound, int low,
                        int high, std::vector<Child>* children) {
    const int device = table_.device_of(stage);
    const bool opens_device = stage < options_.schedule.devices;
    const bool closes_device = last_stage_of_device_[device] == stage;
    const double micro_batches = options_.schedule.micro_batches;
    const double device_start = opens_device ? start_[stage] : device_start_[device];
    const int tail_stage = table_.tail_stage(device);
    const bool chain_to_rest = !table_.split_weight() && options_.schedule.chunks_per_device == 1;
    for (int end = low; end <= high; ++end) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(nodes_));
      if (table_.Forbidden(end)) continue;
      // Every end tried is a node of the search: its bound is worked out.
      if (++nodes_ > options_.max_search_nodes) {
        exhausted_ = true;
        least_unexplored_ = std::min(least_unexplored_, node_bound);
        return absl::OkStatus();
      }
      const int64_t crossing = end < table_.items() ? bytes + table_.LiveBytes(end) : bytes;
      bool any_fits = false;
      bool all_too_slow = true;
      for (const bool recompute : choices_) {
        double forward = 0, backward = 0, weight = 0;
        table_.Costs(stage, begin, end, recompute, &forward, &backward, &weight);
        // The device starts its first op no earlier than device_start,
        // works B times its stages' costs, and then, when its last op is a
        // backward of a chosen stage, waits for the gradient to reach
        // stage 0. All of it only grows with the stage's end.
        double bound =
            device_start + micro_batches * (device_busy_[device] + forward + backward + weight);
        if (tail_stage >= 0 && tail_stage <= stage) bound += gradient_[tail_stage];
        if (!PrunesTime(bound)) all_too_slow = false;
        if (end < table_.items()) {
          // Every op of the later stages starts after the next stage's
          // first forward, and one of their devices does at least its
          // share of the work left; with one chunk per device and no
          // separate W, that device's last op is a backward whose gradient
          // then crosses every stage chosen so far.
          const double transfer = table_.Transfer(stage, end);
          double rest = start_[stage] + forward + transfer +
                        micro_batches * table_.Work(end, table_.items()) / speed_from_[stage + 1];
          if (chain_to_rest) rest += gradient_[stage] + backward + transfer;
          bound = std::max(bound, rest);
          if (suffix_ != nullptr) {
            double finish = start_[stage] + forward + transfer + suffix_->At(stage + 1, end);
            if (suffix_->has_tail()) finish += gradient_[stage] + backward + transfer;
            bound = std::max(bound, finish);
          }
        }
        if (Prunes(bound, crossing)) {
          if (exhausted_) least_unexplored_ = std::min(least_unexplored_, bound);
          continue;
        }
        // A device's memory only grows with more of its stages chosen, so
        // the stages chosen so far bound it.
        footprints_[stage] = table_.Footprint(begin, end, recompute);
        const bool fits = table_.DeviceFits(device, footprints_);
        footprints_[stage] = StageFootprint{};
        if (!fits) continue;
        any_fits = true;
        children->push_back({end, recompute, bound});
        // Recompute only adds time: once the device's memory is known and
        // the faster choice fits, the slower is no better.
        if (closes_device) break;
      }
      // The device's time and memory only grow with the stage's end.
      if (all_too_slow) break;
      if (!any_fits && !FitsSomehow(stage, device, begin, end)) break;
    }
    return absl::OkStatus();
  }

  bool FitsSomehow(int stage, int device, int begin, int end) {
    bool fits = false;
    for (const bool recompute : choices_) {
      footprints_[stage] = table_.Footprint(begin, end, recompute);
      fits = fits || table_.DeviceFits(device, footprints_);
    }
    footprints_[stage] = StageFootprint{};
    return fits;
  }

  absl::Status Descend(int stage, int begin, int64_t bytes, const Child& child) {
    const int end = child.end;
    const int stages = table_.stages();
    const int64_t crossing = end < table_.items() ? bytes + table_.LiveBytes(end) : bytes;
    if (exhausted_) {
      least_unexplored_ = std::min(least_unexplored_, child.bound);
      return absl::OkStatus();
    }
    if (Prunes(child.bound, crossing)) return absl::OkStatus();
    cuts_[stage + 1] = end;
    recompute_[stage] = child.recompute;
    if (stage + 1 == stages) return Offer(cuts_, recompute_);

    const int device = table_.device_of(stage);
    double forward = 0, backward = 0, weight = 0;
    table_.Costs(stage, begin, end, child.recompute, &forward, &backward, &weight);
    const double transfer = table_.Transfer(stage, end);
    footprints_[stage] = table_.Footprint(begin, end, child.recompute);
    costs_.forward[stage] = forward;
    costs_.backward[stage] = backward;
    if (table_.split_weight()) costs_.weight[stage] = weight;
    costs_.transfer[stage] = transfer;
    device_busy_[device] += forward + backward + weight;
    if (stage < options_.schedule.devices) device_start_[device] = start_[stage];
    start_[stage + 1] = start_[stage] + forward + transfer;
    gradient_[stage + 1] = gradient_[stage] + backward + transfer;

    // The schedule on the stages so far with the rest free: the step only
    // grows with any stage's cost, so this bounds every completion. It
    // costs a node per 64 ops simulated.
    nodes_ += ops_per_simulation_ / 64;
    PARTPLAN_ASSIGN_OR_RETURN(const double partial, simulator_.StepSeconds(costs_, token_));
    const double bound = std::max(child.bound, partial);
    absl::Status status = absl::OkStatus();
    if (!Prunes(bound, crossing)) status = Extend(stage + 1, end, crossing, bound);

    device_busy_[device] -= forward + backward + weight;
    costs_.forward[stage] = 0;
    costs_.backward[stage] = 0;
    if (table_.split_weight()) costs_.weight[stage] = 0;
    costs_.transfer[stage] = 0;
    footprints_[stage] = StageFootprint{};
    return status;
  }

  // Whether every plan whose step is at least `bound` is slower than the
  // best plan.
  bool PrunesTime(double bound) const {
    return std::isfinite(best_.step) && bound > best_.step + Tolerance(best_.step);
  }
  // Whether every plan with a step at least `bound` and crossing at least
  // `bytes` is no better than the best plan.
  bool Prunes(double bound, int64_t bytes) const {
    if (!std::isfinite(best_.step)) return false;
    const double tolerance = Tolerance(best_.step);
    if (bound > best_.step + tolerance) return true;
    return bound >= best_.step - tolerance && bytes >= best_.bytes;
  }

  const StageSearchOptions& options_;
  const StageTable& table_;
  const SuffixBound* suffix_;
  const CancellationToken& token_;
  const std::vector<bool> choices_;
  StepSimulator simulator_;
  int64_t ops_per_simulation_ = 0;
  StageCosts costs_;
  std::vector<StageFootprint> footprints_;
  std::vector<int> cuts_;
  std::vector<bool> recompute_;
  std::vector<double> speed_from_;  // total speed of the devices of stages k..
  std::vector<int> last_stage_of_device_;
  std::vector<double> device_busy_;   // per device, its chosen stages' F + B + W
  std::vector<double> device_start_;  // per device, its first stage's start_
  std::vector<double> start_;
  std::vector<double> gradient_;
  Candidate best_;
  int64_t nodes_ = 0;
  bool exhausted_ = false;
  double least_unexplored_ = kInfinity;
};

// A first plan: each stage takes the most items within `limit` seconds
// that fit its device (recomputing if it must; with several chunks per
// device each gets an equal share of the memory), leaving an item for each
// later stage. Empty when that fails. Heterogeneous devices and non-empty
// stages make the greedy inexact: it only seeds the search.
std::vector<int> GreedyCuts(const StageSearchOptions& options, const StageTable& table,
                            const std::vector<TrainingDevice>& devices, double limit,
                            std::vector<bool>* recompute) {
  const int stages = table.stages();
  const std::vector<bool> choices = RecomputeChoices(options.recompute);
  std::vector<int> cuts(stages + 1, 0);
  std::vector<StageFootprint> alone(stages);
  recompute->assign(stages, false);
  for (int k = 0; k < stages; ++k) {
    int low = 0, high = 0;
    if (!table.EndRange(k, cuts[k], &low, &high)) return {};
    const int device = table.device_of(k);
    const double share = devices[device].memory_bytes / options.schedule.chunks_per_device;
    const auto fits = [&](int end, bool recompute_stage) {
      double forward = 0, backward = 0, weight = 0;
      table.Costs(k, cuts[k], end, recompute_stage, &forward, &backward, &weight);
      if (forward + backward + weight > limit) return false;
      alone[k] = table.Footprint(cuts[k], end, recompute_stage);
      const bool result = table.DevicePeak(device, alone) <= share;
      alone[k] = StageFootprint{};
      return result;
    };
    int chosen = -1;
    for (const bool recompute_stage : choices) {
      if (!fits(low, recompute_stage)) continue;
      // The largest end in [low, high] that fits: fitting is monotone.
      int good = low, bad = high + 1;
      while (bad - good > 1) {
        const int mid = good + (bad - good) / 2;
        (fits(mid, recompute_stage) ? good : bad) = mid;
      }
      // Back off cuts inside a group of tied items kept together.
      while (good >= low && table.Forbidden(good)) --good;
      if (good < low) continue;
      chosen = good;
      (*recompute)[k] = recompute_stage;
      break;
    }
    if (chosen < 0) return {};
    cuts[k + 1] = chosen;
  }
  return cuts;
}

// Moves single cuts by 1, 2, 4, ... items either way (up to 64 or a
// stage's length), for a few rounds while the best plan improves. With one chunk per device the two
// stages beside the cut take their fastest choice that fits; with several,
// they keep theirs.
absl::Status ImproveByMoves(const StageTable& table, const CancellationToken& token,
                            Search* search) {
  const int stages = table.stages();
  const int longest_move = std::min(64, std::max(1, table.items() / stages));
  // Each move simulates the schedule: at most 8 per stage in all.
  int64_t moves_left = int64_t{8} * stages;
  bool improved = true;
  for (int round = 0; improved && round < 4; ++round) {
    improved = false;
    for (int k = 1; k < stages; ++k) {
      PARTPLAN_RETURN_IF_ERROR(token.Check());
      bool moved = false;
      for (int step = 1; step <= longest_move && !moved; step *= 2) {
        for (const int sign : {-1, 1}) {
          if (moves_left-- <= 0) return absl::OkStatus();
          const Candidate before = search->best();
          std::vector<int> cuts = before.cuts;
          cuts[k] += sign * step;
          if (cuts[k] <= cuts[k - 1] || cuts[k] >= cuts[k + 1]) continue;
          std::vector<bool> recompute = before.recompute;
          if (table.one_chunk()) {
            for (const int stage : {k - 1, k}) {
              const int choice = table.FastestFitting(stage, cuts[stage], cuts[stage + 1]);
              if (choice >= 0) recompute[stage] = choice == 1;
            }
          }
          PARTPLAN_RETURN_IF_ERROR(search->Offer(cuts, recompute));
          if (search->best().cuts != before.cuts) {
            moved = true;
            break;
          }
        }
      }
      improved = improved || moved;
    }
  }
  return absl::OkStatus();
}

absl::Status NoPlanMeetsThePins() {
  return absl::FailedPreconditionError(
      "no plan meets the pins: the nodes pinned to the first stage, the last stage or a stage "
      "of their own, and the tied parameters kept on one stage, leave no way to make the "
      "stages asked for");
}

// With one chunk per device: whether some plan has every device within
// its memory plus `allowance` bytes, and if so such cuts and choices.
// Stage by stage, the starts reachable so far each reach an interval of
// ends per recompute choice (memory only grows with the end): O(P n log n).
absl::StatusOr<bool> FitsWithAllowance(const StageSearchOptions& options,
                                       const StageTable& table,
                                       const std::vector<TrainingDevice>& devices,
                                       double allowance, const CancellationToken& token,
                                       std::vector<int>* cuts, std::vector<bool>* recompute) {
  int64_t work = 0;
  const int stages = table.stages();
  const int n = table.items();
  const std::vector<bool> choices = RecomputeChoices(options.recompute);
  // Per stage and end: the start and choice that reach it, or -1.
  std::vector<std::vector<int>> from(stages, std::vector<int>(n + 1, -1));
  std::vector<std::vector<bool>> chose(stages, std::vector<bool>(n + 1, false));
  std::vector<bool> reachable(n + 1, false);
  reachable[0] = true;
  for (int k = 0; k < stages; ++k) {
    const int device = table.device_of(k);
    const double cap = devices[device].memory_bytes + allowance;
    // Each reachable start b reaches the ends [low, reach] (reach the
    // furthest over its choices); listed where their interval begins.
    std::vector<std::vector<int>> begins_at(n + 1);
    std::vector<int> reach(n + 1, -1);
    std::vector<bool> reach_choice(n + 1, false);
    for (int b = 0; b < n; ++b) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      if (!reachable[b]) continue;
      int low = 0, high = 0;
      if (!table.EndRange(k, b, &low, &high)) continue;
      for (const bool choice : choices) {
        const auto fits = [&](int e) { return table.StagePeakOf(k, b, e, choice) <= cap; };
        if (!fits(low)) continue;
        int good = low, bad = high + 1;
        while (bad - good > 1) {
          const int mid = good + (bad - good) / 2;
          (fits(mid) ? good : bad) = mid;
        }
        if (good > reach[b]) {
          reach[b] = good;
          reach_choice[b] = choice;
        }
      }
      if (reach[b] >= 0) begins_at[low].push_back(b);
    }
    // Sweeping the ends: of the intervals begun, the one reaching furthest
    // covers every end any of them covers.
    std::vector<bool> next(n + 1, false);
    int best = -1;
    for (int e = 1; e <= n; ++e) {
      for (const int b : begins_at[e]) {
        if (best < 0 || reach[b] > reach[best]) best = b;
      }
      if (best >= 0 && reach[best] >= e && !table.Forbidden(e)) {
        next[e] = true;
        from[k][e] = best;
        chose[k][e] = reach_choice[best];
      }
    }
    reachable = std::move(next);
  }
  if (!reachable[n]) return false;
  cuts->assign(stages + 1, 0);
  recompute->assign(stages, false);
  (*cuts)[stages] = n;
  for (int k = stages - 1; k >= 0; --k) {
    (*recompute)[k] = chose[k][(*cuts)[k + 1]];
    (*cuts)[k] = from[k][(*cuts)[k + 1]];
  }
  return true;
}

// The FAILED_PRECONDITION when no plan exists: the pins, or memory, naming
// the device short the most, and by how much, in the plan that comes
// closest: with one chunk per device, the least largest shortfall over
// every cut and recompute choice (bisection on FitsWithAllowance, to the
// byte); with several, the nodes spread evenly.
absl::Status NoPlan(const StageSearchOptions& options, const StageTable& table,
                    const std::vector<TrainingDevice>& devices, const CancellationToken& token) {
  const int stages = table.stages();
  std::vector<int> cuts(stages + 1, 0);
  cuts[stages] = table.items();
  bool even_split = true;  // the pins may leave none; the search said so
  for (int k = 0; k < stages && even_split; ++k) {
    int low = 0, high = 0;
    even_split = table.EndRange(k, cuts[k], &low, &high);
    const int even = static_cast<int>(static_cast<int64_t>(table.items()) * (k + 1) / stages);
    cuts[k + 1] = std::clamp(even, low, high);
  }
  if (!even_split && !table.one_chunk()) {
    return absl::FailedPreconditionError(
        "no plan fits the devices' memory and meets the pins (the search tried every cut)");
  }
  const bool may_recompute = options.recompute != RecomputeChoice::kNever;
  std::vector<bool> recompute(stages, may_recompute);
  const char* how = may_recompute ? "with the nodes spread evenly and every stage recomputed"
                                  : "with the nodes spread evenly";
  if (table.one_chunk()) {
    // An allowance that fits any stage on any device: no stage needs more
    // than the whole chain would.
    double most = 0;
    for (int k = 0; k < stages; ++k) {
      for (const bool choice : RecomputeChoices(options.recompute)) {
        most = std::max(most, table.StagePeakOf(k, 0, table.items(), choice));
      }
    }
    double low = 0, high = most + 1;
    std::vector<int> best_cuts;
    std::vector<bool> best_recompute;
    bool fits = false;
    for (int grow = 0; grow < 8 && !fits; ++grow, high *= 4) {
      PARTPLAN_RETURN_IF_ERROR(token.Check());
      PARTPLAN_ASSIGN_OR_RETURN(fits, FitsWithAllowance(options, table, devices, high, token,
                                                         &best_cuts, &best_recompute));
      if (fits) break;
    }
    if (!fits) return NoPlanMeetsThePins();
    if (fits) {
      for (int round = 0; round < 64 && high - low > 0.5; ++round) {
        PARTPLAN_RETURN_IF_ERROR(token.Check());
        const double mid = (low + high) / 2;
        std::vector<int> mid_cuts;
        std::vector<bool> mid_recompute;
        PARTPLAN_ASSIGN_OR_RETURN(const bool mid_fits,
                                  FitsWithAllowance(options, table, devices, mid, token,
                                                    &mid_cuts, &mid_recompute));
        if (mid_fits) {
          high = mid;
          best_cuts = std::move(mid_cuts);
          best_recompute = std::move(mid_recompute);
        } else {
          low = mid;
        }
      }
      cuts = std::move(best_cuts);
      recompute = std::move(best_recompute);
      how = "in the plan that comes closest (the least largest shortfall over every cut and "
            "recompute choice)";
    }
  }
  std::vector<StageFootprint> footprints;
  for (int k = 0; k < stages; ++k) {
    footprints.push_back(table.Footprint(cuts[k], cuts[k + 1], recompute[k]));
  }
  int worst = 0;
  double worst_short = -kInfinity;
  double worst_peak = 0;
  for (int d = 0; d < options.schedule.devices; ++d) {
    const double peak = table.DevicePeak(d, footprints);
    if (peak - devices[d].memory_bytes > worst_short) {
      worst_short = peak - devices[d].memory_bytes;
      worst = d;
      worst_peak = peak;
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no plan fits the devices' memory (the search tried every cut); ", how, ", device ",
      devices[worst].name.empty() ? absl::StrCat(worst)
                                  : absl::StrCat("'", devices[worst].name, "' (", worst, ")"),
      " needs ", static_cast<int64_t>(std::ceil(worst_peak)), " bytes, ",
      static_cast<int64_t>(std::ceil(std::max(0.0, worst_short))), " more than its ",
      static_cast<int64_t>(devices[worst].memory_bytes)));
}

}  // namespace

absl::Status StageSearchOptions::CheckAndSetup(const TrainingChain& chain,
                                               const std::vector<TrainingDevice>& devices) const {
  PARTPLAN_RETURN_IF_ERROR(schedule.CheckAndSetup());
  PARTPLAN_RETURN_IF_ERROR(memory.CheckAndSetup());
  if (max_search_nodes < 0) {
    return InvalidFieldError("max_search_nodes",
                             absl::StrCat("at least 0, got ", max_search_nodes));
  }
  const int n = static_cast<int>(chain.items.size());
  if (n < schedule.stages()) {
    return InvalidFieldError(
        "chain.items",
        absl::StrCat(schedule.stages(), " stages need at least as many items, got ", n));
  }
  for (int i = 0; i < n; ++i) {
    const TrainingItem& item = chain.items[i];
    const std::pair<const char*, double> costs[] = {{"forward", item.forward},
                                                    {"backward_input", item.backward_input},
                                                    {"backward_weight", item.backward_weight}};
    for (const auto& [name, value] : costs) {
      if (!FiniteNonNegative(value)) {
        return InvalidFieldError(absl::StrCat("chain.items[", i, "].", name),
                                 absl::StrCat("must be finite and at least 0, got ", value));
      }
    }
    const std::pair<const char*, int64_t> sizes[] = {
        {"saved_activation_bytes", item.saved_activation_bytes},
        {"parameters", item.parameters},
        {"transient_bytes", item.transient_bytes}};
    for (const auto& [name, value] : sizes) {
      if (value < 0) {
        return InvalidFieldError(absl::StrCat("chain.items[", i, "].", name),
                                 absl::StrCat("must be at least 0, got ", value));
      }
    }
  }
  if (static_cast<int>(chain.live_bytes.size()) != n + 1) {
    return InvalidFieldError("chain.live_bytes", absl::StrCat("expected ", n + 1,
                                                              " entries, got ",
                                                              chain.live_bytes.size()));
  }
  for (int c = 0; c <= n; ++c) {
    if (chain.live_bytes[c] < 0) {
      return InvalidFieldError(absl::StrCat("chain.live_bytes[", c, "]"),
                               absl::StrCat("must be at least 0, got ", chain.live_bytes[c]));
    }
  }
  if (!chain.placement.empty() && static_cast<int>(chain.placement.size()) != n) {
    return InvalidFieldError("chain.placement", absl::StrCat("expected ", n, " entries, got ",
                                                             chain.placement.size()));
  }
  for (size_t p = 0; p < chain.shared_saves.size(); ++p) {
    const SharedSave& pair = chain.shared_saves[p];
    const bool in_range = 0 <= pair.first && pair.first < pair.second && pair.second < n;
    if (!in_range || pair.bytes < 0 ||
        pair.bytes > std::min(chain.items[pair.first].saved_activation_bytes,
                              chain.items[pair.second].saved_activation_bytes)) {
      return InvalidFieldError(
          absl::StrCat("chain.shared_saves[", p, "]"),
          "needs 0 <= first < second < items and bytes between 0 and both items' saved bytes");
    }
  }
  for (size_t g = 0; g < chain.tied.size(); ++g) {
    const TiedParameters& group = chain.tied[g];
    for (size_t i = 0; i < group.items.size(); ++i) {
      const int item = group.items[i];
      if (item < 0 || item >= n || (i > 0 && item <= group.items[i - 1])) {
        return InvalidFieldError(
            absl::StrCat("chain.tied[", g, "].items[", i, "]"),
            absl::StrCat("items must be ascending, distinct and below ", n, ", got ", item));
      }
    }
    if (group.parameters < 0) {
      return InvalidFieldError(absl::StrCat("chain.tied[", g, "].parameters"),
                               absl::StrCat("must be at least 0, got ", group.parameters));
    }
  }
  if (static_cast<int>(devices.size()) != schedule.devices) {
    return InvalidFieldError("devices", absl::StrCat("expected ", schedule.devices,
                                                     " devices, got ", devices.size()));
  }
  for (size_t d = 0; d < devices.size(); ++d) {
    const TrainingDevice& device = devices[d];
    if (!std::isfinite(device.speed) || device.speed <= 0) {
      return InvalidFieldError(absl::StrCat("devices[", d, "].speed"),
                               absl::StrCat("must be finite and above 0, got ", device.speed));
    }
    if (std::isnan(device.memory_bytes) || device.memory_bytes < 0) {
      return InvalidFieldError(absl::StrCat("devices[", d, "].memory_bytes"),
                               absl::StrCat("must be at least 0, got ", device.memory_bytes));
    }
    if (std::isnan(device.link_bytes_per_second) || device.link_bytes_per_second <= 0) {
      return InvalidFieldError(
          absl::StrCat("devices[", d, "].link_bytes_per_second"),
          absl::StrCat("must be above 0 (infinity: free), got ", device.link_bytes_per_second));
    }
  }
  return absl::OkStatus();
}

bool CutsMeetPins(const TrainingChain& chain, int stages, const std::vector<int>& cuts) {
  const int n = static_cast<int>(chain.items.size());
  if (static_cast<int>(cuts.size()) != stages + 1 || cuts.front() != 0 || cuts.back() != n) {
    return false;
  }
  for (int k = 0; k < stages; ++k) {
    if (cuts[k] >= cuts[k + 1]) return false;
    for (int i = cuts[k]; i < cuts[k + 1] && !chain.placement.empty(); ++i) {
      const StagePlacement pin = chain.placement[i];
      if ((pin == StagePlacement::kFirst && k != 0) ||
          (pin == StagePlacement::kLast && k != stages - 1) ||
          (pin == StagePlacement::kAlone && cuts[k + 1] - cuts[k] != 1)) {
        return false;
      }
    }
  }
  for (const TiedParameters& group : chain.tied) {
    if (!group.same_stage || group.items.empty()) continue;
    const int first = group.items.front();
    const int last = group.items.back();
    for (int k = 1; k < stages; ++k) {
      if (cuts[k] > first && cuts[k] <= last) return false;
    }
  }
  return true;
}

class TrainingStagesEvaluator::Tables {
 public:
  Tables(const StageSearchOptions& options, const TrainingChain& chain,
         const std::vector<TrainingDevice>& devices, const CancellationToken& token)
      : table(options, chain, devices, token) {}
  StageTable table;
};

TrainingStagesEvaluator::TrainingStagesEvaluator(const StageSearchOptions& options,
                                                 const TrainingChain& chain,
                                                 const std::vector<TrainingDevice>& devices)
    : options_(options), chain_(chain) {}

TrainingStagesEvaluator::~TrainingStagesEvaluator() = default;

absl::StatusOr<std::unique_ptr<TrainingStagesEvaluator>> TrainingStagesEvaluator::Create(
    const StageSearchOptions& options, const TrainingChain& chain,
    const std::vector<TrainingDevice>& devices, const CancellationToken& token) {
  PARTPLAN_RETURN_IF_ERROR(options.CheckAndSetup(chain, devices));
  std::unique_ptr<TrainingStagesEvaluator> evaluator(
      new TrainingStagesEvaluator(options, chain, devices));
  evaluator->tables_ = std::make_unique<Tables>(options, chain, devices, token);
  PARTPLAN_RETURN_IF_ERROR(evaluator->tables_->table.status());
  return evaluator;
}

absl::StatusOr<TrainingStagePlan> TrainingStagesEvaluator::Evaluate(
    const std::vector<int>& cuts, const std::vector<bool>& recompute,
    const CancellationToken& token) const {
  const StageSearchOptions& options = options_;
  const StageTable& table = tables_->table;
  const int stages = options.schedule.stages();
  const int n = static_cast<int>(chain_.items.size());
  if (static_cast<int>(cuts.size()) != stages + 1 || cuts.front() != 0 || cuts.back() != n) {
    return InvalidFieldError("cuts",
                             absl::StrCat("expected ", stages + 1, " cuts from 0 to ", n));
  }
  for (int k = 0; k < stages; ++k) {
    if (cuts[k] >= cuts[k + 1]) {
      return InvalidFieldError(absl::StrCat("cuts[", k + 1, "]"), "stages must not be empty");
    }
  }
  if (static_cast<int>(recompute.size()) != stages) {
    return InvalidFieldError("recompute", absl::StrCat("expected ", stages, " entries"));
  }
  TrainingStagePlan plan;
  plan.cuts = cuts;
  plan.recompute = recompute;
  plan.costs.forward.resize(stages);
  plan.costs.backward.resize(stages);
  if (table.split_weight()) plan.costs.weight.resize(stages);
  plan.costs.transfer.resize(stages - 1);
  for (int k = 0; k < stages; ++k) {
    double weight = 0;
    table.Costs(k, cuts[k], cuts[k + 1], recompute[k], &plan.costs.forward[k],
                &plan.costs.backward[k], &weight);
    if (table.split_weight()) plan.costs.weight[k] = weight;
    if (k + 1 < stages) {
      plan.costs.transfer[k] = table.Transfer(k, cuts[k + 1]);
      plan.crossing_bytes += chain_.live_bytes[cuts[k + 1]];
    }
    plan.footprints.push_back(table.Footprint(cuts[k], cuts[k + 1], recompute[k]));
  }
  PARTPLAN_ASSIGN_OR_RETURN(plan.timeline, SimulateSchedule(options.schedule, plan.costs, token));
  PARTPLAN_ASSIGN_OR_RETURN(plan.memory, DeviceMemoryUnder(options.schedule, plan.timeline,
                                                           options.memory, plan.footprints,
                                                           token));
  std::vector<double> device_end(options.schedule.devices, 0);
  for (int d = 0; d < options.schedule.devices; ++d) {
    if (!plan.timeline.devices[d].empty()) device_end[d] = plan.timeline.devices[d].back().end;
  }
  plan.step_seconds = table.StepWithAllReduce(plan.timeline.step_seconds, device_end, cuts,
                                              &plan.tied_allreduce_seconds);
  plan.lower_bound = plan.step_seconds;
  return plan;
}

absl::StatusOr<TrainingStagePlan> EvaluateTrainingStages(
    const StageSearchOptions& options, const TrainingChain& chain,
    const std::vector<TrainingDevice>& devices, const std::vector<int>& cuts,
    const std::vector<bool>& recompute, const CancellationToken& token) {
  PARTPLAN_ASSIGN_OR_RETURN(const std::unique_ptr<TrainingStagesEvaluator> evaluator,
                            TrainingStagesEvaluator::Create(options, chain, devices, token));
  return evaluator->Evaluate(cuts, recompute, token);
}

absl::StatusOr<TrainingStagePlan> PlanTrainingStages(const StageSearchOptions& options,
                                                     const TrainingChain& chain,
                                                     const std::vector<TrainingDevice>& devices,
                                                     const CancellationToken& token) {
  PARTPLAN_RETURN_IF_ERROR(options.CheckAndSetup(chain, devices));
  const StageTable table(options, chain, devices, token);
  PARTPLAN_RETURN_IF_ERROR(table.status());
  SuffixBound suffix;
  if (table.one_chunk()) {
    PARTPLAN_ASSIGN_OR_RETURN(suffix, SuffixBound::Compute(options, table, token));
  }
  Search search(options, table, table.one_chunk() ? &suffix : nullptr, token);
  // Seeds: the plan attaining the suffix bound, and the least busiest-stage
  // time at which the greedy succeeds, by bisection; then single-cut moves.
  if (table.one_chunk()) {
    std::vector<bool> recompute;
    const std::vector<int> cuts = suffix.Plan(&recompute);
    if (!cuts.empty()) PARTPLAN_RETURN_IF_ERROR(search.Offer(cuts, recompute));
  }
  double slowest = kInfinity;
  for (const TrainingDevice& device : devices) slowest = std::min(slowest, device.speed);
  // Recompute at most doubles the forward: no stage takes longer than this.
  double low = 0;
  double high = 2 * table.Work(0, table.items()) / slowest;
  std::vector<bool> recompute;
  if (!GreedyCuts(options, table, devices, high, &recompute).empty()) {
    for (int round = 0; round < 64 && high - low > Tolerance(high) * 1e-3; ++round) {
      PARTPLAN_RETURN_IF_ERROR(token.Check());
      const double mid = (low + high) / 2;
      (GreedyCuts(options, table, devices, mid, &recompute).empty() ? low : high) = mid;
    }
    const std::vector<int> cuts = GreedyCuts(options, table, devices, high, &recompute);
    PARTPLAN_RETURN_IF_ERROR(search.Offer(cuts, recompute));
  }
  if (!std::isfinite(search.best().step) && table.one_chunk()) {
    // Tight memory or pins can defeat both seeds; a plan that fits, if any
    // does, comes from the reachability the no-plan message uses.
    std::vector<int> cuts;
    std::vector<bool> recompute;
    PARTPLAN_ASSIGN_OR_RETURN(
        const bool fits, FitsWithAllowance(options, table, devices, 0, token, &cuts, &recompute));
    if (fits) PARTPLAN_RETURN_IF_ERROR(search.Offer(cuts, recompute));
  }
  if (std::isfinite(search.best().step)) {
    PARTPLAN_RETURN_IF_ERROR(ImproveByMoves(table, token, &search));
  }
  if (options.max_search_nodes > 0) PARTPLAN_RETURN_IF_ERROR(search.Run());
  if (!std::isfinite(search.best().step)) {
    // With one chunk per device the reachability above has proved that
    // nothing fits; with several, only a finished search proves it.
    if (!table.one_chunk() && (search.exhausted() || options.max_search_nodes == 0)) {
      return absl::FailedPreconditionError(
          absl::StrCat("no plan that fits the devices' memory was found within ",
                       options.max_search_nodes, " search nodes (max_search_nodes)"));
    }
    return NoPlan(options, table, devices, token);
  }
  PARTPLAN_ASSIGN_OR_RETURN(TrainingStagePlan plan,
                            EvaluateTrainingStages(options, chain, devices, search.best().cuts,
                                                   search.best().recompute, token));
  plan.search_nodes = search.nodes();
  plan.proven_optimal = options.max_search_nodes > 0 && !search.exhausted();
  if (plan.proven_optimal) {
    plan.lower_bound = plan.step_seconds;
  } else {
    plan.lower_bound = std::min(plan.step_seconds, search.least_unexplored());
    if (table.one_chunk()) plan.lower_bound = std::max(plan.lower_bound, suffix.At(0, 0));
    if (options.max_search_nodes == 0) plan.lower_bound = table.one_chunk() ? suffix.At(0, 0) : 0;
  }
  return plan;
}

}  // namespace partplan

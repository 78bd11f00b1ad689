// The stage search's view of one problem (internal to stage_search): each
// stage's costs, footprint and memory in O(1) from prefix sums and range
// maxima (memory O(v B) with several chunks per device, a walk over the
// device's ops), the pins and tied groups as allowed ends, and the step
// with tied all-reduces. Built once per problem, polling the token:
//
//   const StageTable table(options, chain, devices, token);
//   PARTPLAN_RETURN_IF_ERROR(table.status());
//   table.Footprint(begin, end, /*recompute=*/false);
#ifndef PARTPLAN_PLANNER_TRAINING_STAGE_TABLE_H_
#define PARTPLAN_PLANNER_TRAINING_STAGE_TABLE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "planner/base/cancellation.h"
#include "planner/training/device_memory.h"
#include "planner/training/schedule.h"
#include "planner/training/shared_saves.h"
#include "planner/training/stage_search.h"

namespace partplan {
namespace stage_search_internal {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The largest x in [low, high] for which `fits` holds, `fits` holding up to
// some point and not after (memory and time only grow with a stage's end);
// low - 1 when it fails at low. O(log(high - low)) calls.
template <typename Fits>
int LastFitting(int low, int high, Fits fits) {
  int good = low - 1, bad = high + 1;
  while (bad - good > 1) {
    const int mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  return good;
}

// Two step times closer than this are the same time, and the plan crossing
// fewer bytes wins: it absorbs the rounding of sums taken in another order.
inline double Tolerance(double seconds) { return 1e-9 * std::max(1.0, std::abs(seconds)); }

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
inline std::vector<bool> RecomputeChoices(RecomputeChoice choice) {
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
    if (!one_chunk()) BuildMemoryMoments();
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
  // Complete cuts' and choices' costs per stage and link, footprints, and
  // the bytes crossing the inner cuts.
  void PlanCosts(const std::vector<int>& cuts, const std::vector<bool>& recompute,
                 StageCosts* costs, std::vector<StageFootprint>* footprints,
                 int64_t* bytes) const {
    costs->forward.assign(stages_, 0);
    costs->backward.assign(stages_, 0);
    costs->weight.assign(split_weight_ ? stages_ : 0, 0);
    costs->transfer.assign(stages_ - 1, 0);
    footprints->assign(stages_, StageFootprint{});
    *bytes = 0;
    for (int k = 0; k < stages_; ++k) {
      double weight = 0;
      Costs(k, cuts[k], cuts[k + 1], recompute[k], &costs->forward[k], &costs->backward[k],
            &weight);
      if (split_weight_) costs->weight[k] = weight;
      if (k + 1 < stages_) {
        costs->transfer[k] = Transfer(k, cuts[k + 1]);
        *bytes += LiveBytes(cuts[k + 1]);
      }
      (*footprints)[k] = Footprint(cuts[k], cuts[k + 1], recompute[k]);
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
  // MemoryOfDevice's peak, to the byte: with several chunks, from the
  // device's distinct memory moments (BuildMemoryMoments) rather than its
  // every op.
  double DevicePeak(int device, const std::vector<StageFootprint>& footprints) const {
    if (one_chunk()) return StagePeak(device, footprints[device]);
    const int devices = options_.schedule.devices;
    double weights = 0, gradients = 0, optimizer = 0;
    for (int s = device; s < stages_; s += devices) {
      const double parameters = static_cast<double>(footprints[s].parameters);
      weights += parameters * per_parameter_.weights;
      gradients += parameters * per_parameter_.gradients;
      optimizer += parameters * per_parameter_.optimizer;
    }
    double most = 0;
    for (const MemoryMoment& moment : moments_[device]) {
      // Integral byte counts below 2^53: the sum is exact in any order.
      double alive = 0;
      for (size_t chunk = 0; chunk < moment.held.size(); ++chunk) {
        if (moment.held[chunk] == 0) continue;
        alive += moment.held[chunk] * Held(footprints[device + chunk * devices]);
      }
      if (moment.backward_chunk >= 0) {
        alive += Working(footprints[device + moment.backward_chunk * devices]);
      }
      most = std::max(most, alive);
    }
    return weights + gradients + optimizer + most;
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
  // What a micro-batch of a stage holds between its F and its B (or W), and
  // its backward's working set, as MemoryOfDevice counts them.
  static double Held(const StageFootprint& footprint) {
    return static_cast<double>(footprint.recompute ? footprint.input_bytes
                                                   : footprint.saved_activation_bytes);
  }
  static double Working(const StageFootprint& footprint) {
    return static_cast<double>(footprint.transient_bytes) +
           (footprint.recompute ? static_cast<double>(footprint.saved_activation_bytes) : 0.0);
  }

  // A moment at which MemoryOfDevice's peak may fall: after a forward (the
  // micro-batches each chunk then holds), or during a backward of
  // `backward_chunk` (those held, plus its working set).
  struct MemoryMoment {
    std::vector<int> held;  // per chunk of the device
    int backward_chunk = -1;
  };

  // Each device's distinct moments, from its op order: the micro-batches in
  // flight per chunk do not depend on the cuts, so a device's peak for any
  // cuts is the largest of these few sums instead of a pass over its
  // 2 v B (or 3 v B) ops.
  static constexpr size_t kMostMomentsToPrune = 2048;
  void BuildMemoryMoments() {
    const int devices = options_.schedule.devices;
    const int chunks = options_.schedule.chunks_per_device;
    const bool weight_op_holds = split_weight_ && options_.memory.activations_until_weight;
    // The counts are hashed as they change (a weighted sum, one term per
    // op), so that finding the distinct moments is linear in the ops.
    std::vector<uint64_t> weight(chunks);
    for (int j = 0; j < chunks; ++j) {
      weight[j] = (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(2 * j + 1)) ^ (static_cast<uint64_t>(j) << 32);
    }
    moments_.resize(devices);
    for (int d = 0; d < devices; ++d) {
      std::vector<MemoryMoment> seen;
      std::unordered_map<uint64_t, size_t> index;
      MemoryMoment now;
      now.held.assign(chunks, 0);
      uint64_t hash = 0;
      const auto record = [&](int backward_chunk) {
        uint64_t key = hash * 0xBF58476D1CE4E5B9ull + static_cast<uint64_t>(backward_chunk + 1);
        while (true) {
          const auto found = index.find(key);
          if (found == index.end()) {
            index.emplace(key, seen.size());
            now.backward_chunk = backward_chunk;
            seen.push_back(now);
            return;
          }
          const MemoryMoment& other = seen[found->second];
          if (other.backward_chunk == backward_chunk && other.held == now.held) return;
          ++key;  // another moment with this key: probe on
        }
      };
      for (const PipelineOp& op : order_[d]) {
        const int chunk = op.stage / devices;
        switch (op.kind) {
          case PipelineOpKind::kForward:
            ++now.held[chunk];
            hash += weight[chunk];
            record(-1);
            break;
          case PipelineOpKind::kBackward:
            record(chunk);
            if (!weight_op_holds) {
              --now.held[chunk];
              hash -= weight[chunk];
            }
            break;
          case PipelineOpKind::kWeight:
            if (weight_op_holds) {
              --now.held[chunk];
              hash -= weight[chunk];
            }
            break;
        }
      }
      // Held bytes and working sets are never negative: a moment holding no
      // more in any chunk than another, which is a backward of the same
      // chunk or (for a forward) any moment, never gives the larger sum.
      const auto covers = [](const MemoryMoment& a, const MemoryMoment& b) {
        if (b.backward_chunk >= 0 && a.backward_chunk != b.backward_chunk) return false;
        for (size_t j = 0; j < a.held.size(); ++j) {
          if (a.held[j] < b.held[j]) return false;
        }
        return true;
      };
      // Quadratic in the distinct moments, which are few (the in-flight
      // counts change in the warm-up and cool-down only); past a bound they
      // are kept as they are.
      if (seen.size() > kMostMomentsToPrune) {
        moments_[d] = std::move(seen);
        continue;
      }
      for (size_t i = 0; i < seen.size(); ++i) {
        bool covered = false;
        for (size_t j = 0; j < seen.size() && !covered; ++j) {
          covered = j != i && covers(seen[j], seen[i]);
        }
        if (!covered) moments_[d].push_back(seen[i]);
      }
    }
  }

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
  std::vector<std::vector<MemoryMoment>> moments_;  // per device, with several chunks
  int first_ = -1;                // the last item pinned to the first stage
  int last_ = std::numeric_limits<int>::max();  // the first pinned to the last
  std::vector<int> alone_from_;   // the first item at or after i that is alone
  std::vector<bool> forbidden_;   // per cut, inside a same_stage tied group
  double ring_rate_ = kInfinity;  // the slowest link of the pipeline's ring
};

}  // namespace stage_search_internal
}  // namespace partplan

#endif  // PARTPLAN_PLANNER_TRAINING_STAGE_TABLE_H_

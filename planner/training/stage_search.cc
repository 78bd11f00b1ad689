#include "planner/training/stage_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"
#include "planner/training/closest_fit.h"
#include "planner/training/stage_table.h"
#include "planner/training/suffix_bound.h"

namespace partplan {
namespace {

using stage_search_internal::ClosePlan;
using stage_search_internal::LargestShortfall;
using stage_search_internal::FitsWithAllowance;
using stage_search_internal::kInfinity;
using stage_search_internal::LastFitting;
using stage_search_internal::NoPlan;
using stage_search_internal::RecomputeChoices;
using stage_search_internal::StageTable;
using stage_search_internal::SuffixBound;
using stage_search_internal::Tolerance;

bool FiniteNonNegative(double x) { return std::isfinite(x) && x >= 0; }

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
    fastest_from_.assign(stages + 1, 0);
    for (int k = stages - 1; k >= 0; --k) {
      const int d = table.device_of(k);
      speed_from_[k] = speed_from_[k + 1] + (counted[d] ? 0.0 : table.speed(k));
      fastest_from_[k] = std::max(fastest_from_[k + 1], table.speed(k));
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
    if (!table_.Allowed(cuts)) return absl::OkStatus();
    StageCosts costs;
    std::vector<StageFootprint> footprints;
    int64_t bytes = 0;
    table_.PlanCosts(cuts, recompute, &costs, &footprints, &bytes);
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

  absl::Status Run() { return Extend(0, 0, 0, suffix_ != nullptr ? suffix_->At(0, 0) : 0.0); }

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
      bound =
          std::max(bound, start[d] + micro_batches * busy[d] + (tail >= 0 ? gradient[tail] : 0));
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
  absl::Status Children(int stage, int begin, int64_t bytes, double node_bound, int low, int high,
                        std::vector<Child>* children) {
    const int device = table_.device_of(stage);
    const bool opens_device = stage < options_.schedule.devices;
    const bool closes_device = last_stage_of_device_[device] == stage;
    const double micro_batches = options_.schedule.micro_batches;
    const double device_start = opens_device ? start_[stage] : device_start_[device];
    const int tail_stage = table_.tail_stage(device);
    const bool chain_to_rest = !table_.split_weight() && options_.schedule.chunks_per_device == 1;
    // GPipe's step is at least sum(F + B) + (B - 1)(max F + max B) over the
    // stages (schedule.h): the chosen stages' own, and for the rest their
    // work over the fastest remaining device and over all remaining speed.
    const bool gpipe = options_.schedule.schedule == PipelineSchedule::kGpipe;
    double chosen_sum = 0, chosen_forward = 0, chosen_backward = 0;
    if (gpipe) {
      for (int k = 0; k < stage; ++k) {
        chosen_sum += costs_.forward[k] + costs_.backward[k];
        chosen_forward = std::max(chosen_forward, costs_.forward[k]);
        chosen_backward = std::max(chosen_backward, costs_.backward[k]);
      }
    }
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
        if (gpipe) {
          double sum = chosen_sum + forward + backward;
          double most_forward = std::max(chosen_forward, forward);
          double most_backward = std::max(chosen_backward, backward);
          if (end < table_.items()) {
            const int n = table_.items();
            const double rest_forward = table_.ForwardBefore(n) - table_.ForwardBefore(end);
            const double rest_backward = table_.InputBefore(n) - table_.InputBefore(end) +
                                         table_.WeightBefore(n) - table_.WeightBefore(end);
            sum += (rest_forward + rest_backward) / fastest_from_[stage + 1];
            most_forward = std::max(most_forward, rest_forward / speed_from_[stage + 1]);
            most_backward = std::max(most_backward, rest_backward / speed_from_[stage + 1]);
          }
          bound = std::max(bound, sum + (micro_batches - 1) * (most_forward + most_backward));
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
  std::vector<double> speed_from_;    // total speed of the devices of stages k..
  std::vector<double> fastest_from_;  // the fastest of them
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
// that fit its device (recomputing if it must), leaving an item for each
// later stage. With several chunks per device and `keep_shares`, the j-th
// chunk (of v) must leave the device's peak with its chunks so far within
// (j + 1) / v of its memory: the later chunks keep a share, and the peaks
// of chunks that do not coincide are not added up; without, each chunk may
// fill what its device has left. Empty when that fails. Heterogeneous
// devices and non-empty stages make the greedy inexact: it only seeds the
// search.
std::vector<int> GreedyCuts(const StageSearchOptions& options, const StageTable& table,
                            const std::vector<TrainingDevice>& devices, double limit,
                            bool keep_shares, std::vector<bool>* recompute) {
  const int stages = table.stages();
  const int chunks = options.schedule.chunks_per_device;
  const std::vector<bool> choices = RecomputeChoices(options.recompute);
  std::vector<int> cuts(stages + 1, 0);
  std::vector<StageFootprint> chosen(stages);  // the stages so far; zero beyond
  recompute->assign(stages, false);
  for (int k = 0; k < stages; ++k) {
    int low = 0, high = 0;
    if (!table.EndRange(k, cuts[k], &low, &high)) return {};
    const int device = table.device_of(k);
    const int chunk = k / options.schedule.devices;
    const double share = keep_shares ? devices[device].memory_bytes * (chunk + 1) / chunks
                                     : devices[device].memory_bytes;
    const auto fits = [&](int end, bool recompute_stage) {
      double forward = 0, backward = 0, weight = 0;
      table.Costs(k, cuts[k], end, recompute_stage, &forward, &backward, &weight);
      if (forward + backward + weight > limit) return false;
      chosen[k] = table.Footprint(cuts[k], end, recompute_stage);
      const bool result = table.DevicePeak(device, chosen) <= share;
      chosen[k] = StageFootprint{};
      return result;
    };
    int end = -1;
    for (const bool recompute_stage : choices) {
      int good = LastFitting(low, high, [&](int end) { return fits(end, recompute_stage); });
      // Back off cuts inside a group of tied items kept together.
      while (good >= low && table.Forbidden(good)) --good;
      if (good < low) continue;
      end = good;
      (*recompute)[k] = recompute_stage;
      break;
    }
    if (end < 0) return {};
    cuts[k + 1] = end;
    chosen[k] = table.Footprint(cuts[k], end, (*recompute)[k]);
  }
  return cuts;
}

// Problems up to this many items x stages get ClosestPlan's bisection by
// search: a few tens of searches, each settling its allowance exactly.
constexpr int64_t kMostWorkForExactClosest = 4096;

// With several chunks per device, when no plan fits, the plan that comes
// closest. A device's peak with several chunks does not decompose by stage,
// so no reachability settles it as with one chunk. First, among the greedy
// first plans (GreedyCuts, no time limit, both ways of sharing a device's
// memory) by bisection on an allowance of bytes every device gets; then,
// for small problems, by bisection below that with the search deciding
// whether anything fits each allowance: exact where the searches finish.
// NoPlan reports the better of it and the even split.
absl::StatusOr<ClosePlan> ClosestPlan(const StageSearchOptions& options, const TrainingChain& chain,
                                      const StageTable& table,
                                      const std::vector<TrainingDevice>& devices,
                                      const CancellationToken& token) {
  ClosePlan best;
  double best_short = kInfinity;
  const auto try_allowance = [&](double allowance) {
    std::vector<TrainingDevice> roomier = devices;
    for (TrainingDevice& device : roomier) device.memory_bytes += allowance;
    bool found = false;
    for (const bool keep_shares : {true, false}) {
      std::vector<bool> recompute;
      const std::vector<int> cuts =
          GreedyCuts(options, table, roomier, kInfinity, keep_shares, &recompute);
      if (cuts.empty()) continue;
      found = true;
      const double most = LargestShortfall(table, devices, cuts, recompute).bytes;
      if (most < best_short) {
        best_short = most;
        best.cuts = cuts;
        best.recompute = std::move(recompute);
      }
    }
    return found;
  };
  double high = 1;
  for (const TrainingDevice& device : devices) high = std::max(high, device.memory_bytes);
  bool found = false;
  for (int grow = 0; grow < 64 && !found; ++grow, high *= 2) {
    PARTPLAN_RETURN_IF_ERROR(token.Check());
    found = try_allowance(high);
    if (found) break;
  }
  if (!found) return best;  // the pins leave no greedy plan: NoPlan says so
  double low = 0;
  for (int round = 0; round < 64 && high - low > 0.5; ++round) {
    PARTPLAN_RETURN_IF_ERROR(token.Check());
    const double mid = (low + high) / 2;
    (try_allowance(mid) ? high : low) = mid;
  }
  if (static_cast<int64_t>(table.items()) * table.stages() > kMostWorkForExactClosest) {
    return best;
  }
  // Small problems: bisection again below the greedy's shortfall, the
  // search deciding whether a plan fits each allowance. Where every search
  // finishes, that is the least largest shortfall over every cut.
  StageSearchOptions probe = options;
  probe.explain_no_plan = false;
  low = 0;
  high = std::max(0.0, best_short);
  for (int round = 0; round < 64 && high - low > 0.5; ++round) {
    PARTPLAN_RETURN_IF_ERROR(token.Check());
    const double mid = (low + high) / 2;
    std::vector<TrainingDevice> roomier = devices;
    for (TrainingDevice& device : roomier) device.memory_bytes += mid;
    absl::StatusOr<TrainingStagePlan> plan = PlanTrainingStages(probe, chain, roomier, token);
    if (!plan.ok()) {
      if (plan.status().code() != absl::StatusCode::kFailedPrecondition) return plan.status();
      low = mid;
      continue;
    }
    high = mid;
    const double most = LargestShortfall(table, devices, plan->cuts, plan->recompute).bytes;
    if (most < best_short) {
      best_short = most;
      best.cuts = plan->cuts;
      best.recompute = plan->recompute;
    }
  }
  return best;
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

// A bound on the step of every plan, from totals alone. Every device does
// B times its items' work, so one of them works at least B times all the
// work over the devices' total speed. GPipe's step, without transfers (which
// only add), is sum(F + B) + (B - 1)(max F + max B) over the stages
// (schedule.h); each sum is at least its work over the fastest speed, and
// each maximum at least its work over the total speed and at least one
// item's over the fastest speed. Recompute only adds.
double AnyPlanBound(const StageSearchOptions& options, const TrainingChain& chain,
                    const std::vector<TrainingDevice>& devices) {
  double total_speed = 0, fastest = 0;
  for (const TrainingDevice& device : devices) {
    total_speed += device.speed;
    fastest = std::max(fastest, device.speed);
  }
  double forward = 0, backward = 0, largest_forward = 0, largest_backward = 0;
  for (const TrainingItem& item : chain.items) {
    const double item_backward = item.backward_input + item.backward_weight;
    forward += item.forward;
    backward += item_backward;
    largest_forward = std::max(largest_forward, item.forward);
    largest_backward = std::max(largest_backward, item_backward);
  }
  const double micro_batches = options.schedule.micro_batches;
  double bound = micro_batches * (forward + backward) / total_speed;
  if (options.schedule.schedule == PipelineSchedule::kGpipe) {
    const double most_forward = std::max(forward / total_speed, largest_forward / fastest);
    const double most_backward = std::max(backward / total_speed, largest_backward / fastest);
    bound = std::max(bound, (forward + backward) / fastest +
                                (micro_batches - 1) * (most_forward + most_backward));
  }
  return bound;
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
    return InvalidFieldError("chain.live_bytes", absl::StrCat("expected ", n + 1, " entries, got ",
                                                              chain.live_bytes.size()));
  }
  for (int c = 0; c <= n; ++c) {
    if (chain.live_bytes[c] < 0) {
      return InvalidFieldError(absl::StrCat("chain.live_bytes[", c, "]"),
                               absl::StrCat("must be at least 0, got ", chain.live_bytes[c]));
    }
  }
  if (!chain.placement.empty() && static_cast<int>(chain.placement.size()) != n) {
    return InvalidFieldError(
        "chain.placement", absl::StrCat("expected ", n, " entries, got ", chain.placement.size()));
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
    return InvalidFieldError(
        "devices", absl::StrCat("expected ", schedule.devices, " devices, got ", devices.size()));
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
    return InvalidFieldError("cuts", absl::StrCat("expected ", stages + 1, " cuts from 0 to ", n));
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
  table.PlanCosts(cuts, recompute, &plan.costs, &plan.footprints, &plan.crossing_bytes);
  PARTPLAN_ASSIGN_OR_RETURN(plan.timeline, SimulateSchedule(options.schedule, plan.costs, token));
  PARTPLAN_ASSIGN_OR_RETURN(plan.memory, DeviceMemoryUnder(options.schedule, plan.timeline,
                                                           options.memory, plan.footprints, token));
  std::vector<double> device_end(options.schedule.devices, 0);
  for (int d = 0; d < options.schedule.devices; ++d) {
    if (!plan.timeline.devices[d].empty()) device_end[d] = plan.timeline.devices[d].back().end;
  }
  plan.step_seconds = table.StepWithAllReduce(plan.timeline.step_seconds, device_end, cuts,
                                              &plan.tied_allreduce_seconds);
  plan.lower_bound = plan.step_seconds;
  return plan;
}

absl::StatusOr<TrainingStagePlan> EvaluateTrainingStages(const StageSearchOptions& options,
                                                         const TrainingChain& chain,
                                                         const std::vector<TrainingDevice>& devices,
                                                         const std::vector<int>& cuts,
                                                         const std::vector<bool>& recompute,
                                                         const CancellationToken& token) {
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
  // time at which the greedy succeeds, by bisection (with several chunks per
  // device, both ways of sharing a device's memory); then single-cut moves.
  if (table.one_chunk()) {
    std::vector<bool> recompute;
    const std::vector<int> cuts = suffix.Plan(&recompute);
    if (!cuts.empty()) PARTPLAN_RETURN_IF_ERROR(search.Offer(cuts, recompute));
  }
  double slowest = kInfinity;
  for (const TrainingDevice& device : devices) slowest = std::min(slowest, device.speed);
  for (const bool keep_shares : {true, false}) {
    if (!keep_shares && table.one_chunk()) break;  // one chunk: the same greedy
    // Recompute at most doubles the forward: no stage takes longer than this.
    double low = 0;
    double high = 2 * table.Work(0, table.items()) / slowest;
    std::vector<bool> recompute;
    if (GreedyCuts(options, table, devices, high, keep_shares, &recompute).empty()) continue;
    for (int round = 0; round < 64 && high - low > Tolerance(high) * 1e-3; ++round) {
      PARTPLAN_RETURN_IF_ERROR(token.Check());
      const double mid = (low + high) / 2;
      (GreedyCuts(options, table, devices, mid, keep_shares, &recompute).empty() ? low : high) =
          mid;
    }
    const std::vector<int> cuts =
        GreedyCuts(options, table, devices, high, keep_shares, &recompute);
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
  if (std::isfinite(search.best().step) && options.improve_first_plan) {
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
    if (!options.explain_no_plan) {
      return absl::FailedPreconditionError("no plan that fits the devices' memory was found");
    }
    if (table.one_chunk()) return NoPlan(options, table, devices, token, nullptr);
    PARTPLAN_ASSIGN_OR_RETURN(const ClosePlan close,
                              ClosestPlan(options, chain, table, devices, token));
    return NoPlan(options, table, devices, token, close.cuts.empty() ? nullptr : &close);
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
    plan.lower_bound = std::min(plan.step_seconds,
                                std::max(plan.lower_bound, AnyPlanBound(options, chain, devices)));
  }
  return plan;
}

}  // namespace partplan

#include "planner/training/schedule.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

// 1F1B's order on one device: `warmup` forwards, then forward and backward
// alternating, then the backwards left. `forward(k)` and `backward(k)` are
// the device's k-th forward and backward.
template <typename Forward, typename Backward>
void OneForwardOneBackward(int total, int warmup, Forward forward, Backward backward,
                           std::vector<PipelineOp>* ops) {
  warmup = std::min(warmup, total);
  for (int k = 0; k < warmup; ++k) ops->push_back(forward(k));
  for (int k = 0; k < total - warmup; ++k) {
    ops->push_back(forward(warmup + k));
    ops->push_back(backward(k));
  }
  for (int k = total - warmup; k < total; ++k) ops->push_back(backward(k));
}

absl::Status CheckCosts(const char* name, const std::vector<double>& costs, size_t expected) {
  if (costs.size() != expected) {
    return InvalidFieldError(absl::StrCat("costs.", name),
                             absl::StrCat("expected ", expected, " costs, got ", costs.size()));
  }
  for (size_t i = 0; i < costs.size(); ++i) {
    if (!std::isfinite(costs[i]) || costs[i] < 0) {
      return InvalidFieldError(absl::StrCat("costs.", name, "[", i, "]"),
                               absl::StrCat("a cost must be finite and at least 0, got ",
                                            costs[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ScheduleOptions::CheckAndSetup() const {
  if (devices < 1) {
    return InvalidFieldError("devices", absl::StrCat("at least 1 device, got ", devices));
  }
  if (micro_batches < 1) {
    return InvalidFieldError("micro_batches",
                             absl::StrCat("at least 1 micro-batch, got ", micro_batches));
  }
  if (chunks_per_device < 1) {
    return InvalidFieldError("chunks_per_device",
                             absl::StrCat("at least 1 chunk per device, got ", chunks_per_device));
  }
  if (schedule != PipelineSchedule::kInterleaved1F1B && chunks_per_device != 1) {
    return InvalidFieldError("chunks_per_device",
                             "more than one chunk per device needs the interleaved schedule");
  }
  if (schedule == PipelineSchedule::kInterleaved1F1B && micro_batches % devices != 0) {
    return InvalidFieldError(
        "micro_batches", absl::StrCat("the interleaved schedule needs a multiple of the ",
                                      devices, " devices, got ", micro_batches));
  }
  if (int64_t{3} * devices * chunks_per_device * micro_batches > kMaxScheduledOps) {
    return InvalidFieldError("micro_batches",
                             absl::StrCat("devices x chunks x micro-batches is above ",
                                          kMaxScheduledOps / 3));
  }
  return absl::OkStatus();
}

StageCosts UniformStageCosts(const ScheduleOptions& options, double forward, double backward,
                             double transfer) {
  const int stages = options.stages();
  StageCosts costs;
  costs.forward.assign(stages, forward);
  costs.backward.assign(stages, backward);
  costs.transfer.assign(std::max(stages - 1, 0), transfer);
  return costs;
}

std::vector<std::vector<PipelineOp>> ScheduleOrder(const ScheduleOptions& options) {
  const int p = options.devices;
  const int b = options.micro_batches;
  const int v = options.chunks_per_device;
  std::vector<std::vector<PipelineOp>> order(p);
  for (int d = 0; d < p; ++d) {
    std::vector<PipelineOp>& ops = order[d];
    ops.reserve(static_cast<size_t>(3) * v * b);
    switch (options.schedule) {
      case PipelineSchedule::kGpipe:
        for (int m = 0; m < b; ++m) ops.push_back({PipelineOpKind::kForward, d, m});
        for (int m = 0; m < b; ++m) ops.push_back({PipelineOpKind::kBackward, d, m});
        break;
      case PipelineSchedule::k1F1B:
        OneForwardOneBackward(
            b, p - d - 1, [d](int k) { return PipelineOp{PipelineOpKind::kForward, d, k}; },
            [d](int k) { return PipelineOp{PipelineOpKind::kBackward, d, k}; }, &ops);
        break;
      case PipelineSchedule::kZeroBubbleH1: {
        int f = 0, bwd = 0, w = 0;
        const auto forward = [&] { ops.push_back({PipelineOpKind::kForward, d, f++}); };
        const auto backward = [&] { ops.push_back({PipelineOpKind::kBackward, d, bwd++}); };
        const auto weight = [&] { ops.push_back({PipelineOpKind::kWeight, d, w++}); };
        for (int k = 0; k < std::min(p - d - 1, b); ++k) forward();
        for (int k = 0; k < d && f < b; ++k) {
          forward();
          backward();
        }
        while (f < b) {
          forward();
          backward();
          weight();
        }
        while (bwd < b) {
          backward();
          weight();
        }
        while (w < b) weight();
        break;
      }
      case PipelineSchedule::kInterleaved1F1B: {
        // The k-th forward takes chunk (k / P) % v and micro-batch
        // (k / (P v)) P + k % P; the k-th backward the same micro-batch of
        // chunk v - 1 - (k / P) % v.
        const auto micro_batch = [p, v](int k) { return (k / (p * v)) * p + k % p; };
        OneForwardOneBackward(
            b * v, 2 * (p - d - 1) + (v - 1) * p,
            [=](int k) {
              return PipelineOp{PipelineOpKind::kForward, ((k / p) % v) * p + d, micro_batch(k)};
            },
            [=](int k) {
              return PipelineOp{PipelineOpKind::kBackward, (v - 1 - (k / p) % v) * p + d,
                                micro_batch(k)};
            },
            &ops);
        break;
      }
    }
  }
  return order;
}

namespace {

// Times the ops of `devices` (an order of `options`) in place and returns
// the step. Costs are not checked.
absl::StatusOr<double> TimeOps(const ScheduleOptions& options, const StageCosts& costs,
                               std::vector<std::vector<PipelineOp>>* devices,
                               SimulationBuffers* buffers, const CancellationToken& token) {
  const int stages = options.stages();
  const int b = options.micro_batches;
  const int p = options.devices;
  const bool split_backward = options.schedule == PipelineSchedule::kZeroBubbleH1;
  const auto weight_cost = [&costs](int stage) {
    return costs.weight.empty() ? 0.0 : costs.weight[stage];
  };
  constexpr double kNotYet = -1;
  // When each stage's F and B of each micro-batch ended.
  std::vector<double>& forward_end = buffers->forward_end;
  std::vector<double>& backward_end = buffers->backward_end;
  forward_end.assign(static_cast<size_t>(stages) * b, kNotYet);
  backward_end.assign(static_cast<size_t>(stages) * b, kNotYet);
  const auto at = [b](int stage, int m) { return static_cast<size_t>(stage) * b + m; };

  // When `op`'s input is ready, or kNotYet.
  const auto ready = [&](const PipelineOp& op) -> double {
    if (op.kind == PipelineOpKind::kWeight) {
      const double own_backward = backward_end[at(op.stage, op.micro_batch)];
      return own_backward;  // kNotYet until then
    }
    if (op.kind == PipelineOpKind::kForward) {
      if (op.stage == 0) return 0;
      const double before = forward_end[at(op.stage - 1, op.micro_batch)];
      return before == kNotYet ? kNotYet : before + costs.transfer[op.stage - 1];
    }
    const double own_forward = forward_end[at(op.stage, op.micro_batch)];
    if (own_forward == kNotYet) return kNotYet;
    if (op.stage == stages - 1) return own_forward;
    const double after = backward_end[at(op.stage + 1, op.micro_batch)];
    return after == kNotYet ? kNotYet : after + costs.transfer[op.stage];
  };

  // Each device runs its ops in order as far as their inputs allow; an op
  // that ends wakes the device waiting for it. Every op runs once: O(ops).
  std::vector<size_t> next(p, 0);
  std::vector<double>& free_at = buffers->device_end;
  free_at.assign(p, 0);
  std::vector<bool> queued(p, true);
  std::deque<int> to_run;
  for (int d = 0; d < p; ++d) to_run.push_back(d);
  int64_t work = 0;
  const auto wake = [&](int stage) {
    const int d = options.DeviceOf(stage);
    if (!queued[d]) {
      queued[d] = true;
      to_run.push_back(d);
    }
  };
  while (!to_run.empty()) {
    const int d = to_run.front();
    to_run.pop_front();
    queued[d] = false;
    std::vector<PipelineOp>& ops = (*devices)[d];
    while (next[d] < ops.size()) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      PipelineOp& op = ops[next[d]];
      const double input = ready(op);
      if (input == kNotYet) break;
      op.start = std::max(free_at[d], input);
      switch (op.kind) {
        case PipelineOpKind::kForward:
          op.end = op.start + costs.forward[op.stage];
          forward_end[at(op.stage, op.micro_batch)] = op.end;
          if (op.stage + 1 < stages) wake(op.stage + 1);
          break;
        case PipelineOpKind::kBackward:
          op.end = op.start + costs.backward[op.stage] +
                   (split_backward ? 0.0 : weight_cost(op.stage));
          backward_end[at(op.stage, op.micro_batch)] = op.end;
          if (op.stage > 0) wake(op.stage - 1);
          break;
        case PipelineOpKind::kWeight:
          op.end = op.start + weight_cost(op.stage);
          break;
      }
      free_at[d] = op.end;
      ++next[d];
    }
  }
  double step = 0;
  for (int d = 0; d < p; ++d) {
    if (next[d] != (*devices)[d].size()) {
      return absl::InternalError(absl::StrCat("the schedule deadlocks on device ", d));
    }
    step = std::max(step, free_at[d]);
  }
  return step;
}

}  // namespace

absl::StatusOr<PipelineTimeline> SimulateSchedule(const ScheduleOptions& options,
                                                  const StageCosts& costs,
                                                  const CancellationToken& token) {
  PARTPLAN_RETURN_IF_ERROR(options.CheckAndSetup());
  const int stages = options.stages();
  PARTPLAN_RETURN_IF_ERROR(CheckCosts("forward", costs.forward, stages));
  PARTPLAN_RETURN_IF_ERROR(CheckCosts("backward", costs.backward, stages));
  if (!costs.weight.empty()) PARTPLAN_RETURN_IF_ERROR(CheckCosts("weight", costs.weight, stages));
  PARTPLAN_RETURN_IF_ERROR(CheckCosts("transfer", costs.transfer, stages - 1));

  PipelineTimeline timeline;
  timeline.devices = ScheduleOrder(options);
  SimulationBuffers buffers;
  PARTPLAN_ASSIGN_OR_RETURN(timeline.step_seconds,
                            TimeOps(options, costs, &timeline.devices, &buffers, token));
  const int p = options.devices;
  const bool split_backward = options.schedule == PipelineSchedule::kZeroBubbleH1;

  // A device's ops never overlap, so its order is time order: a micro-batch
  // joins its stage when its F starts and leaves when its B (or W) ends.
  timeline.peak_in_flight.assign(stages, 0);
  timeline.peak_until_weight.assign(stages, 0);
  timeline.bubble_fraction.assign(p, 0);
  std::vector<int> until_backward(stages, 0);
  std::vector<int> until_weight(stages, 0);
  for (int d = 0; d < p; ++d) {
    double busy = 0;
    for (const PipelineOp& op : timeline.devices[d]) {
      busy += op.end - op.start;
      const int s = op.stage;
      switch (op.kind) {
        case PipelineOpKind::kForward:
          timeline.peak_in_flight[s] = std::max(timeline.peak_in_flight[s], ++until_backward[s]);
          timeline.peak_until_weight[s] =
              std::max(timeline.peak_until_weight[s], ++until_weight[s]);
          break;
        case PipelineOpKind::kBackward:
          --until_backward[s];
          if (!split_backward) --until_weight[s];
          break;
        case PipelineOpKind::kWeight:
          --until_weight[s];
          break;
      }
    }
    if (timeline.step_seconds > 0) {
      timeline.bubble_fraction[d] = 1 - busy / timeline.step_seconds;
    }
  }
  return timeline;
}

StepSimulator::StepSimulator(const ScheduleOptions& options)
    : options_(options), order_(ScheduleOrder(options)) {}

absl::StatusOr<double> StepSimulator::StepSeconds(const StageCosts& costs,
                                                  const CancellationToken& token) {
  return TimeOps(options_, costs, &order_, &buffers_, token);
}

}  // namespace partplan

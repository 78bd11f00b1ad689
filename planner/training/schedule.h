// Pipeline schedules of one training step, simulated exactly: the order in
// which each device runs its forward (F) and backward (B) work, and when each
// piece starts and ends given the stages' costs and the transfers between
// them. The training planner's objective is this simulated step time; no
// closed form is assumed (with transfer costs, 1F1B's steady state pays them
// again every P micro-batches).
//
//   ScheduleOptions options;
//   options.schedule = PipelineSchedule::k1F1B;
//   options.devices = 4;
//   options.micro_batches = 8;
//   StageCosts costs = UniformStageCosts(options, /*forward=*/1, /*backward=*/2,
//                                        /*transfer=*/0.5);
//   PARTPLAN_ASSIGN_OR_RETURN(const PipelineTimeline timeline,
//                             SimulateSchedule(options, costs, token));
//   timeline.step_seconds;          // 41: the last backward's end
//   timeline.peak_in_flight[0];     // 4: micro-batches stage 0 holds at once
//
// Orders (P devices, B micro-batches, device d 0-based):
//   - GPipe (torch's ScheduleGPipe): every F in micro-batch order, then
//     every B in micro-batch order.
//   - 1F1B (PipeDream-flush; Megatron-LM, torch's Schedule1F1B): a warm-up of
//     min(P - d - 1, B) F, then F and B alternating, then the remaining B.
//   - Interleaved 1F1B (Narayanan et al., SC'21): v chunks per device, chunk
//     k of device d being virtual stage k*P + d; B a multiple of P; a warm-up
//     of min(2(P - d - 1) + (v - 1)P, B*v) F, then F and B alternating, F
//     taking chunks 0..v-1 and B chunks v-1..0 in turns of P micro-batches.
//   - ZB-H1 (Qi et al., ICLR 2024, "Zero Bubble Pipeline Parallelism"; the
//     H1 order of DeepSpeed's ZeroBubbleH1Pipeline with exact semantics): the
//     backward split into B, the input gradient, and W, the weight gradient.
//     A warm-up of min(P - d - 1, B) F; then d rounds of F, B; then rounds of
//     F, B, W while forwards remain; then B, W; then the W left, each W for
//     the oldest micro-batch whose B is done.
// The other schedules run a stage's B and W as one backward op of both
// costs.
//
// The model of one op: it starts when its device has finished the op before
// it in the device's order and its input has arrived. F of virtual stage c
// needs F of stage c - 1 to have ended and its activations to have crossed
// the link (transfer[c - 1] seconds); B of stage c needs B of stage c + 1 and
// the gradient's transfer back (the same seconds), and the last stage's B
// needs its own F; W needs its stage's B. Transfers overlap with compute and
// do not contend. A micro-batch is in flight on a stage from the start of its
// F to the end of its B; the inputs W needs are alive until W ends, so under
// ZB-H1 a stage holds more micro-batches until W than until B.
//
// Without transfer costs GPipe's step decomposes: sum(f) + (B - 1) max(f) +
// sum(b) + (B - 1) max(b), over the stages' costs. 1F1B's does not (P = B = 2,
// stage costs (f, b) of (2, 1) and (1, 1): 7, where the same form gives 8),
// so a planner for it has to simulate (schedule_test checks both).
//
// O(P*v*B) time and memory; polls the token as it goes.
#ifndef PARTPLAN_PLANNER_TRAINING_SCHEDULE_H_
#define PARTPLAN_PLANNER_TRAINING_SCHEDULE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"

namespace partplan {

enum class PipelineSchedule { kGpipe, k1F1B, kInterleaved1F1B, kZeroBubbleH1 };

struct ScheduleOptions {
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int devices = 1;            // P
  int micro_batches = 1;      // B
  int chunks_per_device = 1;  // v; more than 1 only for kInterleaved1F1B

  // INVALID_ARGUMENT naming the field (`devices`, `micro_batches`,
  // `chunks_per_device`) unless P >= 1, B >= 1, v >= 1, v == 1 but for the
  // interleaved schedule, whose B must be a multiple of P; and 3 * P * v * B
  // at most kMaxScheduledOps.
  absl::Status CheckAndSetup() const;

  // Virtual stages: P * v.
  int stages() const { return devices * chunks_per_device; }
  // The device of virtual stage `stage`.
  int DeviceOf(int stage) const { return stage % devices; }

  // Bounds a schedule's memory: F, B and W of every stage and micro-batch.
  static constexpr int64_t kMaxScheduledOps = int64_t{1} << 26;
};

// Seconds per virtual stage and per link between stage c and c + 1
// (transfer[c], one fewer than stages). backward[c] is the input gradient's
// share of the backward and weight[c] the weight gradient's (empty: none).
struct StageCosts {
  std::vector<double> forward;
  std::vector<double> backward;
  std::vector<double> weight;
  std::vector<double> transfer;
};

// Every stage with the same costs, for tests and examples.
StageCosts UniformStageCosts(const ScheduleOptions& options, double forward, double backward,
                             double transfer);

enum class PipelineOpKind { kForward, kBackward, kWeight };

struct PipelineOp {
  PipelineOpKind kind;
  int stage;        // virtual stage, 0..P*v-1
  int micro_batch;  // 0..B-1
  double start = 0;
  double end = 0;
};

struct PipelineTimeline {
  // Per device, its ops in the order it runs them.
  std::vector<std::vector<PipelineOp>> devices;
  // The end of the last op.
  double step_seconds = 0;
  // Per device, the share of [0, step_seconds] it is idle.
  std::vector<double> bubble_fraction;
  // Per virtual stage, the most micro-batches in flight at once: from F's
  // start to B's end, and to W's end (the same but for ZB-H1).
  std::vector<int> peak_in_flight;
  std::vector<int> peak_until_weight;
};

// Per device, the order of its ops (start and end left 0). The options must
// pass CheckAndSetup().
std::vector<std::vector<PipelineOp>> ScheduleOrder(const ScheduleOptions& options);

// INVALID_ARGUMENT when the options do not pass CheckAndSetup() or `costs`
// does not have a finite, non-negative cost for every stage and link
// (naming `costs.forward[3]` and the like; `weight` may be empty).
absl::StatusOr<PipelineTimeline> SimulateSchedule(const ScheduleOptions& options,
                                                  const StageCosts& costs,
                                                  const CancellationToken& token);

struct SimulationBuffers {
  std::vector<double> forward_end;
  std::vector<double> backward_end;
  std::vector<double> device_end;  // when each device's last op ends
};

// The step time of one schedule for many cost vectors, for a search: the
// order is built once and the buffers kept. The options must pass
// CheckAndSetup(); the costs are not checked (SimulateSchedule checks
// them): give every stage and link a finite, non-negative cost.
class StepSimulator {
 public:
  explicit StepSimulator(const ScheduleOptions& options);
  // SimulateSchedule(options, costs, token)->step_seconds, exactly.
  absl::StatusOr<double> StepSeconds(const StageCosts& costs, const CancellationToken& token);
  // After StepSeconds: when each device's last op ended.
  const std::vector<double>& device_end() const { return buffers_.device_end; }

 private:
  ScheduleOptions options_;
  std::vector<std::vector<PipelineOp>> order_;
  SimulationBuffers buffers_;
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_TRAINING_SCHEDULE_H_

// DeviceMemoryUnder: ZeRO's division of the model states, activations held
// as the schedule holds micro-batches (1F1B's first stage most, GPipe's all
// alike), full recompute keeping only the inputs, ZB-H1's two conventions,
// and the exact peak of interleaved devices against a recount over the ops.
#include "planner/training/device_memory.h"

#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "tests/planner/training/schedule_options.h"

namespace partplan {
namespace {

std::vector<DeviceMemory> MemoryOf(const ScheduleOptions& options,
                                   const std::vector<StageFootprint>& stages,
                                   const TrainingMemoryOptions& memory = {}) {
  StageCosts costs = UniformStageCosts(options, 1, 1, 0.1);
  costs.weight.assign(options.stages(), 1);
  const absl::StatusOr<PipelineTimeline> timeline =
      SimulateSchedule(options, costs, NoDeadline());
  EXPECT_TRUE(timeline.ok()) << timeline.status();
  if (!timeline.ok()) return {};
  absl::StatusOr<std::vector<DeviceMemory>> devices =
      DeviceMemoryUnder(options, *timeline, memory, stages, NoDeadline());
  EXPECT_TRUE(devices.ok()) << devices.status();
  return devices.ok() ? *std::move(devices) : std::vector<DeviceMemory>();
}

StageFootprint Stage(int64_t parameters, int64_t saved, int64_t inputs = 0,
                     int64_t transient = 0, bool recompute = false) {
  StageFootprint stage;
  stage.parameters = parameters;
  stage.saved_activation_bytes = saved;
  stage.input_bytes = inputs;
  stage.transient_bytes = transient;
  stage.recompute = recompute;
  return stage;
}

// Mixed-precision Adam, 16 bytes a parameter, over d = 8 (Rajbhandari et al.,
// SC'20): ZeRO-1 2 + 2 + 12/8, ZeRO-2 2 + 2/8 + 12/8, ZeRO-3 16/8.
TEST(DeviceMemoryTest, ZeroDividesTheModelStates) {
  const ScheduleOptions options = Options(PipelineSchedule::k1F1B, 1, 1);
  const std::vector<StageFootprint> stages = {Stage(1000, 0)};
  TrainingMemoryOptions memory;
  memory.data_parallel = 8;
  const std::pair<ZeroStage, double> expected[] = {{ZeroStage::kNone, 16000},
                                                   {ZeroStage::kOptimizer, 5500},
                                                   {ZeroStage::kGradients, 3750},
                                                   {ZeroStage::kParameters, 2000}};
  for (const auto& [zero, bytes] : expected) {
    memory.zero = zero;
    const DeviceMemory device = MemoryOf(options, stages, memory)[0];
    EXPECT_DOUBLE_EQ(device.weights + device.gradients + device.optimizer, bytes)
        << static_cast<int>(zero);
    EXPECT_DOUBLE_EQ(device.peak_bytes, bytes);
  }
}

// Identical stages under 1F1B: stage s holds min(P - s, B) micro-batches, so
// the first device needs the most memory though the parameters are balanced
// (DeepSpeed #4477); under GPipe every device holds all B.
TEST(DeviceMemoryTest, ActivationsFollowTheSchedule) {
  const int p = 4;
  const int b = 8;
  const std::vector<StageFootprint> stages(p, Stage(100, 1000));
  const std::vector<DeviceMemory> one_f_one_b =
      MemoryOf(Options(PipelineSchedule::k1F1B, p, b), stages);
  const std::vector<DeviceMemory> gpipe = MemoryOf(Options(PipelineSchedule::kGpipe, p, b), stages);
  for (int s = 0; s < p; ++s) {
    EXPECT_DOUBLE_EQ(one_f_one_b[s].activations, 1000.0 * std::min(p - s, b));
    EXPECT_DOUBLE_EQ(one_f_one_b[s].peak_bytes, 1600.0 + 1000.0 * std::min(p - s, b));
    EXPECT_DOUBLE_EQ(gpipe[s].activations, 1000.0 * b);
    if (s > 0) {
      EXPECT_LT(one_f_one_b[s].peak_bytes, one_f_one_b[s - 1].peak_bytes);
    }
  }
}

// Full recompute holds the stage's inputs per micro-batch, and its backward
// holds one micro-batch's saved activations again, beside its working set.
TEST(DeviceMemoryTest, RecomputeKeepsOnlyTheInputs) {
  const ScheduleOptions options = Options(PipelineSchedule::k1F1B, 2, 4);
  const std::vector<DeviceMemory> devices =
      MemoryOf(options, {Stage(0, 1000, 10, 50, /*recompute=*/true), Stage(0, 1000, 10, 50)});
  EXPECT_DOUBLE_EQ(devices[0].activations, 2 * 10.0);
  EXPECT_DOUBLE_EQ(devices[0].transient, 50.0 + 1000.0);
  EXPECT_DOUBLE_EQ(devices[0].peak_bytes, 2 * 10.0 + 50.0 + 1000.0);
  EXPECT_DOUBLE_EQ(devices[1].activations, 1000.0);
  EXPECT_DOUBLE_EQ(devices[1].peak_bytes, 1000.0 + 50.0);
}

// ZB-H1 counted until W: every stage holds min(P, B) micro-batches; until B:
// min(P - s, B), as 1F1B.
TEST(DeviceMemoryTest, ZeroBubbleCountsUntilWeightOrBackward) {
  const int p = 4;
  const ScheduleOptions options = Options(PipelineSchedule::kZeroBubbleH1, p, 8);
  const std::vector<StageFootprint> stages(p, Stage(0, 100));
  TrainingMemoryOptions until_backward;
  until_backward.activations_until_weight = false;
  const std::vector<DeviceMemory> to_weight = MemoryOf(options, stages);
  const std::vector<DeviceMemory> to_backward = MemoryOf(options, stages, until_backward);
  for (int s = 0; s < p; ++s) {
    EXPECT_DOUBLE_EQ(to_weight[s].activations, 100.0 * p) << s;
    EXPECT_DOUBLE_EQ(to_backward[s].activations, 100.0 * (p - s)) << s;
  }
}

// Interleaved devices hold several stages' micro-batches: the peak, recounted
// at every op from which micro-batches have started and not yet ended, on
// random stage sizes.
TEST(DeviceMemoryTest, InterleavedPeakMatchesARecount) {
  std::mt19937 random(3);
  for (int trial = 0; trial < 50; ++trial) {
    const int p = 2 + random() % 3;
    const int v = 1 + random() % 3;
    const ScheduleOptions options =
        Options(PipelineSchedule::kInterleaved1F1B, p, p * (1 + random() % 3), v);
    std::vector<StageFootprint> stages;
    for (int s = 0; s < options.stages(); ++s) {
      stages.push_back(Stage(0, 1 + random() % 1000, 1 + random() % 10, random() % 100,
                             random() % 2 == 0));
    }
    const std::vector<DeviceMemory> devices = MemoryOf(options, stages);
    StageCosts costs = UniformStageCosts(options, 1, 1, 0.1);
    costs.weight.assign(options.stages(), 1);
    const PipelineTimeline timeline = *SimulateSchedule(options, costs, NoDeadline());
    for (int d = 0; d < p; ++d) {
      const std::vector<PipelineOp>& ops = timeline.devices[d];
      std::map<std::pair<int, int>, std::pair<size_t, size_t>> span;  // (stage, mb) -> [F, B]
      for (size_t k = 0; k < ops.size(); ++k) {
        auto& [first, last] = span[{ops[k].stage, ops[k].micro_batch}];
        if (ops[k].kind == PipelineOpKind::kForward) first = k;
        if (ops[k].kind == PipelineOpKind::kBackward) last = k;
      }
      double most = 0;
      for (size_t k = 0; k < ops.size(); ++k) {
        double held = 0;
        for (const auto& [key, range] : span) {
          const StageFootprint& stage = stages[key.first];
          if (range.first <= k && k <= range.second) {
            held += stage.recompute ? stage.input_bytes : stage.saved_activation_bytes;
          }
        }
        if (ops[k].kind == PipelineOpKind::kBackward) {
          const StageFootprint& stage = stages[ops[k].stage];
          held += stage.transient_bytes + (stage.recompute ? stage.saved_activation_bytes : 0);
        }
        most = std::max(most, held);
      }
      EXPECT_DOUBLE_EQ(devices[d].peak_bytes, most) << "trial " << trial << " device " << d;
    }
  }
}

TEST(DeviceMemoryTest, BadInputsNameTheirField) {
  const ScheduleOptions options = Options(PipelineSchedule::k1F1B, 2, 2);
  const PipelineTimeline timeline =
      *SimulateSchedule(options, UniformStageCosts(options, 1, 1, 0), NoDeadline());
  const auto field_of = [&](const TrainingMemoryOptions& memory,
                            const std::vector<StageFootprint>& stages) {
    const absl::Status status =
        DeviceMemoryUnder(options, timeline, memory, stages, NoDeadline()).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    return InvalidFieldPath(status).value_or("");
  };
  const std::vector<StageFootprint> good(2, Stage(1, 1));
  TrainingMemoryOptions memory;
  memory.data_parallel = 0;
  EXPECT_EQ(field_of(memory, good), "memory.data_parallel");
  memory = {};
  memory.optimizer_bytes = -1;
  EXPECT_EQ(field_of(memory, good), "memory.optimizer_bytes");
  EXPECT_EQ(field_of({}, {Stage(1, 1)}), "stages");
  EXPECT_EQ(field_of({}, {Stage(1, 1), Stage(-5, 1)}), "stages[1].parameters");
}

}  // namespace
}  // namespace partplan

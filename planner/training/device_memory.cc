#include "planner/training/device_memory.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

absl::Status CheckBytes(const char* field, double bytes) {
  if (std::isfinite(bytes) && bytes >= 0) return absl::OkStatus();
  return InvalidFieldError(absl::StrCat("memory.", field),
                           absl::StrCat("bytes per parameter must be finite and at least 0, got ",
                                        bytes));
}

absl::Status CheckFootprint(const std::vector<StageFootprint>& stages, int expected) {
  if (static_cast<int>(stages.size()) != expected) {
    return InvalidFieldError("stages", absl::StrCat("expected ", expected,
                                                    " stage footprints, got ", stages.size()));
  }
  for (size_t s = 0; s < stages.size(); ++s) {
    const StageFootprint& stage = stages[s];
    const std::pair<const char*, int64_t> fields[] = {
        {"parameters", stage.parameters},
        {"saved_activation_bytes", stage.saved_activation_bytes},
        {"input_bytes", stage.input_bytes},
        {"transient_bytes", stage.transient_bytes}};
    for (const auto& [name, value] : fields) {
      if (value < 0) {
        return InvalidFieldError(absl::StrCat("stages[", s, "].", name),
                                 absl::StrCat("must be at least 0, got ", value));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TrainingMemoryOptions::CheckAndSetup() const {
  PARTPLAN_RETURN_IF_ERROR(CheckBytes("weight_bytes", weight_bytes));
  PARTPLAN_RETURN_IF_ERROR(CheckBytes("gradient_bytes", gradient_bytes));
  PARTPLAN_RETURN_IF_ERROR(CheckBytes("optimizer_bytes", optimizer_bytes));
  if (data_parallel < 1) {
    return InvalidFieldError("memory.data_parallel",
                             absl::StrCat("at least 1, got ", data_parallel));
  }
  return absl::OkStatus();
}

ModelStateBytes TrainingMemoryOptions::BytesPerParameter() const {
  const double d = data_parallel;
  ModelStateBytes bytes;
  bytes.weights = zero == ZeroStage::kParameters ? weight_bytes / d : weight_bytes;
  bytes.gradients = zero == ZeroStage::kGradients || zero == ZeroStage::kParameters
                        ? gradient_bytes / d
                        : gradient_bytes;
  bytes.optimizer = zero == ZeroStage::kNone ? optimizer_bytes : optimizer_bytes / d;
  return bytes;
}

DeviceMemory MemoryOfDevice(const ScheduleOptions& options, int device,
                            const std::vector<PipelineOp>& ops,
                            const TrainingMemoryOptions& memory,
                            const std::vector<StageFootprint>& stages) {
  const ModelStateBytes per_parameter = memory.BytesPerParameter();
  const bool weight_op_holds = options.schedule == PipelineSchedule::kZeroBubbleH1 &&
                               memory.activations_until_weight;
  DeviceMemory result;
  for (int s = device; s < options.stages(); s += options.devices) {
    const double parameters = static_cast<double>(stages[s].parameters);
    result.weights += parameters * per_parameter.weights;
    result.gradients += parameters * per_parameter.gradients;
    result.optimizer += parameters * per_parameter.optimizer;
  }
  // What a micro-batch of stage s holds between its F and its B (or W).
  const auto held = [&stages](int s) {
    return static_cast<double>(stages[s].recompute ? stages[s].input_bytes
                                                   : stages[s].saved_activation_bytes);
  };
  const auto working_set = [&stages](int s) {
    return static_cast<double>(stages[s].transient_bytes) +
           (stages[s].recompute ? static_cast<double>(stages[s].saved_activation_bytes) : 0.0);
  };
  double alive = 0;
  double most = 0;  // activations held plus the running op's working set
  for (const PipelineOp& op : ops) {
    switch (op.kind) {
      case PipelineOpKind::kForward:
        alive += held(op.stage);
        result.activations = std::max(result.activations, alive);
        most = std::max(most, alive);
        break;
      case PipelineOpKind::kBackward:
        result.transient = std::max(result.transient, working_set(op.stage));
        most = std::max(most, alive + working_set(op.stage));
        if (!weight_op_holds) alive -= held(op.stage);
        break;
      case PipelineOpKind::kWeight:
        if (weight_op_holds) alive -= held(op.stage);
        break;
    }
  }
  result.peak_bytes = result.weights + result.gradients + result.optimizer + most;
  return result;
}

InFlightCounts InFlightOf(const ScheduleOptions& options, const std::vector<PipelineOp>& ops,
                          const TrainingMemoryOptions& memory) {
  const bool weight_op_holds = options.schedule == PipelineSchedule::kZeroBubbleH1 &&
                               memory.activations_until_weight;
  InFlightCounts counts;
  int alive = 0;
  for (const PipelineOp& op : ops) {
    switch (op.kind) {
      case PipelineOpKind::kForward:
        counts.at_forward = std::max(counts.at_forward, ++alive);
        break;
      case PipelineOpKind::kBackward:
        counts.at_backward = std::max(counts.at_backward, alive);
        if (!weight_op_holds) --alive;
        break;
      case PipelineOpKind::kWeight:
        if (weight_op_holds) --alive;
        break;
    }
  }
  return counts;
}

absl::StatusOr<std::vector<DeviceMemory>> DeviceMemoryUnder(
    const ScheduleOptions& options, const PipelineTimeline& timeline,
    const TrainingMemoryOptions& memory, const std::vector<StageFootprint>& stages,
    const CancellationToken& token) {
  int64_t work_done = 0;
  PARTPLAN_RETURN_IF_ERROR(options.CheckAndSetup());
  PARTPLAN_RETURN_IF_ERROR(memory.CheckAndSetup());
  PARTPLAN_RETURN_IF_ERROR(CheckFootprint(stages, options.stages()));
  if (static_cast<int>(timeline.devices.size()) != options.devices) {
    return absl::InvalidArgumentError("the timeline is not of these schedule options");
  }
  std::vector<DeviceMemory> devices;
  devices.reserve(options.devices);
  for (int i = 0; i < options.devices; ++i) {
    for (const PipelineOp& op : timeline.devices[i]) {
      if (op.stage < 0 || op.stage >= options.stages() || options.DeviceOf(op.stage) != i) {
        return absl::InvalidArgumentError("the timeline is not of these schedule options");
      }
    }
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(static_cast<int64_t>(timeline.devices[i].size()) + 1, &work_done));
    devices.push_back(MemoryOfDevice(options, i, timeline.devices[i], memory, stages));
  }
  return devices;
}

}  // namespace partplan

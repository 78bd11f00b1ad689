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

absl::StatusOr<std::vector<DeviceMemory>> DeviceMemoryUnder(
    const ScheduleOptions& options, const PipelineTimeline& timeline,
    const TrainingMemoryOptions& memory, const std::vector<StageFootprint>& stages,
    const CancellationToken& token) {
  PARTPLAN_RETURN_IF_ERROR(options.CheckAndSetup());
  PARTPLAN_RETURN_IF_ERROR(memory.CheckAndSetup());
  PARTPLAN_RETURN_IF_ERROR(CheckFootprint(stages, options.stages()));
  if (static_cast<int>(timeline.devices.size()) != options.devices) {
    return absl::InvalidArgumentError("the timeline is not of these schedule options");
  }
  const double d = memory.data_parallel;
  const double weight_bytes =
      memory.zero == ZeroStage::kParameters ? memory.weight_bytes / d : memory.weight_bytes;
  const double gradient_bytes =
      memory.zero == ZeroStage::kGradients || memory.zero == ZeroStage::kParameters
          ? memory.gradient_bytes / d
          : memory.gradient_bytes;
  const double optimizer_bytes =
      memory.zero == ZeroStage::kNone ? memory.optimizer_bytes : memory.optimizer_bytes / d;
  const bool weight_op_holds = options.schedule == PipelineSchedule::kZeroBubbleH1 &&
                               memory.activations_until_weight;

  std::vector<DeviceMemory> devices(options.devices);
  int64_t work = 0;
  for (int s = 0; s < options.stages(); ++s) {
    DeviceMemory& device = devices[options.DeviceOf(s)];
    const double parameters = static_cast<double>(stages[s].parameters);
    device.weights += parameters * weight_bytes;
    device.gradients += parameters * gradient_bytes;
    device.optimizer += parameters * optimizer_bytes;
  }
  for (int i = 0; i < options.devices; ++i) {
    DeviceMemory& device = devices[i];
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
    for (const PipelineOp& op : timeline.devices[i]) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      if (op.stage < 0 || op.stage >= options.stages()) {
        return absl::InvalidArgumentError("the timeline is not of these schedule options");
      }
      switch (op.kind) {
        case PipelineOpKind::kForward:
          alive += held(op.stage);
          device.activations = std::max(device.activations, alive);
          most = std::max(most, alive);
          break;
        case PipelineOpKind::kBackward:
          device.transient = std::max(device.transient, working_set(op.stage));
          most = std::max(most, alive + working_set(op.stage));
          if (!weight_op_holds) alive -= held(op.stage);
          break;
        case PipelineOpKind::kWeight:
          if (weight_op_holds) alive -= held(op.stage);
          break;
      }
    }
    device.peak_bytes = device.weights + device.gradients + device.optimizer + most;
  }
  return devices;
}

}  // namespace partplan

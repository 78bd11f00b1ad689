// DeviceMemoryUnder: each device's memory during a training step, from the
// schedule's timeline rather than a guess: model states by ZeRO stage, the
// activations its stages hold for the micro-batches in flight, and the
// backward's working set.
//
//   TrainingMemoryOptions memory;              // mixed-precision Adam, no ZeRO
//   memory.data_parallel = 8;
//   memory.zero = ZeroStage::kOptimizer;
//   PARTPLAN_ASSIGN_OR_RETURN(std::vector<DeviceMemory> devices,
//       DeviceMemoryUnder(options, timeline, memory, stages, token));
//   devices[0].peak_bytes;   // model states + the most activations + working set
//
// Model states (Rajbhandari et al., SC'20, "ZeRO"): bytes per parameter of
// weights, gradients and optimizer state (mixed-precision Adam: 2 + 2 + 12 =
// 16); with data-parallel degree d, ZeRO-1 divides the optimizer state by d,
// ZeRO-2 also the gradients, ZeRO-3 also the weights.
//
// Activations: a micro-batch's saved activations join its stage when its F
// starts and leave when its B ends, or its W under ZB-H1 when
// `activations_until_weight` (the inputs W reads live until then). A stage
// with full recompute keeps only its inputs across the gap, and its B first
// runs the forward again, holding the saved activations of that one
// micro-batch while it runs. The working set of a B is the stage's
// transient_bytes, plus the recomputed activations. The peak is exact under
// this model: the most, over the device's ops in order, of the activations
// held plus the working set of the op running.
#ifndef PARTPLAN_PLANNER_TRAINING_DEVICE_MEMORY_H_
#define PARTPLAN_PLANNER_TRAINING_DEVICE_MEMORY_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/training/schedule.h"

namespace partplan {

enum class ZeroStage { kNone, kOptimizer, kGradients, kParameters };

// Bytes per parameter of each model state on one data-parallel replica.
struct ModelStateBytes {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
};

struct TrainingMemoryOptions {
  // Bytes per parameter of each model state.
  double weight_bytes = 2;
  double gradient_bytes = 2;
  double optimizer_bytes = 12;
  int data_parallel = 1;
  ZeroStage zero = ZeroStage::kNone;
  bool activations_until_weight = true;

  // INVALID_ARGUMENT naming the field unless the byte counts are finite and
  // at least 0 and data_parallel at least 1.
  absl::Status CheckAndSetup() const;

  // The bytes per parameter a replica keeps once ZeRO has divided them.
  ModelStateBytes BytesPerParameter() const;
};

// One virtual stage's share of the model, per micro-batch where it says so.
struct StageFootprint {
  int64_t parameters = 0;
  int64_t saved_activation_bytes = 0;  // saved for backward, per micro-batch
  int64_t input_bytes = 0;             // the stage's inputs, per micro-batch
  int64_t transient_bytes = 0;         // the backward's working set
  bool recompute = false;              // full recompute of the stage
};

struct DeviceMemory {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;  // the most held at once
  double transient = 0;    // the largest working set of one backward
  double peak_bytes = 0;   // states + the most held plus working set at once
};

// Per device of `options`. `stages` has one footprint per virtual stage;
// `timeline` is SimulateSchedule's for `options`. INVALID_ARGUMENT naming
// `memory.<field>` or `stages` (its size, or `stages[3].parameters` and the
// like when negative).
absl::StatusOr<std::vector<DeviceMemory>> DeviceMemoryUnder(
    const ScheduleOptions& options, const PipelineTimeline& timeline,
    const TrainingMemoryOptions& memory, const std::vector<StageFootprint>& stages,
    const CancellationToken& token);

// One device's memory from its ops in order (their times are not read):
// what DeviceMemoryUnder computes per device, unchecked, for callers that
// have validated their inputs and evaluate many plans. `stages` has a
// footprint per virtual stage; only the device's are read.
DeviceMemory MemoryOfDevice(const ScheduleOptions& options, int device,
                            const std::vector<PipelineOp>& ops,
                            const TrainingMemoryOptions& memory,
                            const std::vector<StageFootprint>& stages);

// A device that runs one stage holds `at_forward` micro-batches at most
// once a forward has started, and `at_backward` while a backward runs, so
// its peak is states + max(at_forward * held, at_backward * held + working
// set): what MemoryOfDevice finds, in O(1) per footprint once the counts
// are read off its ops.
struct InFlightCounts {
  int at_forward = 0;
  int at_backward = 0;
};
InFlightCounts InFlightOf(const ScheduleOptions& options, const std::vector<PipelineOp>& ops,
                          const TrainingMemoryOptions& memory);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_TRAINING_DEVICE_MEMORY_H_

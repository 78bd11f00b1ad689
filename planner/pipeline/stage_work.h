// ChooseStageWork: what the BALANCED planner balances -- each item's work --
// and how fast each stage's device does it.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const StageWork work, ChooseStageWork(model, devices, token));
//   PlanBalancedStages(model, work.of_item, work.devices, token);
//
// The kind of work is chosen once for the whole graph, the most direct
// measure of time it carries first:
//   1. latencies, when any node has a `latency`: max(compute, memory)
//      seconds, as torch.fx's latency model reads them;
//   2. FLOPs, when any node has positive `flops`;
//   3. parameter counts (`parameter_count`) otherwise.
// Nodes without the chosen figure count 0 (typically get_attrs and cheap
// element-wise nodes).
//
// Speeds. Latencies are already times, on whatever device measured them:
// every device gets speed 1 and its throughput is not used. FLOPs and
// parameter counts are divided by the device's compute_flops_per_second
// when every device gives one (for parameters a proxy: a device twice as
// fast takes half the time per parameter); stage costs are then seconds.
// When no device gives one, every speed is 1 and stage costs are in units
// of work. Some devices with a throughput and some without is
// INVALID_ARGUMENT naming the first one without. A work sum beyond the
// largest double is INVALID_ARGUMENT on `graph.nodes`.
#ifndef PARTPLAN_PLANNER_PIPELINE_STAGE_WORK_H_
#define PARTPLAN_PLANNER_PIPELINE_STAGE_WORK_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "planner/base/cancellation.h"
#include "planner/graph/devices.h"
#include "planner/pipeline/balanced_stages.h"
#include "planner/pipeline/stage_model.h"

namespace partplan {

enum class WorkKind { kLatency, kFlops, kParameters };

// "latency", "flops" or "parameters".
absl::string_view WorkKindName(WorkKind kind);

struct StageWork {
  WorkKind kind = WorkKind::kParameters;
  // One entry per item of the model.
  std::vector<double> of_item;
  // One per device, in inventory (pipeline) order.
  std::vector<StageDevice> devices;
  // Whether stage costs (work / speed) are seconds.
  bool in_seconds = false;
};

// Polls `token` per item and device; its status when it fires.
absl::StatusOr<StageWork> ChooseStageWork(const StageModel& model, const DeviceList& devices,
                                          const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PIPELINE_STAGE_WORK_H_

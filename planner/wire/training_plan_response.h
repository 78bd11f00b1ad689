// The PlanTraining response, written from the stage search's plan
// (training/stage_search.h) and the problem it solved
// (training/training_chain.h) as a message.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const TrainingStagePlan plan,
//       PlanTrainingStages(problem.options.search, problem.chain, problem.devices, token));
//   PARTPLAN_RETURN_IF_ERROR(
//       TrainingPlanResponseFromPlan(graph, devices, problem, plan, token, &response));
//
// Stages name their first and last nodes and their device; every device has
// its memory (DeviceMemory) and idle share; the timeline lists every op, or
// the kMaxTimelineOps that start first (`timeline_truncated`). The cut
// reports evaluate the plan once more per inner cut and direction
// (EvaluateTrainingStages, same recompute choices): O(P v (n + P v B)), done
// only within kMaxCutMoveWork (else `cut_moves_omitted`; the bounds are in
// training/training_chain.h).
#ifndef PARTPLAN_PLANNER_WIRE_TRAINING_PLAN_RESPONSE_H_
#define PARTPLAN_PLANNER_WIRE_TRAINING_PLAN_RESPONSE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"
#include "planner/training/stage_search.h"
#include "planner/training/training_chain.h"

namespace partplan {

// Fills `*response` (which may live on an arena, and is cleared first).
// `devices` is the inventory `problem` was made from. Polls `token`; on
// error `*response` is unspecified.
absl::Status TrainingPlanResponseFromPlan(const CompactGraph& graph, const DeviceList& devices,
                                          const TrainingProblem& problem,
                                          const TrainingStagePlan& plan,
                                          const CancellationToken& token,
                                          v1::PlanTrainingResponse* response);

// How many of each device's first ops `TrainingPlan.timeline` holds: all of
// them when the step has at most `limit` ops, else the `limit` ops that
// start first (ties to the lower device), a prefix of each device's order
// since a device starts its ops in the order it runs them. O(limit log P).
absl::StatusOr<std::vector<int64_t>> TimelineOpsWritten(
    const std::vector<std::vector<PipelineOp>>& timeline, int64_t limit,
    const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_WIRE_TRAINING_PLAN_RESPONSE_H_

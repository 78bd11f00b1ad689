// The planner library's entry points: one function per PartitionPlanner RPC,
// from request message to response message. The server is a thin adapter
// around these; tests and benchmarks call them directly.
//
//   partplan::CancellationToken token(absl::Now() + absl::Seconds(10));
//   absl::StatusOr<partplan::v1::PartitionGraphResponse> response =
//       partplan::PartitionGraph(request, partplan::InputLimits(), token);
//   if (!response.ok()) {
//     // INVALID_ARGUMENT (with InvalidFieldPath), FAILED_PRECONDITION (no
//     // plan fits), CANCELLED, DEADLINE_EXCEEDED or UNIMPLEMENTED.
//   }
//
// Every function validates its input (see graph_import.h), never crashes on
// bad input, and stops with the token's status when it fires. None keeps
// state between calls; all are safe to call concurrently.
#ifndef PARTPLAN_PLANNER_ENTRY_POINTS_H_
#define PARTPLAN_PLANNER_ENTRY_POINTS_H_

#include "absl/status/statusor.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/cancellation.h"
#include "planner/limits.h"

namespace partplan {

absl::StatusOr<v1::PartitionGraphResponse> PartitionGraph(
    const v1::PartitionGraphRequest& request, const InputLimits& limits,
    const CancellationToken& token);

absl::StatusOr<v1::SplitGraphResponse> SplitGraph(
    const v1::SplitGraphRequest& request, const InputLimits& limits,
    const CancellationToken& token);

absl::StatusOr<v1::ShardGraphResponse> ShardGraph(
    const v1::ShardGraphRequest& request, const InputLimits& limits,
    const CancellationToken& token);

absl::StatusOr<v1::BuildPipelineGraphResponse> BuildPipelineGraph(
    const v1::BuildPipelineGraphRequest& request, const InputLimits& limits,
    const CancellationToken& token);

absl::StatusOr<v1::PlanDataParallelResponse> PlanDataParallel(
    const v1::PlanDataParallelRequest& request, const InputLimits& limits,
    const CancellationToken& token);

absl::StatusOr<v1::PlanResponse> Plan(const v1::PlanRequest& request,
                                      const InputLimits& limits,
                                      const CancellationToken& token);

absl::StatusOr<v1::ValidateResponse> Validate(const v1::ValidateRequest& request,
                                              const InputLimits& limits,
                                              const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_ENTRY_POINTS_H_

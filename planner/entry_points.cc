#include "planner/entry_points.h"

#include "absl/status/status.h"

namespace partplan {

// Placeholder bodies while the planners are being written; each is replaced
// by the real planner in its own commit.
absl::StatusOr<v1::PartitionGraphResponse> PartitionGraph(
    const v1::PartitionGraphRequest&, const InputLimits&, const CancellationToken&) {
  return absl::UnimplementedError("PartitionGraph is not implemented yet");
}
absl::StatusOr<v1::SplitGraphResponse> SplitGraph(const v1::SplitGraphRequest&,
                                                  const InputLimits&,
                                                  const CancellationToken&) {
  return absl::UnimplementedError("SplitGraph is not implemented yet");
}
absl::StatusOr<v1::ShardGraphResponse> ShardGraph(const v1::ShardGraphRequest&,
                                                  const InputLimits&,
                                                  const CancellationToken&) {
  return absl::UnimplementedError("ShardGraph is not implemented yet");
}
absl::StatusOr<v1::BuildPipelineGraphResponse> BuildPipelineGraph(
    const v1::BuildPipelineGraphRequest&, const InputLimits&, const CancellationToken&) {
  return absl::UnimplementedError("BuildPipelineGraph is not implemented yet");
}
absl::StatusOr<v1::PlanDataParallelResponse> PlanDataParallel(
    const v1::PlanDataParallelRequest&, const InputLimits&, const CancellationToken&) {
  return absl::UnimplementedError("PlanDataParallel is not implemented yet");
}
absl::StatusOr<v1::PlanResponse> Plan(const v1::PlanRequest&, const InputLimits&,
                                      const CancellationToken&) {
  return absl::UnimplementedError("Plan is not implemented yet");
}
absl::StatusOr<v1::ValidateResponse> Validate(const v1::ValidateRequest&,
                                              const InputLimits&,
                                              const CancellationToken&) {
  return absl::UnimplementedError("Validate is not implemented yet");
}

}  // namespace partplan

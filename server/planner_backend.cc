#include "server/planner_backend.h"

#include "planner/entry_points.h"

namespace partplan {
namespace {

class LibraryPlannerBackend final : public PlannerBackend {
 public:
  explicit LibraryPlannerBackend(const InputLimits& limits) : limits_(limits) {}

  absl::StatusOr<v1::PartitionGraphResponse> PartitionGraph(
      const v1::PartitionGraphRequest& request, const CancellationToken& token) override {
    return partplan::PartitionGraph(request, limits_, token);
  }
  absl::StatusOr<v1::SplitGraphResponse> SplitGraph(const v1::SplitGraphRequest& request,
                                                    const CancellationToken& token) override {
    return partplan::SplitGraph(request, limits_, token);
  }
  absl::StatusOr<v1::ShardGraphResponse> ShardGraph(const v1::ShardGraphRequest& request,
                                                    const CancellationToken& token) override {
    return partplan::ShardGraph(request, limits_, token);
  }
  absl::StatusOr<v1::BuildPipelineGraphResponse> BuildPipelineGraph(
      const v1::BuildPipelineGraphRequest& request, const CancellationToken& token) override {
    return partplan::BuildPipelineGraph(request, limits_, token);
  }
  absl::StatusOr<v1::PlanDataParallelResponse> PlanDataParallel(
      const v1::PlanDataParallelRequest& request, const CancellationToken& token) override {
    return partplan::PlanDataParallel(request, limits_, token);
  }
  absl::StatusOr<v1::PlanResponse> Plan(const v1::PlanRequest& request,
                                        const CancellationToken& token) override {
    return partplan::Plan(request, limits_, token);
  }
  absl::StatusOr<v1::ValidateResponse> Validate(const v1::ValidateRequest& request,
                                                const CancellationToken& token) override {
    return partplan::Validate(request, limits_, token);
  }

 private:
  const InputLimits limits_;
};

}  // namespace

std::unique_ptr<PlannerBackend> NewLibraryPlannerBackend(const InputLimits& limits) {
  return std::make_unique<LibraryPlannerBackend>(limits);
}

}  // namespace partplan

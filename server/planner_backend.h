// PlannerBackend: what the gRPC service calls to plan, one virtual per RPC.
//
// The service owns threading, deadlines and metrics; the backend only turns a
// request into a response, stopping when the token fires. Production uses
// NewLibraryPlannerBackend(), which calls the planner library
// (planner/entry_points.h) with the server's input limits; tests inject
// fakes that block, sleep or return canned responses:
//
//   std::unique_ptr<partplan::PlannerBackend> backend =
//       partplan::NewLibraryPlannerBackend(limits);
//   partplan::CancellationToken token(absl::Now() + absl::Seconds(5));
//   absl::StatusOr<partplan::v1::ValidateResponse> response =
//       backend->Validate(request, token);
//
// Implementations must be safe to call concurrently from many threads.
#ifndef PARTPLAN_SERVER_PLANNER_BACKEND_H_
#define PARTPLAN_SERVER_PLANNER_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/cancellation.h"
#include "planner/limits.h"

namespace partplan {

class PlannerBackend {
 public:
  virtual ~PlannerBackend() = default;

  virtual absl::StatusOr<v1::PartitionGraphResponse> PartitionGraph(
      const v1::PartitionGraphRequest& request, const CancellationToken& token) = 0;
  virtual absl::StatusOr<v1::SplitGraphResponse> SplitGraph(const v1::SplitGraphRequest& request,
                                                            const CancellationToken& token) = 0;
  virtual absl::StatusOr<v1::ShardGraphResponse> ShardGraph(const v1::ShardGraphRequest& request,
                                                            const CancellationToken& token) = 0;
  virtual absl::StatusOr<v1::BuildPipelineGraphResponse> BuildPipelineGraph(
      const v1::BuildPipelineGraphRequest& request, const CancellationToken& token) = 0;
  virtual absl::StatusOr<v1::PlanDataParallelResponse> PlanDataParallel(
      const v1::PlanDataParallelRequest& request, const CancellationToken& token) = 0;
  virtual absl::StatusOr<v1::PlanResponse> Plan(const v1::PlanRequest& request,
                                                const CancellationToken& token) = 0;
  virtual absl::StatusOr<v1::ValidateResponse> Validate(const v1::ValidateRequest& request,
                                                        const CancellationToken& token) = 0;
};

// The planner library's entry points, each called with `limits`.
std::unique_ptr<PlannerBackend> NewLibraryPlannerBackend(const InputLimits& limits);

}  // namespace partplan

#endif  // PARTPLAN_SERVER_PLANNER_BACKEND_H_

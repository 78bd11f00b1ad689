// PlannerService: partplan.v1.PartitionPlanner on gRPC's callback API.
//
// A handler does no work on gRPC's threads: it creates the call's
// cancellation token (with the call's deadline), queues the planning on the
// bounded planner pool and returns a reactor. A planner thread runs the
// backend and finishes the call. So:
//   - a full pool answers RESOURCE_EXHAUSTED at once, without planning;
//   - a client that cancels, a deadline that passes, or a server drain that
//     runs out of time (gRPC then cancels the calls left) fires the token,
//     and the planner stops;
//   - every call is counted in ServerMetrics and logged in one line with its
//     method, graph size, status code, duration and x-request-id;
//   - with an authenticator (auth.h), a call without an accepted bearer
//     token gets UNAUTHENTICATED before anything is queued;
//   - with a plan cache (plan_cache.h), a planning request seen before is
//     answered from it on the planner thread, without planning.
//
//   partplan::PlannerService service(*backend, pool, metrics);
//   grpc::ServerBuilder builder;
//   builder.RegisterService(&service);   // service must outlive the server
#ifndef PARTPLAN_SERVER_PLANNER_SERVICE_H_
#define PARTPLAN_SERVER_PLANNER_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "partplan/v1/planner_service.grpc.pb.h"
#include "planner/cancellation.h"
#include "server/arena_message_allocator.h"
#include "server/auth.h"
#include "server/bounded_thread_pool.h"
#include "server/metrics.h"
#include "server/plan_cache.h"
#include "server/planner_backend.h"
#include "server/planner_rpc.h"

namespace partplan {

class PlannerService final : public v1::PartitionPlanner::CallbackService {
 public:
  // All must outlive the service; `authenticator` may be null (no token
  // authentication), and so may `plan_cache` (no caching).
  // A call planning for `max_call_duration` from its arrival stops with
  // DEADLINE_EXCEEDED, whatever its own deadline.
  PlannerService(PlannerBackend& backend, BoundedThreadPool& pool, const ServerMetrics& metrics,
                 const TokenAuthenticator* authenticator = nullptr,
                 PlanCache* plan_cache = nullptr,
                 absl::Duration max_call_duration = absl::InfiniteDuration());

  grpc::ServerUnaryReactor* PartitionGraph(grpc::CallbackServerContext* context,
                                           const v1::PartitionGraphRequest* request,
                                           v1::PartitionGraphResponse* response) override;
  grpc::ServerUnaryReactor* SplitGraph(grpc::CallbackServerContext* context,
                                       const v1::SplitGraphRequest* request,
                                       v1::SplitGraphResponse* response) override;
  grpc::ServerUnaryReactor* ShardGraph(grpc::CallbackServerContext* context,
                                       const v1::ShardGraphRequest* request,
                                       v1::ShardGraphResponse* response) override;
  grpc::ServerUnaryReactor* BuildPipelineGraph(grpc::CallbackServerContext* context,
                                               const v1::BuildPipelineGraphRequest* request,
                                               v1::BuildPipelineGraphResponse* response) override;
  grpc::ServerUnaryReactor* PlanDataParallel(grpc::CallbackServerContext* context,
                                             const v1::PlanDataParallelRequest* request,
                                             v1::PlanDataParallelResponse* response) override;
  grpc::ServerUnaryReactor* Plan(grpc::CallbackServerContext* context,
                                 const v1::PlanRequest* request,
                                 v1::PlanResponse* response) override;
  grpc::ServerUnaryReactor* Validate(grpc::CallbackServerContext* context,
                                     const v1::ValidateRequest* request,
                                     v1::ValidateResponse* response) override;

 private:
  // A PlannerBackend method, e.g. &PlannerBackend::Validate.
  template <typename Request, typename Response>
  using BackendMethod = absl::Status (PlannerBackend::*)(const Request&, const CancellationToken&,
                                                         Response*);

  // The one handler behind every RPC above.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Handle(PlannerRpc rpc, BackendMethod<Request, Response> plan,
                                   grpc::CallbackServerContext* context, const Request* request,
                                   Response* response);

  // Every call's request and response live on an arena of its own.
  ArenaMessageAllocator<v1::PartitionGraphRequest, v1::PartitionGraphResponse>
      partition_graph_allocator_;
  ArenaMessageAllocator<v1::SplitGraphRequest, v1::SplitGraphResponse> split_graph_allocator_;
  ArenaMessageAllocator<v1::ShardGraphRequest, v1::ShardGraphResponse> shard_graph_allocator_;
  ArenaMessageAllocator<v1::BuildPipelineGraphRequest, v1::BuildPipelineGraphResponse>
      build_pipeline_graph_allocator_;
  ArenaMessageAllocator<v1::PlanDataParallelRequest, v1::PlanDataParallelResponse>
      plan_data_parallel_allocator_;
  ArenaMessageAllocator<v1::PlanRequest, v1::PlanResponse> plan_allocator_;
  ArenaMessageAllocator<v1::ValidateRequest, v1::ValidateResponse> validate_allocator_;

  PlannerBackend& backend_;
  BoundedThreadPool& pool_;
  const ServerMetrics& metrics_;
  const TokenAuthenticator* const authenticator_;
  PlanCache* const plan_cache_;
  const absl::Duration max_call_duration_;
};

}  // namespace partplan

#endif  // PARTPLAN_SERVER_PLANNER_SERVICE_H_

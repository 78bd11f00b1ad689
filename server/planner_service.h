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
//   - every RPC takes and answers raw bytes, read on the planner thread:
//     the request's fields but its graph parsed onto an arena of the call's
//     (call_arena.h), the graph imported from the bytes where gRPC put them
//     (planner/graph/serialized_request.h; a request that does not split that way
//     is parsed whole), so that:
//   - with a plan cache (plan_cache.h), a planning request whose bytes were
//     seen before is answered with the bytes of its first answer, without
//     being parsed;
//   - a request that does not parse gets INVALID_ARGUMENT, naming the
//     message it should have been.
//
//   partplan::PlannerService service(*backend, pool, metrics);
//   grpc::ServerBuilder builder;
//   builder.RegisterService(&service);   // service must outlive the server
#ifndef PARTPLAN_SERVER_PLANNER_SERVICE_H_
#define PARTPLAN_SERVER_PLANNER_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "partplan/v1/planner_service.grpc.pb.h"
#include "planner/base/cancellation.h"
#include "server/auth.h"
#include "server/bounded_thread_pool.h"
#include "server/metrics.h"
#include "server/plan_cache.h"
#include "server/planner_backend.h"
#include "server/planner_rpc.h"

namespace partplan {

class PlannerCall;  // one call in flight (planner_service.cc)

// partplan.v1.PartitionPlanner with every method on raw bytes.
using RawPlannerCallbackService = v1::PartitionPlanner::WithRawCallbackMethod_PartitionGraph<
    v1::PartitionPlanner::WithRawCallbackMethod_SplitGraph<
        v1::PartitionPlanner::WithRawCallbackMethod_ShardGraph<
            v1::PartitionPlanner::WithRawCallbackMethod_BuildPipelineGraph<
                v1::PartitionPlanner::WithRawCallbackMethod_PlanDataParallel<
                    v1::PartitionPlanner::WithRawCallbackMethod_Plan<
                        v1::PartitionPlanner::WithRawCallbackMethod_Validate<
                            v1::PartitionPlanner::Service>>>>>>>;

class PlannerService final : public RawPlannerCallbackService {
 public:
  // All must outlive the service; `authenticator` may be null (no token
  // authentication), and so may `plan_cache` (no caching).
  // A call planning for `max_call_duration` from its arrival stops with
  // DEADLINE_EXCEEDED, whatever its own deadline.
  PlannerService(PlannerBackend& backend, BoundedThreadPool& pool, const ServerMetrics& metrics,
                 const TokenAuthenticator* authenticator = nullptr, PlanCache* plan_cache = nullptr,
                 absl::Duration max_call_duration = absl::InfiniteDuration());

  grpc::ServerUnaryReactor* PartitionGraph(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SplitGraph(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ShardGraph(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* BuildPipelineGraph(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PlanDataParallel(grpc::CallbackServerContext* context,
                                             const grpc::ByteBuffer* request,
                                             grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Plan(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Validate(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;

 private:
  // A PlannerBackend method, e.g. &PlannerBackend::Validate.
  template <typename Request, typename Response>
  using BackendMethod = absl::Status (PlannerBackend::*)(const Request&, const GraphSource&,
                                                         const CancellationToken&, Response*);

  // The one handler behind every RPC above: `Request` and `Response` are
  // the RPC's messages.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Handle(PlannerRpc rpc, BackendMethod<Request, Response> plan,
                                   grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request, grpc::ByteBuffer* response);

  // Plans `request` with `plan` and serialises the response into
  // `*response`.
  template <typename Request, typename Response>
  absl::Status PlanAndSerialize(BackendMethod<Request, Response> plan, const Request& request,
                                const GraphSource& graph, PlannerCall& call,
                                grpc::ByteBuffer* response);

  // Answers the call on a planner thread: from the cache, or by reading,
  // planning and serialising into `response`.
  template <typename Request, typename Response>
  absl::Status Answer(PlannerRpc rpc, BackendMethod<Request, Response> plan, PlannerCall& call,
                      grpc::ByteBuffer* request, grpc::ByteBuffer* response);

  PlannerBackend& backend_;
  BoundedThreadPool& pool_;
  const ServerMetrics& metrics_;
  const TokenAuthenticator* const authenticator_;
  PlanCache* const plan_cache_;
  const absl::Duration max_call_duration_;
};

}  // namespace partplan

#endif  // PARTPLAN_SERVER_PLANNER_SERVICE_H_

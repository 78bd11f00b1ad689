// PlannerService: partplan.v1.PartitionPlanner on gRPC's callback API, one
// raw-bytes handler per row of the RPC table (planner/api/planner_rpcs.h), so
// that a new row is served, counted and logged with no code here.
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
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/impl/service_type.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/api/planner_rpcs.h"
#include "planner/base/cancellation.h"
#include "server/auth.h"
#include "server/bounded_thread_pool.h"
#include "server/metrics.h"
#include "server/plan_cache.h"
#include "server/planner_backend.h"
#include "server/planner_call.h"

namespace partplan {

class PlannerService final : public grpc::Service {
 public:
  // All must outlive the service; `authenticator` may be null (no token
  // authentication), and so may `plan_cache` (no caching).
  // A call planning for `max_call_duration` from its arrival stops with
  // DEADLINE_EXCEEDED, whatever its own deadline.
  PlannerService(PlannerBackend& backend, BoundedThreadPool& pool, const ServerMetrics& metrics,
                 const TokenAuthenticator* authenticator = nullptr, PlanCache* plan_cache = nullptr,
                 absl::Duration max_call_duration = absl::InfiniteDuration());

  // Queues `call`, whose request is whole in `*request`, on the planner pool
  // (or completes it at once with RESOURCE_EXHAUSTED or UNAVAILABLE). A
  // planner thread answers it, from the cache or by planning, into
  // `*response` and Complete()s the call. Both buffers must live as long as
  // the call. Authentication is the caller's.
  void Queue(PlannerCall* call, grpc::ByteBuffer* request, grpc::ByteBuffer* response);

  // What a transport needs to make a PlannerCall of this service.
  const ServerMetrics& metrics() const { return metrics_; }
  absl::Duration max_call_duration() const { return max_call_duration_; }

 private:
  // The one handler behind every row: checks the token, queues the call.
  grpc::ServerUnaryReactor* Handle(const PlannerRpcMethod& rpc,
                                   grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request, grpc::ByteBuffer* response);

  // Answers the call on a planner thread: from the cache, or by reading,
  // planning and serialising into `response`.
  absl::Status Answer(const PlannerRpcMethod& rpc, PlannerCall& call, grpc::ByteBuffer* request,
                      grpc::ByteBuffer* response);

  PlannerBackend& backend_;
  BoundedThreadPool& pool_;
  const ServerMetrics& metrics_;
  const TokenAuthenticator* const authenticator_;
  PlanCache* const plan_cache_;
  const absl::Duration max_call_duration_;
  // "/partplan.v1.PartitionPlanner/<name>" per row: gRPC keeps pointers to
  // them.
  std::vector<std::string> method_paths_;
};

}  // namespace partplan

#endif  // PARTPLAN_SERVER_PLANNER_SERVICE_H_

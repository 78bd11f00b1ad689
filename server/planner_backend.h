// PlannerBackend: what the gRPC service calls to plan, one virtual per RPC.
//
// The service owns threading, deadlines and metrics; the backend only turns a
// request into a response, stopping when the token fires. Production uses
// NewLibraryPlannerBackend(), which calls the planner library
// (planner/api/entry_points.h) with the server's input limits; tests inject
// fakes that block, sleep or return canned responses:
//
//   std::unique_ptr<partplan::PlannerBackend> backend =
//       partplan::NewLibraryPlannerBackend(limits);
//   partplan::CancellationToken token(absl::Now() + absl::Seconds(5));
//   partplan::v1::ValidateResponse response;
//   absl::Status status = backend->Validate(request, request.graph(), token, &response);
//
// Each method takes the request's graph apart from the request: the service
// passes the graph's bytes as received and the request's other fields
// parsed (planner/graph/serialized_request.h), so a large graph is never parsed
// into messages. Each fills `*response`, which the service created on the call's arena
// and serialises straight from there, so a plan is never copied; but the
// service answers PartitionGraph, Plan, SplitGraph and ShardGraph through
// their *Serialized methods, which return the response's bytes (the
// library's write them without building the response as messages).
//
// Implementations must be safe to call concurrently from many threads.
#ifndef PARTPLAN_SERVER_PLANNER_BACKEND_H_
#define PARTPLAN_SERVER_PLANNER_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/base/limits.h"
#include "planner/graph/graph_import.h"

namespace partplan {

class PlannerBackend {
 public:
  virtual ~PlannerBackend() = default;

  virtual absl::Status PartitionGraph(const v1::PartitionGraphRequest& request,
                                      const GraphSource& graph, const CancellationToken& token,
                                      v1::PartitionGraphResponse* response) = 0;
  // PartitionGraph's response serialised, which the service sends as it
  // is. This default serialises what PartitionGraph fills; the library's
  // backend writes a plan by name straight from the graph's names
  // (PartitionGraphSerialized in planner/api/entry_points.h).
  virtual absl::Status PartitionGraphSerialized(const v1::PartitionGraphRequest& request,
                                                const GraphSource& graph,
                                                const CancellationToken& token,
                                                absl::Cord* response_bytes);
  virtual absl::Status SplitGraph(const v1::SplitGraphRequest& request, const GraphSource& graph,
                                  const CancellationToken& token,
                                  v1::SplitGraphResponse* response) = 0;
  // SplitGraph's response serialised (SplitGraphSerialized in
  // planner/api/entry_points.h).
  virtual absl::Status SplitGraphSerialized(const v1::SplitGraphRequest& request,
                                            const GraphSource& graph,
                                            const CancellationToken& token,
                                            absl::Cord* response_bytes);
  virtual absl::Status ShardGraph(const v1::ShardGraphRequest& request, const GraphSource& graph,
                                  const CancellationToken& token,
                                  v1::ShardGraphResponse* response) = 0;
  // ShardGraph's response serialised (ShardGraphSerialized in
  // planner/api/entry_points.h).
  virtual absl::Status ShardGraphSerialized(const v1::ShardGraphRequest& request,
                                            const GraphSource& graph,
                                            const CancellationToken& token,
                                            absl::Cord* response_bytes);
  virtual absl::Status BuildPipelineGraph(const v1::BuildPipelineGraphRequest& request,
                                          const GraphSource& graph, const CancellationToken& token,
                                          v1::BuildPipelineGraphResponse* response) = 0;
  virtual absl::Status PlanDataParallel(const v1::PlanDataParallelRequest& request,
                                        const GraphSource& graph, const CancellationToken& token,
                                        v1::PlanDataParallelResponse* response) = 0;
  virtual absl::Status Plan(const v1::PlanRequest& request, const GraphSource& graph,
                            const CancellationToken& token, v1::PlanResponse* response) = 0;
  // Plan's response serialised, as PartitionGraphSerialized is
  // PartitionGraph's (PlanSerialized in planner/api/entry_points.h).
  virtual absl::Status PlanSerialized(const v1::PlanRequest& request, const GraphSource& graph,
                                      const CancellationToken& token, absl::Cord* response_bytes);
  virtual absl::Status Validate(const v1::ValidateRequest& request, const GraphSource& graph,
                                const CancellationToken& token, v1::ValidateResponse* response) = 0;
};

// The planner library's entry points, each called with `limits`.
std::unique_ptr<PlannerBackend> NewLibraryPlannerBackend(const InputLimits& limits);

}  // namespace partplan

#endif  // PARTPLAN_SERVER_PLANNER_BACKEND_H_

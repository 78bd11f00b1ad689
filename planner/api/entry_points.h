// The planner library's entry points: one function per PartitionPlanner RPC,
// from request message to response message. The server is a thin adapter
// around these; tests and benchmarks call them directly.
//
//   partplan::CancellationToken token(absl::Now() + absl::Seconds(10));
//   partplan::v1::PartitionGraphResponse response;
//   absl::Status status =
//       partplan::PartitionGraph(request, partplan::InputLimits(), token, &response);
//   if (!status.ok()) {
//     // INVALID_ARGUMENT (with InvalidFieldPath), FAILED_PRECONDITION (no
//     // plan fits), CANCELLED, DEADLINE_EXCEEDED or UNIMPLEMENTED.
//   }
//
// Every function validates its input (see graph_import.h), never crashes on
// bad input, and stops with the token's status when it fires. None keeps
// state between calls; all are safe to call concurrently.
#ifndef PARTPLAN_PLANNER_API_ENTRY_POINTS_H_
#define PARTPLAN_PLANNER_API_ENTRY_POINTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/base/limits.h"
#include "planner/graph/graph_import.h"

namespace partplan {

// Each entry point fills `*response` (which may live on an arena) and
// returns OK, or returns the error and leaves `*response` unspecified. The
// server calls them through the table of RPCs (planner_rpcs.h), which runs
// the *Serialized entry points below for PartitionGraph, Plan, SplitGraph and
// ShardGraph: they write the response's bytes, a plan by name straight from
// the graph's names. The message-filling PartitionGraph and Plan parse those
// bytes, so that a plan has one writer.
//
// Each takes the request's graph as a GraphSource (graph_import.h): the
// server passes the graph's bytes as received (serialized_request.h) and the
// request's other fields parsed, so that no protobuf tree of a large graph
// is built; request.graph() is then not read. The overloads without one
// read request.graph().

absl::Status PartitionGraph(const v1::PartitionGraphRequest& request, const GraphSource& graph,
                            const InputLimits& limits, const CancellationToken& token,
                            v1::PartitionGraphResponse* response);

// PartitionGraph with its response serialised into `*response_bytes` (in
// pieces, which gRPC sends as slices), as the server sends it. A plan by name
// is planned by node index and its names written straight from the graph
// (wire/plan_with_names.h), which costs far less than a message and a string
// per name.
absl::Status PartitionGraphSerialized(const v1::PartitionGraphRequest& request,
                                      const GraphSource& graph, const InputLimits& limits,
                                      const CancellationToken& token, absl::Cord* response_bytes);

absl::Status SplitGraph(const v1::SplitGraphRequest& request, const GraphSource& graph,
                        const InputLimits& limits, const CancellationToken& token,
                        v1::SplitGraphResponse* response);

// SplitGraph with its response serialised, as the server sends it: written
// as bytes without building the response as messages (wire/split_graph_response.h).
absl::Status SplitGraphSerialized(const v1::SplitGraphRequest& request, const GraphSource& graph,
                                  const InputLimits& limits, const CancellationToken& token,
                                  absl::Cord* response_bytes);

absl::Status ShardGraph(const v1::ShardGraphRequest& request, const GraphSource& graph,
                        const InputLimits& limits, const CancellationToken& token,
                        v1::ShardGraphResponse* response);

// ShardGraph with its response serialised, as PartitionGraphSerialized does
// PartitionGraph's: a plan by name is planned by node index and its names
// written straight from the graph.
absl::Status ShardGraphSerialized(const v1::ShardGraphRequest& request, const GraphSource& graph,
                                  const InputLimits& limits, const CancellationToken& token,
                                  absl::Cord* response_bytes);

absl::Status BuildPipelineGraph(const v1::BuildPipelineGraphRequest& request,
                                const GraphSource& graph, const InputLimits& limits,
                                const CancellationToken& token,
                                v1::BuildPipelineGraphResponse* response);

// Reads every node's argument values and shapes many times over, so it
// parses a serialised graph into messages first.
absl::Status PlanDataParallel(const v1::PlanDataParallelRequest& request, const GraphSource& graph,
                              const InputLimits& limits, const CancellationToken& token,
                              v1::PlanDataParallelResponse* response);

absl::Status Plan(const v1::PlanRequest& request, const GraphSource& graph,
                  const InputLimits& limits, const CancellationToken& token,
                  v1::PlanResponse* response);

// Plan with its response serialised, as PartitionGraphSerialized does
// PartitionGraph's: the two responses hold their plan alike, whichever
// planner (a partitioner or a shard planner) made it.
absl::Status PlanSerialized(const v1::PlanRequest& request, const GraphSource& graph,
                            const InputLimits& limits, const CancellationToken& token,
                            absl::Cord* response_bytes);

absl::Status Validate(const v1::ValidateRequest& request, const GraphSource& graph,
                      const InputLimits& limits, const CancellationToken& token,
                      v1::ValidateResponse* response);

// Pipeline stages for a training step (training.proto): the graph and the
// inventory imported, the TrainingConfig validated (training_chain.h), the
// exact stage search run (stage_search.h) and its plan written with a report
// per cut (wire/training_plan_response.h). FAILED_PRECONDITION when no plan
// fits the devices' memory or meets the pins.
absl::Status PlanTraining(const v1::PlanTrainingRequest& request, const GraphSource& graph,
                          const InputLimits& limits, const CancellationToken& token,
                          v1::PlanTrainingResponse* response);

// Parallel configurations of a model on a cluster (parallelize.proto): the
// graph imported when there is one, the request validated
// (parallelize/parallelize_problem.h), the lattice searched
// (parallelize/parallel_search.h) and the ranked configurations written
// (wire/parallelize_response.h). FAILED_PRECONDITION when no configuration
// fits or the lattice is too large.
absl::Status Parallelize(const v1::ParallelizeRequest& request, const GraphSource& graph,
                         const InputLimits& limits, const CancellationToken& token,
                         v1::ParallelizeResponse* response);

#define PARTPLAN_PARSED_GRAPH_ENTRY_POINT_(Name, Request, Response)                  \
  inline absl::Status Name(const v1::Request& request, const InputLimits& limits,    \
                           const CancellationToken& token, v1::Response* response) { \
    return Name(request, request.graph(), limits, token, response);                  \
  }
PARTPLAN_PARSED_GRAPH_ENTRY_POINT_(PartitionGraph, PartitionGraphRequest, PartitionGraphResponse)
PARTPLAN_PARSED_GRAPH_ENTRY_POINT_(SplitGraph, SplitGraphRequest, SplitGraphResponse)
PARTPLAN_PARSED_GRAPH_ENTRY_POINT_(ShardGraph, ShardGraphRequest, ShardGraphResponse)
PARTPLAN_PARSED_GRAPH_ENTRY_POINT_(BuildPipelineGraph, BuildPipelineGraphRequest,
                                   BuildPipelineGraphResponse)
PARTPLAN_PARSED_GRAPH_ENTRY_POINT_(PlanDataParallel, PlanDataParallelRequest,
                                   PlanDataParallelResponse)
PARTPLAN_PARSED_GRAPH_ENTRY_POINT_(Plan, PlanRequest, PlanResponse)
PARTPLAN_PARSED_GRAPH_ENTRY_POINT_(Validate, ValidateRequest, ValidateResponse)
PARTPLAN_PARSED_GRAPH_ENTRY_POINT_(PlanTraining, PlanTrainingRequest, PlanTrainingResponse)
PARTPLAN_PARSED_GRAPH_ENTRY_POINT_(Parallelize, ParallelizeRequest, ParallelizeResponse)
#undef PARTPLAN_PARSED_GRAPH_ENTRY_POINT_

// The same, returning the response by value (for tests and tools):
//   absl::StatusOr<v1::ValidateResponse> r = partplan::Validate(request, limits, token);
template <typename Request, typename Response>
absl::StatusOr<Response> CallReturning(
    absl::Status (*entry_point)(const Request&, const InputLimits&, const CancellationToken&,
                                Response*),
    const Request& request, const InputLimits& limits, const CancellationToken& token) {
  Response response;
  absl::Status status = entry_point(request, limits, token, &response);
  if (!status.ok()) return status;
  return response;
}

#define PARTPLAN_RETURNING_ENTRY_POINT_(Name, Request, Response)                           \
  inline absl::StatusOr<v1::Response> Name(const v1::Request& request,                    \
                                           const InputLimits& limits,                     \
                                           const CancellationToken& token) {              \
    return CallReturning<v1::Request, v1::Response>(&Name, request, limits, token);      \
  }
PARTPLAN_RETURNING_ENTRY_POINT_(PartitionGraph, PartitionGraphRequest, PartitionGraphResponse)
PARTPLAN_RETURNING_ENTRY_POINT_(SplitGraph, SplitGraphRequest, SplitGraphResponse)
PARTPLAN_RETURNING_ENTRY_POINT_(ShardGraph, ShardGraphRequest, ShardGraphResponse)
PARTPLAN_RETURNING_ENTRY_POINT_(BuildPipelineGraph, BuildPipelineGraphRequest,
                                BuildPipelineGraphResponse)
PARTPLAN_RETURNING_ENTRY_POINT_(PlanDataParallel, PlanDataParallelRequest,
                                PlanDataParallelResponse)
PARTPLAN_RETURNING_ENTRY_POINT_(Plan, PlanRequest, PlanResponse)
PARTPLAN_RETURNING_ENTRY_POINT_(Validate, ValidateRequest, ValidateResponse)
PARTPLAN_RETURNING_ENTRY_POINT_(PlanTraining, PlanTrainingRequest, PlanTrainingResponse)
PARTPLAN_RETURNING_ENTRY_POINT_(Parallelize, ParallelizeRequest, ParallelizeResponse)
#undef PARTPLAN_RETURNING_ENTRY_POINT_

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_API_ENTRY_POINTS_H_

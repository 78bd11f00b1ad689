// The BuildPipelineGraph response, written from a PipelineGraph
// (pipeline/pipeline_graph.h) as a message.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const PipelineGraph pipeline,
//                             BuildPipelineGraphPlan(graph, workers, token));
//   PARTPLAN_RETURN_IF_ERROR(
//       PipelineGraphResponseFromPlan(graph, pipeline, workers, token, &response));
//
// Each module is named by its node's name, with its target and the worker
// `workers[module.worker]` names; each value is a PipelineInput.
#ifndef PARTPLAN_PLANNER_WIRE_PIPELINE_GRAPH_RESPONSE_H_
#define PARTPLAN_PLANNER_WIRE_PIPELINE_GRAPH_RESPONSE_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"
#include "planner/pipeline/pipeline_graph.h"

namespace partplan {

// Fills `*response` (which may live on an arena, and is cleared first);
// `workers` are those the pipeline was built with. Polls `token` by the
// modules and values it writes; on error `*response` is unspecified.
absl::Status PipelineGraphResponseFromPlan(const CompactGraph& graph,
                                           const PipelineGraph& pipeline,
                                           absl::Span<const PipelineWorker> workers,
                                           const CancellationToken& token,
                                           v1::BuildPipelineGraphResponse* response);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_WIRE_PIPELINE_GRAPH_RESPONSE_H_

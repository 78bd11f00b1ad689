// BuildPipelineGraphPlan: the BuildPipelineGraph RPC -- fairscale's
// distributed pipeline graph (`GraphCreator.create_graph` in
// fairscale/experimental/nn/distributed_pipeline/trace.py) from a traced
// graph of pipeline modules, in O(nodes + argument values + workers).
//
//   PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph,
//                             ImportGraph(request.graph(), limits, token));
//   PARTPLAN_RETURN_IF_ERROR(BuildPipelineGraphPlan(graph, request, token, &response));
//
// The graph may hold only
//   - placeholders: the i-th placeholder is forward() argument i;
//   - call_module nodes, the pipeline modules (fairscale's RemoteModules),
//     whose arguments are positional, each one node: a placeholder, a
//     module, or a getitem of one;
//   - getitem nodes (call_function `operator.getitem`) taking element i, a
//     non-negative integer constant, of a module's output;
//   - the output.
// Any other node is INVALID_ARGUMENT naming it (`graph.nodes[i].op` or
// `.target`), as is any other argument (`graph.nodes[i].args[k]`,
// `.kwargs[k]`). Every module target needs exactly one entry in `workers`,
// and every entry a module: otherwise INVALID_ARGUMENT on `workers`.
//
// The response lists the modules in graph order: node, target, worker, the
// source of each argument (forward input i, a module's output, or element
// i of it) and the output cardinality, as fairscale computes it from the
// modules' arguments: 0 (fairscale's None) for a single tensor, or one
// more than the largest element index modules read. A module whose output
// modules read both whole and by element is INVALID_ARGUMENT (fairscale
// asserts). `outputs` lists the sources of the values the graph returns,
// flattened in order (constants left out); as in fairscale, they do not
// change a cardinality.
//
// Deliberate differences from fairscale (commit 146f1602):
//   - Every call_module node is a pipeline module of its own. fairscale
//     keys modules by object, so a module called twice shares one
//     cardinality and `_find_node` resolves every reference to its first
//     call: the second call's readers would get the first call's output.
//   - A keyword, list or constant argument of a module is INVALID_ARGUMENT;
//     fairscale drops keyword arguments silently and fails with a Python
//     exception on the others.
//   - References resolve by id in O(1); fairscale scans its node list for
//     every one.
#ifndef PARTPLAN_PLANNER_PIPELINE_PIPELINE_GRAPH_H_
#define PARTPLAN_PLANNER_PIPELINE_PIPELINE_GRAPH_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"

namespace partplan {

// Fills `*response` (which may live on an arena); on error `*response` is
// unspecified.
absl::Status BuildPipelineGraphPlan(const CompactGraph& graph,
                                    const v1::BuildPipelineGraphRequest& request,
                                    const CancellationToken& token,
                                    v1::BuildPipelineGraphResponse* response);

// The same, returning the response.
absl::StatusOr<v1::BuildPipelineGraphResponse> BuildPipelineGraphPlan(
    const CompactGraph& graph, const v1::BuildPipelineGraphRequest& request,
    const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PIPELINE_PIPELINE_GRAPH_H_

// BuildPipelineGraphPlan: the BuildPipelineGraph RPC's planner --
// fairscale's distributed pipeline graph (`GraphCreator.create_graph` in
// fairscale/experimental/nn/distributed_pipeline/trace.py) from a traced
// graph of pipeline modules, in O(nodes + argument values + workers).
//
//   PARTPLAN_ASSIGN_OR_RETURN(const std::vector<PipelineWorker> workers,
//                             PipelineWorkersFromRequest(request, token));
//   PARTPLAN_ASSIGN_OR_RETURN(const PipelineGraph pipeline,
//                             BuildPipelineGraphPlan(graph, workers, token));
//   for (const PipelineModuleCall& module : pipeline.modules) module.node;
//
// wire/pipeline_graph_response.h writes the response message from a
// PipelineGraph.
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
// and every entry a module: otherwise INVALID_ARGUMENT on `workers` (worker
// i is the request's `workers[i]`).
//
// The result lists the modules in graph order: node, target, worker, the
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

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"
#include "planner/graph/name_index.h"

namespace partplan {

// A request's ModuleWorker: the module `target` runs on `worker`. Views, into
// the request, that must outlive the call.
struct PipelineWorker {
  absl::string_view target;
  absl::string_view worker;
};

// The request's workers, as views into it; the token's status when it
// fires. BuildPipelineGraphPlan checks them.
absl::StatusOr<std::vector<PipelineWorker>> PipelineWorkersFromRequest(
    const v1::BuildPipelineGraphRequest& request, const CancellationToken& token);

// What a value a module reads, or the graph returns, is: forward() input
// `index`, or module `index`'s output, or its element `output_index`.
struct PipelineValue {
  enum class Kind : int8_t { kNone, kForwardInput, kModuleOutput };
  Kind kind = Kind::kNone;
  int32_t index = 0;
  int32_t output_index = -1;  // -1 for the whole output

  bool is_module_output() const { return kind == Kind::kModuleOutput; }
  bool is_element() const { return output_index >= 0; }
};

// One pipeline module: a call_module node.
struct PipelineModuleCall {
  NodeId node = -1;
  int32_t worker = -1;  // index into the workers given
  // Its arguments: PipelineGraph::module_inputs[inputs_begin, inputs_end).
  int32_t inputs_begin = 0;
  int32_t inputs_end = 0;
  // 0 for a single tensor, else one more than the largest element read.
  int32_t output_count = 0;
};

struct PipelineGraph {
  std::vector<PipelineModuleCall> modules;  // in graph order
  // Module m's target is targets[m].
  StringPool targets;
  // Every module's arguments, one module after another.
  std::vector<PipelineValue> module_inputs;
  // The graph output's node arguments, in order.
  std::vector<PipelineValue> outputs;
};

absl::StatusOr<PipelineGraph> BuildPipelineGraphPlan(const CompactGraph& graph,
                                                     absl::Span<const PipelineWorker> workers,
                                                     const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PIPELINE_PIPELINE_GRAPH_H_

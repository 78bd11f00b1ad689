// ImportGraph: validates a v1::Graph and builds its CompactGraph.
//
//   absl::StatusOr<CompactGraph> graph =
//       ImportGraph(request.graph(), limits, token, "graph");
//
// Every problem is INVALID_ARGUMENT naming the field (status_util.h), e.g.
//   graph.nodes[7].args[2]: refers to node 'fc3' defined later (nodes[9]);
//   nodes must be in topological order
// The checks: a non-empty node list within InputLimits; unique non-empty
// names; a known op; every reference to an earlier node; well-formed flat
// argument encodings (list/tuple lengths, one value per kwarg); exactly one
// OUTPUT node, last; sizes, parameter counts, latencies and FLOPs
// non-negative and finite, output size not above total size; shapes
// non-negative with a known dtype wherever sizes are derived from them; no
// overflow in any sum. Runs in O(nodes + argument values).
#ifndef PARTPLAN_PLANNER_GRAPH_IMPORT_H_
#define PARTPLAN_PLANNER_GRAPH_IMPORT_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "partplan/v1/graph.pb.h"
#include "planner/cancellation.h"
#include "planner/graph.h"
#include "planner/limits.h"

namespace partplan {

// `field` is the request's path to `graph`, used as the prefix of error
// fields. `graph` must outlive the result.
absl::StatusOr<CompactGraph> ImportGraph(const v1::Graph& graph,
                                         const InputLimits& limits,
                                         const CancellationToken& token,
                                         absl::string_view field = "graph");

// Bytes per element of a torch dtype name (`torch.float32`, `float32`,
// `torch.long`, ...); 0 when unknown.
int64_t DtypeElementBytes(absl::string_view dtype);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_GRAPH_IMPORT_H_

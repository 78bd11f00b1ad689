// ImportGraph: validates a v1::Graph and builds its CompactGraph, from the
// parsed message or straight from its serialised bytes.
//
//   absl::StatusOr<CompactGraph> graph =
//       ImportGraph(request.graph(), limits, token, "graph");
//   // The server's way: no protobuf tree of the graph is ever built.
//   absl::StatusOr<CompactGraph> graph =
//       ImportGraph(GraphSource::Serialized(graph_bytes), limits, token);
//
// Every problem is INVALID_ARGUMENT naming the field (status_util.h), e.g.
//   graph.nodes[7].args[2]: refers to node 'fc3' defined later (nodes[9]);
//   nodes must be in topological order
// The checks: a non-empty node list within InputLimits; unique non-empty
// names; a known op; every reference to an earlier node; well-formed flat
// argument encodings (list/tuple lengths, one value per kwarg); exactly one
// OUTPUT node, last; sizes, parameter counts, latencies and FLOPs
// non-negative and finite, output size not above total size; a node's
// training costs (NodeTraining: backward seconds and FLOPs, input and weight
// gradient, non-negative and finite; saved_activation_bytes non-negative,
// named graph.nodes[i].training.<field>); shapes non-negative with a known
// dtype wherever sizes are derived from them; no overflow in any sum. Runs
// in O(nodes + argument values).
//
// Both sources give the same graph and the same errors for the same graph.
// The serialised one parses one node at a time into a reused message, so
// that a large graph costs its bytes plus the compact form, where the parsed
// tree costs about five times its bytes and most of the import's time in
// allocation and cache misses. A node whose bytes do not parse is
// INVALID_ARGUMENT on graph.nodes[i].
#ifndef PARTPLAN_PLANNER_GRAPH_GRAPH_IMPORT_H_
#define PARTPLAN_PLANNER_GRAPH_GRAPH_IMPORT_H_

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "partplan/v1/graph.pb.h"
#include "planner/base/cancellation.h"
#include "planner/base/limits.h"
#include "planner/graph/graph.h"
#include "planner/graph/serialized_request.h"

namespace partplan {

// Where ImportGraph reads the graph from: a parsed v1::Graph, or the
// serialised bytes of one, whole or in pieces (e.g. the graph field of a
// request as received, see serialized_request.h). Either must outlive the
// imported graph, which points into it.
class GraphSource {
 public:
  // Implicit, so that a message's graph() can be passed as is.
  GraphSource(const v1::Graph& parsed) : parsed_(&parsed) {}  // NOLINT
  static GraphSource Serialized(ChunkedBytes bytes) { return GraphSource(std::move(bytes)); }

  // The parsed graph, or null for a serialised one.
  const v1::Graph* parsed() const { return parsed_; }
  // The serialised graph's bytes (empty for a parsed one).
  const ChunkedBytes& serialized() const { return serialized_; }

  // Where ImportGraph writes how many nodes the graph holds, once it has
  // found them and before it checks them; null (the default): nowhere. For
  // a caller that reports the size of what it was sent (the server's metrics
  // and logs) without reading a large graph's bytes once more for it. The
  // count must outlive every ImportGraph call made with this source.
  void set_node_count_out(int64_t* count) { node_count_out_ = count; }
  int64_t* node_count_out() const { return node_count_out_; }

 private:
  explicit GraphSource(ChunkedBytes bytes) : serialized_(std::move(bytes)) {}

  const v1::Graph* parsed_ = nullptr;
  ChunkedBytes serialized_;
  int64_t* node_count_out_ = nullptr;
};

// `field` is the request's path to `graph`, used as the prefix of error
// fields. `graph` must outlive the result.
absl::StatusOr<CompactGraph> ImportGraph(const GraphSource& graph, const InputLimits& limits,
                                         const CancellationToken& token,
                                         absl::string_view field = "graph");

// Bytes per element of a torch dtype name (`torch.float32`, `float32`,
// `torch.long`, ...); 0 when unknown.
int64_t DtypeElementBytes(absl::string_view dtype);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_GRAPH_GRAPH_IMPORT_H_

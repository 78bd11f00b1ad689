// The SplitGraph response, written from a GraphSplit (split/split_graph.h):
// as the bytes the server sends, or as a message.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const GraphSplit split,
//                             SplitGraphPlan(graph, partition_of, keep_original_order, token));
//   absl::Cord bytes;
//   PARTPLAN_RETURN_IF_ERROR(SerializeSplitGraphResponse(graph, split, token, &bytes));
//
// The submodules in construction order, each with its nodes, inputs and
// outputs by name and the submodules it depends on and its dependents; the
// split module's top-level calls; the qualname_map; the output values. The
// bytes are protobuf's serialisation of the message SplitGraphResponseFromPlan
// fills, byte for byte (fields in number order, empty singular strings left
// out), so that the plan cache, tests and clients cannot tell the two apart.
#ifndef PARTPLAN_PLANNER_WIRE_SPLIT_GRAPH_RESPONSE_H_
#define PARTPLAN_PLANNER_WIRE_SPLIT_GRAPH_RESPONSE_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"
#include "planner/split/split_graph.h"
#include "planner/wire/wire_writer.h"

namespace partplan {

// Writes the serialised response into `*bytes` (replacing what it held), in
// pieces of about `piece_bytes` that gRPC sends as slices, without building
// it as messages (a string per node, on a large graph most of the time and
// heap). Polls `token` by the names it passes over.
absl::Status SerializeSplitGraphResponse(const CompactGraph& graph, const GraphSplit& split,
                                         const CancellationToken& token, absl::Cord* bytes,
                                         size_t piece_bytes = kResponsePieceBytes);

// Fills `*response` (which may live on an arena, and is cleared first) with
// the same response as a message, built from the struct. Polls `token` by
// the names it passes over; on error `*response` is unspecified.
absl::Status SplitGraphResponseFromPlan(const CompactGraph& graph, const GraphSplit& split,
                                        const CancellationToken& token,
                                        v1::SplitGraphResponse* response);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_WIRE_SPLIT_GRAPH_RESPONSE_H_

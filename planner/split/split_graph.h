// SplitGraphPlan: the SplitGraph RPC, torch.fx's split_module from a
// caller's node -> partition assignment.
//
// Validates the assignment (every call_* node exactly once; no other node;
// known names), then returns the submodules with their nodes, ordered inputs
// and outputs, the submodules each depends on and its dependents, the
// split module's top-level calls with split_module's own node names, its
// qualname_map and the values its output returns. A cycle between
// partitions is INVALID_ARGUMENT on `assignments`, naming the partitions.
//
//   PARTPLAN_RETURN_IF_ERROR(SplitGraphPlan(graph, request, token, &response));
//
// O(nodes + edges).
#ifndef PARTPLAN_PLANNER_SPLIT_SPLIT_GRAPH_H_
#define PARTPLAN_PLANNER_SPLIT_SPLIT_GRAPH_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"
#include "planner/wire/wire_writer.h"

namespace partplan {

// Writes the serialised response into `*response_bytes` (replacing what it
// held), in pieces of about `piece_bytes` that gRPC sends as slices: the
// bytes protobuf would make of the response, written without building it
// as messages (a string per node, at 10^6 nodes most of the time and heap).
absl::Status SplitGraphSerializedPlan(const CompactGraph& graph,
                                      const v1::SplitGraphRequest& request,
                                      const CancellationToken& token, absl::Cord* response_bytes,
                                      size_t piece_bytes = kResponsePieceBytes);

// Fills `*response` (which may live on an arena): SplitGraphSerializedPlan's
// bytes, parsed.
absl::Status SplitGraphPlan(const CompactGraph& graph, const v1::SplitGraphRequest& request,
                            const CancellationToken& token, v1::SplitGraphResponse* response);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_SPLIT_SPLIT_GRAPH_H_

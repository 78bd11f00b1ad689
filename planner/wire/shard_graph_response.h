// The ShardGraph response, written from a ShardPlan (pipeline/shard_graph.h):
// as a message, or as the bytes the server sends.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const ShardPlan plan,
//                             ShardGraphPlan(graph, options, devices, token));
//   absl::Cord bytes;
//   PARTPLAN_RETURN_IF_ERROR(SerializeShardGraphResponse(
//       graph, plan, request.node_references(), token, &bytes));
//
// By node index (any node_references but NODE_REFERENCES_NAMES): every
// shard's `node_indices`, and `shard_by_node_index`, the shard of every
// call_* node (-1 for the other nodes). By name: every shard's `nodes`, and
// `assignments`, the shard of every call_* node in graph order. Either way
// the shards' inputs and outputs are names, and the summary counts the
// graph's nodes, call_* nodes and bytes beside the plan's figures.
#ifndef PARTPLAN_PLANNER_WIRE_SHARD_GRAPH_RESPONSE_H_
#define PARTPLAN_PLANNER_WIRE_SHARD_GRAPH_RESPONSE_H_

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"
#include "planner/pipeline/shard_graph.h"

namespace partplan {

// Fills `*response` (which may live on an arena, and is cleared first) with
// the plan by node index. Polls `token` by the nodes it passes over; on
// error `*response` is unspecified.
absl::Status ShardGraphResponseFromPlan(const CompactGraph& graph, const ShardPlan& plan,
                                        const CancellationToken& token,
                                        v1::ShardGraphResponse* response);

// Writes into `*bytes` the serialised response: by node index, what
// ShardGraphResponseFromPlan fills; by name, that with the names written
// straight from the graph (plan_with_names.h), the one writer of a plan by
// name.
absl::Status SerializeShardGraphResponse(const CompactGraph& graph, const ShardPlan& plan,
                                         v1::NodeReferences node_references,
                                         const CancellationToken& token, absl::Cord* bytes);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_WIRE_SHARD_GRAPH_RESPONSE_H_

// ShardGraphPlan: the ShardGraph RPC -- pipeline shards of a graph, by
// fairscale's auto_shard (mode FAIRSCALE, auto_shard.h) or as the optimal
// balanced stages on the request's devices (mode BALANCED,
// balanced_stages.h, with the work of stage_work.h).
//
//   PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph,
//                             ImportGraph(request.graph(), limits, token));
//   PARTPLAN_RETURN_IF_ERROR(ShardGraphPlan(graph, request, token, &response));
//
// Shards are contiguous ranges of the graph's items (stage_model.h: every
// node but the placeholders and the output, in graph order). The response
// has the shard of every call_* node, and for every shard:
//   - nodes: its call_* and get_attr nodes, in graph order;
//   (with the request's node_references NODE_REFERENCES_INDICES, these two
//   by node index: shard_by_node_index and Shard.node_indices;)
//   - parameter_count: FAIRSCALE, the parameters auto_shard charged it;
//     BALANCED, the sum of its nodes' parameter_count;
//   - inputs: the values its nodes read from graph inputs and earlier
//     shards, in order of first use; outputs: its values read by later
//     shards or the graph output, in graph order. A value a shard only
//     carries through for a later one is in neither list;
//   - memory_bytes: StageModel::StageMemoryBytes, its nodes' total sizes
//     plus every value live into it, carried values included;
//   - BALANCED only: logical_device_id (stage s on devices[s]) and cost,
//     the stage time (seconds, or units of work when the devices give no
//     throughput; see stage_work.h).
// The summary: planner `shard/fairscale` or `shard/balanced/<work kind>`;
// node and call_* counts; shards; devices used (BALANCED); the graph's
// total bytes; the largest shard memory; cross_partition_bytes, the sum
// over cuts of the bytes live across each (a linear pipeline carries a
// skip value through every cut between its producer and its last reader,
// so unlike PartitionPlan's figure a value counts once per cut it
// crosses); critical_path_latency_seconds, BALANCED with costs in seconds
// only: the stage times plus each cut's bytes over the bandwidth between
// its two devices (one micro-batch through an empty pipeline); and the
// planner's wall time.
//
// Errors. INVALID_ARGUMENT naming the field: `node_references` or `config.mode` unknown,
// `config.shard_count` not positive, `graph.nodes` without any call_* node;
// FAIRSCALE: `graph.modules` (ModuleParameterCharges); BALANCED: the
// inventory (`devices...`, ImportDevices with default InputLimits), a
// device count other than shard_count, throughput on some devices only.
// FAILED_PRECONDITION with the reason: FAIRSCALE with `exact` making
// another count; BALANCED with no plan fitting the devices' memory.
// CANCELLED / DEADLINE_EXCEEDED when the token fires.
//
// O(nodes + edges) plus the planner's time: AutoShard
// O(edges * log shards), BALANCED O(items * shard_count).
#ifndef PARTPLAN_PLANNER_PIPELINE_SHARD_GRAPH_H_
#define PARTPLAN_PLANNER_PIPELINE_SHARD_GRAPH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"

namespace partplan {

// The request's ShardConfig, checked.
struct ShardOptions {
  v1::ShardConfig::Mode mode = v1::ShardConfig::FAIRSCALE;
  int32_t shard_count = 0;
  // FAIRSCALE: fail instead of returning another count (BALANCED always
  // makes exactly shard_count stages).
  bool exact = false;
  // How the response names nodes (the request's node_references).
  v1::NodeReferences node_references = v1::NODE_REFERENCES_NAMES;

  static ShardOptions FromConfig(const v1::ShardConfig& config);

  // INVALID_ARGUMENT naming `config.mode` (not a known mode) or
  // `config.shard_count` (not positive); MODE_UNSPECIFIED becomes FAIRSCALE.
  absl::Status CheckAndSetup();
};

// Fills `*response` (which may live on an arena); on error `*response` is
// unspecified.
absl::Status ShardGraphPlan(const CompactGraph& graph, const v1::ShardGraphRequest& request,
                            const CancellationToken& token, v1::ShardGraphResponse* response);

// The same, returning the response.
absl::StatusOr<v1::ShardGraphResponse> ShardGraphPlan(const CompactGraph& graph,
                                                      const v1::ShardGraphRequest& request,
                                                      const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PIPELINE_SHARD_GRAPH_H_

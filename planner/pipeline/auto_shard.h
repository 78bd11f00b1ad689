// AutoShard: fairscale's auto_shard (`_split_nodes` in
// fairscale/experimental/nn/auto_shard.py) on a CompactGraph, in
// O(nodes + edges * log shards) where fairscale is cubic in the nodes.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const ParameterCharges charges,
//                             ModuleParameterCharges(graph, token));
//   AutoShardOptions options;
//   options.shard_count = 4;
//   options.exact = true;
//   PARTPLAN_RETURN_IF_ERROR(options.CheckAndSetup());
//   PARTPLAN_ASSIGN_OR_RETURN(const AutoShardResult shards,
//                             AutoShard(graph, charges, options, token));
//
// The walk, as fairscale does it: target = total // shard_count, where
// total is the root module's parameter count. Nodes are visited in graph
// order up to the output, starting in shard 0. A node other than a
// placeholder that reads a value from a shard before the current one --
// except the node right before it in graph order, the normal flow from one
// shard to the next -- is the end of a skip connection: the earliest such
// shard and all later ones merge into one, which becomes current. The node
// then joins the current shard with its parameter charge, and if that
// shard now holds more than `target` parameters, the next node opens a new
// shard. Placeholders join the current shard, uncharged. Shards are
// therefore contiguous in graph order; a shard opened after the last node
// stays empty and is not counted.
//
// Deliberate differences from fairscale (commit 146f1602), each keeping
// its result wherever its defect does not trigger:
//   - Skip connections are found in every argument: positional, keyword,
//     and inside lists and tuples (CompactGraph::inputs). fairscale scans
//     top-level positional arguments only, so it misses torch.cat([h, x])
//     and add(h, other=x), and its shards then read values from shards
//     other than their predecessor.
//   - A call_module node is charged exactly its own module's parameters
//     (the graph.modules entry whose qualified name is the node's target);
//     no other node is charged. fairscale matches node *names* against
//     module names with "." replaced by "_", falling back to the name's
//     prefix before the first "_": a second call of `layers.0` (node
//     `layers_0_1`) is charged all of `layers`, a get_attr `fc_weight` all
//     of `fc`, and a node `_tensor_constant0` the whole model.
//   - `exact`: fairscale returns whatever count the walk makes (issue
//     #827). With `exact`, any count but shard_count is FAILED_PRECONDITION
//     saying why: a skip connection merged shards, large modules used up
//     the budget of several shards, or modules called by several nodes were
//     charged at every call.
//   - fairscale rebuilds its shard -> parameters map over all nodes after
//     every node; here each node costs O(inputs * log shards).
// Like fairscale, a module called by several nodes is charged at each call.
#ifndef PARTPLAN_PLANNER_PIPELINE_AUTO_SHARD_H_
#define PARTPLAN_PLANNER_PIPELINE_AUTO_SHARD_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"

namespace partplan {

struct AutoShardOptions {
  // Shards wanted (fairscale's `shard_count`, 3 there by default).
  int32_t shard_count = 3;
  // Fail with the reason instead of returning another number of shards.
  bool exact = false;

  // INVALID_ARGUMENT naming `config.shard_count` unless it is positive.
  absl::Status CheckAndSetup() const;
};

// What auto_shard charges each node, from the graph's module hierarchy.
struct ParameterCharges {
  // Per node: its call_module's parameter count, else 0.
  std::vector<int64_t> of_node;
  // The root module's parameter count: the model's total.
  int64_t model_total = 0;
};

// Reads graph.modules. INVALID_ARGUMENT naming the field when the list is
// empty or has no root module (qualified name ""), a name twice, a negative
// count, a call_module target it does not list, or charges overflowing;
// the token's status when it fires (polled in every loop).
absl::StatusOr<ParameterCharges> ModuleParameterCharges(const CompactGraph& graph,
                                                        const CancellationToken& token);

struct AutoShardResult {
  // The first node of every shard, ascending (the first is 0): shard s
  // holds the nodes from first_node[s] to the next shard's first node, the
  // last one up to the output node.
  std::vector<NodeId> first_node;
  // Parameters charged to each shard.
  std::vector<int64_t> parameters;
  // total // shard_count: a shard closes once it holds more.
  int64_t target = 0;
};

// `options` must have passed CheckAndSetup().
absl::StatusOr<AutoShardResult> AutoShard(const CompactGraph& graph,
                                          const ParameterCharges& charges,
                                          const AutoShardOptions& options,
                                          const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PIPELINE_AUTO_SHARD_H_

// ShardGraphPlan: pipeline shards of a graph, by fairscale's auto_shard
// (ShardMode::kFairscale, auto_shard.h) or as the optimal balanced stages on
// the given devices (ShardMode::kBalanced, balanced_stages.h, with the work
// of stage_work.h). The ShardGraph RPC and the Plan RPC's shard planners.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const ShardOptions options,
//                             ShardOptions::FromConfig(request.config()));
//   PARTPLAN_ASSIGN_OR_RETURN(const ShardPlan plan,
//                             ShardGraphPlan(graph, options, devices, token));
//   for (const PipelineShard& shard : plan.shards) shard.nodes;
//
// The request is checked at the edge: ShardOptions::FromConfig checks the
// ShardConfig, the caller imports the inventory (ImportDevices) once and
// passes its DeviceList, which only kBalanced reads. The response messages
// are written from a ShardPlan in wire/shard_graph_response.h.
//
// Shards are contiguous ranges of the graph's items (stage_model.h: every
// node but the placeholders and the output, in graph order). For every
// shard, a PipelineShard:
//   - nodes: its call_* and get_attr nodes, in graph order;
//   - parameter_count: kFairscale, the parameters auto_shard charged it;
//     kBalanced, the sum of its nodes' parameter_count;
//   - inputs: the values its nodes read from graph inputs and earlier
//     shards, in order of first use; outputs: its values read by later
//     shards or the graph output, in graph order. A value a shard only
//     carries through for a later one is in neither list;
//   - memory_bytes: StageModel::StageMemoryBytes, its nodes' total sizes
//     plus every value live into it, carried values included;
//   - kBalanced only: logical_device_id (stage s on devices[s]) and cost,
//     the stage time (seconds, or units of work when the devices give no
//     throughput; see stage_work.h).
// The summary figures: planner `shard/fairscale` or
// `shard/balanced/<work kind>`; devices used (kBalanced); the largest
// shard memory; cross_shard_bytes, the sum over cuts of the bytes live
// across each (a linear pipeline carries a skip value through every cut
// between its producer and its last reader, so unlike PartitionPlan's
// figure a value counts once per cut it crosses);
// critical_path_latency_seconds, kBalanced with costs in seconds only: the
// stage times plus each cut's bytes over the bandwidth between its two
// devices (one micro-batch through an empty pipeline); and the planner's
// wall time.
//
// Errors. INVALID_ARGUMENT naming the field: `graph.nodes` without any
// call_* node; kFairscale: `graph.modules` (ModuleParameterCharges);
// kBalanced: a device count other than shard_count (`devices.devices`),
// throughput on some devices only. FAILED_PRECONDITION with the reason:
// kFairscale with `exact` making another count; kBalanced with no plan
// fitting the devices' memory. CANCELLED / DEADLINE_EXCEEDED when the token
// fires.
//
// O(nodes + edges) plus the planner's time: AutoShard
// O(edges * log shards), kBalanced O(items * shard_count).
#ifndef PARTPLAN_PLANNER_PIPELINE_SHARD_GRAPH_H_
#define PARTPLAN_PLANNER_PIPELINE_SHARD_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "partplan/v1/plan.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

enum class ShardMode { kFairscale, kBalanced };

// A ShardConfig, checked.
struct ShardOptions {
  ShardMode mode = ShardMode::kFairscale;
  int32_t shard_count = 1;
  // kFairscale: fail instead of returning another count (kBalanced always
  // makes exactly shard_count stages).
  bool exact = false;

  // INVALID_ARGUMENT naming `config.mode` (not a known mode) or
  // `config.shard_count` (not positive), checked in that order;
  // MODE_UNSPECIFIED is kFairscale.
  static absl::StatusOr<ShardOptions> FromConfig(const v1::ShardConfig& config);
};

struct PipelineShard {
  std::vector<NodeId> nodes;  // call_* and get_attr nodes, graph order
  int64_t parameter_count = 0;
  std::vector<NodeId> inputs;   // values read from earlier, first use order
  std::vector<NodeId> outputs;  // values read later, graph order
  int64_t memory_bytes = 0;
  int32_t logical_device_id = 0;  // kBalanced only
  double cost = 0;                // kBalanced only
};

struct ShardPlan {
  std::vector<PipelineShard> shards;  // shard s is shards[s]
  // kBalanced: each shard has its device (logical_device_id).
  bool shards_have_devices = false;
  std::string planner;        // `shard/fairscale` or `shard/balanced/<work>`
  int32_t devices_used = 0;   // kBalanced: shard_count
  int64_t max_shard_bytes = 0;
  int64_t cross_shard_bytes = 0;
  double critical_path_latency_seconds = 0;  // 0 when not in seconds
  double planner_seconds = 0;
  std::string bound;  // PlanSummary.bound (the entry point says it)
};

// `devices` is read by kBalanced only (kFairscale may pass an empty list).
absl::StatusOr<ShardPlan> ShardGraphPlan(const CompactGraph& graph, const ShardOptions& options,
                                         const DeviceList& devices,
                                         const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PIPELINE_SHARD_GRAPH_H_

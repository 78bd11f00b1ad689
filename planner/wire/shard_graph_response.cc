#include "planner/wire/shard_graph_response.h"

#include <string>

#include "planner/base/status_util.h"
#include "planner/wire/plan_with_names.h"

namespace partplan {

absl::Status ShardGraphResponseFromPlan(const CompactGraph& graph, const ShardPlan& plan,
                                        const CancellationToken& token,
                                        v1::ShardGraphResponse* response) {
  response->Clear();
  google::protobuf::RepeatedField<int32_t>& shard_of = *response->mutable_shard_by_node_index();
  shard_of.Resize(graph.num_nodes(), -1);
  const auto name = [&graph](NodeId v) { return std::string(graph.name(v)); };
  int64_t work = 0;
  const int32_t shards = static_cast<int32_t>(plan.shards.size());
  response->mutable_shards()->Reserve(shards);
  for (int32_t s = 0; s < shards; ++s) {
    const PipelineShard& planned = plan.shards[s];
    v1::Shard* shard = response->add_shards();
    shard->set_id(s);
    shard->set_parameter_count(planned.parameter_count);
    shard->mutable_node_indices()->Reserve(static_cast<int>(planned.nodes.size()));
    for (const NodeId v : planned.nodes) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(++work));
      shard->add_node_indices(v);
      if (graph.is_op_node(v)) shard_of[v] = s;
    }
    for (const NodeId u : planned.inputs) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(++work));
      shard->add_inputs(name(u));
    }
    for (const NodeId v : planned.outputs) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(++work));
      shard->add_outputs(name(v));
    }
    shard->set_memory_bytes(planned.memory_bytes);
    if (plan.shards_have_devices) {
      shard->set_logical_device_id(planned.logical_device_id);
      shard->set_cost(planned.cost);
    }
  }
  v1::PlanSummary* summary = response->mutable_summary();
  summary->set_planner(plan.planner);
  summary->set_node_count(graph.num_nodes());
  summary->set_op_node_count(graph.num_op_nodes());
  summary->set_partition_count(shards);
  summary->set_devices_used(plan.devices_used);
  summary->set_graph_total_bytes(graph.graph_total_bytes());
  summary->set_max_partition_bytes(plan.max_shard_bytes);
  summary->set_cross_partition_bytes(plan.cross_shard_bytes);
  summary->set_critical_path_latency_seconds(plan.critical_path_latency_seconds);
  summary->set_planner_seconds(plan.planner_seconds);
  summary->set_bound(plan.bound);
  return absl::OkStatus();
}

absl::Status SerializeShardGraphResponse(const CompactGraph& graph, const ShardPlan& plan,
                                         v1::NodeReferences node_references,
                                         const CancellationToken& token, absl::Cord* bytes) {
  v1::ShardGraphResponse response;
  PARTPLAN_RETURN_IF_ERROR(ShardGraphResponseFromPlan(graph, plan, token, &response));
  // By name, the plan by index with its node lists written as names.
  return node_references == v1::NODE_REFERENCES_NAMES
             ? SerializeResponseWithNames(graph, &response, bytes)
             : SerializeWithinLimit(response, bytes);
}

}  // namespace partplan

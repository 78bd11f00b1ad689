#include "planner/entry_points.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "planner/devices.h"
#include "planner/graph_import.h"
#include "planner/partitioner.h"
#include "planner/pipeline/pipeline_graph.h"
#include "planner/pipeline/shard_graph.h"
#include "planner/split_graph.h"
#include "planner/status_util.h"

namespace partplan {
namespace {

// Imports and validates the graph and inventory, then partitions.
absl::Status RunPartitioner(const v1::Graph& graph_proto, const v1::DeviceInventory& inventory,
                            const v1::PartitionerConfig& config, const InputLimits& limits,
                            const CancellationToken& token, v1::PartitionPlan* plan) {
  const absl::Time start = absl::Now();
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph, ImportGraph(graph_proto, limits, token));
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices, ImportDevices(inventory, limits));
  PARTPLAN_RETURN_IF_ERROR(PartitionGraphPlan(graph, devices, config, token, plan));
  plan->mutable_summary()->set_planner_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  return absl::OkStatus();
}

absl::Status NotYet(absl::string_view rpc) {
  return absl::UnimplementedError(
      absl::StrCat(rpc, " is part of the API but not implemented by this server yet"));
}

}  // namespace

absl::Status PartitionGraph(const v1::PartitionGraphRequest& request, const InputLimits& limits,
                            const CancellationToken& token, v1::PartitionGraphResponse* response) {
  return RunPartitioner(request.graph(), request.devices(), request.config(), limits, token,
                        response->mutable_plan());
}

absl::Status SplitGraph(const v1::SplitGraphRequest& request, const InputLimits& limits,
                        const CancellationToken& token, v1::SplitGraphResponse* response) {
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph,
                            ImportGraph(request.graph(), limits, token));
  return SplitGraphPlan(graph, request, token, response);
}

absl::Status ShardGraph(const v1::ShardGraphRequest& request, const InputLimits& limits,
                        const CancellationToken& token, v1::ShardGraphResponse* response) {
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph,
                            ImportGraph(request.graph(), limits, token));
  return ShardGraphPlan(graph, request, token, response);
}

absl::Status BuildPipelineGraph(const v1::BuildPipelineGraphRequest& request,
                                const InputLimits& limits, const CancellationToken& token,
                                v1::BuildPipelineGraphResponse* response) {
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph,
                            ImportGraph(request.graph(), limits, token));
  return BuildPipelineGraphPlan(graph, request, token, response);
}

absl::Status PlanDataParallel(const v1::PlanDataParallelRequest&, const InputLimits&,
                              const CancellationToken&, v1::PlanDataParallelResponse*) {
  return NotYet("PlanDataParallel");
}

absl::Status Plan(const v1::PlanRequest& request, const InputLimits& limits,
                  const CancellationToken& token, v1::PlanResponse* response) {
  if (request.planner_case() == v1::PlanRequest::kShard) return NotYet("Plan with a shard planner");
  return RunPartitioner(request.graph(), request.devices(), request.partitioner(), limits, token,
                        response->mutable_plan());
}

absl::Status Validate(const v1::ValidateRequest& request, const InputLimits& limits,
                      const CancellationToken& token, v1::ValidateResponse* response) {
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph,
                            ImportGraph(request.graph(), limits, token));
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices, ImportDevices(request.devices(), limits));
  response->set_node_count(graph.num_nodes());
  response->set_edge_count(graph.num_edges());
  response->set_device_count(devices.size());
  response->set_graph_total_bytes(graph.graph_total_bytes());
  return absl::OkStatus();
}

}  // namespace partplan

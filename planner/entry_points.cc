#include "planner/entry_points.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "planner/devices.h"
#include "planner/graph_import.h"
#include "planner/partitioner.h"
#include "planner/split_graph.h"
#include "planner/status_util.h"

namespace partplan {
namespace {

// Imports and validates the graph and inventory, then partitions.
absl::StatusOr<v1::PartitionPlan> RunPartitioner(const v1::Graph& graph_proto,
                                                 const v1::DeviceInventory& inventory,
                                                 const v1::PartitionerConfig& config,
                                                 const InputLimits& limits,
                                                 const CancellationToken& token) {
  const absl::Time start = absl::Now();
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph, ImportGraph(graph_proto, limits, token));
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices, ImportDevices(inventory, limits));
  PARTPLAN_ASSIGN_OR_RETURN(v1::PartitionPlan plan,
                            PartitionGraphPlan(graph, devices, config, token));
  plan.mutable_summary()->set_planner_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  return plan;
}

absl::Status NotYet(absl::string_view rpc) {
  return absl::UnimplementedError(
      absl::StrCat(rpc, " is part of the API but not implemented by this server yet"));
}

}  // namespace

absl::StatusOr<v1::PartitionGraphResponse> PartitionGraph(
    const v1::PartitionGraphRequest& request, const InputLimits& limits,
    const CancellationToken& token) {
  v1::PartitionGraphResponse response;
  PARTPLAN_ASSIGN_OR_RETURN(*response.mutable_plan(),
                            RunPartitioner(request.graph(), request.devices(),
                                           request.config(), limits, token));
  return response;
}

absl::StatusOr<v1::SplitGraphResponse> SplitGraph(const v1::SplitGraphRequest& request,
                                                  const InputLimits& limits,
                                                  const CancellationToken& token) {
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph,
                            ImportGraph(request.graph(), limits, token));
  return SplitGraphPlan(graph, request, token);
}

absl::StatusOr<v1::ShardGraphResponse> ShardGraph(const v1::ShardGraphRequest&,
                                                  const InputLimits&,
                                                  const CancellationToken&) {
  return NotYet("ShardGraph");
}

absl::StatusOr<v1::BuildPipelineGraphResponse> BuildPipelineGraph(
    const v1::BuildPipelineGraphRequest&, const InputLimits&, const CancellationToken&) {
  return NotYet("BuildPipelineGraph");
}

absl::StatusOr<v1::PlanDataParallelResponse> PlanDataParallel(
    const v1::PlanDataParallelRequest&, const InputLimits&, const CancellationToken&) {
  return NotYet("PlanDataParallel");
}

absl::StatusOr<v1::PlanResponse> Plan(const v1::PlanRequest& request, const InputLimits& limits,
                                      const CancellationToken& token) {
  if (request.planner_case() == v1::PlanRequest::kShard) return NotYet("Plan with a shard planner");
  v1::PlanResponse response;
  PARTPLAN_ASSIGN_OR_RETURN(*response.mutable_plan(),
                            RunPartitioner(request.graph(), request.devices(),
                                           request.partitioner(), limits, token));
  return response;
}

absl::StatusOr<v1::ValidateResponse> Validate(const v1::ValidateRequest& request,
                                              const InputLimits& limits,
                                              const CancellationToken& token) {
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph,
                            ImportGraph(request.graph(), limits, token));
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices, ImportDevices(request.devices(), limits));
  v1::ValidateResponse response;
  response.set_node_count(graph.num_nodes());
  response.set_edge_count(graph.num_edges());
  response.set_device_count(devices.size());
  response.set_graph_total_bytes(graph.graph_total_bytes());
  return response;
}

}  // namespace partplan

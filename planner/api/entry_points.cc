#include "planner/api/entry_points.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "planner/base/status_util.h"
#include "planner/fx/device_mapping.h"
#include "planner/fx/partition.h"
#include "planner/fx/partitioner.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph_import.h"
#include "planner/pipeline/pipeline_graph.h"
#include "planner/pipeline/shard_graph.h"
#include "planner/split/split_graph.h"
#include "planner/wire/pipeline_graph_response.h"
#include "planner/wire/plan_with_names.h"
#include "planner/wire/shard_graph_response.h"
#include "planner/wire/split_graph_response.h"

namespace partplan {
namespace {

// Validates the inventory, then partitions `graph`; the plan's
// planner_seconds count from `start`.
absl::Status PartitionImported(const CompactGraph& graph, const v1::DeviceInventory& inventory,
                               const v1::PartitionerConfig& config,
                               v1::NodeReferences node_references, const InputLimits& limits,
                               const CancellationToken& token, absl::Time start,
                               v1::PartitionPlan* plan) {
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices, ImportDevices(inventory, limits));
  PARTPLAN_RETURN_IF_ERROR(
      PartitionGraphPlan(graph, devices, config, node_references, token, plan));
  plan->mutable_summary()->set_planner_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  return absl::OkStatus();
}

// What PartitionGraph and Plan do once the graph is imported: fill `plan`
// naming nodes as `node_references` says, its planner_seconds counted from
// `start`.
using PlanImportedFunction =
    absl::FunctionRef<absl::Status(const CompactGraph& graph, v1::NodeReferences node_references,
                                   absl::Time start, v1::PartitionPlan* plan)>;

// A graph that does not import, with the inventory's faults added to its
// own, so that a request's independent faults come back together.
absl::Status GraphAndDeviceViolations(const absl::Status& graph_status,
                                      const v1::DeviceInventory& inventory,
                                      const InputLimits& limits) {
  return WithMoreViolations(graph_status, ImportDevices(inventory, limits).status());
}

// Checks the node references, imports and validates the graph, then plans.
absl::Status ImportAndPlan(const GraphSource& graph_source, const v1::DeviceInventory& inventory,
                           v1::NodeReferences node_references, const InputLimits& limits,
                           const CancellationToken& token, PlanImportedFunction plan_imported,
                           v1::PartitionPlan* plan) {
  const absl::Time start = absl::Now();
  PARTPLAN_RETURN_IF_ERROR(CheckNodeReferences(node_references));
  absl::StatusOr<CompactGraph> graph = ImportGraph(graph_source, limits, token);
  if (!graph.ok()) return GraphAndDeviceViolations(graph.status(), inventory, limits);
  return plan_imported(*graph, node_references, start, plan);
}

// ImportAndPlan with the response (PartitionGraphResponse or PlanResponse)
// serialised as the server sends it: a plan by name is planned by node index
// and its names written straight from the graph.
template <typename Response>
absl::Status ImportPlanAndSerialize(const GraphSource& graph_source,
                                    const v1::DeviceInventory& inventory,
                                    v1::NodeReferences node_references, const InputLimits& limits,
                                    const CancellationToken& token,
                                    PlanImportedFunction plan_imported,
                                    absl::Cord* response_bytes) {
  const bool by_name = node_references == v1::NODE_REFERENCES_NAMES;
  Response response;
  return ImportAndPlan(
      graph_source, inventory, node_references, limits, token,
      [&](const CompactGraph& graph, v1::NodeReferences checked, absl::Time start,
          v1::PartitionPlan* plan) {
        PARTPLAN_RETURN_IF_ERROR(
            plan_imported(graph, by_name ? v1::NODE_REFERENCES_INDICES : checked, start, plan));
        return by_name ? SerializeResponseWithNames(graph, &response, response_bytes)
                       : SerializeWithinLimit(response, response_bytes);
      },
      response.mutable_plan());
}

// SplitGraph once the graph is imported: the request's assignments checked
// into the partition of every node, then split.
absl::StatusOr<GraphSplit> SplitImported(const CompactGraph& graph,
                                         const v1::SplitGraphRequest& request,
                                         const CancellationToken& token) {
  PARTPLAN_ASSIGN_OR_RETURN(const std::vector<int32_t> partition_of,
                            PartitionOfNodes(graph, request.assignments(), token));
  return SplitGraphPlan(graph, partition_of, request.keep_original_order(), token);
}

// What ShardGraph checks before it shards, in this order: the node
// references, the graph, for BALANCED (the only mode that reads it) the
// inventory against the server's limits (--max_devices), then the
// ShardConfig. The inventory is imported here once, and the planner reads
// the DeviceList; for FAIRSCALE it is left empty.
struct ShardInputs {
  CompactGraph graph;
  DeviceList devices;
  ShardOptions options;
};
absl::StatusOr<ShardInputs> ImportToShard(const v1::ShardGraphRequest& request,
                                          const GraphSource& graph_source,
                                          const InputLimits& limits,
                                          const CancellationToken& token) {
  PARTPLAN_RETURN_IF_ERROR(CheckNodeReferences(request.node_references()));
  PARTPLAN_ASSIGN_OR_RETURN(CompactGraph graph, ImportGraph(graph_source, limits, token));
  DeviceList devices;
  if (request.config().mode() == v1::ShardConfig::BALANCED) {
    PARTPLAN_ASSIGN_OR_RETURN(devices, ImportDevices(request.devices(), limits));
  }
  PARTPLAN_ASSIGN_OR_RETURN(const ShardOptions options, ShardOptions::FromConfig(request.config()));
  return ShardInputs{std::move(graph), std::move(devices), options};
}

// A shard plan's shards as partitions: their call_* and get_attr nodes with
// the placeholders they read, their memory, and their device when the
// planner chose one. Polls `token` by the nodes and inputs it passes over.
absl::StatusOr<PartitionSet> ShardsToPartitions(const CompactGraph& graph, const ShardPlan& shards,
                                                const CancellationToken& token) {
  PartitionSet set;
  set.partition_of.assign(graph.num_nodes(), -1);
  int64_t work = 0;
  const int32_t num_shards = static_cast<int32_t>(shards.shards.size());
  for (int32_t s = 0; s < num_shards; ++s) {
    const PipelineShard& shard = shards.shards[s];
    Partition& partition = set.partitions.emplace_back();
    for (const NodeId v : shard.nodes) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      partition.nodes.push_back(v);
      if (!graph.is_op_node(v)) continue;
      set.partition_of[v] = s;
      for (NodeId u : graph.inputs(v)) {
        PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
        if (graph.op(u) == v1::PLACEHOLDER) partition.nodes.push_back(u);
      }
    }
    // A sort: n log n of the list at most.
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(1 + 2 * static_cast<int64_t>(partition.nodes.size()), &work));
    std::sort(partition.nodes.begin(), partition.nodes.end());
    partition.nodes.erase(std::unique(partition.nodes.begin(), partition.nodes.end()),
                          partition.nodes.end());
    partition.memory_bytes = shard.memory_bytes;
    if (shards.shards_have_devices) partition.logical_device_ids = {shard.logical_device_id};
  }
  PARTPLAN_RETURN_IF_ERROR(LinkPartitions(graph, token, &set));
  return set;
}

// Plan with a shard planner: its shards, placed (best fit when the planner
// chose no devices), become the plan's partitions. The inventory is
// imported once, against the server's limits. The shard planner's options
// are `config` in a ShardGraphRequest; here they are `shard`.
absl::Status ShardImported(const CompactGraph& graph, const v1::PlanRequest& request,
                           v1::NodeReferences node_references, const InputLimits& limits,
                           const CancellationToken& token, absl::Time start,
                           v1::PartitionPlan* plan) {
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices, ImportDevices(request.devices(), limits));
  const absl::StatusOr<ShardOptions> options = ShardOptions::FromConfig(request.shard());
  if (!options.ok()) return WithFieldPrefix(options.status(), "config", "shard");
  const absl::StatusOr<ShardPlan> shards = ShardGraphPlan(graph, *options, devices, token);
  if (!shards.ok()) return WithFieldPrefix(shards.status(), "config", "shard");
  PARTPLAN_ASSIGN_OR_RETURN(PartitionSet set, ShardsToPartitions(graph, *shards, token));
  std::vector<DeviceLoad> loads(devices.size());
  if (!devices.empty()) {
    PARTPLAN_RETURN_IF_ERROR(MapPartitionsToDevices(graph, devices, token, &set, &loads));
  }
  PARTPLAN_RETURN_IF_ERROR(DescribePlan(graph, devices, set, shards->planner, "shard",
                                        node_references, token, plan));
  plan->mutable_summary()->set_planner_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  return absl::OkStatus();
}

// Plan once the graph is imported, with the planner the request names.
absl::Status PlanImported(const CompactGraph& graph, const v1::PlanRequest& request,
                          v1::NodeReferences node_references, const InputLimits& limits,
                          const CancellationToken& token, absl::Time start,
                          v1::PartitionPlan* plan) {
  if (request.planner_case() == v1::PlanRequest::kShard) {
    return ShardImported(graph, request, node_references, limits, token, start, plan);
  }
  // The partitioner names its options `config` (PartitionGraphRequest's
  // field); here they are `partitioner`.
  return WithFieldPrefix(PartitionImported(graph, request.devices(), request.partitioner(),
                                           node_references, limits, token, start, plan),
                         "config", "partitioner");
}

// The planning steps of PartitionGraph and Plan, for ImportAndPlan and
// ImportPlanAndSerialize; each refers to its arguments, which must outlive
// it.
auto PartitionerFor(const v1::PartitionGraphRequest& request, const InputLimits& limits,
                    const CancellationToken& token) {
  return [&request, &limits, &token](const CompactGraph& graph, v1::NodeReferences node_references,
                                     absl::Time start, v1::PartitionPlan* plan) {
    return PartitionImported(graph, request.devices(), request.config(), node_references, limits,
                             token, start, plan);
  };
}
auto PlannerFor(const v1::PlanRequest& request, const InputLimits& limits,
                const CancellationToken& token) {
  return [&request, &limits, &token](const CompactGraph& graph, v1::NodeReferences node_references,
                                     absl::Time start, v1::PartitionPlan* plan) {
    return PlanImported(graph, request, node_references, limits, token, start, plan);
  };
}

}  // namespace

absl::Status PartitionGraph(const v1::PartitionGraphRequest& request, const GraphSource& graph,
                            const InputLimits& limits, const CancellationToken& token,
                            v1::PartitionGraphResponse* response) {
  return ImportAndPlan(graph, request.devices(), request.node_references(), limits, token,
                       PartitionerFor(request, limits, token), response->mutable_plan());
}

absl::Status PartitionGraphSerialized(const v1::PartitionGraphRequest& request,
                                      const GraphSource& graph, const InputLimits& limits,
                                      const CancellationToken& token, absl::Cord* response_bytes) {
  return ImportPlanAndSerialize<v1::PartitionGraphResponse>(
      graph, request.devices(), request.node_references(), limits, token, PartitionerFor(request, limits, token),
      response_bytes);
}

absl::Status SplitGraph(const v1::SplitGraphRequest& request, const GraphSource& graph_source,
                        const InputLimits& limits, const CancellationToken& token,
                        v1::SplitGraphResponse* response) {
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph, ImportGraph(graph_source, limits, token));
  PARTPLAN_ASSIGN_OR_RETURN(const GraphSplit split,
                            SplitImported(graph, request, token));
  // Built from the struct, as a message: no bytes written and parsed back.
  return SplitGraphResponseFromPlan(graph, split, token, response);
}

absl::Status SplitGraphSerialized(const v1::SplitGraphRequest& request,
                                  const GraphSource& graph_source, const InputLimits& limits,
                                  const CancellationToken& token, absl::Cord* response_bytes) {
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph, ImportGraph(graph_source, limits, token));
  PARTPLAN_ASSIGN_OR_RETURN(const GraphSplit split,
                            SplitImported(graph, request, token));
  return SerializeSplitGraphResponse(graph, split, token, response_bytes);
}

absl::Status ShardGraph(const v1::ShardGraphRequest& request, const GraphSource& graph_source,
                        const InputLimits& limits, const CancellationToken& token,
                        v1::ShardGraphResponse* response) {
  PARTPLAN_ASSIGN_OR_RETURN(const ShardInputs in,
                            ImportToShard(request, graph_source, limits, token));
  PARTPLAN_ASSIGN_OR_RETURN(const ShardPlan plan,
                            ShardGraphPlan(in.graph, in.options, in.devices, token));
  return ShardGraphResponseFromPlan(in.graph, plan, request.node_references(), token, response);
}

absl::Status ShardGraphSerialized(const v1::ShardGraphRequest& request,
                                  const GraphSource& graph_source, const InputLimits& limits,
                                  const CancellationToken& token, absl::Cord* response_bytes) {
  PARTPLAN_ASSIGN_OR_RETURN(const ShardInputs in,
                            ImportToShard(request, graph_source, limits, token));
  PARTPLAN_ASSIGN_OR_RETURN(const ShardPlan plan,
                            ShardGraphPlan(in.graph, in.options, in.devices, token));
  return SerializeShardGraphResponse(in.graph, plan, request.node_references(), token,
                                     response_bytes);
}

absl::Status BuildPipelineGraph(const v1::BuildPipelineGraphRequest& request,
                                const GraphSource& graph_source, const InputLimits& limits,
                                const CancellationToken& token,
                                v1::BuildPipelineGraphResponse* response) {
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph, ImportGraph(graph_source, limits, token));
  PARTPLAN_ASSIGN_OR_RETURN(const std::vector<PipelineWorker> workers,
                            PipelineWorkersFromRequest(request, token));
  PARTPLAN_ASSIGN_OR_RETURN(const PipelineGraph pipeline,
                            BuildPipelineGraphPlan(graph, workers, token));
  return PipelineGraphResponseFromPlan(graph, pipeline, workers, token, response);
}

absl::Status Plan(const v1::PlanRequest& request, const GraphSource& graph,
                  const InputLimits& limits, const CancellationToken& token,
                  v1::PlanResponse* response) {
  return ImportAndPlan(graph, request.devices(), request.node_references(), limits, token,
                       PlannerFor(request, limits, token), response->mutable_plan());
}

absl::Status PlanSerialized(const v1::PlanRequest& request, const GraphSource& graph,
                            const InputLimits& limits, const CancellationToken& token,
                            absl::Cord* response_bytes) {
  return ImportPlanAndSerialize<v1::PlanResponse>(graph, request.devices(),
                                                  request.node_references(), limits, token,
                                                  PlannerFor(request, limits, token),
                                                  response_bytes);
}

absl::Status Validate(const v1::ValidateRequest& request, const GraphSource& graph_source,
                      const InputLimits& limits, const CancellationToken& token,
                      v1::ValidateResponse* response) {
  absl::StatusOr<CompactGraph> imported = ImportGraph(graph_source, limits, token);
  if (!imported.ok()) return GraphAndDeviceViolations(imported.status(), request.devices(), limits);
  const CompactGraph& graph = *imported;
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices, ImportDevices(request.devices(), limits));
  response->set_node_count(graph.num_nodes());
  response->set_edge_count(graph.num_edges());
  response->set_device_count(devices.size());
  response->set_graph_total_bytes(graph.graph_total_bytes());
  return absl::OkStatus();
}

}  // namespace partplan

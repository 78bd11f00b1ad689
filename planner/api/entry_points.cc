#include "planner/api/entry_points.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "planner/api/plan_bound.h"
#include "planner/base/status_util.h"
#include "planner/fx/device_mapping.h"
#include "planner/fx/partition.h"
#include "planner/fx/partitioner.h"
#include "planner/fx/partitioner_options.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph_import.h"
#include "planner/graph/serialized_request.h"
#include "planner/parallelize/parallel_search.h"
#include "planner/parallelize/parallelize_problem.h"
#include "planner/pipeline/pipeline_graph.h"
#include "planner/pipeline/shard_graph.h"
#include "planner/split/split_graph.h"
#include "planner/training/stage_search.h"
#include "planner/training/training_chain.h"
#include "planner/wire/pipeline_graph_response.h"
#include "planner/wire/parallelize_response.h"
#include "planner/wire/partition_plan.h"
#include "planner/wire/plan_with_names.h"
#include "planner/wire/shard_graph_response.h"
#include "planner/wire/split_graph_response.h"
#include "planner/wire/training_plan_response.h"

namespace partplan {
namespace {

// The figures of the plan the same config makes on `inventory`; nullopt
// when that inventory or plan is refused (past --max_devices, a mesh the
// inventory no longer fills): a what-if left out. The token's status when
// it fires.
absl::StatusOr<std::optional<PlanFigures>> FiguresOnInventory(
    const CompactGraph& graph, const v1::DeviceInventory& inventory,
    const v1::PartitionerConfig& config, const InputLimits& limits,
    const CancellationToken& token) {
  absl::StatusOr<DeviceList> devices = ImportDevices(inventory, limits);
  if (!devices.ok()) return std::nullopt;
  absl::StatusOr<PartitionerOptions> options =
      PartitionerOptionsFromConfig(config, graph, *devices, token);
  absl::StatusOr<PartitionerPlan> plan =
      options.ok() ? PartitionGraphPlan(graph, *devices, *options, token)
                   : absl::StatusOr<PartitionerPlan>(options.status());
  PARTPLAN_RETURN_IF_ERROR(token.Check());
  if (!plan.ok()) return std::nullopt;
  return FiguresOf(*plan, *devices);
}

// PlanSummary.bound of `planned` (plan_bound.h): with, for graphs of at most
// kMaxNodesForWhatIfs nodes, the same config's plan with one more device
// like the largest and with every device's memory 10% larger.
absl::StatusOr<std::string> BoundOf(const CompactGraph& graph,
                                    const v1::DeviceInventory& inventory,
                                    const v1::PartitionerConfig& config,
                                    const InputLimits& limits, const PartitionerPlan& planned,
                                    const DeviceList& devices, const CancellationToken& token) {
  const PlanFigures now = FiguresOf(planned, devices);
  if (now.partitions <= 1 || graph.num_nodes() > kMaxNodesForWhatIfs) {
    return DescribeBound(now, nullptr, "", nullptr, now.partitions > 1);
  }
  int largest = 0;
  int64_t next_id = 0;
  for (int d = 0; d < inventory.devices_size(); ++d) {
    const v1::Device& device = inventory.devices(d);
    if (device.available_memory_bytes() >
        inventory.devices(largest).available_memory_bytes()) {
      largest = d;
    }
    next_id = std::max<int64_t>(next_id, int64_t{device.logical_id()} + 1);
  }
  std::optional<PlanFigures> with_one_more;
  if (next_id <= std::numeric_limits<int32_t>::max()) {  // else no id is left for it
    v1::DeviceInventory one_more = inventory;
    v1::Device* added = one_more.add_devices();
    *added = inventory.devices(largest);
    added->set_name(absl::StrCat(added->name(), "+1"));
    added->set_logical_id(static_cast<int32_t>(next_id));
    PARTPLAN_ASSIGN_OR_RETURN(with_one_more,
                              FiguresOnInventory(graph, one_more, config, limits, token));
  }
  v1::DeviceInventory more_memory = inventory;
  for (v1::Device& device : *more_memory.mutable_devices()) {
    const int64_t bytes = device.available_memory_bytes();
    device.set_available_memory_bytes(bytes > std::numeric_limits<int64_t>::max() / 11 * 10
                                          ? std::numeric_limits<int64_t>::max()
                                          : bytes + bytes / 10);
  }
  PARTPLAN_ASSIGN_OR_RETURN(const std::optional<PlanFigures> with_more_memory,
                            FiguresOnInventory(graph, more_memory, config, limits, token));
  return DescribeBound(now, with_one_more ? &*with_one_more : nullptr,
                       inventory.devices(largest).name(),
                       with_more_memory ? &*with_more_memory : nullptr, false);
}

// Partitions the imported graph as `config` asks: the inventory imported
// once, the config validated into options, the plan written by node index,
// what bounds it said.
absl::Status PartitionImported(const CompactGraph& graph, const v1::DeviceInventory& inventory,
                               const v1::PartitionerConfig& config, const InputLimits& limits,
                               const CancellationToken& token, v1::PartitionPlan* plan) {
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices, ImportDevices(inventory, limits));
  PARTPLAN_ASSIGN_OR_RETURN(const PartitionerOptions options,
                            PartitionerOptionsFromConfig(config, graph, devices, token));
  PARTPLAN_ASSIGN_OR_RETURN(PartitionerPlan planned,
                            PartitionGraphPlan(graph, devices, options, token));
  PARTPLAN_ASSIGN_OR_RETURN(planned.bound,
                            BoundOf(graph, inventory, config, limits, planned, devices, token));
  return WritePartitionPlan(graph, devices, planned, token, plan);
}

// A graph that does not import, with the inventory's faults added to its
// own, so that a request's independent faults come back together.
absl::Status GraphAndDeviceViolations(const absl::Status& graph_status,
                                      const v1::DeviceInventory& inventory,
                                      const InputLimits& limits) {
  return WithMoreViolations(graph_status, ImportDevices(inventory, limits).status());
}

// A typed entry point's response: the bytes its *Serialized twin writes,
// parsed, so that a plan has one writer whichever way it is asked for.
template <typename Request, typename Response>
absl::Status ParseSerialized(absl::Status (*serialized)(const Request&, const GraphSource&,
                                                        const InputLimits&,
                                                        const CancellationToken&, absl::Cord*),
                             const Request& request, const GraphSource& graph,
                             const InputLimits& limits, const CancellationToken& token,
                             Response* response) {
  absl::Cord bytes;
  PARTPLAN_RETURN_IF_ERROR(serialized(request, graph, limits, token, &bytes));
  const std::vector<absl::string_view> pieces(bytes.Chunks().begin(), bytes.Chunks().end());
  const ChunkedBytes chunked(pieces);
  ChunkedInputStream stream(chunked);
  if (!response->ParseFromZeroCopyStream(&stream)) {
    return absl::InternalError("the response written does not parse");
  }
  return absl::OkStatus();
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
                           const InputLimits& limits, const CancellationToken& token,
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
  PARTPLAN_ASSIGN_OR_RETURN(
      PartitionerPlan described,
      DescribePartitions(graph, devices, std::move(set), shards->planner, "shard", token));
  // The shard planners choose the cuts whatever the memory: no what-ifs.
  described.bound = DescribeBound(FiguresOf(described, devices), nullptr, "", nullptr, false);
  return WritePartitionPlan(graph, devices, described, token, plan);
}

// Plan once the graph is imported, with the planner the request names.
absl::Status PlanImported(const CompactGraph& graph, const v1::PlanRequest& request,
                          const InputLimits& limits, const CancellationToken& token,
                          v1::PartitionPlan* plan) {
  if (request.planner_case() == v1::PlanRequest::kShard) {
    return ShardImported(graph, request, limits, token, plan);
  }
  // The partitioner names its options `config` (PartitionGraphRequest's
  // field); here they are `partitioner`.
  return WithFieldPrefix(
      PartitionImported(graph, request.devices(), request.partitioner(), limits, token, plan),
      "config", "partitioner");
}

// PartitionGraph once the graph is imported.
absl::Status PlanImported(const CompactGraph& graph, const v1::PartitionGraphRequest& request,
                          const InputLimits& limits, const CancellationToken& token,
                          v1::PartitionPlan* plan) {
  return PartitionImported(graph, request.devices(), request.config(), limits, token, plan);
}

// PartitionGraph's and Plan's response (`Response`), serialised: the node
// references checked, the graph imported and validated, the plan made by
// node index, then written as bytes, a plan by name with its names taken
// straight from the graph (plan_with_names.h). planner_seconds counts from
// the start.
template <typename Response, typename Request>
absl::Status ImportPlanAndSerialize(const Request& request, const GraphSource& graph_source,
                                    const InputLimits& limits, const CancellationToken& token,
                                    absl::Cord* response_bytes) {
  const absl::Time start = absl::Now();
  const v1::NodeReferences node_references = request.node_references();
  PARTPLAN_RETURN_IF_ERROR(CheckNodeReferences(node_references));
  absl::StatusOr<CompactGraph> graph = ImportGraph(graph_source, limits, token);
  if (!graph.ok()) return GraphAndDeviceViolations(graph.status(), request.devices(), limits);
  Response response;
  v1::PartitionPlan* plan = response.mutable_plan();
  PARTPLAN_RETURN_IF_ERROR(PlanImported(*graph, request, limits, token, plan));
  plan->mutable_summary()->set_planner_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  return node_references == v1::NODE_REFERENCES_NAMES
             ? SerializeResponseWithNames(*graph, &response, response_bytes)
             : SerializeWithinLimit(response, response_bytes);
}

}  // namespace

absl::Status PartitionGraph(const v1::PartitionGraphRequest& request, const GraphSource& graph,
                            const InputLimits& limits, const CancellationToken& token,
                            v1::PartitionGraphResponse* response) {
  return ParseSerialized(&PartitionGraphSerialized, request, graph, limits, token, response);
}

absl::Status PartitionGraphSerialized(const v1::PartitionGraphRequest& request,
                                      const GraphSource& graph, const InputLimits& limits,
                                      const CancellationToken& token, absl::Cord* response_bytes) {
  return ImportPlanAndSerialize<v1::PartitionGraphResponse>(request, graph, limits, token,
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
  return ParseSerialized(&ShardGraphSerialized, request, graph_source, limits, token, response);
}

absl::Status ShardGraphSerialized(const v1::ShardGraphRequest& request,
                                  const GraphSource& graph_source, const InputLimits& limits,
                                  const CancellationToken& token, absl::Cord* response_bytes) {
  PARTPLAN_ASSIGN_OR_RETURN(const ShardInputs in,
                            ImportToShard(request, graph_source, limits, token));
  PARTPLAN_ASSIGN_OR_RETURN(ShardPlan plan,
                            ShardGraphPlan(in.graph, in.options, in.devices, token));
  plan.bound = DescribeShardBound(plan, in.graph.graph_total_bytes());
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
  return ParseSerialized(&PlanSerialized, request, graph, limits, token, response);
}

absl::Status PlanSerialized(const v1::PlanRequest& request, const GraphSource& graph,
                            const InputLimits& limits, const CancellationToken& token,
                            absl::Cord* response_bytes) {
  return ImportPlanAndSerialize<v1::PlanResponse>(request, graph, limits, token, response_bytes);
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

// The first plan found (no search) for `problem` changed by `change`: its
// step, or found false when none fits; nullopt when the changed problem is
// not one the planner takes (past a cap, or micro-batches that one more
// device no longer divides). The token's status when it fires.
template <typename Change>
absl::StatusOr<std::optional<TrainingWhatIf>> FirstTrainingPlan(const TrainingProblem& problem,
                                                                Change change,
                                                                const CancellationToken& token) {
  StageSearchOptions options = problem.options.search;
  options.max_search_nodes = 0;
  std::vector<TrainingDevice> devices = problem.devices;
  change(&options, &devices);
  absl::StatusOr<TrainingStagePlan> plan =
      PlanTrainingStages(options, problem.chain, devices, token);
  PARTPLAN_RETURN_IF_ERROR(token.Check());
  if (!plan.ok() && plan.status().code() != absl::StatusCode::kFailedPrecondition) {
    return std::nullopt;
  }
  TrainingWhatIf result;
  result.found = plan.ok();
  if (plan.ok()) result.step_seconds = plan->step_seconds;
  return result;
}

// TrainingPlan.bound (plan_bound.h): with, below kMaxTrainingWorkForWhatIfs,
// the first plans found with 10% more memory and with one more device like
// the last.
absl::StatusOr<std::string> TrainingBoundOf(const TrainingProblem& problem,
                                            const TrainingStagePlan& plan,
                                            const CancellationToken& token) {
  const int64_t work = static_cast<int64_t>(problem.chain.items.size()) *
                       problem.options.search.schedule.stages();
  if (work > kMaxTrainingWorkForWhatIfs) {
    return DescribeTrainingBound(plan, problem.devices, nullptr, nullptr, "", true);
  }
  PARTPLAN_ASSIGN_OR_RETURN(
      const std::optional<TrainingWhatIf> more_memory,
      FirstTrainingPlan(
          problem,
          [](StageSearchOptions*, std::vector<TrainingDevice>* devices) {
            for (TrainingDevice& device : *devices) device.memory_bytes *= 1.1;
          },
          token));
  PARTPLAN_ASSIGN_OR_RETURN(
      const std::optional<TrainingWhatIf> one_more,
      FirstTrainingPlan(
          problem,
          [](StageSearchOptions* options, std::vector<TrainingDevice>* devices) {
            // The new device takes the last one's place in the ring (its link
            // to the first); the link into it is as fast as the one before.
            const size_t last = devices->size() - 1;
            devices->push_back((*devices)[last]);
            if (last > 0) (*devices)[last].link_bytes_per_second = (*devices)[last - 1].link_bytes_per_second;
            ++options->schedule.devices;
          },
          token));
  return DescribeTrainingBound(plan, problem.devices, more_memory ? &*more_memory : nullptr,
                               one_more ? &*one_more : nullptr, problem.devices.back().name,
                               false);
}

absl::Status PlanTraining(const v1::PlanTrainingRequest& request, const GraphSource& graph_source,
                          const InputLimits& limits, const CancellationToken& token,
                          v1::PlanTrainingResponse* response) {
  absl::StatusOr<CompactGraph> imported = ImportGraph(graph_source, limits, token);
  if (!imported.ok()) return GraphAndDeviceViolations(imported.status(), request.devices(), limits);
  const CompactGraph& graph = *imported;
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices, ImportDevices(request.devices(), limits));
  PARTPLAN_ASSIGN_OR_RETURN(const TrainingProblem problem,
                            TrainingProblemFromRequest(graph, devices, request.config(), token));
  PARTPLAN_ASSIGN_OR_RETURN(
      const TrainingStagePlan plan,
      PlanTrainingStages(problem.options.search, problem.chain, problem.devices, token));
  PARTPLAN_RETURN_IF_ERROR(TrainingPlanResponseFromPlan(graph, devices, problem, plan, token, response));
  PARTPLAN_ASSIGN_OR_RETURN(*response->mutable_plan()->mutable_bound(),
                            TrainingBoundOf(problem, plan, token));
  return absl::OkStatus();
}

absl::Status Parallelize(const v1::ParallelizeRequest& request, const GraphSource& graph,
                         const InputLimits& limits, const CancellationToken& token,
                         v1::ParallelizeResponse* response) {
  const bool graph_given = graph.parsed() != nullptr ? graph.parsed()->nodes_size() > 0
                                                     : CountSerializedNodes(graph.serialized()) != 0;
  std::optional<CompactGraph> imported;
  if (graph_given) {
    absl::StatusOr<CompactGraph> compact = ImportGraph(graph, limits, token);
    if (!compact.ok()) return compact.status();
    imported = *std::move(compact);
  }
  PARTPLAN_ASSIGN_OR_RETURN(
      const ParallelizeProblem problem,
      ParallelizeProblemFromRequest(request, imported ? &*imported : nullptr));
  PARTPLAN_ASSIGN_OR_RETURN(const ParallelSearchResult result,
                            SearchParallelConfigs(problem, token));
  ParallelizeResponseFromResult(problem, result, response);
  return absl::OkStatus();
}

}  // namespace partplan

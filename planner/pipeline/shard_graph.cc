#include "planner/pipeline/shard_graph.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "planner/base/limits.h"
#include "planner/base/status_util.h"
#include "planner/fx/partition.h"
#include "planner/graph/devices.h"
#include "planner/pipeline/auto_shard.h"
#include "planner/pipeline/balanced_stages.h"
#include "planner/pipeline/stage_model.h"
#include "planner/pipeline/stage_work.h"

namespace partplan {
namespace {

// auto_shard's shards start at nodes; as item ranges they start at the
// first item at or after that node.
std::vector<int32_t> ItemCuts(const StageModel& model, const std::vector<NodeId>& first_node) {
  std::vector<int32_t> cuts;
  cuts.reserve(first_node.size() + 1);
  int32_t i = 0;
  for (NodeId first : first_node) {
    while (i < model.num_items() && model.item(i) < first) ++i;
    cuts.push_back(i);
  }
  cuts.push_back(model.num_items());
  return cuts;
}

// The sum of the nodes' parameter_count in each shard.
absl::StatusOr<std::vector<int64_t>> NodeParameters(const StageModel& model,
                                                    absl::Span<const int32_t> cuts,
                                                    const CancellationToken& token) {
  std::vector<int64_t> parameters(cuts.size() - 1, 0);
  NodeReader nodes(model.graph());
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    for (int32_t i = cuts[s]; i < cuts[s + 1]; ++i) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
      parameters[s] += nodes.OwnFields(model.item(i)).parameter_count;
    }
  }
  return parameters;
}

// The shards [cuts[s], cuts[s + 1]): the call_* assignment, each shard's
// nodes, parameters, inputs, outputs and memory, and the summary's counts
// and bytes.
absl::Status DescribeShards(const StageModel& model, absl::Span<const int32_t> cuts,
                            absl::Span<const int64_t> parameters,
                            v1::NodeReferences node_references, const CancellationToken& token,
                            v1::ShardGraphResponse* response) {
  const CompactGraph& graph = model.graph();
  const bool by_name = node_references == v1::NODE_REFERENCES_NAMES;
  google::protobuf::RepeatedField<int32_t>& shard_of = *response->mutable_shard_by_node_index();
  if (by_name) {
    response->mutable_assignments()->Reserve(graph.num_op_nodes());
  } else {
    shard_of.Resize(graph.num_nodes(), -1);
  }
  std::vector<int32_t> read_by(graph.num_nodes(), -1);  // last shard listing it as an input
  int64_t max_bytes = 0;
  int64_t iterations = 0;
  const int32_t shards = static_cast<int32_t>(cuts.size()) - 1;
  for (int32_t s = 0; s < shards; ++s) {
    v1::Shard* shard = response->add_shards();
    shard->set_id(s);
    shard->set_parameter_count(parameters[s]);
    const int32_t begin = cuts[s];
    const int32_t end = cuts[s + 1];
    if (by_name) {
      shard->mutable_nodes()->Reserve(end - begin);
    } else {
      shard->mutable_node_indices()->Reserve(end - begin);
    }
    for (int32_t i = begin; i < end; ++i) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(++iterations));
      const NodeId v = model.item(i);
      if (!by_name) {
        shard->add_node_indices(v);
        if (graph.is_op_node(v)) shard_of[v] = s;
      } else {
        shard->add_nodes(std::string(graph.name(v)));
        if (graph.is_op_node(v)) {
          v1::NodePartition* assignment = response->add_assignments();
          assignment->set_node(std::string(graph.name(v)));
          assignment->set_partition(s);
        }
      }
      for (NodeId u : graph.inputs(v)) {
        if (model.position(u) < begin && read_by[u] != s) {
          read_by[u] = s;
          shard->add_inputs(std::string(graph.name(u)));
        }
      }
      for (NodeId w : graph.users(v)) {
        if (w == graph.output_node() || model.position(w) >= end) {
          shard->add_outputs(std::string(graph.name(v)));
          break;
        }
      }
    }
    const int64_t bytes = end > begin ? model.StageMemoryBytes(begin, end) : 0;
    shard->set_memory_bytes(bytes);
    max_bytes = std::max(max_bytes, bytes);
  }
  int64_t crossing = 0;
  for (int32_t s = 1; s < shards; ++s) crossing += model.LiveBytes(cuts[s]);
  v1::PlanSummary* summary = response->mutable_summary();
  summary->set_node_count(graph.num_nodes());
  summary->set_op_node_count(graph.num_op_nodes());
  summary->set_partition_count(shards);
  summary->set_graph_total_bytes(graph.graph_total_bytes());
  summary->set_max_partition_bytes(max_bytes);
  summary->set_cross_partition_bytes(crossing);
  return absl::OkStatus();
}

absl::Status FairscaleShards(const StageModel& model, const ShardOptions& options,
                             const CancellationToken& token, v1::ShardGraphResponse* response) {
  AutoShardOptions auto_shard;
  auto_shard.shard_count = options.shard_count;
  auto_shard.exact = options.exact;
  PARTPLAN_RETURN_IF_ERROR(auto_shard.CheckAndSetup());
  PARTPLAN_ASSIGN_OR_RETURN(const ParameterCharges charges,
                            ModuleParameterCharges(model.graph(), token));
  PARTPLAN_ASSIGN_OR_RETURN(const AutoShardResult shards,
                            AutoShard(model.graph(), charges, auto_shard, token));
  const std::vector<int32_t> cuts = ItemCuts(model, shards.first_node);
  PARTPLAN_RETURN_IF_ERROR(
      DescribeShards(model, cuts, shards.parameters, options.node_references, token, response));
  response->mutable_summary()->set_planner("shard/fairscale");
  return absl::OkStatus();
}

absl::Status BalancedShards(const StageModel& model, const v1::ShardGraphRequest& request,
                            const ShardOptions& options, const CancellationToken& token,
                            v1::ShardGraphResponse* response) {
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices,
                            ImportDevices(request.devices(), InputLimits(), "devices"));
  if (devices.size() != options.shard_count) {
    return InvalidFieldError(
        "devices.devices",
        absl::StrCat("BALANCED places stage i on devices[i] and needs one device per stage: ",
                     devices.size(), " devices for shard_count ", options.shard_count));
  }
  PARTPLAN_ASSIGN_OR_RETURN(const StageWork work, ChooseStageWork(model, devices, token));
  PARTPLAN_ASSIGN_OR_RETURN(const StagePlan plan,
                            PlanBalancedStages(model, work.of_item, work.devices, token));
  PARTPLAN_ASSIGN_OR_RETURN(const std::vector<int64_t> parameters,
                            NodeParameters(model, plan.cuts, token));
  PARTPLAN_RETURN_IF_ERROR(
      DescribeShards(model, plan.cuts, parameters, options.node_references, token, response));
  const StageTimes times(work.of_item, work.devices);
  double pipeline_seconds = 0;
  for (int s = 0; s < options.shard_count; ++s) {
    v1::Shard* shard = response->mutable_shards(s);
    shard->set_logical_device_id(devices[s].logical_id);
    shard->set_cost(times.Time(s, plan.cuts[s], plan.cuts[s + 1]));
    pipeline_seconds += shard->cost();
    if (s == 0) continue;
    const double bandwidth =
        devices.BandwidthBetween(devices[s - 1].logical_id, devices[s].logical_id);
    if (bandwidth > 0) {
      pipeline_seconds += static_cast<double>(model.LiveBytes(plan.cuts[s])) / bandwidth;
    }
  }
  v1::PlanSummary* summary = response->mutable_summary();
  summary->set_planner(absl::StrCat("shard/balanced/", WorkKindName(work.kind)));
  summary->set_devices_used(options.shard_count);
  if (work.in_seconds) summary->set_critical_path_latency_seconds(pipeline_seconds);
  return absl::OkStatus();
}

}  // namespace

ShardOptions ShardOptions::FromConfig(const v1::ShardConfig& config) {
  ShardOptions options;
  options.mode = config.mode();
  options.shard_count = config.shard_count();
  options.exact = config.exact();
  return options;
}

absl::Status ShardOptions::CheckAndSetup() {
  PARTPLAN_RETURN_IF_ERROR(CheckNodeReferences(node_references));
  if (mode == v1::ShardConfig::MODE_UNSPECIFIED) mode = v1::ShardConfig::FAIRSCALE;
  if (mode != v1::ShardConfig::FAIRSCALE && mode != v1::ShardConfig::BALANCED) {
    return InvalidFieldError(
        "config.mode",
        absl::StrCat("unknown shard mode ", static_cast<int>(mode), "; use FAIRSCALE or BALANCED"));
  }
  if (shard_count <= 0) {
    return InvalidFieldError("config.shard_count",
                             absl::StrCat("must be positive, got ", shard_count));
  }
  return absl::OkStatus();
}

absl::Status ShardGraphPlan(const CompactGraph& graph, const v1::ShardGraphRequest& request,
                            const CancellationToken& token, v1::ShardGraphResponse* response) {
  const absl::Time start = absl::Now();
  response->Clear();
  ShardOptions options = ShardOptions::FromConfig(request.config());
  options.node_references = request.node_references();
  PARTPLAN_RETURN_IF_ERROR(options.CheckAndSetup());
  if (graph.num_op_nodes() == 0) {
    return InvalidFieldError("graph.nodes",
                             "nothing to shard: the graph has no call_module, call_function or "
                             "call_method node");
  }
  PARTPLAN_ASSIGN_OR_RETURN(const StageModel model, StageModel::Create(graph, token));
  PARTPLAN_RETURN_IF_ERROR(options.mode == v1::ShardConfig::BALANCED
                               ? BalancedShards(model, request, options, token, response)
                               : FairscaleShards(model, options, token, response));
  response->mutable_summary()->set_planner_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  return absl::OkStatus();
}

absl::StatusOr<v1::ShardGraphResponse> ShardGraphPlan(const CompactGraph& graph,
                                                      const v1::ShardGraphRequest& request,
                                                      const CancellationToken& token) {
  v1::ShardGraphResponse response;
  PARTPLAN_RETURN_IF_ERROR(ShardGraphPlan(graph, request, token, &response));
  return response;
}

}  // namespace partplan

#include "planner/pipeline/shard_graph.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "planner/base/status_util.h"
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

// The shards [cuts[s], cuts[s + 1]): each shard's nodes, parameters,
// inputs, outputs and memory, and the plan's bytes figures.
absl::Status DescribeShards(const StageModel& model, absl::Span<const int32_t> cuts,
                            absl::Span<const int64_t> parameters, const CancellationToken& token,
                            ShardPlan* plan) {
  const CompactGraph& graph = model.graph();
  std::vector<int32_t> read_by(graph.num_nodes(), -1);  // last shard listing it as an input
  int64_t max_bytes = 0;
  int64_t iterations = 0;
  const int32_t shards = static_cast<int32_t>(cuts.size()) - 1;
  plan->shards.resize(shards);
  for (int32_t s = 0; s < shards; ++s) {
    PipelineShard& shard = plan->shards[s];
    shard.parameter_count = parameters[s];
    const int32_t begin = cuts[s];
    const int32_t end = cuts[s + 1];
    shard.nodes.reserve(end - begin);
    for (int32_t i = begin; i < end; ++i) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(++iterations));
      const NodeId v = model.item(i);
      shard.nodes.push_back(v);
      for (NodeId u : graph.inputs(v)) {
        if (model.position(u) < begin && read_by[u] != s) {
          read_by[u] = s;
          shard.inputs.push_back(u);
        }
      }
      for (NodeId w : graph.users(v)) {
        if (w == graph.output_node() || model.position(w) >= end) {
          shard.outputs.push_back(v);
          break;
        }
      }
    }
    shard.memory_bytes = end > begin ? model.StageMemoryBytes(begin, end) : 0;
    max_bytes = std::max(max_bytes, shard.memory_bytes);
  }
  int64_t crossing = 0;
  for (int32_t s = 1; s < shards; ++s) crossing += model.LiveBytes(cuts[s]);
  plan->max_shard_bytes = max_bytes;
  plan->cross_shard_bytes = crossing;
  return absl::OkStatus();
}

absl::Status FairscaleShards(const StageModel& model, const ShardOptions& options,
                             const CancellationToken& token, ShardPlan* plan) {
  AutoShardOptions auto_shard;
  auto_shard.shard_count = options.shard_count;
  auto_shard.exact = options.exact;
  PARTPLAN_RETURN_IF_ERROR(auto_shard.CheckAndSetup());
  PARTPLAN_ASSIGN_OR_RETURN(const ParameterCharges charges,
                            ModuleParameterCharges(model.graph(), token));
  PARTPLAN_ASSIGN_OR_RETURN(const AutoShardResult shards,
                            AutoShard(model.graph(), charges, auto_shard, token));
  const std::vector<int32_t> cuts = ItemCuts(model, shards.first_node);
  PARTPLAN_RETURN_IF_ERROR(DescribeShards(model, cuts, shards.parameters, token, plan));
  plan->planner = "shard/fairscale";
  return absl::OkStatus();
}

absl::Status BalancedShards(const StageModel& model, const DeviceList& devices,
                            const ShardOptions& options, const CancellationToken& token,
                            ShardPlan* plan) {
  if (devices.size() != options.shard_count) {
    return InvalidFieldError(
        "devices.devices",
        absl::StrCat("BALANCED places stage i on devices[i] and needs one device per stage: ",
                     devices.size(), " devices for shard_count ", options.shard_count));
  }
  PARTPLAN_ASSIGN_OR_RETURN(const StageWork work, ChooseStageWork(model, devices, token));
  PARTPLAN_ASSIGN_OR_RETURN(const StagePlan stages,
                            PlanBalancedStages(model, work.of_item, work.devices, token));
  PARTPLAN_ASSIGN_OR_RETURN(const std::vector<int64_t> parameters,
                            NodeParameters(model, stages.cuts, token));
  PARTPLAN_RETURN_IF_ERROR(DescribeShards(model, stages.cuts, parameters, token, plan));
  const StageTimes times(work.of_item, work.devices);
  double pipeline_seconds = 0;
  for (int s = 0; s < options.shard_count; ++s) {
    PipelineShard& shard = plan->shards[s];
    shard.logical_device_id = devices[s].logical_id;
    shard.cost = times.Time(s, stages.cuts[s], stages.cuts[s + 1]);
    pipeline_seconds += shard.cost;
    if (s == 0) continue;
    const double bandwidth =
        devices.BandwidthBetween(devices[s - 1].logical_id, devices[s].logical_id);
    if (bandwidth > 0) {
      pipeline_seconds += static_cast<double>(model.LiveBytes(stages.cuts[s])) / bandwidth;
    }
  }
  plan->shards_have_devices = true;
  plan->planner = absl::StrCat("shard/balanced/", WorkKindName(work.kind));
  plan->devices_used = options.shard_count;
  if (work.in_seconds) plan->critical_path_latency_seconds = pipeline_seconds;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShardOptions> ShardOptions::FromConfig(const v1::ShardConfig& config) {
  ShardOptions options;
  switch (config.mode()) {
    case v1::ShardConfig::MODE_UNSPECIFIED:
    case v1::ShardConfig::FAIRSCALE:
      options.mode = ShardMode::kFairscale;
      break;
    case v1::ShardConfig::BALANCED:
      options.mode = ShardMode::kBalanced;
      break;
    default:
      return InvalidFieldError("config.mode",
                               absl::StrCat("unknown shard mode ", static_cast<int>(config.mode()),
                                            "; use FAIRSCALE or BALANCED"));
  }
  if (config.shard_count() <= 0) {
    return InvalidFieldError("config.shard_count",
                             absl::StrCat("must be positive, got ", config.shard_count()));
  }
  options.shard_count = config.shard_count();
  options.exact = config.exact();
  return options;
}

absl::StatusOr<ShardPlan> ShardGraphPlan(const CompactGraph& graph, const ShardOptions& options,
                                         const DeviceList& devices,
                                         const CancellationToken& token) {
  const absl::Time start = absl::Now();
  if (graph.num_op_nodes() == 0) {
    return InvalidFieldError("graph.nodes",
                             "nothing to shard: the graph has no call_module, call_function or "
                             "call_method node");
  }
  PARTPLAN_ASSIGN_OR_RETURN(const StageModel model, StageModel::Create(graph, token));
  ShardPlan plan;
  PARTPLAN_RETURN_IF_ERROR(options.mode == ShardMode::kBalanced
                               ? BalancedShards(model, devices, options, token, &plan)
                               : FairscaleShards(model, options, token, &plan));
  plan.planner_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return plan;
}

}  // namespace partplan

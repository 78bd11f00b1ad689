#include "planner/parallelize/parallelize_problem.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "planner/base/status_util.h"
#include "planner/training/training_chain.h"

namespace partplan {
namespace {

bool PositiveFinite(double x) { return std::isfinite(x) && x > 0; }

absl::Status CheckAtLeastOne(absl::string_view field, int64_t value, int64_t most) {
  if (value < 1 || value > most) {
    return InvalidFieldError(field, absl::StrCat("from 1 to ", most, ", got ", value));
  }
  return absl::OkStatus();
}

absl::StatusOr<TransformerModel> ModelFrom(const v1::TransformerSummary& summary) {
  // Sizes past 2^24 (hidden size, sequence, vocabulary) are beyond any
  // model trained and would make products lose precision in doubles.
  constexpr int64_t kMostSize = int64_t{1} << 24;
  PARTPLAN_RETURN_IF_ERROR(
      CheckAtLeastOne("transformer.layers", summary.layers(), kMaxParallelizeLayers));
  PARTPLAN_RETURN_IF_ERROR(
      CheckAtLeastOne("transformer.hidden_size", summary.hidden_size(), kMostSize));
  PARTPLAN_RETURN_IF_ERROR(
      CheckAtLeastOne("transformer.attention_heads", summary.attention_heads(), kMostSize));
  PARTPLAN_RETURN_IF_ERROR(
      CheckAtLeastOne("transformer.sequence_length", summary.sequence_length(), kMostSize));
  PARTPLAN_RETURN_IF_ERROR(
      CheckAtLeastOne("transformer.vocabulary_size", summary.vocabulary_size(), kMostSize));
  if (summary.hidden_size() % summary.attention_heads() != 0) {
    return InvalidFieldError(
        "transformer.attention_heads",
        absl::StrCat(summary.attention_heads(), " heads do not divide hidden_size ",
                     summary.hidden_size()));
  }
  if (summary.ffn_hidden_size() < 0 || summary.ffn_hidden_size() > kMostSize) {
    return InvalidFieldError(
        "transformer.ffn_hidden_size",
        absl::StrCat("from 0 to ", kMostSize, ", got ", summary.ffn_hidden_size()));
  }
  if (summary.experts() < 0 || summary.experts() > 4096) {
    return InvalidFieldError("transformer.experts",
                             absl::StrCat("from 0 to 4096, got ", summary.experts()));
  }
  const int experts = std::max(1, summary.experts());
  if (summary.experts_per_token() < 0 || summary.experts_per_token() > experts) {
    return InvalidFieldError(
        "transformer.experts_per_token",
        absl::StrCat("from 0 to experts (", experts, "), got ", summary.experts_per_token()));
  }
  TransformerModel model;
  model.layers = summary.layers();
  model.hidden = static_cast<double>(summary.hidden_size());
  model.heads = summary.attention_heads();
  model.sequence = static_cast<double>(summary.sequence_length());
  model.vocabulary = static_cast<double>(summary.vocabulary_size());
  model.ffn = summary.ffn_hidden_size() == 0 ? 4 * model.hidden
                                             : static_cast<double>(summary.ffn_hidden_size());
  model.experts = experts;
  model.experts_per_token = std::max(1, summary.experts_per_token());
  return model;
}

absl::StatusOr<ParallelizeCluster> ClusterFrom(const v1::Cluster& cluster) {
  if (cluster.host_groups().empty()) {
    return InvalidFieldError("cluster.host_groups", "at least one group of hosts");
  }
  ParallelizeCluster out;
  int64_t devices = 0;
  for (int g = 0; g < cluster.host_groups_size(); ++g) {
    const v1::HostGroup& group = cluster.host_groups(g);
    const std::string field = absl::StrCat("cluster.host_groups[", g, "]");
    PARTPLAN_RETURN_IF_ERROR(
        CheckAtLeastOne(field + ".hosts", group.hosts(), kMaxParallelizeDevices));
    PARTPLAN_RETURN_IF_ERROR(CheckAtLeastOne(field + ".devices_per_host", group.devices_per_host(),
                                             kMaxParallelizeDevices));
    devices += int64_t{group.hosts()} * group.devices_per_host();
    if (devices > kMaxParallelizeDevices) {
      return InvalidFieldError(
          field, absl::StrCat("the cluster has more than ", kMaxParallelizeDevices, " devices"));
    }
    const v1::Accelerator& accelerator = group.accelerator();
    if (!PositiveFinite(accelerator.memory_bytes())) {
      return InvalidFieldError(field + ".accelerator.memory_bytes",
                               absl::StrCat("positive, got ", accelerator.memory_bytes()));
    }
    if (!PositiveFinite(accelerator.peak_flops_per_second())) {
      return InvalidFieldError(field + ".accelerator.peak_flops_per_second",
                               absl::StrCat("positive, got ", accelerator.peak_flops_per_second()));
    }
    if (!PositiveFinite(group.intra_host_bytes_per_second())) {
      return InvalidFieldError(field + ".intra_host_bytes_per_second",
                               absl::StrCat("positive, got ", group.intra_host_bytes_per_second()));
    }
    if (!PositiveFinite(group.inter_host_bytes_per_second())) {
      return InvalidFieldError(field + ".inter_host_bytes_per_second",
                               absl::StrCat("positive, got ", group.inter_host_bytes_per_second()));
    }
    DeviceType type;
    type.name = accelerator.name().empty() ? absl::StrCat("group ", g) : accelerator.name();
    type.memory_bytes = accelerator.memory_bytes();
    type.peak_flops = accelerator.peak_flops_per_second();
    type.intra_host_bytes_per_second = group.intra_host_bytes_per_second();
    type.inter_host_bytes_per_second = group.inter_host_bytes_per_second();
    out.types.push_back(type);
    for (int h = 0; h < group.hosts(); ++h) {
      out.host_type.push_back(g);
      out.devices_per_host.push_back(group.devices_per_host());
    }
  }
  const int hosts = static_cast<int>(out.host_type.size());
  std::set<std::pair<int, int>> busy;
  for (int i = 0; i < cluster.busy_devices_size(); ++i) {
    const std::string field = absl::StrCat("cluster.busy_devices[", i, "]");
    const std::vector<absl::string_view> parts = absl::StrSplit(cluster.busy_devices(i), ':');
    int host = -1, index = -1;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &host) ||
        !absl::SimpleAtoi(parts[1], &index)) {
      return InvalidFieldError(
          field, absl::StrCat("\"<host>:<device>\", got \"", cluster.busy_devices(i), "\""));
    }
    if (host < 0 || host >= hosts || index < 0 || index >= out.devices_per_host[host]) {
      return InvalidFieldError(field, absl::StrCat("no device ", cluster.busy_devices(i),
                                                   " in a cluster of ", hosts, " hosts"));
    }
    if (!busy.insert({host, index}).second) {
      return InvalidFieldError(field, absl::StrCat(cluster.busy_devices(i), " listed twice"));
    }
  }
  for (int host = 0; host < hosts; ++host) {
    for (int index = 0; index < out.devices_per_host[host]; ++index) {
      if (busy.count({host, index}) == 0) out.free.push_back({host, index, out.host_type[host]});
    }
  }
  if (out.free.empty()) {
    return InvalidFieldError("cluster.busy_devices", "every device of the cluster is busy");
  }
  return out;
}

absl::StatusOr<double> BytesPerParameter(absl::string_view field, bool given, double value,
                                         double fallback) {
  if (!given) return fallback;
  if (!std::isfinite(value) || value < 0 || value > 1024) {
    return InvalidFieldError(field, absl::StrCat("from 0 to 1024, got ", value));
  }
  return value;
}

template <typename Domain, typename Kind>
absl::Status ChoicesFrom(absl::string_view field, const google::protobuf::RepeatedField<int>& given,
                         const std::vector<Domain>& all,
                         absl::StatusOr<Domain> (*of)(Kind, absl::string_view),
                         std::vector<Domain>* out) {
  if (given.empty()) {
    *out = all;
    return absl::OkStatus();
  }
  for (int i = 0; i < given.size(); ++i) {
    const std::string at = absl::StrCat(field, "[", i, "]");
    PARTPLAN_ASSIGN_OR_RETURN(const Domain choice, of(static_cast<Kind>(given[i]), at));
    if (std::find(out->begin(), out->end(), choice) != out->end()) {
      return InvalidFieldError(at, "listed twice");
    }
    out->push_back(choice);
  }
  return absl::OkStatus();
}

absl::StatusOr<LayerRecomputeMode> LayerRecomputeModeOf(v1::LayerRecompute kind,
                                                        absl::string_view field) {
  switch (kind) {
    case v1::LAYER_RECOMPUTE_NONE:
      return LayerRecomputeMode::kNone;
    case v1::LAYER_RECOMPUTE_SELECTIVE:
      return LayerRecomputeMode::kSelective;
    case v1::LAYER_RECOMPUTE_FULL:
      return LayerRecomputeMode::kFull;
    default:
      return InvalidFieldError(field, absl::StrCat("unknown LayerRecompute ", kind));
  }
}

absl::StatusOr<ParallelizeOptions> OptionsFrom(const v1::ParallelizeOptions& given) {
  ParallelizeOptions options;
  PARTPLAN_RETURN_IF_ERROR(
      CheckAtLeastOne("options.global_batch_size", given.global_batch_size(), int64_t{1} << 24));
  options.global_batch = given.global_batch_size();
  PARTPLAN_ASSIGN_OR_RETURN(
      options.state_bytes.weights,
      BytesPerParameter("options.weight_bytes_per_parameter",
                        given.has_weight_bytes_per_parameter(), given.weight_bytes_per_parameter(),
                        options.state_bytes.weights));
  PARTPLAN_ASSIGN_OR_RETURN(
      options.state_bytes.gradients,
      BytesPerParameter("options.gradient_bytes_per_parameter",
                        given.has_gradient_bytes_per_parameter(),
                        given.gradient_bytes_per_parameter(), options.state_bytes.gradients));
  PARTPLAN_ASSIGN_OR_RETURN(
      options.state_bytes.optimizer,
      BytesPerParameter("options.optimizer_bytes_per_parameter",
                        given.has_optimizer_bytes_per_parameter(),
                        given.optimizer_bytes_per_parameter(), options.state_bytes.optimizer));
  if (given.has_compute_efficiency()) {
    if (!(given.compute_efficiency() > 0 && given.compute_efficiency() <= 1)) {
      return InvalidFieldError("options.compute_efficiency",
                               absl::StrCat("in (0, 1], got ", given.compute_efficiency()));
    }
    options.compute_efficiency = given.compute_efficiency();
  }
  if (!(given.data_parallel_overlap() >= 0 && given.data_parallel_overlap() <= 1)) {
    return InvalidFieldError("options.data_parallel_overlap",
                             absl::StrCat("in [0, 1], got ", given.data_parallel_overlap()));
  }
  options.data_parallel_overlap = given.data_parallel_overlap();
  if (!(given.collective_latency_seconds() >= 0 && given.collective_latency_seconds() <= 0.01)) {
    return InvalidFieldError(
        "options.collective_latency_seconds",
        absl::StrCat("in [0, 0.01], got ", given.collective_latency_seconds()));
  }
  options.collective_latency_seconds = given.collective_latency_seconds();
  options.tensor_parallel_across_hosts = given.tensor_parallel_across_hosts();
  PARTPLAN_RETURN_IF_ERROR((ChoicesFrom<PipelineSchedule, v1::PipelineScheduleKind>(
      "options.schedules", given.schedules(),
      {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B, PipelineSchedule::kGpipe,
       PipelineSchedule::kZeroBubbleH1},
      &PipelineScheduleOf, &options.schedules)));
  if (given.max_chunks_per_device() < 0 || given.max_chunks_per_device() > 64) {
    return InvalidFieldError("options.max_chunks_per_device",
                             absl::StrCat("from 0 to 64, got ", given.max_chunks_per_device()));
  }
  if (given.max_chunks_per_device() > 0) {
    options.max_chunks_per_device = given.max_chunks_per_device();
  }
  PARTPLAN_RETURN_IF_ERROR((ChoicesFrom<ZeroStage, v1::ZeroStageKind>(
      "options.zero_stages", given.zero_stages(),
      {ZeroStage::kNone, ZeroStage::kOptimizer, ZeroStage::kGradients, ZeroStage::kParameters},
      &ZeroStageOf, &options.zero_stages)));
  PARTPLAN_RETURN_IF_ERROR((ChoicesFrom<LayerRecomputeMode, v1::LayerRecompute>(
      "options.recompute", given.recompute(),
      {LayerRecomputeMode::kNone, LayerRecomputeMode::kSelective, LayerRecomputeMode::kFull},
      &LayerRecomputeModeOf, &options.recompute)));
  if (given.max_configurations() < 0 ||
      given.max_configurations() > kMaxParallelizeConfigurations) {
    return InvalidFieldError("options.max_configurations",
                             absl::StrCat("from 0 to ", kMaxParallelizeConfigurations, ", got ",
                                          given.max_configurations()));
  }
  if (given.max_configurations() > 0) options.max_configurations = given.max_configurations();
  options.all_configurations = given.all_configurations();
  if (given.max_search_nodes() < 0 || given.max_search_nodes() > (int64_t{1} << 24)) {
    return InvalidFieldError("options.max_search_nodes",
                             absl::StrCat("from 0 to 2^24, got ", given.max_search_nodes()));
  }
  if (given.max_search_nodes() > 0) options.max_search_nodes = given.max_search_nodes();
  const std::pair<const char*, int> fixed[] = {
      {"options.tensor_parallel", given.tensor_parallel()},
      {"options.pipeline_parallel", given.pipeline_parallel()},
      {"options.data_parallel", given.data_parallel()},
      {"options.micro_batch_size", given.micro_batch_size()}};
  for (const auto& [field, value] : fixed) {
    if (value < 0 || value > kMaxParallelizeDevices) {
      return InvalidFieldError(field,
                               absl::StrCat("from 0 to ", kMaxParallelizeDevices, ", got ", value));
    }
  }
  options.tensor = given.tensor_parallel();
  options.pipeline = given.pipeline_parallel();
  options.data = given.data_parallel();
  options.micro_batch_size = given.micro_batch_size();
  return options;
}

}  // namespace

double TransformerModel::LayerParameters() const {
  const double attention = 4 * hidden * hidden + 4 * hidden;
  const double mlp = (2 * hidden * ffn + ffn + hidden) * experts;
  const double router = experts > 1 ? hidden * experts : 0;
  const double norms = 4 * hidden;
  return attention + mlp + router + norms;
}

double TransformerModel::TotalParameters() const {
  return layers * LayerParameters() + WordEmbeddingParameters() + PositionEmbeddingParameters() +
         FinalNormParameters();
}

double TransformerModel::LayerGemmFlopsPerSequence() const {
  const double router = experts > 1 ? 2 * sequence * hidden * experts : 0;
  return 8 * sequence * hidden * hidden + 4 * sequence * hidden * ffn * experts_per_token + router;
}

double TransformerModel::LayerAttentionFlopsPerSequence() const {
  return 4 * sequence * sequence * hidden;
}

double TransformerModel::ModelFlopsPerSequence() const {
  return 3 * (layers * (LayerGemmFlopsPerSequence() + LayerAttentionFlopsPerSequence()) +
              LogitFlopsPerSequence());
}

std::string ParallelizeCluster::Name(const ClusterDevice& device) {
  return absl::StrCat(device.host, ":", device.index);
}

absl::StatusOr<ParallelizeProblem> ParallelizeProblemFromRequest(
    const v1::ParallelizeRequest& request, const CompactGraph* graph) {
  if (!request.has_transformer() && graph == nullptr) {
    return InvalidFieldError("transformer",
                             "the model to train is required, as `transformer` or as `graph`");
  }
  ParallelizeProblem problem;
  problem.graph = graph;
  problem.has_transformer = request.has_transformer();
  if (problem.has_transformer) {
    PARTPLAN_ASSIGN_OR_RETURN(problem.model, ModelFrom(request.transformer()));
  } else {
    problem.model.layers = 0;
  }
  if (request.options().graph_batch_size() < 0 ||
      (graph == nullptr && request.options().graph_batch_size() != 0)) {
    return InvalidFieldError("options.graph_batch_size",
                             graph == nullptr ? "only with a graph" : "at least 0 (0 means 1)");
  }
  problem.graph_batch_size = std::max(1, request.options().graph_batch_size());
  PARTPLAN_ASSIGN_OR_RETURN(problem.cluster, ClusterFrom(request.cluster()));
  PARTPLAN_ASSIGN_OR_RETURN(problem.options, OptionsFrom(request.options()));
  return problem;
}

v1::PipelineScheduleKind ScheduleKindOf(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kGpipe:
      return v1::GPIPE;
    case PipelineSchedule::k1F1B:
      return v1::ONE_F_ONE_B;
    case PipelineSchedule::kInterleaved1F1B:
      return v1::INTERLEAVED_1F1B;
    case PipelineSchedule::kZeroBubbleH1:
      return v1::ZERO_BUBBLE_H1;
  }
  return v1::ONE_F_ONE_B;
}

v1::ZeroStageKind ZeroStageKindOf(ZeroStage zero) {
  switch (zero) {
    case ZeroStage::kNone:
      return v1::ZERO_NONE;
    case ZeroStage::kOptimizer:
      return v1::ZERO_OPTIMIZER;
    case ZeroStage::kGradients:
      return v1::ZERO_GRADIENTS;
    case ZeroStage::kParameters:
      return v1::ZERO_PARAMETERS;
  }
  return v1::ZERO_NONE;
}

v1::LayerRecompute LayerRecomputeOf(LayerRecomputeMode mode) {
  switch (mode) {
    case LayerRecomputeMode::kNone:
      return v1::LAYER_RECOMPUTE_NONE;
    case LayerRecomputeMode::kSelective:
      return v1::LAYER_RECOMPUTE_SELECTIVE;
    case LayerRecomputeMode::kFull:
      return v1::LAYER_RECOMPUTE_FULL;
  }
  return v1::LAYER_RECOMPUTE_NONE;
}

}  // namespace partplan

#include "planner/training/training_chain.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

absl::Status NotNegative(absl::string_view field, int64_t value) {
  if (value >= 0) return absl::OkStatus();
  return InvalidFieldError(absl::StrCat("config.", field),
                           absl::StrCat("must not be negative, got ", value));
}

// An optional bytes-per-parameter figure: `fallback` when absent.
absl::StatusOr<double> BytesPerParameter(absl::string_view field, bool has, double value,
                                         double fallback) {
  if (!has) return fallback;
  if (!std::isfinite(value) || value < 0) {
    return InvalidFieldError(absl::StrCat("config.", field), "must be finite and not negative");
  }
  return value;
}

}  // namespace

absl::StatusOr<PipelineSchedule> PipelineScheduleOf(v1::PipelineScheduleKind kind,
                                                    absl::string_view field) {
  switch (kind) {
    case v1::PIPELINE_SCHEDULE_UNSPECIFIED:
    case v1::ONE_F_ONE_B:
      return PipelineSchedule::k1F1B;
    case v1::GPIPE:
      return PipelineSchedule::kGpipe;
    case v1::INTERLEAVED_1F1B:
      return PipelineSchedule::kInterleaved1F1B;
    case v1::ZERO_BUBBLE_H1:
      return PipelineSchedule::kZeroBubbleH1;
    default:
      return InvalidFieldError(field, absl::StrCat("unknown PipelineScheduleKind ", kind));
  }
}

absl::StatusOr<ZeroStage> ZeroStageOf(v1::ZeroStageKind kind, absl::string_view field) {
  switch (kind) {
    case v1::ZERO_NONE:
      return ZeroStage::kNone;
    case v1::ZERO_OPTIMIZER:
      return ZeroStage::kOptimizer;
    case v1::ZERO_GRADIENTS:
      return ZeroStage::kGradients;
    case v1::ZERO_PARAMETERS:
      return ZeroStage::kParameters;
    default:
      return InvalidFieldError(field, absl::StrCat("unknown ZeroStageKind ", kind));
  }
}

namespace {

absl::StatusOr<RecomputeChoice> RecomputeOf(v1::RecomputePolicy policy) {
  switch (policy) {
    case v1::RECOMPUTE_AUTO:
      return RecomputeChoice::kAuto;
    case v1::RECOMPUTE_NEVER:
      return RecomputeChoice::kNever;
    case v1::RECOMPUTE_ALWAYS:
      return RecomputeChoice::kAlways;
    default:
      return InvalidFieldError("config.recompute",
                               absl::StrCat("unknown RecomputePolicy ", policy));
  }
}

// The forward's kind of work, chosen for the whole graph as ChooseStageWork
// (pipeline/stage_work.h) chooses it.
enum class ForwardWork { kLatency, kFlops, kParameters };

ForwardWork ForwardWorkOf(const CompactGraph& graph) {
  if (graph.has_latencies()) return ForwardWork::kLatency;
  return graph.has_flops() ? ForwardWork::kFlops : ForwardWork::kParameters;
}

// How a node's seconds and FLOPs become work in the forward's unit.
struct WorkUnits {
  bool latency = false;      // work is seconds on a device of speed 1
  double shared_flops = 0;   // every device's compute_flops_per_second, when one figure
};

}  // namespace

absl::StatusOr<TrainingOptions> TrainingOptionsFromConfig(const v1::TrainingConfig& config,
                                                          int devices) {
  if (devices < 1) {
    return InvalidFieldError("devices.devices",
                             "PlanTraining needs at least one device: the pipeline's, in order");
  }
  TrainingOptions options;
  StageSearchOptions& search = options.search;
  PARTPLAN_ASSIGN_OR_RETURN(search.schedule.schedule,
                            PipelineScheduleOf(config.schedule(), "config.schedule"));
  search.schedule.devices = devices;
  if (config.micro_batches() < 1) {
    return InvalidFieldError("config.micro_batches",
                             absl::StrCat("at least 1 micro-batch, got ", config.micro_batches()));
  }
  if (config.micro_batches() > kMaxTrainingMicroBatches) {
    return InvalidFieldError(
        "config.micro_batches",
        absl::StrCat("at most ", kMaxTrainingMicroBatches, " micro-batches per step, got ",
                     config.micro_batches()));
  }
  search.schedule.micro_batches = config.micro_batches();
  PARTPLAN_RETURN_IF_ERROR(NotNegative("chunks_per_device", config.chunks_per_device()));
  search.schedule.chunks_per_device = std::max(config.chunks_per_device(), 1);
  if (search.schedule.chunks_per_device > 1 &&
      search.schedule.schedule != PipelineSchedule::kInterleaved1F1B) {
    return InvalidFieldError("config.chunks_per_device",
                             absl::StrCat(search.schedule.chunks_per_device,
                                          " chunks per device need schedule INTERLEAVED_1F1B"));
  }
  if (search.schedule.schedule == PipelineSchedule::kInterleaved1F1B &&
      config.micro_batches() % devices != 0) {
    return InvalidFieldError(
        "config.micro_batches",
        absl::StrCat("INTERLEAVED_1F1B needs a multiple of the ", devices, " devices, got ",
                     config.micro_batches()));
  }
  const int64_t stages = int64_t{devices} * search.schedule.chunks_per_device;
  if (stages > kMaxTrainingStages) {
    const bool chunked = search.schedule.chunks_per_device > 1;
    return InvalidFieldError(
        chunked ? "config.chunks_per_device" : "devices.devices",
        absl::StrCat("at most ", kMaxTrainingStages,
                     " pipeline stages (devices x chunks_per_device), got ", devices,
                     " devices x ", search.schedule.chunks_per_device, " chunks"));
  }
  if (stages * config.micro_batches() > kMaxTrainingStageMicroBatches) {
    return InvalidFieldError(
        "config.micro_batches",
        absl::StrCat("devices x chunks_per_device x micro_batches is ", devices, " x ",
                     search.schedule.chunks_per_device, " x ", config.micro_batches(),
                     ", above ", kMaxTrainingStageMicroBatches));
  }
  static_assert(3 * kMaxTrainingStageMicroBatches <= ScheduleOptions::kMaxScheduledOps,
                "the caps keep every schedule within ScheduleOptions' bound");
  // Anything else ScheduleOptions refuses (none that the checks above let
  // through), named in the config.
  PARTPLAN_RETURN_IF_ERROR(
      WithFieldPrefix(search.schedule.CheckAndSetup(), "", "config."));

  PARTPLAN_RETURN_IF_ERROR(NotNegative("micro_batch_size", config.micro_batch_size()));
  options.micro_batch_size = std::max(config.micro_batch_size(), 1);

  TrainingMemoryOptions& memory = search.memory;
  const TrainingMemoryOptions defaults;
  PARTPLAN_ASSIGN_OR_RETURN(
      memory.weight_bytes,
      BytesPerParameter("weight_bytes_per_parameter", config.has_weight_bytes_per_parameter(),
                        config.weight_bytes_per_parameter(), defaults.weight_bytes));
  PARTPLAN_ASSIGN_OR_RETURN(
      memory.gradient_bytes,
      BytesPerParameter("gradient_bytes_per_parameter", config.has_gradient_bytes_per_parameter(),
                        config.gradient_bytes_per_parameter(), defaults.gradient_bytes));
  PARTPLAN_ASSIGN_OR_RETURN(memory.optimizer_bytes,
                            BytesPerParameter("optimizer_bytes_per_parameter",
                                              config.has_optimizer_bytes_per_parameter(),
                                              config.optimizer_bytes_per_parameter(),
                                              defaults.optimizer_bytes));
  PARTPLAN_RETURN_IF_ERROR(NotNegative("data_parallel", config.data_parallel()));
  memory.data_parallel = std::max(config.data_parallel(), 1);
  PARTPLAN_ASSIGN_OR_RETURN(memory.zero, ZeroStageOf(config.zero(), "config.zero"));
  memory.activations_until_weight =
      config.has_activations_until_weight() ? config.activations_until_weight() : true;
  PARTPLAN_RETURN_IF_ERROR(WithFieldPrefix(memory.CheckAndSetup(), "memory.", "config."));

  PARTPLAN_ASSIGN_OR_RETURN(search.recompute, RecomputeOf(config.recompute()));
  PARTPLAN_RETURN_IF_ERROR(NotNegative("max_search_nodes", config.max_search_nodes()));
  if (config.max_search_nodes() > 0) search.max_search_nodes = config.max_search_nodes();
  return options;
}

std::vector<TrainingDevice> TrainingDevicesFrom(const DeviceList& devices) {
  const int p = devices.size();
  std::vector<TrainingDevice> result(p);
  for (int d = 0; d < p; ++d) {
    result[d].name = devices[d].name;
    result[d].memory_bytes = static_cast<double>(devices[d].available_memory_bytes);
    const int next = (d + 1) % p;
    const double rate =
        next == d ? 0 : devices.BandwidthBetween(devices[d].logical_id, devices[next].logical_id);
    result[d].link_bytes_per_second = rate > 0 ? rate : kInfinity;
  }
  return result;
}

absl::StatusOr<TrainingChainFromGraphResult> TrainingChainFromGraph(
    const StageModel& model, const DeviceList& inventory,
    const google::protobuf::RepeatedPtrField<v1::NodePin>& pins,
    std::vector<TrainingDevice>* devices, const CancellationToken& token) {
  const CompactGraph& graph = model.graph();
  const ForwardWork kind = ForwardWorkOf(graph);
  const int p = inventory.size();

  // Speeds: 1 for latencies; else every device's throughput, or none's.
  bool scale = false;
  if (kind != ForwardWork::kLatency && p > 0) {
    scale = inventory.compute_flops_per_second(0) > 0;
    for (int d = 1; d < p; ++d) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(d));
      if ((inventory.compute_flops_per_second(d) > 0) != scale) {
        const int without = scale ? d : 0;
        return InvalidFieldError(
            absl::StrCat("devices.devices[", without, "].compute_flops_per_second"),
            absl::StrCat("no node gives a latency, so PlanTraining divides ",
                         kind == ForwardWork::kFlops ? "FLOPs" : "parameter counts",
                         " by every device's throughput or by none: give it for all devices "
                         "or for none (devices[",
                         scale ? 0 : d, "] gives one, devices[", without, "] does not)"));
      }
    }
  }
  WorkUnits units;
  units.latency = kind == ForwardWork::kLatency;
  if (p > 0 && inventory.compute_flops_per_second(0) > 0) {
    units.shared_flops = inventory.compute_flops_per_second(0);
    for (int d = 1; d < p; ++d) {
      if (inventory.compute_flops_per_second(d) != units.shared_flops) units.shared_flops = 0;
    }
  }
  devices->resize(p);
  for (int d = 0; d < p; ++d) {
    (*devices)[d].speed = scale ? inventory.compute_flops_per_second(d) : 1.0;
  }

  TrainingChainFromGraphResult result;
  result.in_seconds = kind == ForwardWork::kLatency || scale;
  TrainingChain& chain = result.chain;
  const int32_t n = model.num_items();
  chain.items.resize(n);
  chain.live_bytes.resize(static_cast<size_t>(n) + 1);
  result.item_nodes.resize(n);

  // One backward part of a node with NodeTraining, as work: its FLOPs when
  // above 0, else its seconds, converted to the forward's unit.
  const auto part = [&](NodeId v, double seconds, double flops, const char* seconds_field,
                        const char* flops_field) -> absl::StatusOr<double> {
    const bool use_flops = flops > 0;
    if (use_flops != units.latency || (use_flops ? flops : seconds) == 0) {
      return use_flops ? flops : seconds;  // already in the forward's unit
    }
    if (units.shared_flops <= 0) {
      return InvalidFieldError(
          absl::StrCat("graph.nodes[", v, "].training.", use_flops ? flops_field : seconds_field),
          absl::StrCat(
              "the graph's forward costs are ",
              units.latency ? "latencies (seconds)" : "FLOPs (no node gives a latency)",
              ", and this node's backward is in ", use_flops ? "FLOPs" : "seconds",
              ": converting needs one compute_flops_per_second shared by every device"));
    }
    return use_flops ? flops / units.shared_flops : seconds * units.shared_flops;
  };

  NodeReader nodes(graph);
  double forward_sum = 0;
  double backward_sum = 0;
  for (int32_t i = 0; i < n; ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
    const NodeId v = model.item(i);
    result.item_nodes[i] = v;
    TrainingItem& item = chain.items[i];
    const NodeFields& own = nodes.OwnFields(v);
    switch (kind) {
      case ForwardWork::kLatency:
        item.forward = std::max(graph.latency_seconds(v), 0.0);
        break;
      case ForwardWork::kFlops:
        item.forward = graph.flops(v);
        break;
      case ForwardWork::kParameters:
        item.forward = static_cast<double>(own.parameter_count);
        break;
    }
    item.parameters = own.parameter_count;
    item.transient_bytes = graph.output_bytes(v);
    if (const NodeTrainingFields* training = graph.training(v); training != nullptr) {
      PARTPLAN_ASSIGN_OR_RETURN(
          item.backward_input,
          part(v, training->backward_input_seconds, training->backward_input_flops,
               "backward_input_seconds", "backward_input_flops"));
      PARTPLAN_ASSIGN_OR_RETURN(
          item.backward_weight,
          part(v, training->backward_weight_seconds, training->backward_weight_flops,
               "backward_weight_seconds", "backward_weight_flops"));
      item.saved_activation_bytes = training->saved_activation_bytes;
    } else {
      item.backward_input = item.backward_weight = item.forward;
      if (graph.op(v) != v1::GET_ATTR) {
        item.saved_activation_bytes = graph.output_bytes(v);
        ++result.estimated_saved_bytes_nodes;
      }
    }
    forward_sum += item.forward;
    backward_sum += item.backward_input + item.backward_weight;
  }
  if (!std::isfinite(forward_sum) || !std::isfinite(backward_sum)) {
    return InvalidFieldError("graph.nodes",
                             "the nodes' training costs add up beyond the largest double");
  }
  // Storages several nodes save: each later saver counts them too, and
  // consecutive savers make a pair the stage search counts once per stage.
  absl::flat_hash_map<std::pair<NodeId, int32_t>, int32_t> last_saver;
  for (int32_t i = 0; i < n; ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
    const NodeId v = model.item(i);
    const absl::Span<const CompactGraph::Resaved> resaved = graph.resaved(v);
    for (size_t j = 0; j < resaved.size(); ++j) {
      const CompactGraph::Resaved& storage = resaved[j];
      const int32_t first = model.position(storage.first_saver);
      const auto [it, inserted] =
          last_saver.try_emplace({storage.first_saver, storage.storage}, first);
      const int32_t before = it->second;
      if (before == i) continue;  // listed twice by one node
      if (inserted && first >= 0 &&
          storage.bytes > chain.items[first].saved_activation_bytes) {
        return InvalidFieldError(
            absl::StrCat("graph.nodes[", v, "].training.resaved[", j, "].bytes"),
            absl::StrCat(storage.bytes, " bytes, more than node '",
                         graph.name(storage.first_saver), "' saves (",
                         chain.items[first].saved_activation_bytes, ")"));
      }
      chain.items[i].saved_activation_bytes += storage.bytes;
      if (before >= 0) chain.shared_saves.push_back({before, i, storage.bytes});
      it->second = i;
    }
  }
  for (int32_t c = 0; c <= n; ++c) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(c));
    chain.live_bytes[c] = model.LiveBytes(c);
  }

  if (!pins.empty()) {
    chain.placement.assign(n, StagePlacement::kAny);
    absl::flat_hash_map<int32_t, int> pinned_by;  // item -> its pin's index
    for (int i = 0; i < pins.size(); ++i) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
      const v1::NodePin& pin = pins.Get(i);
      const std::string field = absl::StrCat("config.pins[", i, "]");
      const NodeId v = graph.Find(pin.node());
      if (v < 0) {
        return InvalidFieldError(field + ".node",
                                 absl::StrCat("no node is called '", pin.node(), "'"));
      }
      const int32_t position = model.position(v);
      if (position < 0) {
        return InvalidFieldError(
            field + ".node", absl::StrCat("node '", pin.node(), "' is a ",
                                          v1::Op_Name(graph.op(v)),
                                          ", in no stage: pin a node of the pipeline's stages"));
      }
      StagePlacement placement = StagePlacement::kAny;
      switch (pin.pin()) {
        case v1::FIRST_STAGE:
          placement = StagePlacement::kFirst;
          break;
        case v1::LAST_STAGE:
          placement = StagePlacement::kLast;
          break;
        case v1::OWN_STAGE:
          placement = StagePlacement::kAlone;
          break;
        default:
          return InvalidFieldError(
              field + ".pin", absl::StrCat("give FIRST_STAGE, LAST_STAGE or OWN_STAGE, got ",
                                           static_cast<int>(pin.pin())));
      }
      if (const auto [it, inserted] = pinned_by.emplace(position, i); !inserted) {
        return InvalidFieldError(field + ".node",
                                 absl::StrCat("node '", pin.node(),
                                              "' is pinned twice (first by pins[", it->second,
                                              "])"));
      }
      chain.placement[position] = placement;
    }
  }
  return result;
}

namespace {

// The config's tied parameters, as the chain's: each group's nodes as
// items, ascending; the shared parameters taken off each node's own.
absl::Status AddTiedParameters(const StageModel& model,
                               const google::protobuf::RepeatedPtrField<v1::TiedParameters>& tied,
                               TrainingChain* chain, const CancellationToken& token) {
  const CompactGraph& graph = model.graph();
  int64_t work = 0;
  for (int g = 0; g < tied.size(); ++g) {
    const v1::TiedParameters& group = tied.Get(g);
    const std::string field = absl::StrCat("config.tied[", g, "]");
    if (group.nodes().empty()) {
      return InvalidFieldError(field + ".nodes", "name the nodes that share the parameters");
    }
    if (group.parameter_count() < 0) {
      return InvalidFieldError(field + ".parameter_count",
                               absl::StrCat("must not be negative, got ", group.parameter_count()));
    }
    TiedParameters parameters;
    parameters.parameters = group.parameter_count();
    parameters.same_stage = group.same_stage();
    for (int j = 0; j < group.nodes_size(); ++j) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      const NodeId v = graph.Find(group.nodes(j));
      const int32_t position = v < 0 ? -1 : model.position(v);
      if (position < 0) {
        return InvalidFieldError(
            absl::StrCat(field, ".nodes[", j, "]"),
            absl::StrCat("'", group.nodes(j),
                         "' is not a node of the pipeline's stages (all but placeholders and the "
                         "output)"));
      }
      parameters.items.push_back(position);
    }
    std::sort(parameters.items.begin(), parameters.items.end());
    if (std::adjacent_find(parameters.items.begin(), parameters.items.end()) !=
        parameters.items.end()) {
      return InvalidFieldError(field + ".nodes", "a node is listed twice");
    }
    for (const int item : parameters.items) {
      int64_t& own = chain->items[item].parameters;
      own = std::max<int64_t>(0, own - parameters.parameters);
    }
    chain->tied.push_back(std::move(parameters));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainingProblem> TrainingProblemFromRequest(const CompactGraph& graph,
                                                           const DeviceList& devices,
                                                           const v1::TrainingConfig& config,
                                                           const CancellationToken& token) {
  if (devices.empty()) {
    return InvalidFieldError("devices.devices",
                             "PlanTraining needs at least one device: the pipeline's, in order");
  }
  TrainingProblem problem;
  PARTPLAN_ASSIGN_OR_RETURN(problem.options, TrainingOptionsFromConfig(config, devices.size()));
  PARTPLAN_ASSIGN_OR_RETURN(const StageModel model, StageModel::Create(graph, token));
  const int stages = problem.options.search.schedule.stages();
  if (model.num_items() < stages) {
    return InvalidFieldError(
        "devices.devices",
        absl::StrCat("the pipeline has ", stages, " stages (", devices.size(), " devices x ",
                     problem.options.search.schedule.chunks_per_device,
                     " chunks) and the graph only ", model.num_items(),
                     " nodes to place in them (all but placeholders and the output); each stage "
                     "needs one"));
  }
  problem.devices = TrainingDevicesFrom(devices);
  PARTPLAN_ASSIGN_OR_RETURN(
      TrainingChainFromGraphResult chain,
      TrainingChainFromGraph(model, devices, config.pins(), &problem.devices, token));
  problem.chain = std::move(chain.chain);
  PARTPLAN_RETURN_IF_ERROR(AddTiedParameters(model, config.tied(), &problem.chain, token));
  problem.item_nodes = std::move(chain.item_nodes);
  problem.estimated_saved_bytes_nodes = chain.estimated_saved_bytes_nodes;
  problem.in_seconds = chain.in_seconds;
  return problem;
}

}  // namespace partplan

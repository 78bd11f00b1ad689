#include "planner/parallelize/graph_costs.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "partplan/v1/device.pb.h"
#include "partplan/v1/training.pb.h"
#include "planner/base/limits.h"
#include "planner/base/status_util.h"
#include "planner/graph/devices.h"
#include "planner/training/training_chain.h"

namespace partplan {
namespace {

// The training planner's problem for `c` on ranks with `links`.
absl::StatusOr<TrainingProblem> ProblemOn(const GraphModel& model,
                                          const ParallelizeOptions& options,
                                          const ParallelCandidate& c,
                                          const std::vector<RankLinks>& links,
                                          const CancellationToken& token) {
  v1::DeviceInventory inventory;
  for (size_t r = 0; r < links.size(); ++r) {
    v1::Device* device = inventory.add_devices();
    device->set_name(absl::StrCat("rank ", r));
    device->set_logical_id(static_cast<int32_t>(r));
    const double memory = std::min(links[r].memory_bytes, 9.0e18);
    device->set_available_memory_bytes(static_cast<int64_t>(memory));
    device->set_compute_flops_per_second(options.compute_efficiency * links[r].peak_flops);
    // Inventory links have no direction: with two ranks, rank 1's link to
    // rank 0 is rank 0's to rank 1, at the slower of the two rates.
    double rate = links[r].next_bytes_per_second;
    if (links.size() == 2) {
      if (r == 1) continue;
      rate = std::min(rate, links[1].next_bytes_per_second);
    }
    if (links.size() > 1 && std::isfinite(rate)) {
      v1::Link* link = inventory.add_links();
      link->set_logical_id_a(static_cast<int32_t>(r));
      link->set_logical_id_b(static_cast<int32_t>((r + 1) % links.size()));
      link->set_bandwidth_bytes_per_second(rate);
    }
  }
  InputLimits limits;
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices, ImportDevices(inventory, limits));
  v1::TrainingConfig config;
  config.set_schedule(ScheduleKindOf(c.schedule));
  config.set_micro_batches(c.micro_batches);
  config.set_chunks_per_device(c.chunks);
  config.set_micro_batch_size(c.micro_batch_size);
  config.set_weight_bytes_per_parameter(options.state_bytes.weights);
  config.set_gradient_bytes_per_parameter(options.state_bytes.gradients);
  config.set_optimizer_bytes_per_parameter(options.state_bytes.optimizer);
  config.set_data_parallel(c.data);
  config.set_zero(ZeroStageKindOf(c.zero));
  config.set_recompute(v1::RECOMPUTE_AUTO);
  return TrainingProblemFromRequest(*model.graph, devices, config, token);
}

// The graph on one device of speed 1 and no memory bound: its items' work
// in the graph's own unit, and their saved bytes.
absl::StatusOr<TrainingProblem> OneDeviceProblem(const GraphModel& model,
                                                 const CancellationToken& token) {
  ParallelCandidate one;
  one.micro_batch_size = model.batch_size;
  RankLinks links;
  links.peak_flops = 1;
  links.memory_bytes = std::numeric_limits<double>::infinity();
  links.tensor_bytes_per_second = links.data_bytes_per_second = links.next_bytes_per_second =
      std::numeric_limits<double>::infinity();
  ParallelizeOptions options;
  options.compute_efficiency = 1;
  return ProblemOn(model, options, one, {links}, token);
}

}  // namespace

absl::StatusOr<GraphModel> GraphModelOf(const CompactGraph& graph, int batch_size,
                                        const CancellationToken& token) {
  GraphModel model;
  model.graph = &graph;
  model.batch_size = batch_size;
  PARTPLAN_ASSIGN_OR_RETURN(const TrainingProblem problem, OneDeviceProblem(model, token));
  model.items = static_cast<int>(problem.chain.items.size());
  model.in_seconds = problem.in_seconds;
  for (const TrainingItem& item : problem.chain.items) {
    const double work = item.forward + item.backward_input + item.backward_weight;
    model.work += work;
    if (work > 0) model.forward_share = std::min(model.forward_share, item.forward / work);
    model.parameters += static_cast<double>(item.parameters);
  }
  for (const TiedParameters& tied : problem.chain.tied) {
    model.parameters += static_cast<double>(tied.parameters);
  }
  return model;
}

absl::StatusOr<TransformerChain> BuildGraphChain(const GraphModel& model,
                                                 const ParallelizeOptions& options,
                                                 const ParallelCandidate& c,
                                                 const std::vector<RankLinks>& links,
                                                 std::vector<TrainingDevice>* devices,
                                                 const CancellationToken& token) {
  PARTPLAN_ASSIGN_OR_RETURN(TrainingProblem problem, ProblemOn(model, options, c, links, token));
  TransformerChain out;
  const double reference_speed = problem.devices[0].speed;
  for (TrainingItem& item : problem.chain.items) {
    ItemTime time;
    time.compute = (item.forward + item.backward_input + item.backward_weight) / reference_speed;
    time.zero = ZeroMicroBatchSeconds(options, c, static_cast<double>(item.parameters),
                                      links[0].data_bytes_per_second);
    item.backward_weight += time.zero * reference_speed;
    out.item_times.push_back(time);
  }
  for (const TrainingDevice& device : problem.devices) {
    out.rank_speed.push_back(device.speed / reference_speed);
  }
  out.chain = std::move(problem.chain);
  out.item_nodes = std::move(problem.item_nodes);
  *devices = std::move(problem.devices);
  return out;
}

namespace {

// `target` as "<prefix>.<i>.<rest>": the first dotted component that is a
// number; false when there is none.
bool LayerOf(absl::string_view target, absl::string_view* prefix, int* index) {
  size_t start = 0;
  while (start < target.size()) {
    size_t end = target.find('.', start);
    if (end == absl::string_view::npos) return false;  // the last component
    const absl::string_view part = target.substr(start, end - start);
    int value = 0;
    if (start > 0 && !part.empty() && absl::SimpleAtoi(part, &value) && value >= 0) {
      *prefix = target.substr(0, start - 1);
      *index = value;
      return true;
    }
    start = end + 1;
  }
  return false;
}

}  // namespace

absl::StatusOr<MeasuredActivations> MeasureLayerActivations(const CompactGraph& graph, int layers,
                                                            int batch_size,
                                                            const CancellationToken& token) {
  GraphModel model;
  model.graph = &graph;
  model.batch_size = batch_size;
  PARTPLAN_ASSIGN_OR_RETURN(const TrainingProblem problem, OneDeviceProblem(model, token));
  const int n = static_cast<int>(problem.chain.items.size());
  // Each item's layer, if it is a module of a numbered list.
  NodeReader reader(graph);
  std::vector<std::string> prefix_of(n);
  std::vector<int> index_of(n, -1);
  std::map<std::string, std::set<int>> indices;
  std::map<std::string, int> modules;
  for (int i = 0; i < n; ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
    const NodeId node = problem.item_nodes[i];
    if (graph.op(node) != v1::CALL_MODULE) continue;
    absl::string_view prefix;
    int index = 0;
    if (!LayerOf(reader.OwnFields(node).target, &prefix, &index)) {
      index_of[i] = -2;  // a module outside any list
      continue;
    }
    prefix_of[i] = std::string(prefix);
    index_of[i] = index;
    indices[prefix_of[i]].insert(index);
    ++modules[prefix_of[i]];
  }
  std::string list;
  for (const auto& [prefix, seen] : indices) {
    if (static_cast<int>(seen.size()) != layers || *seen.begin() != 0 ||
        *seen.rbegin() != layers - 1) {
      continue;
    }
    if (list.empty() || modules[prefix] > modules[list]) list = prefix;
  }
  if (list.empty()) {
    return InvalidFieldError(
        "graph", absl::StrCat("no list of ", layers,
                              " modules (call_module targets '<prefix>.0.' to '<prefix>.",
                              layers - 1, ".', as transformer.layers says) in the graph"));
  }
  MeasuredActivations measured;
  measured.layers.assign(layers, 0);
  int current = -1;  // -1 the embedding, 0..l-1 a layer, l the head
  for (int i = 0; i < n; ++i) {
    const bool in_list = index_of[i] >= 0 && prefix_of[i] == list;
    if (in_list && current < layers) {
      current = std::max(current, index_of[i]);
    } else if (index_of[i] != -1 && !in_list && current == layers - 1) {
      current = layers;
    }
    const double saved =
        static_cast<double>(problem.chain.items[i].saved_activation_bytes) / batch_size;
    if (current < 0) {
      measured.embedding += saved;
    } else if (current < layers) {
      measured.layers[current] += saved;
    } else {
      measured.head += saved;
    }
  }
  return measured;
}

}  // namespace partplan

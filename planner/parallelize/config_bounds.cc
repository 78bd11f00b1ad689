#include "planner/parallelize/config_bounds.h"

#include <algorithm>
#include <cmath>

namespace partplan {
namespace {

// The least step any plan of `c` can take (parallel_search.h), or -1 when
// its model states alone overflow the memory of every rank.
double GraphLowerBound(const GraphModel& graph, const ParallelizeOptions& options,
                       const ParallelCandidate& c, const Layout& layout) {
  const ModelStateBytes per_parameter = MemoryOptionsOf(options, c).BytesPerParameter();
  // The fullest rank holds at least the average share of the states.
  if (graph.parameters / c.pipeline *
          (per_parameter.weights + per_parameter.gradients + per_parameter.optimizer) >
      layout.most_memory) {
    return -1;
  }
  double fastest = 0, speed_sum = 0;
  for (const auto& [links, count] : layout.distinct) {
    const double speed = graph.in_seconds ? 1.0 : options.compute_efficiency * links.peak_flops;
    fastest = std::max(fastest, speed);
    speed_sum += speed * count;
  }
  const double B = c.micro_batches;
  double bound = B * graph.work / speed_sum;
  if (c.pipeline > 1 && c.chunks == 1) {
    const double phi = c.schedule == PipelineSchedule::kZeroBubbleH1 ? graph.forward_share : 1.0;
    const double shrink = std::pow(1 - phi / B, c.pipeline);
    if (phi > 0 && shrink < 1) {
      bound = std::max(bound, phi * (graph.work / fastest) / (1 - shrink));
    }
  }
  return bound;
}

}  // namespace

// The training planner's memory options of configuration `c`.
TrainingMemoryOptions MemoryOptionsOf(const ParallelizeOptions& options,
                                      const ParallelCandidate& c) {
  TrainingMemoryOptions memory;
  memory.weight_bytes = options.state_bytes.weights;
  memory.gradient_bytes = options.state_bytes.gradients;
  memory.optimizer_bytes = options.state_bytes.optimizer;
  memory.data_parallel = c.data;
  memory.zero = c.zero;
  return memory;
}

// Whether no layout of `c` can fit its ranks' memory, by a bound cheaper
// than planning: at its first backward, rank r holds n_r micro-batches of
// every layer it has (1F1B and ZB-H1: min(p - r, B) from their warm-up;
// GPipe: B; interleaved: at least one of each chunk). A rank of x_r layers
// then needs x_r (s + n_r a) bytes, s a layer's model states and a the
// least a layer saves; spreading the l layers over the ranks as evenly as
// that allows leaves the fullest needing at least l / sum_r 1/(s + n_r a).
bool ActivationsCannotFit(const ParallelizeProblem& problem, const MeasuredActivations* measured,
                          const ParallelCandidate& c, const Layout& layout) {
  const TransformerModel& m = problem.model;
  const ModelStateBytes per_parameter = MemoryOptionsOf(problem.options, c).BytesPerParameter();
  const double states = LayerDeviceParameters(m, c.tensor) *
                        (per_parameter.weights + per_parameter.gradients + per_parameter.optimizer);
  double saved = LayerSavedBytes(m, c, measured, 0);
  if (measured != nullptr) {
    for (int i = 1; i < m.layers; ++i) saved = std::min(saved, LayerSavedBytes(m, c, measured, i));
  }
  double inverse_sum = 0;
  for (int r = 0; r < c.pipeline; ++r) {
    int held = 1;
    if (c.schedule == PipelineSchedule::kGpipe) {
      held = c.micro_batches;
    } else if (c.chunks == 1) {
      held = std::min(c.pipeline - r, c.micro_batches);
    }
    const double need = states + held * saved;
    if (need <= 0) return false;
    inverse_sum += 1 / need;
  }
  return m.layers / inverse_sum > layout.most_memory;
}

double LowerBound(const ParallelizeProblem& problem, const GraphModel* graph,
                  const ParallelCandidate& c, const Layout& layout) {
  if (graph != nullptr) return GraphLowerBound(*graph, problem.options, c, layout);
  const TransformerModel& m = problem.model;
  const ParallelizeOptions& options = problem.options;
  const int most_layers = (m.layers + c.pipeline - 1) / c.pipeline;
  const double most_parameters = most_layers * LayerDeviceParameters(m, c.tensor);
  const ModelStateBytes per_parameter = MemoryOptionsOf(options, c).BytesPerParameter();
  const double states =
      most_parameters * (per_parameter.weights + per_parameter.gradients + per_parameter.optimizer);
  if (states > layout.most_memory) return -1;

  const TransformerItemTimes reference = ItemTimesOn(m, options, c, layout.first);
  const double layer = reference.layer.total();
  const double work = m.layers * layer + reference.embedding.total() + reference.head.total();
  double fastest = 0, speed_sum = 0;
  for (const auto& [links, count] : layout.distinct) {
    const double seconds =
        layout.distinct.size() == 1 ? layer : ItemTimesOn(m, options, c, links).layer.total();
    const double speed = seconds > 0 ? layer / seconds : 1.0;
    fastest = std::max(fastest, speed);
    speed_sum += speed * count;
  }
  const double B = c.micro_batches;
  double bound = B * work / speed_sum;
  bound = std::max(
      bound, B * most_layers * layer / fastest +
                 (1 - options.data_parallel_overlap) *
                     DataParallelSeconds(options, c, most_parameters, layout.fastest_data_rate));
  const double p = c.pipeline;
  if (c.pipeline > 1 && c.chunks == 1) {
    // Device k starts after the first micro-batch's forwards through
    // stages 0..k-1 and then works B w_k. Under GPipe and 1F1B its last op
    // is a backward, followed by that micro-batch's backwards through the
    // same stages: the step is at least S_k + B w_k for every k (phi = 1).
    // ZB-H1 may end on a weight gradient: only the forwards count, phi S_k
    // + B w_k, phi the least share of an item's work its forward is.
    double phi = 1;
    if (c.schedule == PipelineSchedule::kZeroBubbleH1) {
      phi = reference.layer_forward / layer;
      if (reference.head.total() > 0) {
        phi = std::min(phi, reference.head_forward / reference.head.total());
      }
      if (reference.embedding.total() > 0) {
        phi = std::min(phi, reference.embedding_forward / reference.embedding.total());
      }
    }
    const double shrink = std::pow(1 - phi / B, p);
    if (phi > 0 && shrink < 1) bound = std::max(bound, phi * (work / fastest) / (1 - shrink));
  } else if (c.pipeline > 1) {
    // Interleaved: device k's first op waits for the first micro-batch's
    // forwards through the first chunk's stages 0..k-1, its last op is the
    // backward of its first chunk, followed by the backwards through them;
    // each of those stages but the first holds a layer at least. So the
    // step is at least (k - 1) w + B y_k for every k >= 1, y_k the device's
    // work: at least (B W + w (p - 1)(p - 2) / 2) / p.
    bound = std::max(bound, (B * work + layer * (p - 1) * (p - 2) / 2) / (p * fastest));
  }
  return bound;
}

}  // namespace partplan

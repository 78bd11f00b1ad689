#include "planner/parallelize/parallel_search.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"
#include "planner/parallelize/cluster_layout.h"
#include "planner/parallelize/config_bounds.h"
#include "planner/parallelize/graph_costs.h"
#include "planner/training/training_chain.h"

namespace partplan {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The training planner's search bound while the lattice is ranked; the
// configurations returned are planned again with the request's bound.
constexpr int64_t kLatticeSearchNodes = 256;

// Bounds on one search, so that a request cannot hold a planner thread for
// minutes: the configurations visited per pass (each bounded in O(1); a
// 96-layer model on 4,096 devices has under 2M), and the devices visited
// making layouts (each (t, p, d) visits its p d t devices once).
constexpr int64_t kMaxLatticeConfigurations = int64_t{1} << 25;
constexpr int64_t kMaxLayoutWork = int64_t{1} << 27;
// And the layouts kept (a summary of about 100 bytes each).
constexpr int64_t kMaxLayouts = int64_t{1} << 18;

std::vector<int> Divisors(int n) {
  std::vector<int> small, large;
  for (int i = 1; static_cast<int64_t>(i) * i <= n; ++i) {
    if (n % i != 0) continue;
    small.push_back(i);
    if (i != n / i) large.push_back(n / i);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

struct Bounded {
  ParallelCandidate candidate;
  int layout = 0;
  double bound = 0;
  int64_t serial = 0;  // enumeration order: ties in the bound broken by it
};

bool BoundedBefore(const Bounded& a, const Bounded& b) {
  return std::tie(a.bound, a.serial) < std::tie(b.bound, b.serial);
}

struct Enumeration {
  std::vector<Layout> layouts;
  // Tensor groups per t (TensorGroups), and each layout's t.
  std::vector<std::vector<std::vector<int>>> groups_by_tensor;
  std::vector<int> layout_tensor;
  const std::vector<std::vector<int>>& GroupsOf(int layout) const {
    return groups_by_tensor[layout_tensor[layout]];
  }
};

// Calls `visit(candidate, layout index)` for every configuration of the
// lattice, in one fixed order.
absl::Status EnumerateLattice(const ParallelizeProblem& problem, const GraphModel* graph,
                              Enumeration* enumeration, const CancellationToken& token,
                              const std::function<void(const ParallelCandidate&, int)>& visit) {
  const TransformerModel& m = problem.model;
  const ParallelizeOptions& options = problem.options;
  const ParallelizeCluster& cluster = problem.cluster;
  const bool build = enumeration->layouts.empty();
  int most_per_host = 0;
  {
    std::vector<int> free_per_host(cluster.host_type.size(), 0);
    for (const ClusterDevice& device : cluster.free) {
      most_per_host = std::max(most_per_host, ++free_per_host[device.host]);
    }
  }
  // A graph has no tensor parallelism, its items for stages and its own
  // micro-batch; a transformer its layers.
  const int most_tensor = graph != nullptr ? 1
                          : options.tensor_parallel_across_hosts
                              ? static_cast<int>(cluster.free.size())
                              : most_per_host;
  const int most_pipeline = graph != nullptr ? graph->items : m.layers;
  const int most_stages = graph != nullptr ? graph->items : m.layers + 2;
  const int G = options.global_batch;
  const std::vector<int> batch_divisors = Divisors(G);
  // ZeRO-1 exchanges (d - 1)/d (gradient + weight bytes) where plain data
  // parallelism all-reduces 2 (d - 1)/d gradient bytes, and holds less: with
  // weights no larger than gradients, every layout that fits without it
  // fits with it, no slower.
  const bool zero_one_dominates = options.state_bytes.weights <= options.state_bytes.gradients &&
                                  std::find(options.zero_stages.begin(), options.zero_stages.end(),
                                            ZeroStage::kOptimizer) != options.zero_stages.end();
  int layout_index = 0;
  int64_t work = 0;
  int64_t layout_work = 0;  // devices visited making layouts
  int64_t visits = 0;
  const auto too_large = [&]() {
    return absl::FailedPreconditionError(absl::StrCat(
        "the configurations to search are too many (more than ", kMaxLatticeConfigurations,
        ", or more than ", kMaxLayouts, " layouts of t, p and d, or layouts over more than ",
        kMaxLayoutWork, " devices in all, for ", cluster.free.size(),
        " devices and a global batch of ", G,
        "): fix one of options.tensor_parallel, pipeline_parallel, data_parallel or "
        "micro_batch_size, or list fewer schedules, zero_stages or recompute choices"));
  };
  for (int t = 1; t <= most_tensor; ++t) {
    if ((options.tensor > 0 && t != options.tensor) || static_cast<int64_t>(m.heads) % t != 0 ||
        static_cast<int64_t>(m.hidden) % t != 0 || static_cast<int64_t>(m.ffn) % t != 0) {
      continue;
    }
    if (build) {
      enumeration->groups_by_tensor.resize(t + 1);
      enumeration->groups_by_tensor[t] =
          TensorGroups(cluster, t, options.tensor_parallel_across_hosts);
    }
    const std::vector<std::vector<int>>& groups = enumeration->groups_by_tensor[t];
    const int group_count = static_cast<int>(groups.size());
    if (group_count == 0) continue;
    for (int p = 1; p <= std::min(most_pipeline, group_count); ++p) {
      if (options.pipeline > 0 && p != options.pipeline) continue;
      for (const int d : batch_divisors) {
        if (static_cast<int64_t>(p) * d > group_count) break;
        if (options.data > 0 && d != options.data) continue;
        if (build) {
          layout_work += static_cast<int64_t>(p) * d * t;
          PARTPLAN_RETURN_IF_ERROR(token.CheckWork(static_cast<int64_t>(p) * d * t, &work));
          if (layout_work > kMaxLayoutWork ||
              static_cast<int64_t>(enumeration->layouts.size()) >= kMaxLayouts) {
            return too_large();
          }
          enumeration->layouts.push_back(MakeLayout(cluster, groups, t, p, d));
          enumeration->layout_tensor.push_back(t);
        }
        const int index = layout_index++;
        for (const int b : Divisors(G / d)) {
          if (options.micro_batch_size > 0 && b != options.micro_batch_size) continue;
          if (graph != nullptr && b != graph->batch_size) continue;
          const int64_t micro_batches = G / d / b;
          if (micro_batches > kMaxTrainingMicroBatches) continue;
          ParallelCandidate c;
          c.tensor = t;
          c.pipeline = p;
          c.data = d;
          c.micro_batch_size = b;
          c.micro_batches = static_cast<int>(micro_batches);
          for (const PipelineSchedule schedule : options.schedules) {
            std::vector<int> chunk_choices = {1};
            if (p == 1 && schedule != options.schedules.front()) continue;
            if (p > 1 && schedule == PipelineSchedule::kInterleaved1F1B) {
              chunk_choices.clear();
              if (micro_batches % p != 0) continue;
              for (int v = 2; v <= options.max_chunks_per_device; ++v) {
                if (static_cast<int64_t>(p) * v > most_stages) break;
                chunk_choices.push_back(v);
              }
            }
            c.schedule = p == 1 ? PipelineSchedule::k1F1B : schedule;
            for (const int v : chunk_choices) {
              if (static_cast<int64_t>(p) * v * micro_batches > kMaxTrainingStageMicroBatches) {
                continue;
              }
              c.chunks = v;
              for (const ZeroStage zero : options.zero_stages) {
                if (d == 1 && zero != options.zero_stages.front()) continue;
                if (d > 1 && zero == ZeroStage::kNone && zero_one_dominates) continue;
                c.zero = d == 1 ? ZeroStage::kNone : zero;
                for (const LayerRecomputeMode recompute : options.recompute) {
                  // A graph's recompute is the training planner's, per stage.
                  if (graph != nullptr && recompute != options.recompute.front()) break;
                  c.recompute = graph != nullptr ? LayerRecomputeMode::kNone : recompute;
                  if (++visits > kMaxLatticeConfigurations) return too_large();
                  // Each visit bounds a configuration: a poll every
                  // kPollInterval of them.
                  PARTPLAN_RETURN_IF_ERROR(token.CheckWork(1, &work));
                  visit(c, index);
                }
              }
            }
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

// Plans `c` on `layout`: nullopt-like (a false `*fits`) when no stage
// layout fits its devices' memory.
absl::StatusOr<ParallelConfigResult> PlanCandidate(const ParallelizeProblem& problem,
                                                   const GraphModel* graph,
                                                   const MeasuredActivations* activations,
                                                   const ParallelCandidate& c, const Layout& layout,
                                                   const std::vector<std::vector<int>>& groups,
                                                   int64_t max_search_nodes,
                                                   const CancellationToken& token) {
  const TransformerModel& m = problem.model;
  const ParallelizeOptions& options = problem.options;
  const std::vector<RankLinks> ranks =
      RanksOf(problem.cluster, groups, c.tensor, c.pipeline, c.data, nullptr);
  TransformerChain chain;
  std::vector<TrainingDevice> devices(c.pipeline);
  if (graph != nullptr) {
    PARTPLAN_ASSIGN_OR_RETURN(chain, BuildGraphChain(*graph, options, c, ranks, &devices, token));
  } else {
    chain = BuildTransformerChain(m, options, c, ranks, activations);
    for (int r = 0; r < c.pipeline; ++r) {
      devices[r].name = absl::StrCat("pipeline rank ", r);
      devices[r].speed = chain.rank_speed[r];
      devices[r].memory_bytes = ranks[r].memory_bytes;
      devices[r].link_bytes_per_second = ranks[r].next_bytes_per_second;
    }
  }
  StageSearchOptions search;
  search.schedule.schedule = c.schedule;
  search.schedule.devices = c.pipeline;
  search.schedule.micro_batches = c.micro_batches;
  search.schedule.chunks_per_device = c.chunks;
  search.memory = MemoryOptionsOf(options, c);
  search.recompute = graph != nullptr ? RecomputeChoice::kAuto : RecomputeChoice::kNever;
  search.max_search_nodes = max_search_nodes;
  search.explain_no_plan = false;
  search.improve_first_plan = max_search_nodes > kLatticeSearchNodes;
  PARTPLAN_ASSIGN_OR_RETURN(TrainingStagePlan plan,
                            PlanTrainingStages(search, chain.chain, devices, token));

  ParallelConfigResult result;
  result.candidate = c;
  const int stages = c.pipeline * c.chunks;
  std::vector<double> rank_parameters(c.pipeline, 0);
  std::vector<ItemTime> rank_work(c.pipeline);
  for (int k = 0; k < stages; ++k) {
    const int r = k % c.pipeline;
    rank_parameters[r] += static_cast<double>(plan.footprints[k].parameters);
    for (int i = plan.cuts[k]; i < plan.cuts[k + 1]; ++i) {
      rank_work[r].compute += chain.item_times[i].compute;
      rank_work[r].tensor += chain.item_times[i].tensor;
      rank_work[r].zero += chain.item_times[i].zero;
    }
  }
  double step = plan.step_seconds;
  int last_rank = 0;
  double last_end = -1;
  std::vector<double> exposed(c.pipeline, 0);
  for (int r = 0; r < c.pipeline; ++r) {
    double end = 0;
    for (const PipelineOp& op : plan.timeline.devices[r]) end = std::max(end, op.end);
    exposed[r] =
        (1 - options.data_parallel_overlap) *
        DataParallelSeconds(options, c, rank_parameters[r], ranks[r].data_bytes_per_second);
    if (end + exposed[r] > last_end) {
      last_end = end + exposed[r];
      last_rank = r;
    }
  }
  step = std::max(step, last_end);
  const double per_micro_batch = c.micro_batches / chain.rank_speed[last_rank];
  result.parts.compute = rank_work[last_rank].compute * per_micro_batch;
  result.parts.tensor = rank_work[last_rank].tensor * per_micro_batch;
  result.parts.zero = rank_work[last_rank].zero * per_micro_batch;
  result.parts.data_parallel = exposed[last_rank];
  result.parts.idle = std::max(0.0, step - result.parts.compute - result.parts.tensor -
                                        result.parts.zero - result.parts.data_parallel);
  result.step_seconds = step;
  const double global_batch = options.global_batch;
  result.samples_per_second = global_batch / step;
  if (graph != nullptr) {
    // The graph's work per micro-batch, in FLOPs when it gives FLOPs.
    result.model_flops_utilization =
        graph->in_seconds
            ? 0
            : graph->work * global_batch / graph->batch_size / (step * layout.peak_flops_sum);
    result.item_nodes = chain.item_nodes;
  } else {
    result.tokens_per_second = global_batch * m.sequence / step;
    result.model_flops_utilization =
        global_batch * m.ModelFlopsPerSequence() / (step * layout.peak_flops_sum);
  }
  for (int r = 0; r < c.pipeline; ++r) {
    if (plan.memory[r].peak_bytes > plan.memory[result.fullest_rank].peak_bytes) {
      result.fullest_rank = r;
    }
  }
  for (const RankLinks& rank : ranks) result.rank_memory_bytes.push_back(rank.memory_bytes);
  result.rank_groups.resize(c.pipeline);
  for (int r = 0; r < c.pipeline; ++r) {
    for (int j = 0; j < c.data; ++j) {
      std::vector<ClusterDevice> group;
      for (const int index : groups[r * c.data + j]) group.push_back(problem.cluster.free[index]);
      result.rank_groups[r].push_back(std::move(group));
    }
  }
  // The response does not carry the timeline; a search keeps many plans.
  plan.timeline.devices = {};
  result.plan = std::move(plan);
  return result;
}

bool ResultBefore(const ParallelConfigResult& a, const ParallelConfigResult& b) {
  const int devices_a = a.candidate.tensor * a.candidate.pipeline * a.candidate.data;
  const int devices_b = b.candidate.tensor * b.candidate.pipeline * b.candidate.data;
  const double memory_a = a.plan.memory[a.fullest_rank].peak_bytes;
  const double memory_b = b.plan.memory[b.fullest_rank].peak_bytes;
  return std::tie(a.step_seconds, devices_a, memory_a) <
         std::tie(b.step_seconds, devices_b, memory_b);
}

}  // namespace

absl::StatusOr<ParallelSearchResult> SearchParallelConfigs(const ParallelizeProblem& problem,
                                                           const CancellationToken& token) {
  const ParallelizeOptions& options = problem.options;
  const size_t wanted = options.all_configurations
                            ? std::numeric_limits<size_t>::max()
                            : static_cast<size_t>(options.max_configurations);
  ParallelSearchResult result;
  Enumeration enumeration;
  // A graph alone is the model; with a summary, it measures the summary's
  // activations.
  std::optional<GraphModel> graph_model;
  std::optional<MeasuredActivations> measured;
  if (problem.graph != nullptr && !problem.has_transformer) {
    PARTPLAN_ASSIGN_OR_RETURN(graph_model,
                              GraphModelOf(*problem.graph, problem.graph_batch_size, token));
  } else if (problem.graph != nullptr) {
    PARTPLAN_ASSIGN_OR_RETURN(measured,
                              MeasureLayerActivations(*problem.graph, problem.model.layers,
                                                      problem.graph_batch_size, token));
  }
  const GraphModel* graph = graph_model ? &*graph_model : nullptr;
  const MeasuredActivations* activations = measured ? &*measured : nullptr;
  // The steps of the best `wanted` found so far: the top is the step a
  // configuration must beat to be returned.
  std::priority_queue<double> best_steps;
  auto threshold = [&]() {
    return best_steps.size() < wanted ? std::numeric_limits<double>::infinity() : best_steps.top();
  };
  bool first_pass = true;
  bool have_floor = false;
  Bounded floor;
  std::string infeasible_example;
  int64_t infeasible = 0;
  while (true) {
    // The pass keeps the kCandidatesPerPass configurations after the floor
    // with the least bounds, in a max-heap on (bound, serial).
    std::vector<Bounded> kept;
    bool dropped = false;
    int64_t serial = 0;
    PARTPLAN_RETURN_IF_ERROR(EnumerateLattice(
        problem, graph, &enumeration, token, [&](const ParallelCandidate& c, int layout) {
          Bounded item{c, layout, 0, serial++};
          if (first_pass) ++result.candidates;
          item.bound = LowerBound(problem, graph, c, enumeration.layouts[layout]);
          if (item.bound < 0) {
            if (first_pass) ++result.pruned_by_memory;
            return;
          }
          if (have_floor && !BoundedBefore(floor, item)) return;
          if (static_cast<int64_t>(kept.size()) < kCandidatesPerPass) {
            kept.push_back(item);
            std::push_heap(kept.begin(), kept.end(), BoundedBefore);
          } else if (BoundedBefore(item, kept.front())) {
            std::pop_heap(kept.begin(), kept.end(), BoundedBefore);
            kept.back() = item;
            std::push_heap(kept.begin(), kept.end(), BoundedBefore);
            dropped = true;
          } else {
            dropped = true;
          }
        }));
    first_pass = false;
    std::sort(kept.begin(), kept.end(), BoundedBefore);
    bool stopped = false;
    for (const Bounded& item : kept) {
      if (item.bound > threshold()) {
        stopped = true;
        break;
      }
      PARTPLAN_RETURN_IF_ERROR(token.Check());
      if (graph == nullptr && ActivationsCannotFit(problem, activations, item.candidate,
                                                   enumeration.layouts[item.layout])) {
        ++result.pruned_by_memory;
        continue;
      }
      ++result.planned;
      const Layout& layout = enumeration.layouts[item.layout];
      absl::StatusOr<ParallelConfigResult> planned = PlanCandidate(
          problem, graph, activations, item.candidate, layout, enumeration.GroupsOf(item.layout),
          std::min(options.max_search_nodes, kLatticeSearchNodes), token);
      if (!planned.ok()) {
        if (planned.status().code() != absl::StatusCode::kFailedPrecondition) {
          return planned.status();
        }
        ++infeasible;
        if (infeasible_example.empty()) {
          infeasible_example =
              absl::StrCat(DescribeConfig(item.candidate), ": ", planned.status().message());
        }
        continue;
      }
      planned->layout = item.layout;
      best_steps.push(planned->step_seconds);
      if (best_steps.size() > wanted) best_steps.pop();
      result.configs.push_back(*std::move(planned));
      if (result.configs.size() >= 2 * wanted && wanted < kCandidatesPerPass) {
        std::sort(result.configs.begin(), result.configs.end(), ResultBefore);
        result.configs.resize(wanted);
      }
    }
    if (stopped || !dropped || kept.empty()) break;
    floor = kept.back();
    have_floor = true;
  }
  result.pruned_by_bound = result.candidates - result.pruned_by_memory - result.planned;
  std::sort(result.configs.begin(), result.configs.end(), ResultBefore);
  if (result.configs.size() > wanted) result.configs.resize(wanted);
  // The configurations returned, planned again with the request's search
  // bound and first-plan moves (a step only falls) and ranked again; those
  // left out stay compared by their first plans.
  if (options.max_search_nodes > kLatticeSearchNodes) {
    for (ParallelConfigResult& config : result.configs) {
      if (config.plan.proven_optimal) continue;
      const ParallelCandidate c = config.candidate;
      const int layout = config.layout;
      absl::StatusOr<ParallelConfigResult> again =
          PlanCandidate(problem, graph, activations, c, enumeration.layouts[layout],
                        enumeration.GroupsOf(layout), options.max_search_nodes, token);
      if (!again.ok()) {
        if (again.status().code() == absl::StatusCode::kFailedPrecondition) continue;
        return again.status();
      }
      again->layout = layout;
      if (again->step_seconds <= config.step_seconds) config = *std::move(again);
    }
    std::sort(result.configs.begin(), result.configs.end(), ResultBefore);
  }
  if (result.configs.empty()) {
    std::string why =
        absl::StrCat("no configuration fits: of ", result.candidates, ", ", result.pruned_by_memory,
                     " hold more model states than a device's memory on the rank "
                     "with the most layers");
    if (infeasible > 0) {
      absl::StrAppend(&why, ", and no stage layout of the other ", infeasible, " fits (e.g. ",
                      infeasible_example, ")");
    }
    return absl::FailedPreconditionError(why);
  }
  return result;
}

}  // namespace partplan

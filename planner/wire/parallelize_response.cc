#include "planner/wire/parallelize_response.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/parallelize/config_comparison.h"

namespace partplan {
namespace {

void WriteStages(const ParallelizeProblem& problem, const ParallelConfigResult& result,
                 v1::ParallelConfig* config) {
  const int layers = problem.model.layers;
  const std::vector<int>& cuts = result.plan.cuts;
  const int stages = static_cast<int>(cuts.size()) - 1;
  const int pipeline = result.candidate.pipeline;
  for (int k = 0; k < stages; ++k) {
    v1::ParallelStage* stage = config->add_stages();
    stage->set_stage(k);
    for (const std::vector<ClusterDevice>& group : result.rank_groups[k % pipeline]) {
      std::vector<std::string> names;
      names.reserve(group.size());
      for (const ClusterDevice& device : group) names.push_back(ParallelizeCluster::Name(device));
      stage->add_tensor_parallel_groups(absl::StrJoin(names, ","));
    }
    if (!problem.has_transformer) {  // a graph model: its nodes name the stage
      stage->set_first_layer(-1);
      stage->set_last_layer(-1);
      stage->set_first_node(std::string(problem.graph->name(result.item_nodes[cuts[k]])));
      stage->set_last_node(std::string(problem.graph->name(result.item_nodes[cuts[k + 1] - 1])));
      stage->set_recompute(result.plan.recompute[k]);
      continue;
    }
    // Items: 0 the embedding, 1..l the layers, l + 1 the head.
    const int first_item = std::max(cuts[k], 1);
    const int end_item = std::min(cuts[k + 1], layers + 1);
    if (first_item < end_item) {
      stage->set_first_layer(first_item - 1);
      stage->set_last_layer(end_item - 2);
    } else {
      stage->set_first_layer(-1);
      stage->set_last_layer(-1);
    }
    stage->set_embedding(cuts[k] == 0);
    stage->set_head(cuts[k + 1] == layers + 2);
  }
}

void WriteMemory(const DeviceMemory& memory, double available, v1::StageMemory* out) {
  out->set_weights(memory.weights);
  out->set_gradients(memory.gradients);
  out->set_optimizer(memory.optimizer);
  out->set_activations(memory.activations);
  out->set_transient(memory.transient);
  out->set_peak(memory.peak_bytes);
  out->set_available(available);
}

}  // namespace

void ParallelizeResponseFromResult(const ParallelizeProblem& problem,
                                   const ParallelSearchResult& result,
                                   v1::ParallelizeResponse* response) {
  response->Clear();
  for (const ParallelConfigResult& found : result.configs) {
    const ParallelCandidate& c = found.candidate;
    v1::ParallelConfig* config = response->add_configurations();
    config->set_tensor_parallel(c.tensor);
    config->set_pipeline_parallel(c.pipeline);
    config->set_data_parallel(c.data);
    config->set_devices(c.tensor * c.pipeline * c.data);
    config->set_micro_batch_size(c.micro_batch_size);
    config->set_micro_batches(c.micro_batches);
    config->set_schedule(ScheduleKindOf(c.schedule));
    config->set_chunks_per_device(c.chunks);
    config->set_zero(ZeroStageKindOf(c.zero));
    config->set_recompute(LayerRecomputeOf(c.recompute));
    config->set_sequence_parallel(c.sequence_parallel());
    config->set_step_seconds(found.step_seconds);
    config->set_tokens_per_second(found.tokens_per_second);
    config->set_samples_per_second(found.samples_per_second);
    config->set_model_flops_utilization(found.model_flops_utilization);
    v1::StepBreakdown* breakdown = config->mutable_breakdown();
    breakdown->set_compute_seconds(found.parts.compute);
    breakdown->set_tensor_parallel_seconds(found.parts.tensor);
    breakdown->set_zero_gather_seconds(found.parts.zero);
    breakdown->set_pipeline_idle_seconds(found.parts.idle);
    breakdown->set_data_parallel_seconds(found.parts.data_parallel);
    for (size_t r = 0; r < found.plan.memory.size(); ++r) {
      WriteMemory(found.plan.memory[r], found.rank_memory_bytes[r], config->add_rank_memory());
    }
    *config->mutable_memory() = config->rank_memory(found.fullest_rank);
    const ClusterDevice& fullest = found.rank_groups[found.fullest_rank][0][0];
    config->set_fullest_device(ParallelizeCluster::Name(fullest));
    WriteStages(problem, found, config);
    config->set_layout_proven_optimal(found.plan.proven_optimal);
  }
  if (result.configs.size() >= 2) {
    response->set_why(WhyFirstBeatsSecond(result.configs[0], result.configs[1]));
  } else if (result.configs.size() == 1) {
    response->set_why(absl::StrCat(DescribeConfig(result.configs[0].candidate),
                                   " is the only configuration that fits."));
  }
  response->set_candidates(result.candidates);
  response->set_pruned_by_memory(result.pruned_by_memory);
  response->set_planned(result.planned);
  response->set_pruned_by_bound(result.pruned_by_bound);
}

}  // namespace partplan

#include "planner/parallelize/parallel_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "planner/base/cancellation.h"
#include "planner/base/limits.h"
#include "planner/base/status_util.h"
#include "planner/parallelize/config_comparison.h"
#include "planner/parallelize/parallelize_problem.h"
#include "tests/planner/parallelize/megatron_runs.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

// client/examples/plan_training.json, its pins cleared.
v1::PlanTrainingRequest TrainingExample() {
  std::ifstream file("client/examples/plan_training.json");
  std::stringstream text;
  text << file.rdbuf();
  v1::PlanTrainingRequest request;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &request).ok());
  request.mutable_config()->clear_pins();
  return request;
}

v1::Graph TrainingExampleGraph() { return TrainingExample().graph(); }

v1::ParallelizeRequest SmallRequest() {
  v1::ParallelizeRequest request;
  v1::TransformerSummary* model = request.mutable_transformer();
  model->set_layers(8);
  model->set_hidden_size(1024);
  model->set_attention_heads(16);
  model->set_sequence_length(1024);
  model->set_vocabulary_size(32000);
  v1::HostGroup* hosts = request.mutable_cluster()->add_host_groups();
  hosts->set_hosts(2);
  hosts->set_devices_per_host(4);
  hosts->mutable_accelerator()->set_memory_bytes(16.0 * (1 << 30));
  hosts->mutable_accelerator()->set_peak_flops_per_second(100e12);
  hosts->set_intra_host_bytes_per_second(100e9);
  hosts->set_inter_host_bytes_per_second(10e9);
  request.mutable_options()->set_global_batch_size(16);
  return request;
}

absl::StatusOr<ParallelSearchResult> Search(const v1::ParallelizeRequest& request) {
  PARTPLAN_ASSIGN_OR_RETURN(const ParallelizeProblem problem,
                            ParallelizeProblemFromRequest(request, nullptr));
  return SearchParallelConfigs(problem, CancellationToken());
}

void ExpectInvalid(const v1::ParallelizeRequest& request, const std::string& field) {
  const absl::StatusOr<v1::ParallelizeResponse> response =
      Parallelize(request, InputLimits(), CancellationToken());
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_EQ(InvalidFieldPath(response.status()).value_or(""), field) << response.status();
}

TEST(Parallelize, NamesTheFieldOfBadInput) {
  v1::ParallelizeRequest request = SmallRequest();
  request.mutable_transformer()->set_attention_heads(24);
  ExpectInvalid(request, "transformer.attention_heads");
  request = SmallRequest();
  request.clear_transformer();
  ExpectInvalid(request, "transformer");
  request = SmallRequest();
  request.mutable_options()->set_global_batch_size(0);
  ExpectInvalid(request, "options.global_batch_size");
  request = SmallRequest();
  request.mutable_cluster()->add_busy_devices("1:9");
  ExpectInvalid(request, "cluster.busy_devices[0]");
  request = SmallRequest();
  request.mutable_cluster()->add_busy_devices("0:1");
  request.mutable_cluster()->add_busy_devices("0:1");
  ExpectInvalid(request, "cluster.busy_devices[1]");
  request = SmallRequest();
  request.mutable_cluster()->mutable_host_groups(0)->set_inter_host_bytes_per_second(0);
  ExpectInvalid(request, "cluster.host_groups[0].inter_host_bytes_per_second");
  request = SmallRequest();
  request.mutable_options()->set_compute_efficiency(1.5);
  ExpectInvalid(request, "options.compute_efficiency");
  request = SmallRequest();
  request.mutable_options()->add_schedules(v1::GPIPE);
  request.mutable_options()->add_schedules(v1::GPIPE);
  ExpectInvalid(request, "options.schedules[1]");
  request = SmallRequest();
  *request.mutable_graph() = TrainingExampleGraph();
  ExpectInvalid(request, "graph");
  request = SmallRequest();
  request.mutable_options()->set_graph_batch_size(8);
  ExpectInvalid(request, "options.graph_batch_size");
}

TEST(Parallelize, SaysWhenNothingFits) {
  v1::ParallelizeRequest request = SmallRequest();
  request.mutable_cluster()->mutable_host_groups(0)->mutable_accelerator()->set_memory_bytes(1e6);
  const absl::StatusOr<v1::ParallelizeResponse> response =
      Parallelize(request, InputLimits(), CancellationToken());
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(response.status().message().find("no configuration fits"), std::string::npos)
      << response.status();
}

TEST(Parallelize, ResponseDescribesEachConfiguration) {
  const absl::StatusOr<v1::ParallelizeResponse> response =
      Parallelize(SmallRequest(), InputLimits(), CancellationToken());
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_GE(response->configurations_size(), 2);
  EXPECT_FALSE(response->why().empty());
  for (const v1::ParallelConfig& config : response->configurations()) {
    EXPECT_EQ(config.devices(),
              config.tensor_parallel() * config.pipeline_parallel() * config.data_parallel());
    EXPECT_EQ(config.micro_batches() * config.micro_batch_size() * config.data_parallel(), 16);
    EXPECT_LE(config.memory().peak(), config.memory().available());
    ASSERT_EQ(config.rank_memory_size(), config.pipeline_parallel());
    double fullest = 0;
    for (const v1::StageMemory& rank : config.rank_memory()) {
      EXPECT_LE(rank.peak(), rank.available());
      fullest = std::max(fullest, rank.peak());
    }
    EXPECT_EQ(config.memory().peak(), fullest);
    EXPECT_GT(config.model_flops_utilization(), 0);
    EXPECT_LT(config.model_flops_utilization(), 1);
    const v1::StepBreakdown& parts = config.breakdown();
    EXPECT_NEAR(parts.compute_seconds() + parts.tensor_parallel_seconds() +
                    parts.zero_gather_seconds() + parts.pipeline_idle_seconds() +
                    parts.data_parallel_seconds(),
                config.step_seconds(), 1e-9 * config.step_seconds());
    // Every layer in exactly one stage, in order; every stage has d groups
    // of t devices.
    int next_layer = 0;
    ASSERT_EQ(config.stages_size(), config.pipeline_parallel() * config.chunks_per_device());
    for (const v1::ParallelStage& stage : config.stages()) {
      if (stage.first_layer() >= 0) {
        EXPECT_EQ(stage.first_layer(), next_layer);
        next_layer = stage.last_layer() + 1;
      }
      EXPECT_EQ(stage.tensor_parallel_groups_size(), config.data_parallel());
    }
    EXPECT_EQ(next_layer, 8);
    EXPECT_TRUE(config.stages(0).embedding());
    EXPECT_TRUE(config.stages(config.stages_size() - 1).head());
  }
  for (int i = 1; i < response->configurations_size(); ++i) {
    EXPECT_LE(response->configurations(i - 1).step_seconds(),
              response->configurations(i).step_seconds());
  }
}

TEST(Parallelize, BusyDevicesAreNotUsed) {
  v1::ParallelizeRequest request = SmallRequest();
  request.mutable_cluster()->add_busy_devices("0:0");
  request.mutable_cluster()->add_busy_devices("1:3");
  const absl::StatusOr<v1::ParallelizeResponse> response =
      Parallelize(request, InputLimits(), CancellationToken());
  ASSERT_TRUE(response.ok()) << response.status();
  for (const v1::ParallelConfig& config : response->configurations()) {
    EXPECT_LE(config.devices(), 6);
    for (const v1::ParallelStage& stage : config.stages()) {
      for (const std::string& group : stage.tensor_parallel_groups()) {
        EXPECT_EQ(group.find("0:0,"), std::string::npos);
        EXPECT_NE(group, "0:0");
        EXPECT_EQ(group.find("1:3"), std::string::npos);
      }
    }
  }
}

// The bound-pruned search returns the same best configurations as planning
// every one, on random small models and clusters (heterogeneous ones
// included): the bounds never drop a better configuration.
TEST(Parallelize, PruningKeepsTheBestOnRandomInstances) {
  std::mt19937 random(20261126);
  auto pick = [&](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(random);
  };
  for (int instance = 0; instance < 60; ++instance) {
    v1::ParallelizeRequest request;
    v1::TransformerSummary* model = request.mutable_transformer();
    model->set_layers(pick(1, 8));
    const int heads = 1 << pick(0, 3);
    model->set_attention_heads(heads);
    model->set_hidden_size(heads * 64 * pick(1, 4));
    model->set_sequence_length(256 * pick(1, 8));
    model->set_vocabulary_size(1000 * pick(1, 50));
    for (int g = 0; g < pick(1, 2); ++g) {
      v1::HostGroup* hosts = request.mutable_cluster()->add_host_groups();
      hosts->set_hosts(pick(1, 3));
      hosts->set_devices_per_host(pick(1, 4));
      hosts->mutable_accelerator()->set_memory_bytes(pick(1, 16) * 1e9);
      hosts->mutable_accelerator()->set_peak_flops_per_second(pick(50, 400) * 1e12);
      hosts->set_intra_host_bytes_per_second(pick(20, 300) * 1e9);
      hosts->set_inter_host_bytes_per_second(pick(5, 50) * 1e9);
    }
    request.mutable_options()->set_global_batch_size(pick(1, 24));
    request.mutable_options()->set_data_parallel_overlap(pick(0, 2) * 0.4);
    request.mutable_options()->set_max_configurations(3);
    v1::ParallelizeRequest every = request;
    every.mutable_options()->set_all_configurations(true);
    const absl::StatusOr<ParallelSearchResult> pruned = Search(request);
    const absl::StatusOr<ParallelSearchResult> all = Search(every);
    ASSERT_EQ(pruned.ok(), all.ok())
        << instance << ": " << pruned.status() << " / " << all.status();
    if (!all.ok()) continue;
    ASSERT_GE(all->configs.size(), pruned->configs.size());
    for (size_t i = 0; i < pruned->configs.size(); ++i) {
      EXPECT_DOUBLE_EQ(pruned->configs[i].step_seconds, all->configs[i].step_seconds)
          << instance << " #" << i << ": " << DescribeConfig(pruned->configs[i].candidate) << " vs "
          << DescribeConfig(all->configs[i].candidate);
    }
    EXPECT_LE(pruned->planned, all->planned);
  }
}

// Megatron-LM's published runs (megatron_runs.h): the configuration each
// used fits our memory model, and our predicted throughput for it, with its
// full recompute and the default compute efficiency, is within 30% of the
// throughput it measured; our best configuration is predicted no slower.
TEST(Parallelize, MegatronPublishedRuns) {
  for (const MegatronRun& run : kMegatronRuns) {
    SCOPED_TRACE(run.name);
    v1::ParallelizeRequest request = MegatronRequest(run);
    const absl::StatusOr<ParallelSearchResult> best = Search(request);
    ASSERT_TRUE(best.ok()) << best.status();
    v1::ParallelizeOptions* options = request.mutable_options();
    options->set_tensor_parallel(run.tensor);
    options->set_pipeline_parallel(run.pipeline);
    options->set_data_parallel(run.gpus / run.tensor / run.pipeline);
    options->set_micro_batch_size(1);
    options->add_recompute(v1::LAYER_RECOMPUTE_FULL);
    options->add_schedules(run.pipeline > 1 ? v1::INTERLEAVED_1F1B : v1::ONE_F_ONE_B);
    if (run.pipeline > 1) options->add_schedules(v1::ONE_F_ONE_B);
    options->set_max_configurations(1);
    const absl::StatusOr<ParallelSearchResult> published = Search(request);
    ASSERT_TRUE(published.ok()) << published.status();
    const ParallelConfigResult& theirs = published->configs[0];
    // The paper's FLOPs (with recompute's extra forward) per GPU per second.
    const double l = run.layers, h = run.hidden, s = 2048, V = 51200;
    const double flops = 96.0 * run.batch * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    const double predicted = flops / theirs.step_seconds / run.gpus / 1e12;
    std::printf(
        "%-7s published t=%d p=%d: %.0f TFLOP/s per GPU measured, %.0f "
        "predicted (%s); "
        "best: %s, %.2f s against %.2f s\n",
        run.name, run.tensor, run.pipeline, run.teraflops_per_gpu, predicted,
        DescribeConfig(theirs.candidate).c_str(),
        DescribeConfig(best->configs[0].candidate).c_str(), best->configs[0].step_seconds,
        theirs.step_seconds);
    EXPECT_NEAR(predicted / run.teraflops_per_gpu, 1.0, 0.3);
    EXPECT_LE(best->configs[0].step_seconds, theirs.step_seconds * (1 + 1e-12));
  }
}

}  // namespace
}  // namespace partplan

namespace partplan {
namespace {

// A graph model: the PlanTraining example's MLP (latencies, NodeTraining),
// 32 samples a micro-batch, on one host of 4 devices like its inventory.
v1::ParallelizeRequest GraphRequest() {
  const v1::PlanTrainingRequest training = TrainingExample();
  v1::ParallelizeRequest request;
  *request.mutable_graph() = training.graph();
  v1::HostGroup* hosts = request.mutable_cluster()->add_host_groups();
  hosts->set_hosts(1);
  hosts->set_devices_per_host(4);
  hosts->mutable_accelerator()->set_memory_bytes(1 << 30);
  hosts->mutable_accelerator()->set_peak_flops_per_second(100e12);
  hosts->set_intra_host_bytes_per_second(25e9);
  hosts->set_inter_host_bytes_per_second(25e9);
  request.mutable_options()->set_global_batch_size(256);
  request.mutable_options()->set_graph_batch_size(32);
  return request;
}

TEST(Parallelize, PlansAGraphModel) {
  const absl::StatusOr<v1::ParallelizeResponse> response =
      Parallelize(GraphRequest(), InputLimits(), CancellationToken());
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_GE(response->configurations_size(), 2);
  for (const v1::ParallelConfig& config : response->configurations()) {
    EXPECT_EQ(config.tensor_parallel(), 1);
    EXPECT_EQ(config.micro_batch_size(), 32);
    EXPECT_EQ(config.micro_batches() * 32 * config.data_parallel(), 256);
    EXPECT_EQ(config.tokens_per_second(), 0);
    EXPECT_NEAR(config.samples_per_second(), 256 / config.step_seconds(), 1e-9);
    EXPECT_FALSE(config.stages(0).first_node().empty());
    EXPECT_EQ(config.stages(0).first_layer(), -1);
    EXPECT_EQ(config.stages(config.stages_size() - 1).last_node(), "fc8");
  }
}

// With the degrees fixed to the PlanTraining example's pipeline (4 ranks
// of one device, 8 micro-batches of 32, 1F1B, no ZeRO), Parallelize plans
// the same problem: the same step as PlanTraining.
TEST(Parallelize, AGraphPipelineIsPlanTrainingsPlan) {
  v1::ParallelizeRequest request = GraphRequest();
  v1::ParallelizeOptions* options = request.mutable_options();
  options->set_pipeline_parallel(4);
  options->set_data_parallel(1);
  options->set_global_batch_size(8 * 32);
  options->add_schedules(v1::ONE_F_ONE_B);
  options->add_zero_stages(v1::ZERO_NONE);
  const absl::StatusOr<v1::ParallelizeResponse> response =
      Parallelize(request, InputLimits(), CancellationToken());
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->configurations_size(), 1);
  v1::PlanTrainingRequest training = TrainingExample();
  for (int i = 0; i < 3; ++i) {
    v1::Link* link = training.mutable_devices()->add_links();
    link->set_logical_id_a(i);
    link->set_logical_id_b(i + 1);
    link->set_bandwidth_bytes_per_second(25e9);
  }
  const absl::StatusOr<v1::PlanTrainingResponse> plan =
      PlanTraining(training, InputLimits(), CancellationToken());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_DOUBLE_EQ(response->configurations(0).step_seconds(), plan->plan().step_seconds());
}

// Hosts of two speeds: with the degrees fixed to one pipeline rank per
// host, the rank on the host four times faster holds more of the layers.
TEST(Parallelize, FasterHostsTakeMoreLayers) {
  v1::ParallelizeRequest request = SmallRequest();
  request.mutable_transformer()->set_layers(16);
  v1::Cluster* cluster = request.mutable_cluster();
  cluster->clear_host_groups();
  for (const double peak : {400e12, 100e12}) {
    v1::HostGroup* hosts = cluster->add_host_groups();
    hosts->set_hosts(1);
    hosts->set_devices_per_host(4);
    hosts->mutable_accelerator()->set_memory_bytes(80.0 * (1 << 30));
    hosts->mutable_accelerator()->set_peak_flops_per_second(peak);
    hosts->set_intra_host_bytes_per_second(300e9);
    hosts->set_inter_host_bytes_per_second(25e9);
  }
  v1::ParallelizeOptions* options = request.mutable_options();
  options->set_global_batch_size(64);
  options->set_tensor_parallel(4);
  options->set_pipeline_parallel(2);
  options->set_data_parallel(1);
  options->add_schedules(v1::ONE_F_ONE_B);
  const absl::StatusOr<v1::ParallelizeResponse> response =
      Parallelize(request, InputLimits(), CancellationToken());
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::ParallelConfig& best = response->configurations(0);
  ASSERT_EQ(best.stages_size(), 2);
  EXPECT_EQ(best.stages(0).tensor_parallel_groups(0), "0:0,0:1,0:2,0:3");
  EXPECT_EQ(best.stages(1).tensor_parallel_groups(0), "1:0,1:1,1:2,1:3");
  const int fast = best.stages(0).last_layer() - best.stages(0).first_layer() + 1;
  const int slow = best.stages(1).last_layer() - best.stages(1).first_layer() + 1;
  EXPECT_EQ(fast + slow, 16);
  EXPECT_GE(fast, 11) << "the fast rank holds " << fast << " of 16 layers";
}

// Mixture of experts: 8 experts, 2 a token. With the degrees fixed, the
// fullest device holds about 8 MLPs' weights a layer and the step runs
// about 2 MLPs' FLOPs a token.
TEST(Parallelize, ExpertsMultiplyWeightsAndTheirTokensFlops) {
  auto fixed = [](int experts) {
    v1::ParallelizeRequest request = SmallRequest();
    request.mutable_transformer()->set_experts(experts);
    request.mutable_transformer()->set_experts_per_token(experts > 1 ? 2 : 0);
    v1::ParallelizeOptions* options = request.mutable_options();
    options->set_tensor_parallel(4);
    options->set_pipeline_parallel(2);
    options->set_data_parallel(1);
    options->add_schedules(v1::ONE_F_ONE_B);
    options->add_recompute(v1::LAYER_RECOMPUTE_NONE);
    const absl::StatusOr<v1::ParallelizeResponse> response =
        Parallelize(request, InputLimits(), CancellationToken());
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->configurations(0) : v1::ParallelConfig();
  };
  const v1::ParallelConfig dense = fixed(0);
  const v1::ParallelConfig moe = fixed(8);
  // A layer: 4h^2 attention + 8h^2 MLP; with 8 experts 4h^2 + 64h^2, 5.7x;
  // the embedding (V h / t) on the fullest device is not multiplied.
  EXPECT_GT(moe.memory().weights(), 3 * dense.memory().weights());
  EXPECT_LT(moe.memory().weights(), 8 * dense.memory().weights());
  // The MLP's share of a dense layer's FLOPs (16 of 24 s h^2, and the
  // scores) doubles: more than 1.3x the step, less than 2x.
  EXPECT_GT(moe.step_seconds(), 1.3 * dense.step_seconds());
  EXPECT_LT(moe.step_seconds(), 2 * dense.step_seconds());
}

// A transformer's graph with its summary: the graph's measured saved bytes
// replace the formulas. Two layers "h.0" and "h.1", an embedding and a head
// around them; on one device (p = 1, one micro-batch in flight) the
// activations held are every item's saved bytes, for a micro-batch of the
// graph's 4 sequences.
TEST(Parallelize, AGraphWithTheSummaryMeasuresActivations) {
  TestGraph graph;
  graph.Placeholder("x", 64);
  int64_t total_saved = 0;
  std::string previous = "x";
  auto module = [&](const std::string& name, const std::string& target, int64_t saved) {
    graph.Module(name, {previous}, 1000, 100);
    graph.last()->set_target(target);
    graph.last()->mutable_training()->set_saved_activation_bytes(saved);
    total_saved += saved;
    previous = name;
  };
  module("wte", "wte", 1000);
  module("h_0_attn", "h.0.attn", 70000);
  module("h_0_mlp", "h.0.mlp", 50000);
  graph.Op("add_0", {previous}, 100, 100);
  graph.last()->mutable_training()->set_saved_activation_bytes(0);
  previous = "add_0";
  module("h_1_attn", "h.1.attn", 71000);
  module("h_1_mlp", "h.1.mlp", 52000);
  module("ln_f", "ln_f", 3000);
  module("lm_head", "lm_head", 9000);
  graph.Output({previous});

  v1::ParallelizeRequest request = SmallRequest();
  request.mutable_transformer()->set_layers(2);
  *request.mutable_graph() = graph.Build();
  v1::ParallelizeOptions* options = request.mutable_options();
  options->set_graph_batch_size(4);
  options->set_tensor_parallel(1);
  options->set_pipeline_parallel(1);
  options->set_data_parallel(1);
  options->set_micro_batch_size(4);
  options->add_recompute(v1::LAYER_RECOMPUTE_NONE);
  const absl::StatusOr<v1::ParallelizeResponse> response =
      Parallelize(request, InputLimits(), CancellationToken());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->configurations(0).memory().activations(), total_saved);

  // Without the list the summary names, the graph says which field is wrong.
  request.mutable_transformer()->set_layers(3);
  ExpectInvalid(request, "graph");
}

// Collective latency: on one rank (p = 1, d = 1) of t = 4, each
// micro-batch runs 2 all-reduces in each layer's forward and 2 in its
// backward, one in the embedding's forward and one in the head's backward,
// each 2 (t - 1) steps: the step grows by B (4 l + 2) 2 (t - 1) latency.
TEST(Parallelize, CollectiveLatencyAddsItsSteps) {
  auto step = [](double latency) {
    v1::ParallelizeRequest request = SmallRequest();
    v1::ParallelizeOptions* options = request.mutable_options();
    options->set_tensor_parallel(4);
    options->set_pipeline_parallel(1);
    options->set_data_parallel(1);
    options->set_micro_batch_size(2);
    options->add_recompute(v1::LAYER_RECOMPUTE_NONE);
    options->set_collective_latency_seconds(latency);
    const absl::StatusOr<v1::ParallelizeResponse> response =
        Parallelize(request, InputLimits(), CancellationToken());
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->configurations(0).step_seconds() : 0.0;
  };
  const double latency = 20e-6;
  const double micro_batches = 16 / 2, layers = 8, t = 4;
  EXPECT_NEAR(step(latency) - step(0), micro_batches * (4 * layers + 2) * 2 * (t - 1) * latency,
              1e-9);
  v1::ParallelizeRequest request = SmallRequest();
  request.mutable_options()->set_collective_latency_seconds(-1);
  ExpectInvalid(request, "options.collective_latency_seconds");
}

}  // namespace
}  // namespace partplan

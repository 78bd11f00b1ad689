// The schedule simulation and the memory it implies, at the sizes the
// training planner will simulate many times per request: P devices, B
// micro-batches, every schedule. Stage costs vary so that no two stages are
// alike.
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "planner/base/cancellation.h"
#include "planner/training/device_memory.h"
#include "planner/training/schedule.h"
#include "planner/training/stage_search.h"
#include "planner/api/entry_points.h"
#include "planner/base/limits.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

ScheduleOptions Options(PipelineSchedule schedule, int devices, int micro_batches) {
  ScheduleOptions options;
  options.schedule = schedule;
  options.devices = devices;
  options.micro_batches = micro_batches;
  options.chunks_per_device = schedule == PipelineSchedule::kInterleaved1F1B ? 2 : 1;
  return options;
}

StageCosts VariedCosts(const ScheduleOptions& options) {
  StageCosts costs;
  for (int s = 0; s < options.stages(); ++s) {
    costs.forward.push_back(1.0 + (s % 7) * 0.1);
    costs.backward.push_back(1.5 + (s % 5) * 0.1);
    costs.weight.push_back(0.5 + (s % 3) * 0.1);
    if (s > 0) costs.transfer.push_back(0.05 * (s % 4));
  }
  return costs;
}

void BM_SimulateSchedule(benchmark::State& state, PipelineSchedule schedule) {
  const ScheduleOptions options =
      Options(schedule, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const StageCosts costs = VariedCosts(options);
  const CancellationToken token;
  for (auto _ : state) {
    absl::StatusOr<PipelineTimeline> timeline = SimulateSchedule(options, costs, token);
    if (!timeline.ok()) {
      state.SkipWithError(std::string(timeline.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(timeline->step_seconds);
  }
  state.SetItemsProcessed(state.iterations() * options.stages() * options.micro_batches);
}

void BM_DeviceMemory(benchmark::State& state) {
  const ScheduleOptions options = Options(PipelineSchedule::k1F1B,
                                          static_cast<int>(state.range(0)),
                                          static_cast<int>(state.range(1)));
  const CancellationToken token;
  const PipelineTimeline timeline = *SimulateSchedule(options, VariedCosts(options), token);
  std::vector<StageFootprint> stages(options.stages());
  for (int s = 0; s < options.stages(); ++s) {
    stages[s].parameters = 1000000 + s;
    stages[s].saved_activation_bytes = 1 << 20;
    stages[s].input_bytes = 1 << 12;
    stages[s].recompute = s % 2 == 0;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        DeviceMemoryUnder(options, timeline, TrainingMemoryOptions(), stages, token));
  }
}

// A transformer-like chain: an embedding, layers of ten items of unequal
// cost (attention and MLP matmuls heavy, norms and adds light), and a head.
TrainingChain TransformerChain(int items) {
  TrainingChain chain;
  const double layer_forward[] = {0.2, 3, 3, 1, 0.1, 0.2, 4, 0.3, 4, 0.1};
  const int64_t layer_parameters[] = {2, 300, 300, 100, 0, 2, 400, 0, 400, 0};
  for (int i = 0; i < items; ++i) {
    TrainingItem item;
    const bool embedding = i == 0;
    const bool head = i == items - 1;
    item.forward = embedding ? 1 : head ? 8 : layer_forward[(i - 1) % 10] * (1 + (i % 7) * 0.01);
    item.backward_input = item.forward;
    item.backward_weight = item.forward;
    item.parameters = embedding || head ? 5000 : layer_parameters[(i - 1) % 10];
    item.saved_activation_bytes = 4096 + (i % 3) * 1024;
    item.transient_bytes = 8192;
    chain.items.push_back(item);
  }
  for (int c = 0; c <= items; ++c) chain.live_bytes.push_back(c % 10 == 1 ? 4096 : 12288);
  return chain;
}

// args: items, devices P, micro-batches B, schedule, memory (0: unlimited,
// else the share of an even split's largest peak every device gets, in %).
void BM_PlanTrainingStages(benchmark::State& state) {
  const int items = static_cast<int>(state.range(0));
  const auto schedule = static_cast<PipelineSchedule>(state.range(3));
  StageSearchOptions options;
  options.schedule = Options(schedule, static_cast<int>(state.range(1)),
                             static_cast<int>(state.range(2)));
  const TrainingChain chain = TransformerChain(items);
  std::vector<TrainingDevice> devices(options.schedule.devices);
  for (size_t d = 0; d < devices.size(); ++d) {
    devices[d].speed = d % 4 == 3 ? 0.8 : 1.0;  // one slower device in four
    devices[d].link_bytes_per_second = 1e5;
  }
  const CancellationToken token;
  if (state.range(4) > 0) {
    const int stages = options.schedule.stages();
    std::vector<int> even;
    for (int k = 0; k <= stages; ++k) even.push_back(static_cast<int>(int64_t{items} * k / stages));
    const absl::StatusOr<TrainingStagePlan> plan = EvaluateTrainingStages(
        options, chain, devices, even, std::vector<bool>(stages, false), token);
    double most = 0;
    for (const DeviceMemory& memory : plan->memory) most = std::max(most, memory.peak_bytes);
    for (TrainingDevice& device : devices) device.memory_bytes = most * state.range(4) / 100;
  }
  TrainingStagePlan last;
  for (auto _ : state) {
    absl::StatusOr<TrainingStagePlan> plan = PlanTrainingStages(options, chain, devices, token);
    if (!plan.ok()) {
      state.SkipWithError(std::string(plan.status().message()).c_str());
      return;
    }
    last = *std::move(plan);
  }
  state.counters["step"] = last.step_seconds;
  state.counters["proven"] = last.proven_optimal;
  state.counters["nodes"] = static_cast<double>(last.search_nodes);
  state.counters["gap_pct"] = 100 * (last.step_seconds - last.lower_bound) / last.step_seconds;
  state.counters["recomputed"] =
      static_cast<double>(std::count(last.recompute.begin(), last.recompute.end(), true));
}

// The whole PlanTraining call as the server makes it (the graph imported,
// the chain built, the search, the response with the timeline and every
// cut's moves): a chain of `items` nodes with latencies and NodeTraining,
// P devices of ample memory, 1F1B with B micro-batches.
void BM_PlanTrainingRequest(benchmark::State& state) {
  const int items = static_cast<int>(state.range(0));
  const int devices = static_cast<int>(state.range(1));
  TestGraph builder;
  builder.Placeholder("x", 4096);
  std::string previous = "x";
  for (int i = 0; i < items; ++i) {
    const std::string name = "n" + std::to_string(i);
    builder.Op(name, {previous}, 8192 + 4096 * (i % 3), 4096);
    v1::Node* node = builder.last();
    node->set_parameter_count(1000 + 100 * (i % 10));
    node->mutable_latency()->set_compute_latency_seconds(1e-4 * (1 + i % 10));
    node->mutable_training()->set_backward_input_seconds(1e-4 * (1 + i % 10));
    node->mutable_training()->set_backward_weight_seconds(1e-4 * (i % 2));
    node->mutable_training()->set_saved_activation_bytes(4096 + 1024 * (i % 3));
    previous = name;
  }
  builder.Output({previous});
  v1::PlanTrainingRequest request;
  *request.mutable_graph() = builder.Build();
  *request.mutable_devices() = TestDevices(std::vector<int64_t>(devices, int64_t{1} << 40));
  request.mutable_devices()->set_transfer_rate_bytes_per_second(1e9);
  request.mutable_config()->set_schedule(v1::ONE_F_ONE_B);
  request.mutable_config()->set_micro_batches(static_cast<int>(state.range(2)));
  const CancellationToken token;
  v1::PlanTrainingResponse last;
  for (auto _ : state) {
    absl::StatusOr<v1::PlanTrainingResponse> response = PlanTraining(request, InputLimits(), token);
    if (!response.ok()) {
      state.SkipWithError(std::string(response.status().message()).c_str());
      return;
    }
    last = *std::move(response);
  }
  state.counters["proven"] = last.plan().proven_optimal();
  state.counters["cut_moves"] = !last.plan().cut_moves_omitted();
}

void Sizes(benchmark::internal::Benchmark* benchmark) {
  benchmark->Args({16, 64})->Args({64, 256})->Args({64, 1024})->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_SimulateSchedule, gpipe, PipelineSchedule::kGpipe)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_SimulateSchedule, one_f_one_b, PipelineSchedule::k1F1B)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_SimulateSchedule, interleaved_v2, PipelineSchedule::kInterleaved1F1B)
    ->Apply(Sizes);
BENCHMARK_CAPTURE(BM_SimulateSchedule, zb_h1, PipelineSchedule::kZeroBubbleH1)->Apply(Sizes);
BENCHMARK(BM_DeviceMemory)->Apply(Sizes);

constexpr int kGpipe = static_cast<int>(PipelineSchedule::kGpipe);
constexpr int k1F1B = static_cast<int>(PipelineSchedule::k1F1B);
constexpr int kInterleaved = static_cast<int>(PipelineSchedule::kInterleaved1F1B);
constexpr int kZeroBubble = static_cast<int>(PipelineSchedule::kZeroBubbleH1);
BENCHMARK(BM_PlanTrainingStages)
    ->ArgNames({"items", "P", "B", "schedule", "memory_pct"})
    ->Args({10000, 16, 32, k1F1B, 0})
    ->Args({10000, 16, 32, k1F1B, 60})
    ->Args({10000, 16, 32, kGpipe, 0})
    ->Args({10000, 16, 32, kZeroBubble, 0})
    ->Args({10000, 16, 32, kInterleaved, 0})
    ->Args({10000, 16, 32, kInterleaved, 60})
    ->Args({100000, 64, 128, k1F1B, 0})->Iterations(1)
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_PlanTrainingRequest)
    ->ArgNames({"items", "P", "B"})
    ->Args({10000, 16, 32})
    ->Args({100000, 64, 128})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace partplan

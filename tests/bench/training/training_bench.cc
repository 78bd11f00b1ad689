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

void Sizes(benchmark::internal::Benchmark* benchmark) {
  benchmark->Args({16, 64})->Args({64, 256})->Args({64, 1024})->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_SimulateSchedule, gpipe, PipelineSchedule::kGpipe)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_SimulateSchedule, one_f_one_b, PipelineSchedule::k1F1B)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_SimulateSchedule, interleaved_v2, PipelineSchedule::kInterleaved1F1B)
    ->Apply(Sizes);
BENCHMARK_CAPTURE(BM_SimulateSchedule, zb_h1, PipelineSchedule::kZeroBubbleH1)->Apply(Sizes);
BENCHMARK(BM_DeviceMemory)->Apply(Sizes);

}  // namespace
}  // namespace partplan

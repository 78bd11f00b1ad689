// Parallelize end to end (validation, the lattice, each configuration's
// stages, the response) for a GPT-3-sized transformer (96 layers, hidden
// size 12,288, 96 heads, sequence 2,048; Brown et al., 2020) on DGX A100
// hosts: the targets are 1 s at 1,024 devices and 5 s at 4,096.
// Counters: configurations in the lattice, planned, and the best step.
#include <benchmark/benchmark.h>

#include "partplan/v1/parallelize.pb.h"
#include "planner/api/entry_points.h"
#include "planner/base/cancellation.h"
#include "planner/base/limits.h"

namespace partplan {
namespace {

v1::ParallelizeRequest Gpt3Request(int devices, int global_batch) {
  v1::ParallelizeRequest request;
  v1::TransformerSummary* model = request.mutable_transformer();
  model->set_layers(96);
  model->set_hidden_size(12288);
  model->set_attention_heads(96);
  model->set_sequence_length(2048);
  model->set_vocabulary_size(51200);
  v1::HostGroup* hosts = request.mutable_cluster()->add_host_groups();
  hosts->set_hosts(devices / 8);
  hosts->set_devices_per_host(8);
  hosts->mutable_accelerator()->set_memory_bytes(80.0 * (1 << 30));
  hosts->mutable_accelerator()->set_peak_flops_per_second(312e12);
  hosts->set_intra_host_bytes_per_second(300e9);
  hosts->set_inter_host_bytes_per_second(25e9);
  request.mutable_options()->set_global_batch_size(global_batch);
  return request;
}

void BM_ParallelizeGpt3(benchmark::State& state) {
  const v1::ParallelizeRequest request =
      Gpt3Request(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  v1::ParallelizeResponse response;
  for (auto _ : state) {
    absl::StatusOr<v1::ParallelizeResponse> answer =
        Parallelize(request, InputLimits(), CancellationToken());
    if (!answer.ok()) {
      state.SkipWithError(std::string(answer.status().message()).c_str());
      return;
    }
    response = *std::move(answer);
  }
  state.counters["candidates"] = static_cast<double>(response.candidates());
  state.counters["planned"] = static_cast<double>(response.planned());
  state.counters["step"] = response.configurations(0).step_seconds();
}
BENCHMARK(BM_ParallelizeGpt3)
    ->Args({1024, 1536})
    ->Args({4096, 1536})
    ->Args({1024, 512})
    ->Args({1024, 2048})
    ->Args({1024, 3072})
    ->Args({1024, 4096})
    ->Args({4096, 4096})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace partplan

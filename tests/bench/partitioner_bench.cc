// Benchmarks of the torch.fx Partitioner modes on synthetic residual
// stacks of 10^4 to 10^6 nodes.
//
//   bazel run -c opt //tests/bench:partitioner_bench
//
// The reference (torch.fx 1.13, size_based) takes 57 s at 16,002 nodes on
// this kind of machine (shared/design/reference-planners.md); the 16,002
// case is here to compare with it.
#include <string>

#include "benchmark/benchmark.h"
#include "planner/entry_points.h"
#include "tests/bench/synthetic_graphs.h"

namespace partplan {
namespace {

// Parse of the serialised request alone: the floor for a request/response.
void BM_ParseRequest(benchmark::State& state) {
  const std::string bytes = ResidualStackRequest(state.range(0), 8).SerializeAsString();
  for (auto _ : state) {
    v1::PartitionGraphRequest request;
    benchmark::DoNotOptimize(request.ParseFromString(bytes));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["request_bytes"] = static_cast<double>(bytes.size());
}

// Import + validation + size_based + device mapping + DAG + latency + the
// response message.
void BM_PartitionGraphSizeBased(benchmark::State& state) {
  const v1::PartitionGraphRequest request = ResidualStackRequest(state.range(0), 8);
  CancellationToken token;
  int partitions = 0;
  for (auto _ : state) {
    absl::StatusOr<v1::PartitionGraphResponse> response =
        PartitionGraph(request, InputLimits(), token);
    if (!response.ok()) {
      state.SkipWithError(std::string(response.status().message()).c_str());
      return;
    }
    partitions = response->plan().partitions_size();
    benchmark::DoNotOptimize(response);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["partitions"] = partitions;
}

// Validation alone (the Validate RPC).
void BM_Validate(benchmark::State& state) {
  v1::ValidateRequest request;
  *request.mutable_graph() = ResidualStack(state.range(0));
  CancellationToken token;
  for (auto _ : state) {
    benchmark::DoNotOptimize(Validate(request, InputLimits(), token));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

BENCHMARK(BM_ParseRequest)->Arg(16002)->Arg(10000)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PartitionGraphSizeBased)->Arg(16002)->Arg(10000)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Validate)->Arg(10000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace partplan

BENCHMARK_MAIN();

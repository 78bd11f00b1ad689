// The main() of every benchmark binary here: the server's heap policy
// (server/heap_policy.h), as partplan_server's main() sets it, so that the
// calls they time reuse freed memory as the server's do; then Google
// Benchmark, with the benchmarks each binary registered.
#include <iostream>

#include "absl/status/status.h"
#include "benchmark/benchmark.h"
#include "server/heap_policy.h"

int main(int argc, char** argv) {
  if (absl::Status heap = partplan::RetainFreedHeap(partplan::kDefaultRetainedHeapBytes);
      !heap.ok()) {
    std::cerr << "warning: not as in the server: " << heap << "\n";
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

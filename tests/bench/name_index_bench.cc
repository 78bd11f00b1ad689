// Why the import's name -> id index is compact: the index on its own, on
// the residual stack's node names, next to a general hash map and a plain
// pass over the same names.
//
//   bazel run -c opt //tests/bench:name_index_bench
//
// Each iteration inserts every name and looks up each node's arguments (the
// previous layer's names), as GraphBuilder::AddNode and AddValues do.
// - BM_FlatHashMapIndex: absl::flat_hash_map<string_view, NodeId>, reserved
//   up front. At 10^5 nodes its table (24-byte slots, 2^17 of them: 3 MiB)
//   is near the size of an L2 cache; at 10^6 (48 MiB) it is larger than most
//   L3 caches, every insert at a random slot is a cache miss, and time per
//   node rises although the work per node is the same.
// - BM_NameIndex: planner/graph/name_index.h as graph_import uses it, 4-byte slots
//   and each insert's slot prefetched NameIndex::kLookahead names ahead.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "benchmark/benchmark.h"
#include "planner/graph/name_index.h"

namespace partplan {
namespace {

// The names of ResidualStack(n) (synthetic_graphs.h), each a separate heap
// string as in a parsed request.
std::vector<std::string> ResidualStackNames(int64_t n) {
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(n));
  names.push_back("x");
  for (int64_t i = 0; static_cast<int64_t>(names.size()) + 3 <= n - 1; ++i) {
    names.push_back(absl::StrCat("layers_", i, "_linear"));
    names.push_back(absl::StrCat("relu_", i));
    names.push_back(absl::StrCat("add_", i));
  }
  names.push_back("output");
  return names;
}

void BM_FlatHashMapIndex(benchmark::State& state) {
  const std::vector<std::string> names = ResidualStackNames(state.range(0));
  const int64_t n = static_cast<int64_t>(names.size());
  for (auto _ : state) {
    absl::flat_hash_map<absl::string_view, int32_t> id_of_name;
    id_of_name.reserve(static_cast<size_t>(n));
    int64_t found = 0;
    for (int32_t v = 0; v < n; ++v) {
      id_of_name.try_emplace(names[v], v);
      // A node's arguments: the node before it, and the layer input (3 back).
      if (v >= 1) found += id_of_name.find(names[v - 1])->second;
      if (v >= 3) found += id_of_name.find(names[v - 3])->second;
    }
    benchmark::DoNotOptimize(found);
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_NameIndex(benchmark::State& state) {
  const std::vector<std::string> names = ResidualStackNames(state.range(0));
  const int32_t n = static_cast<int32_t>(names.size());
  constexpr int kAhead = NameIndex::kLookahead;
  for (auto _ : state) {
    NameIndex index(n);
    int64_t found = 0;
    for (int32_t v = 0; v < n; ++v) {
      if (v + kAhead < n) index.Prefetch(NameIndex::Hash(names[v + kAhead]));
      index.Insert(names, v, NameIndex::Hash(names[v]));
      if (v >= 1) found += index.Find(names, names[v - 1]);
      if (v >= 3) found += index.Find(names, names[v - 3]);
    }
    benchmark::DoNotOptimize(found);
  }
  state.SetItemsProcessed(state.iterations() * n);
}

// The same names read once in order: what a linear pass costs.
void BM_NamePass(benchmark::State& state) {
  const std::vector<std::string> names = ResidualStackNames(state.range(0));
  for (auto _ : state) {
    uint64_t sum = 0;
    for (const std::string& name : names) sum += static_cast<unsigned char>(name.back());
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(names.size()));
}

BENCHMARK(BM_FlatHashMapIndex)->Arg(10000)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NameIndex)->Arg(10000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NamePass)->Arg(10000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace partplan

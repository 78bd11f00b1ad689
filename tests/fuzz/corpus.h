// Seed requests for the fuzzers, made from the golden fixtures
// (tests/fixtures/**.json) and the example requests (client/examples), as
// serialised request messages of each RPC:
//
//   for (const std::string& seed : SeedRequests(PlannerRpc::kPartitionGraph)) ...
//
// Each fixture gives a request of its own RPC, and its graph (and devices)
// also give requests of the RPCs that take a graph alone: Validate, Plan,
// ShardGraph (FAIRSCALE, 2 shards). A partitioner fixture's expected
// assignment gives a SplitGraph request. Paths are relative to `root`, the
// workspace root; seeds come out in a fixed order, without duplicates.
#ifndef PARTPLAN_TESTS_FUZZ_CORPUS_H_
#define PARTPLAN_TESTS_FUZZ_CORPUS_H_

#include <string>
#include <vector>

#include "planner/api/planner_rpcs.h"

namespace partplan::fuzz {

std::vector<std::string> SeedRequests(PlannerRpc rpc, const std::string& root = ".");

// "partition_graph", "split_graph", ...: the fuzzer of `rpc` is
// tests/fuzz/<name>_fuzzer.
std::string FuzzerName(PlannerRpc rpc);

}  // namespace partplan::fuzz

#endif  // PARTPLAN_TESTS_FUZZ_CORPUS_H_

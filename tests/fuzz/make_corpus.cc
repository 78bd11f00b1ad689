// make_corpus OUT_DIR: writes the seed corpus of every fuzzer (corpus.h) as
// OUT_DIR/<fuzzer name>/seed-<n>, one serialised request each. Run from the
// workspace root (tools/fuzz.sh does).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "planner/api/planner_rpcs.h"
#include "tests/fuzz/corpus.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus OUT_DIR\n");
    return 2;
  }
  for (const partplan::PlannerRpcMethod& row : partplan::kPlannerRpcs) {
    const partplan::PlannerRpc rpc = row.rpc;
    const std::string name = partplan::fuzz::FuzzerName(rpc);
    const std::filesystem::path dir = std::filesystem::path(argv[1]) / name;
    std::filesystem::create_directories(dir);
    const std::vector<std::string> seeds = partplan::fuzz::SeedRequests(rpc);
    for (size_t i = 0; i < seeds.size(); ++i) {
      std::ofstream out(dir / ("seed-" + std::to_string(i)), std::ios::binary);
      out << seeds[i];
    }
    std::printf("%s: %zu seeds\n", name.c_str(), seeds.size());
    if (seeds.empty()) return 1;
  }
  return 0;
}

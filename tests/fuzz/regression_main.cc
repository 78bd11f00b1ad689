// The main of the fuzzers when they are not built for libFuzzer: runs the
// linked fuzzer over inputs and exits 0 unless a check aborts.
//
//   bazel-bin/tests/fuzz/partition_graph_fuzzer crash-1234 corpus_dir/   # replay
//   partition_graph_fuzzer_regression_test: --seeds --mutations=8
//   tests/fuzz/regressions/partition_graph
//
// --seeds adds the seed corpus (corpus.h) from the workspace; --mutations=N
// also runs N message edits (MutateMessage) of every seed and N byte edits
// (a byte changed or dropped, or the bytes cut short: mostly requests that
// no longer parse, whose graph the import must refuse by its bytes), with
// fixed random seeds, so that the regression tests fuzz a little,
// reproducibly.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "tests/fuzz/byte_edits.h"
#include "tests/fuzz/corpus.h"
#include "tests/fuzz/fuzz_harness.h"

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// Where each input is written before it runs, so that the one a check
// aborts on is left behind: $TEST_UNDECLARED_OUTPUTS_DIR (Bazel keeps it in
// the test's outputs.zip) or /tmp.
std::string LastInputPath() {
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" +
         partplan::fuzz::FuzzerName(partplan::fuzz::Target().rpc) + "-last-input";
}

int Run(const std::string& bytes) {
  static const std::string last_input = LastInputPath();
  {
    std::ofstream out(last_input, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  return partplan::fuzz::Target().run(reinterpret_cast<const uint8_t*>(bytes.data()),
                                      bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  const partplan::fuzz::FuzzTarget& target = partplan::fuzz::Target();
  bool seeds = false;
  int mutations = 0;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seeds") {
      seeds = true;
    } else if (absl::StartsWith(arg, "--mutations=")) {
      if (!absl::SimpleAtoi(arg.substr(12), &mutations)) {
        std::fprintf(stderr, "bad %s\n", arg.c_str());
        return 2;
      }
    } else if (std::filesystem::is_directory(arg)) {
      std::vector<std::string> in_dir;
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') {
          in_dir.push_back(entry.path().string());
        }
      }
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else if (std::filesystem::exists(arg)) {
      files.push_back(arg);
    }  // A regressions directory with nothing saved yet is not in the runfiles.
  }
  std::vector<std::string> seed_inputs;
  if (seeds) {
    seed_inputs = partplan::fuzz::SeedRequests(target.rpc);
    if (seed_inputs.empty()) {
      std::fprintf(stderr, "no seeds: run from the workspace root\n");
      return 1;
    }
  }
  int runs = 0;
  for (const std::string& path : files) {
    Run(ReadFile(path));
    ++runs;
  }
  int mutated = 0;
  int corrupted = 0;
  for (size_t i = 0; i < seed_inputs.size(); ++i) {
    Run(seed_inputs[i]);
    ++runs;
    for (int k = 0; k < mutations; ++k) {
      std::mt19937_64 random(i * 1000003 + static_cast<uint64_t>(k));
      std::string bytes = seed_inputs[i];
      // A few edits in a row, as libFuzzer stacks mutations.
      for (int step = 0; step <= k % 4; ++step) target.mutate(&bytes, random);
      Run(bytes);
      ++runs;
      ++mutated;

      bytes = seed_inputs[i];
      partplan::fuzz::EditBytes(&bytes, 1 + k % 3, random);
      Run(bytes);
      ++runs;
      ++corrupted;
    }
  }
  std::printf(
      "%s: ran %d inputs (%zu files, %zu seeds, %d message edits and %d byte edits of "
      "them)\n",
      partplan::fuzz::FuzzerName(target.rpc).c_str(), runs, files.size(), seed_inputs.size(),
      mutated, corrupted);
  return 0;
}

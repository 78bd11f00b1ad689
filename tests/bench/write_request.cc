// Writes the benchmarks' synthetic request (synthetic_graphs.h) to a file, as
// binary protobuf, so that `partplan load` and `partplan call` can send it.
//
//   bazel run -c opt //tests/bench:write_request -- 101 8 /tmp/small.pb
//   bazel run -c opt //tests/bench:write_request -- 1000000 8 /tmp/big.pb
//
// Arguments: nodes (about: 3 per residual layer, plus input and output),
// devices, output path. The request is a PartitionGraphRequest (size_based
// over equal devices with 10% headroom), the one end_to_end_bench and
// partitioner_bench plan. Prints the node count and the size.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "tests/bench/synthetic_graphs.h"

int main(int argc, char** argv) {
  int64_t nodes = 0;
  int devices = 0;
  if (argc != 4 || !absl::SimpleAtoi(argv[1], &nodes) || !absl::SimpleAtoi(argv[2], &devices) ||
      nodes < 5 || devices < 1) {
    std::cerr << "usage: write_request NODES DEVICES OUTPUT.pb (NODES >= 5, DEVICES >= 1)\n";
    return 2;
  }
  const partplan::v1::PartitionGraphRequest request =
      partplan::ResidualStackRequest(nodes, devices);
  std::ofstream out(argv[3], std::ios::binary | std::ios::trunc);
  if (!out || !request.SerializeToOstream(&out) || !out.flush()) {
    std::cerr << "write_request: cannot write '" << argv[3] << "'\n";
    return 1;
  }
  std::cout << argv[3] << ": " << request.graph().nodes_size() << " nodes, " << devices
            << " devices, " << request.ByteSizeLong() << " bytes\n";
  return 0;
}

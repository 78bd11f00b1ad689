// Writes the benchmarks' synthetic request (synthetic_graphs.h) to a file, as
// binary protobuf, so that `partplan load` and `partplan call` can send it.
//
//   bazel run -c opt //tests/bench:write_request -- 101 8 /tmp/small.pb
//   bazel run -c opt //tests/bench:write_request -- 1000000 8 /tmp/big.pb
//   bazel run -c opt //tests/bench:write_request -- 1000000 8 /tmp/big.pb indices
//
// Arguments: nodes (about: 3 per residual layer, plus input and output),
// devices, output path, and optionally `indices` for a request asking for
// the plan by node index (NODE_REFERENCES_INDICES). The request is a
// PartitionGraphRequest (size_based over equal devices with 10% headroom),
// the one end_to_end_bench and partitioner_bench plan. Prints the node count
// and the size.
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
  const bool by_index = argc == 5 && std::string(argv[4]) == "indices";
  if ((argc != 4 && !by_index) || !absl::SimpleAtoi(argv[1], &nodes) ||
      !absl::SimpleAtoi(argv[2], &devices) || nodes < 5 || devices < 1) {
    std::cerr << "usage: write_request NODES DEVICES OUTPUT.pb [indices] (NODES >= 5, DEVICES >= "
                 "1)\n";
    return 2;
  }
  partplan::v1::PartitionGraphRequest request = partplan::ResidualStackRequest(nodes, devices);
  if (by_index) request.set_node_references(partplan::v1::NODE_REFERENCES_INDICES);
  std::ofstream out(argv[3], std::ios::binary | std::ios::trunc);
  if (!out || !request.SerializeToOstream(&out) || !out.flush()) {
    std::cerr << "write_request: cannot write '" << argv[3] << "'\n";
    return 1;
  }
  std::cout << argv[3] << ": " << request.graph().nodes_size() << " nodes, " << devices
            << " devices, " << request.ByteSizeLong() << " bytes\n";
  return 0;
}

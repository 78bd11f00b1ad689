#!/usr/bin/python3
"""Times torch.fx's accelerator Partitioner (size_based) on the benchmarks' graph.

The graph is what torch.fx records for N layers of `x = relu(linear(x)) + x`
with nn.Linear(64, 64) on a 32x64 float32 batch: the residual stack of
tests/bench/synthetic_graphs.h (3 nodes per layer, plus input and output), with
the same node sizes (get_size_of_all_nodes: parameters + output for a Linear,
the output for the others) and the same devices (8, each holding an eighth of
the total plus 10%, transfers at 1e10 B/s).

    /usr/bin/python3 tests/bench/fx_size_based.py            # 16,002 nodes
    /usr/bin/python3 tests/bench/fx_size_based.py --nodes 1002

Needs Debian's python3-torch (1.13). Prints one line per phase; the figure to
compare with partplan is `partition_graph`.
"""

import argparse
import time

import torch
from torch import fx, nn
from torch.fx.experimental.accelerator_partitioner import Partitioner
from torch.fx.experimental.partitioner_utils import Device, PartitionerConfig, PartitionMode
from torch.fx.passes.graph_manipulation import get_size_of_all_nodes


class ResidualStack(nn.Module):
    # The Linears sit directly in one ModuleList: torch.fx walks named_modules()
    # for every call_module node, so a deeper hierarchy would only slow it down.
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(layers))

    def forward(self, x):
        for linear in self.layers:
            x = torch.relu(linear(x)) + x
        return x


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=16002,
                        help="about this many nodes, as ResidualStack(nodes) in synthetic_graphs.h")
    parser.add_argument("--devices", type=int, default=8)
    args = parser.parse_args()
    layers = (args.nodes - 2) // 3

    start = time.perf_counter()
    torch.manual_seed(0)
    module = ResidualStack(layers)
    x = torch.randn(32, 64)
    traced = fx.symbolic_trace(module)
    get_size_of_all_nodes(traced, [x])
    nodes = len(traced.graph.nodes)
    print(f"torch.fx {torch.__version__}: {nodes} nodes, trace + shape propagation "
          f"{time.perf_counter() - start:.2f} s", flush=True)

    total = sum(node.size_bytes.total_size for node in traced.graph.nodes
                if getattr(node, "size_bytes", None) is not None and node.op != "output")
    per_device = total // args.devices + total // (10 * args.devices) + 1
    devices = [Device(f"gpu{d}", per_device, d) for d in range(args.devices)]
    config = PartitionerConfig(devices, PartitionMode.size_based,
                               transfer_rate_bytes_per_sec=1e10)

    start = time.perf_counter()
    result = Partitioner().partition_graph(traced, x, config)
    seconds = time.perf_counter() - start
    partitions = len(result.dag.nodes)
    print(f"torch.fx {torch.__version__} size_based partition_graph: {nodes} nodes, "
          f"{partitions} partitions, {seconds:.2f} s", flush=True)


if __name__ == "__main__":
    main()

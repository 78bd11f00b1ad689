#include "planner/fx/latency.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

uint64_t PairKey(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }

// max(compute, memory) seconds of v on device index `device` (-1: none).
// Finite figures can still give an infinite time (FLOPs over a denormal
// FLOP/s): INVALID_ARGUMENT naming the device's figure then.
absl::StatusOr<double> NodeSeconds(const CompactGraph& graph, const DeviceList& devices, NodeId v,
                                   int device) {
  if (const double seconds = graph.latency_seconds(v); seconds >= 0) return seconds;
  if (device < 0) return 0.0;
  double compute = 0;
  const double flops_per_second = devices.compute_flops_per_second(device);
  if (flops_per_second > 0) compute = graph.flops(v) / flops_per_second;
  double memory = 0;
  const double bandwidth = devices.memory_bandwidth_bytes_per_second(device);
  if (bandwidth > 0) {
    double bytes = static_cast<double>(graph.total_bytes(v));
    for (NodeId u : graph.inputs(v)) bytes += static_cast<double>(graph.output_bytes(u));
    memory = bytes / bandwidth;
  }
  if (!std::isfinite(compute) || !std::isfinite(memory)) {
    const bool by_compute = !std::isfinite(compute);
    return InvalidFieldError(
        absl::StrCat("devices.devices[", device, "].",
                     by_compute ? "compute_flops_per_second" : "memory_bandwidth_bytes_per_second"),
        absl::StrCat("node '", graph.name(v), "' would take longer than the largest double of ",
                     "seconds at ", by_compute ? flops_per_second : bandwidth,
                     by_compute ? " FLOP/s" : " bytes/s", " on device '", devices[device].name,
                     "'"));
  }
  return std::max(compute, memory);
}

// Adds to each parent -> child edge the output bytes of the graph inputs
// that the child's call_* nodes read and that the parent holds too (each
// once per edge, in the order the child first reads them), as torch.fx's
// get_comm_latency_between counts them.
//
// An edge's inputs are the intersection of two lists: those the child reads
// and those the parent holds. Testing each input the child reads against
// every parent would cost |parents| x |inputs read| per child, quadratic in
// one child's arguments. So each edge walks the shorter list and looks the
// other up (a mark by node, or a binary search): O(sum over edges of the
// shorter list's length x log), at most O(M^1.5 log M) for M nodes and
// arguments, and linear when one side is short. Polled by that work.
absl::Status ChargeSharedGraphInputs(const CompactGraph& graph, const PartitionSet& set,
                                     const CancellationToken& token,
                                     absl::flat_hash_map<uint64_t, double>& edge_bytes) {
  const int32_t num_partitions = static_cast<int32_t>(set.partitions.size());
  int64_t work = 0;
  // The graph inputs each partition holds, in node order (nodes are sorted).
  std::vector<std::vector<NodeId>> held_inputs(num_partitions);
  for (int32_t p = 0; p < num_partitions; ++p) {
    for (NodeId v : set.partitions[p].nodes) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      if (graph.is_input_node(v)) held_inputs[p].push_back(v);
    }
  }
  std::vector<int32_t> read_by(graph.num_nodes(), -1);  // marks inputs per child
  std::vector<int32_t> read_at(graph.num_nodes(), -1);  // position in inputs_read
  std::vector<NodeId> inputs_read;
  std::vector<int32_t> shared;  // positions in inputs_read of one edge's inputs
  for (int32_t c = 0; c < num_partitions; ++c) {
    const Partition& child = set.partitions[c];
    inputs_read.clear();
    for (NodeId v : child.nodes) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      if (!graph.is_op_node(v)) continue;
      for (NodeId u : graph.inputs(v)) {
        PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
        if (graph.is_input_node(u) && read_by[u] != c) {
          read_by[u] = c;
          read_at[u] = static_cast<int32_t>(inputs_read.size());
          inputs_read.push_back(u);
        }
      }
    }
    for (int32_t p : child.parents) {
      const std::vector<NodeId>& held = held_inputs[p];  // sorted
      shared.clear();
      if (held.size() < inputs_read.size()) {
        for (NodeId u : held) {
          PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
          if (read_by[u] == c) shared.push_back(read_at[u]);
        }
        // Charged in the child's order of first reads, as below.
        std::sort(shared.begin(), shared.end());
      } else {
        for (int32_t i = 0; i < static_cast<int32_t>(inputs_read.size()); ++i) {
          PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
          if (std::binary_search(held.begin(), held.end(), inputs_read[i])) shared.push_back(i);
        }
      }
      for (int32_t i : shared) {
        edge_bytes[PairKey(p, c)] += static_cast<double>(graph.output_bytes(inputs_read[i]));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PlanLatency> EstimatePlanLatency(const CompactGraph& graph,
                                                const DeviceList& devices,
                                                const PartitionSet& set,
                                                const CancellationToken& token,
                                                const LatencyOptions& options) {
  const int32_t num_partitions = static_cast<int32_t>(set.partitions.size());
  std::vector<int> device_of(num_partitions, -1);
  for (int32_t p = 0; p < num_partitions; ++p) {
    if (!set.partitions[p].logical_device_ids.empty()) {
      device_of[p] = devices.IndexOf(set.partitions[p].logical_device_ids.front());
    }
  }

  // Longest path ending at each call_* node within its partition; node ids
  // are a topological order, so one forward pass suffices.
  PlanLatency result;
  result.partition_seconds.assign(num_partitions, 0.0);
  std::vector<double> path_seconds(graph.num_nodes(), 0.0);
  // Bytes each child reads from each parent (each value once per child).
  absl::flat_hash_map<uint64_t, double> edge_bytes;
  absl::flat_hash_set<uint64_t> counted;  // (child, value)
  // Nodes, edges and partition links seen, for the polls.
  int64_t work = 0;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    const int32_t p = set.partition_of[v];
    if (p < 0) continue;
    double before = 0;
    for (NodeId u : graph.inputs(v)) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      const int32_t q = set.partition_of[u];
      if (q == p) {
        before = std::max(before, path_seconds[u]);
      } else if (q >= 0 && counted.insert(PairKey(p, u)).second) {
        edge_bytes[PairKey(q, p)] += static_cast<double>(graph.output_bytes(u));
      }
    }
    PARTPLAN_ASSIGN_OR_RETURN(const double seconds, NodeSeconds(graph, devices, v, device_of[p]));
    path_seconds[v] = before + seconds;
    if (!std::isfinite(path_seconds[v])) {
      return InvalidFieldError(absl::StrCat("graph.nodes[", v, "]"),
                               absl::StrCat("the latencies along the path to node '", graph.name(v),
                                            "' add up beyond the largest double"));
    }
    result.partition_seconds[p] = std::max(result.partition_seconds[p], path_seconds[v]);
  }

  if (options.charge_shared_graph_inputs) {
    PARTPLAN_RETURN_IF_ERROR(ChargeSharedGraphInputs(graph, set, token, edge_bytes));
  }

  // Longest path through the partition DAG, in Kahn order.
  std::vector<int32_t> waiting(num_partitions);
  std::vector<int32_t> ready;
  std::vector<double> finish(num_partitions, 0.0);
  for (int32_t p = 0; p < num_partitions; ++p) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    waiting[p] = static_cast<int32_t>(set.partitions[p].parents.size());
    if (waiting[p] == 0) ready.push_back(p);
  }
  int32_t done = 0;
  while (!ready.empty()) {
    const int32_t p = ready.back();
    ready.pop_back();
    ++done;
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    finish[p] += result.partition_seconds[p];
    if (!std::isfinite(finish[p])) {
      return InvalidFieldError("graph.nodes",
                               absl::StrCat("the critical path through partition ", p,
                                            " adds up beyond the largest double of seconds"));
    }
    result.critical_path_seconds = std::max(result.critical_path_seconds, finish[p]);
    const Partition& parent = set.partitions[p];
    for (int32_t c : parent.children) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      const Partition& child = set.partitions[c];
      double transfer = 0;
      const char* rate_field = "devices";  // the figure the transfer was timed with
      const bool same_devices = !parent.logical_device_ids.empty() &&
                                parent.logical_device_ids == child.logical_device_ids;
      if (!same_devices && !parent.logical_device_ids.empty() &&
          !child.logical_device_ids.empty()) {
        const double bandwidth = devices.BandwidthBetween(parent.logical_device_ids.front(),
                                                          child.logical_device_ids.front());
        if (bandwidth > 0) transfer = edge_bytes[PairKey(p, c)] / bandwidth;
      } else if (!same_devices && devices.transfer_rate_bytes_per_second() > 0) {
        transfer = edge_bytes[PairKey(p, c)] / devices.transfer_rate_bytes_per_second();
        rate_field = "devices.transfer_rate_bytes_per_second";
      }
      if (!std::isfinite(finish[p] + transfer)) {
        return InvalidFieldError(
            rate_field, absl::StrCat("the critical path to partition ", c,
                                    " (its latencies and the transfer of ", edge_bytes[PairKey(p, c)],
                                    " bytes from partition ", p,
                                    " over the bandwidth between their devices) adds up beyond "
                                    "the largest double of seconds"));
      }
      finish[c] = std::max(finish[c], finish[p] + transfer);
      if (--waiting[c] == 0) ready.push_back(c);
    }
  }
  if (done != num_partitions) {
    return absl::InvalidArgumentError("the partitions depend on each other in a cycle");
  }
  return result;
}

}  // namespace partplan

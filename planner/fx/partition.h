// Partitions of a CompactGraph with torch.fx's memory accounting.
//
// A Partition holds call_* nodes plus, as in torch.fx, every placeholder and
// get_attr they read (copied into each partition that reads them). Its
// memory is torch.fx's `used_mem_bytes`: the sum over its nodes of
// `get_extra_size_of(node, partition)`, i.e. each node's total size plus the
// output size of each of its inputs that lives outside the partition.
//
//   PartitionBuilder builder(graph);
//   int p = builder.NewPartition();
//   if (builder.ExtraBytes(v, p) <= room) builder.AddNode(v, p);
//   PartitionSet set = std::move(builder).Finish();
#ifndef PARTPLAN_PLANNER_FX_PARTITION_H_
#define PARTPLAN_PLANNER_FX_PARTITION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "partplan/v1/plan.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"

namespace partplan {

struct Partition {
  // Nodes in graph order (call_* nodes and the inputs copied in).
  std::vector<NodeId> nodes;
  // torch.fx's used_mem_bytes.
  int64_t memory_bytes = 0;
  // Devices it runs on, in the order they were assigned.
  std::vector<int32_t> logical_device_ids;
  // Partitions it reads from / that read from it, ascending.
  std::vector<int32_t> parents;
  std::vector<int32_t> children;
};

struct PartitionSet {
  std::vector<Partition> partitions;
  // Partition of every call_* node; -1 for other nodes.
  std::vector<int32_t> partition_of;
};

// Builds partitions node by node, keeping torch.fx's memory figure up to
// date in O(inputs) per node. Nodes must be added to partitions in creation
// order: once partition p+1 has a node, p takes no more (every torch.fx
// planner that builds partitions incrementally works this way).
class PartitionBuilder {
 public:
  explicit PartitionBuilder(const CompactGraph& graph);

  // Appends an empty partition and returns its id.
  int32_t NewPartition();
  Partition& partition(int32_t p) { return partitions_[p]; }
  int32_t num_partitions() const { return static_cast<int32_t>(partitions_.size()); }

  // torch.fx's get_extra_size_of(v, nodes of p): v's total size plus the
  // output size of its inputs outside p.
  int64_t ExtraBytes(NodeId v, int32_t p) const;
  // torch.fx's Partition.add_node: adds v and its placeholder/get_attr inputs.
  void AddNode(NodeId v, int32_t p);

  // Sorts node lists into graph order, fills partition_of, parents, children;
  // polls `token` by nodes and edges, its status when it fires.
  absl::StatusOr<PartitionSet> Finish(const CancellationToken& token) &&;

 private:
  bool Contains(int32_t p, NodeId u) const { return last_partition_[u] == p; }

  const CompactGraph& graph_;
  std::vector<Partition> partitions_;
  std::vector<int32_t> last_partition_;  // newest partition holding each node
};

// torch.fx's recalculate_mem_size for any set of nodes: the sum over
// `nodes` of their total size plus the output size of their inputs outside
// the set. Reuses one marker array across calls: O(|nodes| + their inputs).
class NodeSetMemory {
 public:
  explicit NodeSetMemory(const CompactGraph& graph)
      : graph_(graph), mark_(graph.num_nodes(), 0) {}
  int64_t Compute(absl::Span<const NodeId> nodes);

 private:
  const CompactGraph& graph_;
  std::vector<uint32_t> mark_;
  uint32_t epoch_ = 0;
};

// Sets parents and children from partition_of: p is a parent of c when a
// node of p has a user in c (torch.fx's set_parents_and_children). Polls
// `token` by nodes and edges seen; its status when it fires.
absl::Status LinkPartitions(const CompactGraph& graph, const CancellationToken& token,
                            PartitionSet* set);

// How a plan lists its nodes (a request's node_references): OK for a value
// this library knows, else INVALID_ARGUMENT on `node_references`. A newer
// client may send a value an older server does not know.
absl::Status CheckNodeReferences(v1::NodeReferences node_references);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_PARTITION_H_

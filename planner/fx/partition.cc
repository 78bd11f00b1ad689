#include "planner/fx/partition.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {

absl::Status CheckNodeReferences(v1::NodeReferences node_references) {
  if (v1::NodeReferences_IsValid(node_references)) return absl::OkStatus();
  return InvalidFieldError("node_references",
                           absl::StrCat("unknown node_references ", node_references,
                                        ": expected NODE_REFERENCES_NAMES or "
                                        "NODE_REFERENCES_INDICES"));
}

PartitionBuilder::PartitionBuilder(const CompactGraph& graph)
    : graph_(graph), last_partition_(graph.num_nodes(), -1) {}

int32_t PartitionBuilder::NewPartition() {
  partitions_.emplace_back();
  return num_partitions() - 1;
}

int64_t PartitionBuilder::ExtraBytes(NodeId v, int32_t p) const {
  int64_t bytes = graph_.total_bytes(v);
  for (NodeId u : graph_.inputs(v)) {
    if (!Contains(p, u)) bytes += graph_.output_bytes(u);
  }
  return bytes;
}

void PartitionBuilder::AddNode(NodeId v, int32_t p) {
  Partition& partition = partitions_[p];
  // Inputs copied in count their own total size (they read no nodes).
  for (NodeId u : graph_.inputs(v)) {
    if (graph_.is_input_node(u) && !Contains(p, u)) {
      last_partition_[u] = p;
      partition.nodes.push_back(u);
      partition.memory_bytes += graph_.total_bytes(u);
    }
  }
  partition.memory_bytes += ExtraBytes(v, p);
  last_partition_[v] = p;
  partition.nodes.push_back(v);
}

namespace {

// Sorts the node lists of `partitions` into graph order, all at once: a
// counting sort by node id, O(N + entries), where sorting each list would
// be O(entries log entries), the one part of size_based's own work that
// would grow faster than the graph. Lists already in order, as most are,
// are left as they are.
absl::Status SortNodeLists(int32_t num_nodes, const CancellationToken& token,
                           std::vector<Partition>* partitions) {
  int64_t work = 0;
  std::vector<Partition*> unsorted;
  for (Partition& partition : *partitions) {
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(1 + static_cast<int64_t>(partition.nodes.size()), &work));
    if (!std::is_sorted(partition.nodes.begin(), partition.nodes.end())) {
      unsorted.push_back(&partition);
    }
  }
  if (unsorted.empty()) return absl::OkStatus();
  // The unsorted lists inverted: for each node, the lists holding it (once
  // per time it is listed). offsets[v] counts v's entries, is summed to the
  // end of v's range, then walks back to its start as they are placed.
  std::vector<int32_t> offsets(num_nodes + 1, 0);
  for (const Partition* partition : unsorted) {
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(1 + static_cast<int64_t>(partition->nodes.size()), &work));
    for (NodeId v : partition->nodes) ++offsets[v];
  }
  for (int32_t v = 1; v <= num_nodes; ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    offsets[v] += offsets[v - 1];
  }
  std::vector<int32_t> lists(offsets[num_nodes]);
  for (int32_t i = 0; i < static_cast<int32_t>(unsorted.size()); ++i) {
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(1 + static_cast<int64_t>(unsorted[i]->nodes.size()), &work));
    for (NodeId v : unsorted[i]->nodes) lists[--offsets[v]] = i;
  }
  for (Partition* partition : unsorted) partition->nodes.clear();
  for (NodeId v = 0; v < num_nodes; ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(1 + offsets[v + 1] - offsets[v], &work));
    for (int32_t k = offsets[v]; k < offsets[v + 1]; ++k) unsorted[lists[k]]->nodes.push_back(v);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PartitionSet> PartitionBuilder::Finish(const CancellationToken& token) && {
  PartitionSet set;
  set.partition_of.assign(graph_.num_nodes(), -1);
  PARTPLAN_RETURN_IF_ERROR(SortNodeLists(graph_.num_nodes(), token, &partitions_));
  int64_t work = 0;
  for (int32_t p = 0; p < num_partitions(); ++p) {
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(1 + static_cast<int64_t>(partitions_[p].nodes.size()), &work));
    for (NodeId v : partitions_[p].nodes) {
      if (graph_.is_op_node(v)) set.partition_of[v] = p;
    }
  }
  set.partitions = std::move(partitions_);
  PARTPLAN_RETURN_IF_ERROR(LinkPartitions(graph_, token, &set));
  return set;
}

int64_t NodeSetMemory::Compute(absl::Span<const NodeId> nodes) {
  if (++epoch_ == 0) {  // wrapped: clear stale marks
    std::fill(mark_.begin(), mark_.end(), 0);
    epoch_ = 1;
  }
  for (NodeId v : nodes) mark_[v] = epoch_;
  int64_t bytes = 0;
  for (NodeId v : nodes) {
    bytes += graph_.total_bytes(v);
    for (NodeId u : graph_.inputs(v)) {
      if (mark_[u] != epoch_) bytes += graph_.output_bytes(u);
    }
  }
  return bytes;
}

absl::Status LinkPartitions(const CompactGraph& graph, const CancellationToken& token,
                            PartitionSet* set) {
  int64_t work = 0;
  for (Partition& partition : set->partitions) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    partition.parents.clear();
    partition.children.clear();
  }
  // Placeholders and get_attrs are copied into their users' partitions, so
  // only call_* nodes link partitions.
  for (NodeId u = 0; u < graph.num_nodes(); ++u) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    const int32_t p = set->partition_of[u];
    if (p < 0) continue;
    for (NodeId v : graph.users(u)) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      const int32_t c = set->partition_of[v];
      if (c >= 0 && c != p) {
        set->partitions[p].children.push_back(c);
        set->partitions[c].parents.push_back(p);
      }
    }
  }
  for (Partition& partition : set->partitions) {
    for (std::vector<int32_t>* ids : {&partition.parents, &partition.children}) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckWork(1 + static_cast<int64_t>(ids->size()), &work));
      std::sort(ids->begin(), ids->end());
      ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
    }
  }
  return absl::OkStatus();
}

}  // namespace partplan

#include "planner/sparse_nn_partitioner.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "planner/status_util.h"

namespace partplan {
namespace {

// Which call_module targets torch.fx's is_embedding_node accepts.
//
// torch.fx walks the target's atoms from the root module and answers yes at
// the first module that prints "Embedding", i.e. that is an embedding or
// holds one. Each prefix it visits holds the next, so if any prefix holds
// an embedding module, the first atom does: the question is whether the
// target's first atom is the first atom of some embedding module's
// qualified name. (Targets are looked at with leading dots dropped, as the
// prefix walk did.) That is O(length) per node and per module; marking every
// prefix of every name and hashing every prefix of every target was
// quadratic in the number of atoms, in time and memory.
class EmbeddingModules {
 public:
  explicit EmbeddingModules(const CompactGraph& graph) {
    for (const v1::Module& module : graph.modules()) {
      if (!absl::StrContains(module.module_type(), "Embedding")) continue;
      const absl::string_view first = FirstAtom(module.qualified_name());
      if (!first.empty()) first_atoms_.insert(first);
    }
  }

  // Whether node v is one. Only a call_module can be, so only those have
  // their fields decoded again: that decoding was most of this planner's
  // own time.
  bool IsEmbedding(const CompactGraph& graph, NodeReader& nodes, NodeId v) const {
    if (graph.op(v) != v1::CALL_MODULE) return false;
    const NodeFields& node = nodes.OwnFields(v);
    if (absl::StrContains(node.module_type, "Embedding")) return true;
    absl::string_view target = node.target;
    while (absl::ConsumePrefix(&target, ".")) {
    }
    const absl::string_view first = FirstAtom(target);
    return !first.empty() && first_atoms_.contains(first);
  }

 private:
  static absl::string_view FirstAtom(absl::string_view name) {
    return name.substr(0, name.find('.'));
  }

  // Views into the graph's module names, which outlive this object.
  absl::flat_hash_set<absl::string_view> first_atoms_;
};

// Partitions being merged, in torch.fx's list order, with stable handles.
class MergeState {
 public:
  MergeState(const CompactGraph& graph, PartitionSet set)
      : graph_(graph), memory_(graph) {
    for (Partition& partition : set.partitions) {
      order_.push_back(static_cast<int32_t>(parts_.size()));
      parts_.push_back(std::move(partition));
    }
    handle_of_ = std::move(set.partition_of);
  }

  const Partition& part(int32_t handle) const { return parts_[handle]; }

  // Longest-path depth of every live partition in the partition DAG (what
  // torch.fx's get_bfs_level_partition ends up assigning).
  std::vector<int32_t> Levels() const {
    std::vector<std::vector<int32_t>> children(parts_.size());
    std::vector<int32_t> waiting(parts_.size(), 0);
    absl::flat_hash_set<uint64_t> seen;
    for (NodeId u = 0; u < graph_.num_nodes(); ++u) {
      const int32_t from = handle_of_[u];
      if (from < 0) continue;
      for (NodeId v : graph_.users(u)) {
        const int32_t to = handle_of_[v];
        if (to < 0 || to == from) continue;
        if (seen.insert((static_cast<uint64_t>(from) << 32) | static_cast<uint32_t>(to)).second) {
          children[from].push_back(to);
          ++waiting[to];
        }
      }
    }
    std::vector<int32_t> level(parts_.size(), 0);
    std::vector<int32_t> ready;
    for (int32_t h : order_) {
      if (waiting[h] == 0) ready.push_back(h);
    }
    while (!ready.empty()) {
      const int32_t h = ready.back();
      ready.pop_back();
      for (int32_t c : children[h]) {
        level[c] = std::max(level[c], level[h] + 1);
        if (--waiting[c] == 0) ready.push_back(c);
      }
    }
    return level;
  }

  // Memory of the union of two partitions.
  int64_t MergedMemory(int32_t a, int32_t b) {
    const std::vector<NodeId> nodes = Union(a, b);
    return memory_.Compute(nodes);
  }

  // torch.fx's combine_two_partitions: the union goes last, a and b go.
  int32_t Merge(int32_t a, int32_t b) {
    Partition merged;
    merged.nodes = Union(a, b);
    merged.memory_bytes = memory_.Compute(merged.nodes);
    const int32_t handle = static_cast<int32_t>(parts_.size());
    for (NodeId v : merged.nodes) {
      if (graph_.is_op_node(v)) handle_of_[v] = handle;
    }
    parts_.push_back(std::move(merged));
    order_.erase(std::remove_if(order_.begin(), order_.end(),
                                [&](int32_t h) { return h == a || h == b; }),
                 order_.end());
    order_.push_back(handle);
    return handle;
  }

  // The id partition `handle` has now: its place in the list.
  int32_t IdOf(int32_t handle) const {
    return static_cast<int32_t>(std::find(order_.begin(), order_.end(), handle) - order_.begin());
  }

  // Live partitions in order, renumbered 0..P-1; `index_of` maps handles
  // to the new ids.
  PartitionSet Finish(std::vector<int32_t>& index_of) && {
    PartitionSet set;
    index_of.assign(parts_.size(), -1);
    for (int32_t h : order_) {
      index_of[h] = static_cast<int32_t>(set.partitions.size());
      set.partitions.push_back(std::move(parts_[h]));
    }
    set.partition_of.assign(graph_.num_nodes(), -1);
    for (NodeId v = 0; v < graph_.num_nodes(); ++v) {
      if (handle_of_[v] >= 0) set.partition_of[v] = index_of[handle_of_[v]];
    }
    LinkPartitions(graph_, &set);
    return set;
  }

 private:
  std::vector<NodeId> Union(int32_t a, int32_t b) const {
    std::vector<NodeId> nodes;
    std::set_union(parts_[a].nodes.begin(), parts_[a].nodes.end(), parts_[b].nodes.begin(),
                   parts_[b].nodes.end(), std::back_inserter(nodes));
    return nodes;
  }

  const CompactGraph& graph_;
  NodeSetMemory memory_;
  std::vector<Partition> parts_;   // by handle; merged-away ones stay, unused
  std::vector<int32_t> order_;     // live handles in torch.fx's list order
  std::vector<int32_t> handle_of_; // per call_* node
};

// torch.fx's combine_partitions_based_on_size over one group of partitions.
absl::Status CombineBySize(MergeState& state, std::vector<int32_t>& group,
                           int64_t device_memory, const CancellationToken& token) {
  for (int64_t round = 0; group.size() > 1; ++round) {
    PARTPLAN_RETURN_IF_ERROR(token.Check());
    std::vector<int32_t> by_memory = group;
    std::stable_sort(by_memory.begin(), by_memory.end(), [&](int32_t a, int32_t b) {
      return state.part(a).memory_bytes < state.part(b).memory_bytes;
    });
    const std::vector<int32_t> level = state.Levels();
    const int32_t smallest = by_memory.front();
    int32_t partner = -1;
    for (size_t i = by_memory.size() - 1; i >= 1; --i) {
      const int32_t candidate = by_memory[i];
      if (std::abs(level[smallest] - level[candidate]) <= 1 &&
          state.MergedMemory(candidate, smallest) <= device_memory) {
        partner = candidate;
        break;
      }
    }
    if (partner < 0) break;
    const int32_t merged = state.Merge(partner, smallest);
    group.erase(std::remove_if(group.begin(), group.end(),
                               [&](int32_t h) { return h == partner || h == smallest; }),
                group.end());
    group.push_back(merged);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PartitionSet> SparseNnPartition(const CompactGraph& graph,
                                               const DeviceList& devices,
                                               const CancellationToken& token) {
  const int64_t device_memory = devices[0].available_memory_bytes;
  const EmbeddingModules embeddings(graph);
  NodeReader nodes(graph);

  // The cuts.
  PartitionBuilder builder(graph);
  std::vector<int32_t> embedding_group, dense_group;
  bool in_embedding_region = false;
  int32_t current = builder.NewPartition();
  auto close_current = [&] {
    (in_embedding_region ? embedding_group : dense_group).push_back(current);
  };
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(v));
    if (!graph.is_op_node(v)) continue;
    if (embeddings.IsEmbedding(graph, nodes, v) != in_embedding_region) {
      // An empty partition is kept and joins the region being entered.
      if (builder.partition(current).memory_bytes != 0) {
        close_current();
        current = builder.NewPartition();
      }
      in_embedding_region = !in_embedding_region;
    }
    if (builder.ExtraBytes(v, current) + builder.partition(current).memory_bytes >
        device_memory) {
      close_current();
      current = builder.NewPartition();
      const int64_t need = builder.ExtraBytes(v, current);
      if (need > device_memory) {
        return absl::FailedPreconditionError(
            absl::StrCat("node '", graph.name(v), "' (target ", nodes.OwnFields(v).target,
                         ") is too large to fit into a device: it needs ", need,
                         " bytes with its inputs and devices have ", device_memory));
      }
    }
    builder.AddNode(v, current);
  }
  close_current();

  // The merges: dense partitions first, then embedding ones.
  MergeState state(graph, std::move(builder).Finish());
  PARTPLAN_RETURN_IF_ERROR(CombineBySize(state, dense_group, device_memory, token));
  PARTPLAN_RETURN_IF_ERROR(CombineBySize(state, embedding_group, device_memory, token));

  // Devices: one per embedding partition; dense partitions on all of them.
  if (embedding_group.size() > static_cast<size_t>(devices.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("need ", embedding_group.size(), " devices, but only ", devices.size(),
                     " provided: each embedding partition needs a device of its own"));
  }
  int64_t dense_bytes = 0;
  for (int32_t h : dense_group) dense_bytes += state.part(h).memory_bytes;
  std::vector<int32_t> embedding_devices;
  for (size_t i = 0; i < embedding_group.size(); ++i) {
    const Partition& partition = state.part(embedding_group[i]);
    if (dense_bytes + partition.memory_bytes > device_memory) {
      return absl::FailedPreconditionError(absl::StrCat(
          "partition ", state.IdOf(embedding_group[i]), " (an embedding partition of ",
          partition.memory_bytes, " bytes) and the non-embedding partitions (", dense_bytes,
          " bytes) can not fit into one device of ", device_memory, " bytes"));
    }
    embedding_devices.push_back(devices[static_cast<int>(i)].logical_id);
  }
  std::vector<int32_t> index_of;
  PartitionSet set = std::move(state).Finish(index_of);
  for (size_t i = 0; i < embedding_group.size(); ++i) {
    set.partitions[index_of[embedding_group[i]]].logical_device_ids = {embedding_devices[i]};
  }
  for (int32_t h : dense_group) {
    set.partitions[index_of[h]].logical_device_ids = embedding_devices;
  }
  return set;
}

}  // namespace partplan

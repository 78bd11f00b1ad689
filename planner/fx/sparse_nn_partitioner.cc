#include "planner/fx/sparse_nn_partitioner.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "planner/base/status_util.h"
#include "planner/fx/partition_merge.h"

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
  PARTPLAN_ASSIGN_OR_RETURN(PartitionSet built, std::move(builder).Finish(token));
  PARTPLAN_ASSIGN_OR_RETURN(PartitionMerger merger,
                            PartitionMerger::Create(graph, std::move(built), token));
  PARTPLAN_RETURN_IF_ERROR(merger.CombineBySize(dense_group, device_memory, token));
  PARTPLAN_RETURN_IF_ERROR(merger.CombineBySize(embedding_group, device_memory, token));

  // Devices: one per embedding partition; dense partitions on all of them.
  if (embedding_group.size() > static_cast<size_t>(devices.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("need ", embedding_group.size(), " devices, but only ", devices.size(),
                     " provided: each embedding partition needs a device of its own"));
  }
  int64_t dense_bytes = 0;
  for (int32_t h : dense_group) dense_bytes += merger.memory_bytes(h);
  std::vector<int32_t> embedding_devices;
  for (size_t i = 0; i < embedding_group.size(); ++i) {
    const int64_t embedding_bytes = merger.memory_bytes(embedding_group[i]);
    if (dense_bytes + embedding_bytes > device_memory) {
      return absl::FailedPreconditionError(absl::StrCat(
          "partition ", merger.IdOf(embedding_group[i]), " (an embedding partition of ",
          embedding_bytes, " bytes) and the non-embedding partitions (", dense_bytes,
          " bytes) can not fit into one device of ", device_memory, " bytes"));
    }
    embedding_devices.push_back(devices[static_cast<int>(i)].logical_id);
  }
  std::vector<int32_t> index_of;
  PARTPLAN_ASSIGN_OR_RETURN(PartitionSet set, std::move(merger).Finish(index_of, token));
  for (size_t i = 0; i < embedding_group.size(); ++i) {
    set.partitions[index_of[embedding_group[i]]].logical_device_ids = {embedding_devices[i]};
  }
  for (int32_t h : dense_group) {
    set.partitions[index_of[h]].logical_device_ids = embedding_devices;
  }
  return set;
}

}  // namespace partplan

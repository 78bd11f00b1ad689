#include "planner/split/split_graph.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

// split_module's qualname_map (QualifiedNames). The first uses are found
// with a NameIndex, which stays fast where a hash set of a million names
// would miss the cache on every insert. Polls `token` by the nodes it
// passes over.
absl::Status AddQualifiedNames(const CompactGraph& graph, const ModuleSplit& split,
                               const CancellationToken& token, QualifiedNames* names) {
  std::vector<const std::string*> submodule_name_of(graph.num_nodes(), nullptr);
  int64_t work = 0;
  for (const SplitPartition& part : split.partitions) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(1 + static_cast<int64_t>(part.nodes.size()), &work));
    for (NodeId v : part.nodes) submodule_name_of[v] = &part.submodule_name;
  }
  NodeReader nodes(graph);
  std::string split_name;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    if (graph.op(v) != v1::CALL_MODULE) continue;
    const absl::string_view target = nodes.OwnFields(v).target;
    split_name.assign(*submodule_name_of[v]);
    split_name += '.';
    for (const char c : target) split_name += c == '.' ? '_' : c;
    names->split_names.Add(split_name);
    names->original_names.Add(target);
  }
  const StringPool& split_names = names->split_names;
  NameIndex first_use(split_names.size());
  HashAhead hashes(first_use, split_names.size(),
                   [&split_names](int64_t i) { return split_names[i]; });
  for (int32_t i = 0; i < static_cast<int32_t>(split_names.size()); ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    if (first_use.Insert(split_names, i, hashes.Next(i)) >= 0) continue;
    names->entries.push_back(i);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> PartitionOfNodes(
    const CompactGraph& graph,
    const google::protobuf::RepeatedPtrField<v1::NodePartition>& assignments,
    const CancellationToken& token) {
  std::vector<int32_t> partition_of(graph.num_nodes(), -1);
  std::vector<bool> assigned(graph.num_nodes(), false);
  HashAhead hashes(graph.name_index(), assignments.size(),
                   [&](int64_t i) -> const std::string& { return assignments[i].node(); });
  for (int i = 0; i < assignments.size(); ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
    const v1::NodePartition& assignment = assignments[i];
    const NodeId v = graph.Find(assignment.node(), hashes.Next(i));
    if (v >= 0 && graph.is_op_node(v) && !assigned[v]) {
      assigned[v] = true;
      partition_of[v] = assignment.partition();
      continue;
    }
    const std::string at = absl::StrCat("assignments[", i, "]");
    if (v < 0) {
      return InvalidFieldError(absl::StrCat(at, ".node"),
                               absl::StrCat("no node is called '", assignment.node(), "'"));
    }
    if (!graph.is_op_node(v)) {
      return InvalidFieldError(
          absl::StrCat(at, ".node"),
          absl::StrCat("node '", assignment.node(), "' is a ", v1::Op_Name(graph.op(v)),
                       "; only call_module, call_function and call_method nodes are "
                       "assigned (graph inputs are threaded into the partitions using them)"));
    }
    return InvalidFieldError(absl::StrCat(at, ".node"),
                             absl::StrCat("node '", assignment.node(), "' is assigned twice"));
  }
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(v));
    if (graph.is_op_node(v) && !assigned[v]) {
      return InvalidFieldError("assignments",
                               absl::StrCat("node '", graph.name(v), "' (graph.nodes[", v,
                                            "]) has no partition"));
    }
  }
  return partition_of;
}

absl::StatusOr<GraphSplit> SplitGraphPlan(const CompactGraph& graph,
                                          absl::Span<const int32_t> partition_of,
                                          bool keep_original_order,
                                          const CancellationToken& token) {
  GraphSplit result;
  PARTPLAN_ASSIGN_OR_RETURN(
      result.split,
      SplitModule(graph, partition_of, keep_original_order, "assignments", token));
  PARTPLAN_RETURN_IF_ERROR(AddQualifiedNames(graph, result.split, token, &result.qualified_names));
  return result;
}

}  // namespace partplan

#include "planner/split_graph.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "planner/module_split.h"
#include "planner/name_index.h"
#include "planner/status_util.h"

namespace partplan {
namespace {

// The partition of every call_* node, from the request's assignments.
absl::StatusOr<std::vector<int32_t>> PartitionOfNodes(const CompactGraph& graph,
                                                      const v1::SplitGraphRequest& request) {
  std::vector<int32_t> partition_of(graph.num_nodes(), -1);
  std::vector<bool> assigned(graph.num_nodes(), false);
  const auto& assignments = request.assignments();
  HashAhead hashes(graph.name_index(), assignments.size(),
                   [&](int64_t i) -> const std::string& { return assignments[i].node(); });
  for (int i = 0; i < assignments.size(); ++i) {
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
    if (graph.is_op_node(v) && !assigned[v]) {
      return InvalidFieldError("assignments",
                               absl::StrCat("node '", graph.name(v), "' (graph.nodes[", v,
                                            "]) has no partition"));
    }
  }
  return partition_of;
}

}  // namespace

absl::Status SplitGraphPlan(const CompactGraph& graph, const v1::SplitGraphRequest& request,
                            const CancellationToken& token, v1::SplitGraphResponse* out) {
  PARTPLAN_ASSIGN_OR_RETURN(const std::vector<int32_t> partition_of,
                            PartitionOfNodes(graph, request));
  PARTPLAN_ASSIGN_OR_RETURN(const ModuleSplit split,
                            SplitModule(graph, partition_of, request.keep_original_order(),
                                        "assignments", token));
  v1::SplitGraphResponse& response = *out;
  response.Clear();
  for (int32_t i : split.construction_order) {
    const SplitPartition& part = split.partitions[i];
    v1::Submodule* submodule = response.add_submodules();
    submodule->set_name(part.submodule_name);
    submodule->set_partition(part.partition);
    graph.AppendNames(part.nodes, submodule->mutable_nodes());
    graph.AppendNames(part.inputs, submodule->mutable_inputs());
    graph.AppendNames(part.outputs, submodule->mutable_outputs());
    for (int32_t j : part.depends_on) {
      submodule->add_depends_on(split.partitions[j].submodule_name);
    }
    for (int32_t j : part.dependents) {
      submodule->add_dependents(split.partitions[j].submodule_name);
    }
    v1::BaseGraphCall* call = response.add_base_graph();
    call->set_submodule(part.submodule_name);
    *call->mutable_arguments() = {part.argument_names.begin(), part.argument_names.end()};
    *call->mutable_results() = {part.result_names.begin(), part.result_names.end()};
  }
  // split_module's qualname_map: one entry per submodule target, in graph
  // order of first use.
  std::vector<const std::string*> submodule_name_of(graph.num_nodes(), nullptr);
  for (const SplitPartition& part : split.partitions) {
    for (NodeId v : part.nodes) submodule_name_of[v] = &part.submodule_name;
  }
  std::vector<NodeId> modules;
  std::vector<std::string> split_names;
  NodeReader nodes(graph);
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (graph.op(v) != v1::CALL_MODULE) continue;
    modules.push_back(v);
    split_names.push_back(absl::StrCat(
        *submodule_name_of[v], ".", absl::StrReplaceAll(nodes.OwnFields(v).target, {{".", "_"}})));
  }
  // First uses found with a NameIndex, which stays fast where a hash set of
  // a million names would miss the cache on every insert.
  NameIndex first_use(static_cast<int64_t>(split_names.size()));
  HashAhead hashes(first_use, static_cast<int64_t>(split_names.size()),
                   [&](int64_t i) -> const std::string& { return split_names[i]; });
  for (int32_t i = 0; i < static_cast<int32_t>(split_names.size()); ++i) {
    if (first_use.Insert(split_names, i, hashes.Next(i)) >= 0) continue;
    v1::QualifiedName* entry = response.add_qualname_map();
    entry->set_split_name(split_names[i]);
    entry->set_original_name(std::string(nodes.OwnFields(modules[i]).target));
  }
  *response.mutable_output_values() = {split.output_values.begin(), split.output_values.end()};
  return absl::OkStatus();
}

}  // namespace partplan

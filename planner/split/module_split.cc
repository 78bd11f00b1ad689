#include "planner/split/module_split.h"

#include <cctype>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

// torch.fx's _Namespace.create_name: illegal characters become `_`, a
// leading digit gets a `_`, and a taken name gets the smallest free numeric
// suffix. Python keywords and builtins cannot arise from the candidates used
// here (`submod_N`, `getitem`, `output`), so they are not checked.
class NodeNamespace {
 public:
  void Reserve(const std::string& name) { used_.insert(name); }

  std::string Create(absl::string_view candidate_in) {
    std::string candidate;
    bool in_illegal_run = false;
    for (char c : candidate_in) {
      const bool legal = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      if (legal) candidate.push_back(c);
      else if (!in_illegal_run) candidate.push_back('_');
      in_illegal_run = !legal;
    }
    if (candidate.empty() || std::isdigit(static_cast<unsigned char>(candidate[0]))) {
      candidate.insert(candidate.begin(), '_');
    }
    // Split a `_<digits>` suffix off, as torch.fx's `(.*)_(\d+)$` does.
    std::string base = candidate;
    int64_t num = 0;
    bool has_num = false;
    const size_t underscore = candidate.rfind('_');
    if (underscore != std::string::npos && underscore + 1 < candidate.size() &&
        candidate.find_first_not_of("0123456789", underscore + 1) == std::string::npos &&
        absl::SimpleAtoi(absl::string_view(candidate).substr(underscore + 1), &num)) {
      base = candidate.substr(0, underscore);
      has_num = true;
    }
    // Names of one base are taken in increasing suffix order, so a plain
    // candidate resumes where the last one of its base stopped.
    int64_t* next_free = has_num ? nullptr : &next_free_[base];
    if (next_free != nullptr && *next_free > 0) num = *next_free;
    std::string name = (has_num || num > 0) ? absl::StrCat(base, "_", num) : base;
    // Skip taken names. A search remembers, for each taken name it passes,
    // the suffix where it ended (every name of the base in between is
    // taken, and names are never freed), so that later searches jump over a
    // run of taken names instead of walking it again: graph inputs named
    // submod_0..submod_N made naming N partitions quadratic.
    std::vector<std::string> passed;
    while (used_.contains(name)) {
      auto skip = skip_to_.find(name);
      passed.push_back(std::move(name));
      num = skip != skip_to_.end() ? skip->second : num + 1;
      name = absl::StrCat(base, "_", num);
    }
    for (std::string& taken : passed) skip_to_[std::move(taken)] = num;
    used_.insert(name);
    if (next_free != nullptr) *next_free = num + 1;
    return name;
  }

 private:
  absl::flat_hash_set<std::string> used_;
  absl::flat_hash_map<std::string, int64_t> next_free_;
  // Taken name -> a suffix of its base at or before the next free name.
  absl::flat_hash_map<std::string, int64_t> skip_to_;
};

// Appends `value` to `list` unless `seen` already has `key` (dict.setdefault).
template <typename T>
void AppendOnce(absl::flat_hash_set<uint64_t>& seen, uint64_t key, std::vector<T>& list,
                T value) {
  if (seen.insert(key).second) list.push_back(value);
}

uint64_t PairKey(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }

}  // namespace

absl::StatusOr<ModuleSplit> SplitModule(const CompactGraph& graph,
                                        absl::Span<const int32_t> partition_of,
                                        bool keep_original_order,
                                        absl::string_view assignment_field,
                                        const CancellationToken& token) {
  ModuleSplit split;
  std::vector<SplitPartition>& parts = split.partitions;
  absl::flat_hash_map<int32_t, int32_t> index_of_partition;
  std::vector<int32_t> index_of_node(graph.num_nodes(), -1);  // into parts
  absl::flat_hash_set<uint64_t> seen_input, seen_dependency, seen_dependent;
  std::vector<bool> is_output(graph.num_nodes(), false);

  // Records that `user_index` (or the graph output, -1) reads u.
  auto record_use = [&](NodeId u, int32_t user_index) {
    const int32_t def_index = index_of_node[u];
    if (def_index == user_index) return;
    if (def_index >= 0) {
      if (!is_output[u]) {
        is_output[u] = true;
        parts[def_index].outputs.push_back(u);
      }
      if (user_index >= 0) {
        AppendOnce(seen_dependent, PairKey(def_index, user_index), parts[def_index].dependents,
                   user_index);
      }
    }
    if (user_index >= 0) {
      AppendOnce(seen_input, PairKey(user_index, u), parts[user_index].inputs, u);
      if (def_index >= 0) {
        AppendOnce(seen_dependency, PairKey(user_index, def_index),
                   parts[user_index].depends_on, def_index);
      }
    }
  };

  // Steps of every loop below (a node's inputs, a partition's lists), for
  // the token's polls: the loops after the first are linear too, and one
  // node or partition may be large.
  int64_t work = 0;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    if (v == graph.output_node()) {
      for (NodeId u : graph.inputs(v)) {
        PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
        record_use(u, -1);
      }
      continue;
    }
    if (!graph.is_op_node(v)) continue;
    auto [it, inserted] = index_of_partition.try_emplace(partition_of[v], parts.size());
    if (inserted) {
      parts.emplace_back();
      parts.back().partition = partition_of[v];
    }
    index_of_node[v] = it->second;
    parts[it->second].nodes.push_back(v);
    for (NodeId u : graph.inputs(v)) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      record_use(u, it->second);
    }
  }

  // split_module's topological order: roots in order of appearance on a
  // stack, each popped partition releasing its dependents in order.
  std::vector<int32_t> pending(parts.size());
  std::vector<int32_t> stack;
  for (int32_t i = 0; i < static_cast<int32_t>(parts.size()); ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    pending[i] = static_cast<int32_t>(parts[i].depends_on.size());
    if (pending[i] == 0) stack.push_back(i);
  }
  std::vector<int32_t> topological;
  while (!stack.empty()) {
    const int32_t i = stack.back();
    stack.pop_back();
    topological.push_back(i);
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    for (int32_t dependent : parts[i].dependents) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      if (--pending[dependent] == 0) stack.push_back(dependent);
    }
  }
  if (topological.size() != parts.size()) {
    std::vector<int32_t> on_cycle;
    for (int32_t i = 0; i < static_cast<int32_t>(parts.size()); ++i) {
      if (pending[i] > 0) on_cycle.push_back(parts[i].partition);
    }
    return InvalidFieldError(
        assignment_field,
        absl::StrCat("cycle exists between partitions: partitions ", absl::StrJoin(on_cycle, ", "),
                     " depend on each other (directly or through other partitions)"));
  }
  if (keep_original_order) {
    for (int32_t i = 0; i < static_cast<int32_t>(parts.size()); ++i) {
      split.construction_order.push_back(i);
    }
  } else {
    split.construction_order = std::move(topological);
  }

  // Names in the top-level graph: graph inputs keep their names; each
  // submodule call, its getitems and finally the output are named in
  // construction order.
  NodeNamespace names;
  // Top-level names of graph inputs and partition outputs (few of the nodes).
  absl::flat_hash_map<NodeId, std::string> value_name;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    if (graph.is_input_node(v)) {
      value_name[v] = std::string(graph.name(v));
      names.Reserve(value_name[v]);
    }
  }
  // Users, in the top-level graph, of each single-output submodule call.
  std::vector<std::vector<std::string>> call_users(parts.size());
  std::vector<bool> constructed(parts.size(), false);
  for (int32_t i : split.construction_order) {
    SplitPartition& part = parts[i];
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    part.submodule_name = names.Create(absl::StrCat("submod_", part.partition));
    for (NodeId u : part.inputs) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      const int32_t def_index = index_of_node[u];
      if (def_index >= 0 && !constructed[def_index]) {
        return InvalidFieldError(
            assignment_field,
            absl::StrCat("with keep_original_order, partition ", part.partition,
                         " would be built before partition ", parts[def_index].partition,
                         " whose output '", graph.name(u), "' it reads"));
      }
      part.argument_names.push_back(value_name[u]);
      if (def_index >= 0 && parts[def_index].outputs.size() == 1) {
        call_users[def_index].push_back(part.submodule_name);
      }
    }
    constructed[i] = true;
    if (part.outputs.size() > 1) {
      for (NodeId u : part.outputs) {
        PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
        value_name[u] = names.Create("getitem");
        part.result_names.push_back(value_name[u]);
      }
    } else {
      for (NodeId u : part.outputs) value_name[u] = part.submodule_name;
      part.result_names.push_back(part.submodule_name);
    }
  }
  NodeReader nodes(graph);
  for (const v1::Value& value : nodes.Read(graph.output_node()).args()) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    if (value.kind_case() == v1::Value::kNode) {
      split.output_values.push_back(value_name[graph.Find(value.node())]);
    }
  }
  const std::string output_name = names.Create("output");
  for (NodeId u : graph.inputs(graph.output_node())) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    const int32_t def_index = index_of_node[u];
    if (def_index >= 0 && parts[def_index].outputs.size() == 1) {
      call_users[def_index].push_back(output_name);
    }
  }
  for (int32_t i = 0; i < static_cast<int32_t>(parts.size()); ++i) {
    SplitPartition& part = parts[i];
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(1 + static_cast<int64_t>(part.result_names.size()), &work));
    if (part.outputs.size() > 1) {
      part.dag_output_names = part.result_names;
    } else if (call_users[i].size() > 1) {
      part.dag_output_names = std::move(call_users[i]);
    } else {
      part.dag_output_names = {part.submodule_name};
    }
  }
  return split;
}

}  // namespace partplan

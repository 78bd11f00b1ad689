#include "planner/pipeline/auto_shard.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/name_index.h"
#include "planner/status_util.h"

namespace partplan {
namespace {

// A skip connection that merged shards during the walk.
struct ShardMerge {
  NodeId source = -1;  // the value read from an earlier shard
  NodeId reader = -1;
  int32_t into = 0;  // the earliest shard, which the later ones joined
  int32_t last = 0;  // the current shard then (possibly just opened, still empty)
};

// The open shard holding node u: shards are contiguous, so it is the last
// one starting at or before u.
int32_t ShardOf(const std::vector<NodeId>& first_node, NodeId u) {
  return static_cast<int32_t>(std::upper_bound(first_node.begin(), first_node.end(), u) -
                              first_node.begin()) -
         1;
}

std::string NodeLabel(const CompactGraph& graph, NodeId v) {
  return absl::StrCat("'", graph.name(v), "' (graph.nodes[", v, "])");
}

// FAILED_PRECONDITION for `exact` when the walk made another count.
absl::Status WrongShardCount(const CompactGraph& graph, const ParameterCharges& charges,
                             const AutoShardOptions& options, const AutoShardResult& result,
                             int merge_count, const ShardMerge& first_merge) {
  const int32_t made = static_cast<int32_t>(result.first_node.size());
  std::string message = absl::StrCat("auto_shard makes ", made, " shards, not the ",
                                     options.shard_count, " asked for with exact: ");
  if (made < options.shard_count) {
    if (merge_count > 0) {
      absl::StrAppend(&message, merge_count, " skip connection", merge_count == 1 ? "" : "s",
                      " merged shards, the first from ", NodeLabel(graph, first_merge.source),
                      " to ", NodeLabel(graph, first_merge.reader), ", which merged shards ",
                      first_merge.into, " to ", first_merge.last, " back into shard ",
                      first_merge.into, "; ");
    }
    absl::StrAppend(&message, "a shard closes only once it holds more than total // shard_count = ",
                    charges.model_total, " // ", options.shard_count, " = ", result.target,
                    " parameters, and the shards hold [", absl::StrJoin(result.parameters, ", "),
                    "]");
  } else {
    int64_t charged = 0;
    for (int64_t p : result.parameters) charged += p;
    absl::StrAppend(&message, "the nodes are charged ", charged,
                    " parameters in all, more than the model's ", charges.model_total,
                    " (graph.modules root), so more shards pass the target of ", result.target);
    absl::flat_hash_map<std::string, NodeId> first_call;  // by target
    NodeReader nodes(graph);
    for (NodeId v = 0; v < graph.num_nodes(); ++v) {
      if (graph.op(v) != v1::CALL_MODULE) continue;
      auto [it, inserted] = first_call.try_emplace(nodes.Read(v).target(), v);
      if (!inserted) {
        absl::StrAppend(&message, ": a module called by several nodes is charged at every call, ",
                        "e.g. '", it->first, "' by ", NodeLabel(graph, it->second), " and ",
                        NodeLabel(graph, v));
        break;
      }
    }
  }
  absl::StrAppend(&message, "; mode BALANCED always makes exactly shard_count stages");
  return absl::FailedPreconditionError(message);
}

}  // namespace

absl::Status AutoShardOptions::CheckAndSetup() const {
  if (shard_count <= 0) {
    return InvalidFieldError("config.shard_count",
                             absl::StrCat("must be positive, got ", shard_count));
  }
  return absl::OkStatus();
}

namespace {

// The modules' qualified names by index, as NameIndex reads names.
struct ModuleNames {
  const google::protobuf::RepeatedPtrField<v1::Module>& modules;
  absl::string_view operator[](int64_t i) const {
    return modules.Get(static_cast<int>(i)).qualified_name();
  }
};

}  // namespace

absl::StatusOr<ParameterCharges> ModuleParameterCharges(const CompactGraph& graph) {
  const google::protobuf::RepeatedPtrField<v1::Module>& modules = graph.modules();
  if (modules.empty()) {
    return InvalidFieldError(
        "graph.modules",
        "FAIRSCALE charges every call_module node its module's parameters and needs the "
        "module hierarchy (named_modules()), but the graph lists no modules");
  }
  // graph_import's compact index (name_index.h): a model has about a
  // module per call_module node, and a hash map of a million names missed
  // the cache on nearly every insert and lookup.
  const ModuleNames names{modules};
  NameIndex index_of(modules.size());
  HashAhead hashes(index_of, modules.size(), [&names](int64_t i) { return names[i]; });
  for (int i = 0; i < modules.size(); ++i) {
    const v1::Module& module = modules.Get(i);
    if (const int32_t earlier = index_of.Insert(names, i, hashes.Next(i)); earlier >= 0) {
      return InvalidFieldError(absl::StrCat("graph.modules[", i, "].qualified_name"),
                               absl::StrCat("module '", module.qualified_name(),
                                            "' is listed twice (first as modules[", earlier, "])"));
    }
    if (module.parameter_count() < 0) {
      return InvalidFieldError(absl::StrCat("graph.modules[", i, "].parameter_count"),
                               "must not be negative");
    }
  }
  const int32_t root = index_of.Find(names, "", NameIndex::Hash(""));
  if (root < 0) {
    return InvalidFieldError("graph.modules",
                             "no root module (qualified_name \"\"): its parameter count is the "
                             "model's total, which sets the per-shard target");
  }
  ParameterCharges charges;
  charges.model_total = modules.Get(root).parameter_count();
  charges.of_node.assign(graph.num_nodes(), 0);
  int64_t charged = 0;
  NodeReader nodes(graph);
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (graph.op(v) != v1::CALL_MODULE) continue;
    const std::string& target = nodes.Read(v).target();
    const int32_t module = index_of.Find(names, target, NameIndex::Hash(target));
    if (module < 0) {
      return InvalidFieldError(absl::StrCat("graph.nodes[", v, "].target"),
                               absl::StrCat("module '", target, "' is not in graph.modules"));
    }
    charges.of_node[v] = modules.Get(module).parameter_count();
    if (__builtin_add_overflow(charged, charges.of_node[v], &charged)) {
      return InvalidFieldError(absl::StrCat("graph.nodes[", v, "].target"),
                               "the parameters charged to the nodes overflow 64 bits");
    }
  }
  return charges;
}

absl::StatusOr<AutoShardResult> AutoShard(const CompactGraph& graph,
                                          const ParameterCharges& charges,
                                          const AutoShardOptions& options,
                                          const CancellationToken& token) {
  AutoShardResult result;
  result.target = charges.model_total / options.shard_count;
  result.first_node = {0};
  result.parameters = {0};
  int merge_count = 0;
  ShardMerge first_merge;
  for (NodeId v = 0; v < graph.output_node(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(v));
    if (graph.op(v) == v1::PLACEHOLDER) continue;  // joins the current shard, uncharged
    int32_t current = static_cast<int32_t>(result.first_node.size()) - 1;
    int32_t earliest = current;
    NodeId source = -1;
    for (NodeId u : graph.inputs(v)) {
      if (u == v - 1) continue;  // the normal flow from the node before
      const int32_t shard = ShardOf(result.first_node, u);
      if (shard < earliest) {
        earliest = shard;
        source = u;
      }
    }
    if (earliest < current) {
      if (merge_count++ == 0) first_merge = ShardMerge{source, v, earliest, current};
      for (int32_t s = earliest + 1; s <= current; ++s) {
        result.parameters[earliest] += result.parameters[s];
      }
      result.first_node.resize(earliest + 1);
      result.parameters.resize(earliest + 1);
      current = earliest;
    }
    result.parameters[current] += charges.of_node[v];
    if (result.parameters[current] > result.target) {
      result.first_node.push_back(v + 1);
      result.parameters.push_back(0);
    }
  }
  if (result.first_node.size() > 1 && result.first_node.back() == graph.output_node()) {
    // Opened after the last node: no node joined it.
    result.first_node.pop_back();
    result.parameters.pop_back();
  }
  if (options.exact && static_cast<int32_t>(result.first_node.size()) != options.shard_count) {
    return WrongShardCount(graph, charges, options, result, merge_count, first_merge);
  }
  return result;
}

}  // namespace partplan

#include "planner/pipeline/auto_shard.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "planner/base/status_util.h"
#include "planner/graph/name_index.h"

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
      auto [it, inserted] = first_call.try_emplace(nodes.OwnFields(v).target, v);
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

absl::StatusOr<ParameterCharges> ModuleParameterCharges(const CompactGraph& graph,
                                                        const CancellationToken& token) {
  const google::protobuf::RepeatedPtrField<v1::Module>& modules = graph.modules();
  if (modules.empty()) {
    return InvalidFieldError(
        "graph.modules",
        "FAIRSCALE charges every call_module node its module's parameters and needs the "
        "module hierarchy (named_modules()), but the graph lists no modules");
  }
  // The modules' names and counts as flat arrays, so that a lookup compares
  // against a view rather than a message two pointers away.
  const int num_modules = modules.size();
  std::vector<absl::string_view> module_names(num_modules);
  std::vector<int64_t> module_parameters(num_modules);
  for (int i = 0; i < num_modules; ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
    module_names[i] = modules.Get(i).qualified_name();
    module_parameters[i] = modules.Get(i).parameter_count();
  }
  // graph_import's compact index (name_index.h): a model has about a
  // module per call_module node, and a hash map of a million names missed
  // the cache on nearly every insert and lookup.
  NameIndex index_of(num_modules);
  HashAhead module_hashes(index_of, num_modules,
                          [&module_names](int64_t i) { return module_names[i]; });
  // The import checked the modules: each name once, no negative count.
  for (int i = 0; i < num_modules; ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
    index_of.Insert(module_names, i, module_hashes.Next(i));
  }
  const int32_t root = index_of.Find(module_names, "", NameIndex::Hash(""));
  if (root < 0) {
    return InvalidFieldError("graph.modules",
                             "no root module (qualified_name \"\"): its parameter count is the "
                             "model's total, which sets the per-shard target");
  }
  // The call_module nodes' targets, gathered first so that each lookup's
  // slot is prefetched a few nodes ahead (HashAhead): at 10^6 nodes the
  // index is out of cache, and waiting on its slots was most of this
  // function's time. They are copied, as OwnFields' views last only until
  // its next call.
  std::vector<NodeId> callers;
  StringPool targets;
  NodeReader nodes(graph);
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(v));
    if (graph.op(v) != v1::CALL_MODULE) continue;
    callers.push_back(v);
    targets.Add(nodes.OwnFields(v).target);
  }
  ParameterCharges charges;
  charges.model_total = module_parameters[root];
  charges.of_node.assign(graph.num_nodes(), 0);
  int64_t charged = 0;
  HashAhead target_hashes(index_of, targets.size(), [&targets](int64_t i) { return targets[i]; });
  for (int64_t i = 0; i < targets.size(); ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
    const NodeId v = callers[i];
    const int32_t module = index_of.Find(module_names, targets[i], target_hashes.Next(i));
    if (module < 0) {
      return InvalidFieldError(absl::StrCat("graph.nodes[", v, "].target"),
                               absl::StrCat("module '", targets[i], "' is not in graph.modules"));
    }
    charges.of_node[v] = module_parameters[module];
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

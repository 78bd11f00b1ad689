#include "planner/pipeline/pipeline_graph.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"
#include "planner/graph/name_index.h"

namespace partplan {
namespace {

// operator.getitem as exporters spell it (fairscale compares the function
// object, operator.__getitem__, which is the same function).
bool IsGetitem(const std::string& target) {
  return target == "operator.getitem" || target == "_operator.getitem" ||
         target == "operator.__getitem__";
}

std::string NodeLabel(const CompactGraph& graph, NodeId v) {
  return absl::StrCat("'", graph.name(v), "' (graph.nodes[", v, "])");
}

// The path of node v's field `field` (".op", ".args[2]", ...), for errors:
// built only when one is reported, as it takes a heap allocation.
std::string NodePath(NodeId v, absl::string_view field) {
  return absl::StrCat("graph.nodes[", v, "]", field);
}
std::string ArgPath(NodeId v, int k) { return absl::StrCat("graph.nodes[", v, "].args[", k, "]"); }

// What each node stands for (PipelineValue, kNone for the output node):
// three integers a node.
using Source = PipelineValue;

// How modules read one module's output, for its cardinality.
struct OutputReads {
  NodeId whole_reader = -1;    // first module reading the whole output
  NodeId element_reader = -1;  // first module reading an element
  int32_t element_count = 0;   // largest element read + 1
};

class PipelineGraphBuilder {
 public:
  PipelineGraphBuilder(const CompactGraph& graph, absl::Span<const PipelineWorker> workers,
                       const CancellationToken& token, PipelineGraph* result)
      : graph_(graph),
        workers_(workers),
        token_(token),
        result_(*result),
        source_of_(graph.num_nodes()) {}

  absl::Status Build() {
    PARTPLAN_RETURN_IF_ERROR(ReadWorkers());
    int32_t placeholders = 0;
    for (NodeId v = 0; v < graph_.num_nodes(); ++v) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(v));
      const v1::Node& node = nodes_.Read(v);
      switch (node.op()) {
        case v1::PLACEHOLDER:
          source_of_[v] = {Source::Kind::kForwardInput, placeholders++};
          break;
        case v1::CALL_MODULE:
          PARTPLAN_RETURN_IF_ERROR(AddModule(v, node));
          break;
        case v1::CALL_FUNCTION:
          if (!IsGetitem(node.target())) {
            return InvalidFieldError(
                NodePath(v, ".target"),
                absl::StrCat("node ", NodeLabel(graph_, v), " calls '", node.target(),
                             "'; a pipeline graph's only function is operator.getitem on a "
                             "module's output (all other work belongs in pipeline modules)"));
          }
          PARTPLAN_RETURN_IF_ERROR(AddGetitem(v, node));
          break;
        case v1::OUTPUT: {
          ArgumentNodes arguments(graph_, v);
          for (const v1::Value& value : node.args()) {
            if (value.kind_case() == v1::Value::kNode) {
              result_.outputs.push_back(source_of_[arguments.Next(value.node())]);
            }
          }
          break;
        }
        default:
          return InvalidFieldError(
              NodePath(v, ".op"),
              absl::StrCat("node ", NodeLabel(graph_, v), " is a ", v1::Op_Name(node.op()),
                           "; a pipeline graph holds only placeholders, pipeline modules "
                           "(call_module), getitem on their outputs and the output"));
      }
    }
    for (int32_t m = 0; m < static_cast<int32_t>(result_.modules.size()); ++m) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(m));
      result_.modules[m].output_count = reads_[m].element_count;
    }
    for (int i = 0; i < static_cast<int>(workers_.size()); ++i) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(i));
      if (!worker_used_[i]) {
        return InvalidFieldError(
            absl::StrCat("workers[", i, "].target"),
            absl::StrCat("no call_module node calls module '", workers_[i].target, "'"));
      }
    }
    return absl::OkStatus();
  }

 private:
  // Indexes the workers by target, then finds each call_module node's. A
  // pipeline has about a worker per module, and a hash map of a million
  // targets missed the cache on nearly every insert and lookup: the index is
  // graph_import's compact one (name_index.h), and the modules' targets are
  // gathered first so that each lookup's slot is prefetched a few modules
  // ahead, as the workers' are for their inserts.
  absl::Status ReadWorkers() {
    const int num_workers = static_cast<int>(workers_.size());
    std::vector<absl::string_view> targets(num_workers);
    for (int i = 0; i < num_workers; ++i) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(i));
      targets[i] = workers_[i].target;
    }
    NameIndex index(num_workers);
    HashAhead worker_hashes(index, num_workers, [&targets](int64_t i) { return targets[i]; });
    for (int i = 0; i < num_workers; ++i) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(i));
      const uint64_t hash = worker_hashes.Next(i);
      const PipelineWorker& worker = workers_[i];
      const auto path = [i](absl::string_view field) {
        return absl::StrCat("workers[", i, "].", field);
      };
      if (worker.target.empty()) {
        return InvalidFieldError(path("target"), "no module target");
      }
      if (worker.worker.empty()) {
        return InvalidFieldError(path("worker"),
                                 absl::StrCat("no worker for module '", worker.target, "'"));
      }
      if (const int32_t earlier = index.Insert(targets, i, hash); earlier >= 0) {
        return InvalidFieldError(path("target"),
                                 absl::StrCat("module '", worker.target,
                                              "' has a worker already (workers[", earlier, "])"));
      }
    }
    worker_used_.assign(num_workers, false);
    // OwnFields' views last only until its next call: the targets are
    // copied, into the result, as every call_module node is a module.
    StringPool& module_targets = result_.targets;
    for (NodeId v = 0; v < graph_.num_nodes(); ++v) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(v));
      if (graph_.op(v) == v1::CALL_MODULE) module_targets.Add(nodes_.OwnFields(v).target);
    }
    HashAhead module_hashes(index, module_targets.size(),
                            [&module_targets](int64_t i) { return module_targets[i]; });
    worker_of_module_.resize(module_targets.size());
    for (int64_t m = 0; m < module_targets.size(); ++m) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(m));
      worker_of_module_[m] = index.Find(targets, module_targets[m], module_hashes.Next(m));
    }
    return absl::OkStatus();
  }

  absl::Status AddModule(NodeId v, const v1::Node& node) {
    if (node.kwargs_size() > 0) {
      return InvalidFieldError(
          NodePath(v, ".kwargs[0]"),
          absl::StrCat("pipeline module ", NodeLabel(graph_, v), " takes keyword argument '",
                       node.kwargs(0).name(),
                       "'; pipeline modules take positional arguments only (fairscale drops "
                       "keyword arguments)"));
    }
    // The call_module nodes come here in graph order, as ReadWorkers found
    // their workers.
    const int32_t module = static_cast<int32_t>(result_.modules.size());
    const int32_t worker = worker_of_module_[module];
    if (worker < 0) {
      return InvalidFieldError("workers", absl::StrCat("no worker for module '", node.target(),
                                                       "', called by ", NodeLabel(graph_, v)));
    }
    worker_used_[worker] = true;
    PipelineModuleCall& entry = result_.modules.emplace_back();
    entry.node = v;
    entry.worker = worker;
    entry.inputs_begin = static_cast<int32_t>(result_.module_inputs.size());
    ArgumentNodes arguments(graph_, v);
    for (int k = 0; k < node.args_size(); ++k) {
      const v1::Value& value = node.args(k);
      if (value.kind_case() != v1::Value::kNode) {
        return InvalidFieldError(
            ArgPath(v, k),
            absl::StrCat("pipeline module ", NodeLabel(graph_, v),
                         " takes a constant, list or tuple argument; each argument must "
                         "be a graph input, a module's output or an element of it"));
      }
      const Source& input = source_of_[arguments.Next(value.node())];
      if (input.is_module_output()) PARTPLAN_RETURN_IF_ERROR(NoteRead(input, v, k));
      result_.module_inputs.push_back(input);
    }
    entry.inputs_end = static_cast<int32_t>(result_.module_inputs.size());
    source_of_[v] = {Source::Kind::kModuleOutput, module};
    reads_.emplace_back();
    return absl::OkStatus();
  }

  absl::Status AddGetitem(NodeId v, const v1::Node& node) {
    const bool shaped = node.args_size() == 2 && node.kwargs_size() == 0 &&
                        node.args(0).kind_case() == v1::Value::kNode &&
                        node.args(1).kind_case() == v1::Value::kInt;
    if (!shaped) {
      return InvalidFieldError(NodePath(v, ".args"),
                               absl::StrCat("getitem ", NodeLabel(graph_, v),
                                            " must take a module's output and an integer "
                                            "constant index, positionally"));
    }
    const NodeId u = ArgumentNodes(graph_, v).Next(node.args(0).node());
    if (!source_of_[u].is_module_output() || source_of_[u].is_element()) {
      return InvalidFieldError(
          ArgPath(v, 0),
          absl::StrCat("getitem ", NodeLabel(graph_, v), " reads ", NodeLabel(graph_, u),
                       ", which is not a pipeline module's output"));
    }
    const int64_t index = node.args(1).int_();
    if (index < 0 || index >= (int64_t{1} << 30)) {
      return InvalidFieldError(ArgPath(v, 1),
                               absl::StrCat("element index ", index, " out of range"));
    }
    source_of_[v] = {Source::Kind::kModuleOutput, source_of_[u].index, static_cast<int32_t>(index)};
    return absl::OkStatus();
  }

  // Notes that module node `reader` reads `ref` (a module's output) as its
  // argument k; whole and element reads of one output do not mix.
  absl::Status NoteRead(const Source& ref, NodeId reader, int k) {
    OutputReads& reads = reads_[ref.index];
    const auto module = [&] {
      return absl::StrCat("module '", graph_.name(result_.modules[ref.index].node), "'");
    };
    if (ref.is_element()) {
      if (reads.whole_reader >= 0) {
        return InvalidFieldError(
            ArgPath(reader, k),
            absl::StrCat("reads element ", ref.output_index, " of ", module(),
                         ", whose whole output ", NodeLabel(graph_, reads.whole_reader),
                         " reads; a module's output is one tensor or a tuple read by element"));
      }
      if (reads.element_reader < 0) reads.element_reader = reader;
      reads.element_count = std::max(reads.element_count, ref.output_index + 1);
    } else {
      if (reads.element_reader >= 0) {
        return InvalidFieldError(
            ArgPath(reader, k),
            absl::StrCat("reads the whole output of ", module(), ", whose elements ",
                         NodeLabel(graph_, reads.element_reader),
                         " reads; a module's output is one tensor or a tuple read by element"));
      }
      if (reads.whole_reader < 0) reads.whole_reader = reader;
    }
    return absl::OkStatus();
  }

  const CompactGraph& graph_;
  NodeReader nodes_{graph_};
  const absl::Span<const PipelineWorker> workers_;
  const CancellationToken& token_;
  PipelineGraph& result_;
  // What each node stands for: a forward input, a module's output or an
  // element of it (unset for the output node).
  std::vector<Source> source_of_;
  std::vector<OutputReads> reads_;  // per module
  // Per module (call_module node, in graph order), its entry in
  // workers_, or -1 for none; per worker, whether a module has it.
  std::vector<int32_t> worker_of_module_;
  std::vector<bool> worker_used_;
};

}  // namespace

absl::StatusOr<std::vector<PipelineWorker>> PipelineWorkersFromRequest(
    const v1::BuildPipelineGraphRequest& request, const CancellationToken& token) {
  std::vector<PipelineWorker> workers;
  workers.reserve(request.workers_size());
  for (const v1::ModuleWorker& worker : request.workers()) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(static_cast<int64_t>(workers.size())));
    workers.push_back({worker.target(), worker.worker()});
  }
  return workers;
}

absl::StatusOr<PipelineGraph> BuildPipelineGraphPlan(const CompactGraph& graph,
                                                     absl::Span<const PipelineWorker> workers,
                                                     const CancellationToken& token) {
  PipelineGraph result;
  PARTPLAN_RETURN_IF_ERROR(PipelineGraphBuilder(graph, workers, token, &result).Build());
  return result;
}

}  // namespace partplan

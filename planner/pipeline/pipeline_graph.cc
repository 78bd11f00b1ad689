#include "planner/pipeline/pipeline_graph.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "planner/status_util.h"

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

// How modules read one module's output, for its cardinality.
struct OutputReads {
  NodeId whole_reader = -1;    // first module reading the whole output
  NodeId element_reader = -1;  // first module reading an element
  int32_t element_count = 0;   // largest element read + 1
};

class PipelineGraphBuilder {
 public:
  PipelineGraphBuilder(const CompactGraph& graph, const v1::BuildPipelineGraphRequest& request,
                       const CancellationToken& token, v1::BuildPipelineGraphResponse* response)
      : graph_(graph),
        request_(request),
        token_(token),
        response_(*response),
        source_of_(graph.num_nodes()) {}

  absl::Status Build() {
    PARTPLAN_RETURN_IF_ERROR(ReadWorkers());
    int32_t placeholders = 0;
    for (NodeId v = 0; v < graph_.num_nodes(); ++v) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(v));
      const v1::Node& node = nodes_.Read(v);
      const std::string at = absl::StrCat("graph.nodes[", v, "]");
      switch (node.op()) {
        case v1::PLACEHOLDER:
          source_of_[v].set_forward_input(placeholders++);
          break;
        case v1::CALL_MODULE:
          PARTPLAN_RETURN_IF_ERROR(AddModule(v, node, at));
          break;
        case v1::CALL_FUNCTION:
          if (!IsGetitem(node.target())) {
            return InvalidFieldError(
                absl::StrCat(at, ".target"),
                absl::StrCat("node ", NodeLabel(graph_, v), " calls '", node.target(),
                             "'; a pipeline graph's only function is operator.getitem on a "
                             "module's output (all other work belongs in pipeline modules)"));
          }
          PARTPLAN_RETURN_IF_ERROR(AddGetitem(v, node, at));
          break;
        case v1::OUTPUT:
          for (const v1::Value& value : node.args()) {
            if (value.kind_case() == v1::Value::kNode) {
              *response_.add_outputs() = source_of_[graph_.Find(value.node())];
            }
          }
          break;
        default:
          return InvalidFieldError(
              absl::StrCat(at, ".op"),
              absl::StrCat("node ", NodeLabel(graph_, v), " is a ", v1::Op_Name(node.op()),
                           "; a pipeline graph holds only placeholders, pipeline modules "
                           "(call_module), getitem on their outputs and the output"));
      }
    }
    for (int32_t m = 0; m < response_.modules_size(); ++m) {
      response_.mutable_modules(m)->set_output_count(reads_[m].element_count);
    }
    for (int i = 0; i < request_.workers_size(); ++i) {
      if (!worker_of_[request_.workers(i).target()].used) {
        return InvalidFieldError(
            absl::StrCat("workers[", i, "].target"),
            absl::StrCat("no call_module node calls module '", request_.workers(i).target(), "'"));
      }
    }
    return absl::OkStatus();
  }

 private:
  struct WorkerEntry {
    int index = 0;  // in request_.workers
    bool used = false;
  };

  absl::Status ReadWorkers() {
    for (int i = 0; i < request_.workers_size(); ++i) {
      const v1::ModuleWorker& worker = request_.workers(i);
      const std::string at = absl::StrCat("workers[", i, "]");
      if (worker.target().empty()) {
        return InvalidFieldError(absl::StrCat(at, ".target"), "no module target");
      }
      if (worker.worker().empty()) {
        return InvalidFieldError(absl::StrCat(at, ".worker"),
                                 absl::StrCat("no worker for module '", worker.target(), "'"));
      }
      auto [it, inserted] = worker_of_.try_emplace(worker.target(), WorkerEntry{i, false});
      if (!inserted) {
        return InvalidFieldError(
            absl::StrCat(at, ".target"),
            absl::StrCat("module '", worker.target(), "' has a worker already (workers[",
                         it->second.index, "])"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status AddModule(NodeId v, const v1::Node& node, const std::string& at) {
    if (node.kwargs_size() > 0) {
      return InvalidFieldError(
          absl::StrCat(at, ".kwargs[0]"),
          absl::StrCat("pipeline module ", NodeLabel(graph_, v), " takes keyword argument '",
                       node.kwargs(0).name(),
                       "'; pipeline modules take positional arguments only (fairscale drops "
                       "keyword arguments)"));
    }
    auto worker = worker_of_.find(node.target());
    if (worker == worker_of_.end()) {
      return InvalidFieldError("workers", absl::StrCat("no worker for module '", node.target(),
                                                       "', called by ", NodeLabel(graph_, v)));
    }
    worker->second.used = true;
    const int32_t module = response_.modules_size();
    v1::PipelineModule* entry = response_.add_modules();
    entry->set_node(std::string(graph_.name(v)));
    entry->set_target(node.target());
    entry->set_worker(request_.workers(worker->second.index).worker());
    for (int k = 0; k < node.args_size(); ++k) {
      const v1::Value& value = node.args(k);
      const std::string arg_at = absl::StrCat(at, ".args[", k, "]");
      if (value.kind_case() != v1::Value::kNode) {
        return InvalidFieldError(
            arg_at, absl::StrCat("pipeline module ", NodeLabel(graph_, v),
                                 " takes a constant, list or tuple argument; each argument must "
                                 "be a graph input, a module's output or an element of it"));
      }
      const NodeId u = graph_.Find(value.node());
      const v1::PipelineInput& input = source_of_[u];
      if (input.has_module_output()) {
        PARTPLAN_RETURN_IF_ERROR(NoteRead(input.module_output(), v, arg_at));
      }
      *entry->add_inputs() = input;
    }
    source_of_[v].mutable_module_output()->set_module(module);
    reads_.emplace_back();
    return absl::OkStatus();
  }

  absl::Status AddGetitem(NodeId v, const v1::Node& node, const std::string& at) {
    const bool shaped = node.args_size() == 2 && node.kwargs_size() == 0 &&
                        node.args(0).kind_case() == v1::Value::kNode &&
                        node.args(1).kind_case() == v1::Value::kInt;
    if (!shaped) {
      return InvalidFieldError(absl::StrCat(at, ".args"),
                               absl::StrCat("getitem ", NodeLabel(graph_, v),
                                            " must take a module's output and an integer "
                                            "constant index, positionally"));
    }
    const NodeId u = graph_.Find(node.args(0).node());
    if (!source_of_[u].has_module_output() || source_of_[u].module_output().has_output_index()) {
      return InvalidFieldError(
          absl::StrCat(at, ".args[0]"),
          absl::StrCat("getitem ", NodeLabel(graph_, v), " reads ", NodeLabel(graph_, u),
                       ", which is not a pipeline module's output"));
    }
    const int64_t index = node.args(1).int_();
    if (index < 0 || index >= (int64_t{1} << 30)) {
      return InvalidFieldError(absl::StrCat(at, ".args[1]"),
                               absl::StrCat("element index ", index, " out of range"));
    }
    v1::PipelineOutputRef* ref = source_of_[v].mutable_module_output();
    ref->set_module(source_of_[u].module_output().module());
    ref->set_output_index(static_cast<int32_t>(index));
    return absl::OkStatus();
  }

  // Notes that module node `reader` reads `ref`; whole and element reads
  // of one output do not mix.
  absl::Status NoteRead(const v1::PipelineOutputRef& ref, NodeId reader, const std::string& at) {
    OutputReads& reads = reads_[ref.module()];
    const std::string module =
        absl::StrCat("module '", response_.modules(ref.module()).node(), "'");
    if (ref.has_output_index()) {
      if (reads.whole_reader >= 0) {
        return InvalidFieldError(
            at, absl::StrCat("reads element ", ref.output_index(), " of ", module,
                             ", whose whole output ", NodeLabel(graph_, reads.whole_reader),
                             " reads; a module's output is one tensor or a tuple read by element"));
      }
      if (reads.element_reader < 0) reads.element_reader = reader;
      reads.element_count = std::max(reads.element_count, ref.output_index() + 1);
    } else {
      if (reads.element_reader >= 0) {
        return InvalidFieldError(
            at, absl::StrCat("reads the whole output of ", module, ", whose elements ",
                             NodeLabel(graph_, reads.element_reader),
                             " reads; a module's output is one tensor or a tuple read by element"));
      }
      if (reads.whole_reader < 0) reads.whole_reader = reader;
    }
    return absl::OkStatus();
  }

  const CompactGraph& graph_;
  NodeReader nodes_{graph_};
  const v1::BuildPipelineGraphRequest& request_;
  const CancellationToken& token_;
  v1::BuildPipelineGraphResponse& response_;
  // What each node stands for: a forward input, a module's output or an
  // element of it (unset for the output node).
  std::vector<v1::PipelineInput> source_of_;
  std::vector<OutputReads> reads_;  // per module
  absl::flat_hash_map<std::string, WorkerEntry> worker_of_;
};

}  // namespace

absl::Status BuildPipelineGraphPlan(const CompactGraph& graph,
                                    const v1::BuildPipelineGraphRequest& request,
                                    const CancellationToken& token,
                                    v1::BuildPipelineGraphResponse* response) {
  response->Clear();
  return PipelineGraphBuilder(graph, request, token, response).Build();
}

absl::StatusOr<v1::BuildPipelineGraphResponse> BuildPipelineGraphPlan(
    const CompactGraph& graph, const v1::BuildPipelineGraphRequest& request,
    const CancellationToken& token) {
  v1::BuildPipelineGraphResponse response;
  PARTPLAN_RETURN_IF_ERROR(BuildPipelineGraphPlan(graph, request, token, &response));
  return response;
}

}  // namespace partplan

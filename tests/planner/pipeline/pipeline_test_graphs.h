// Hand-built graphs for the pipeline planner tests: call_module nodes with
// their own targets, keyword and list arguments, parameter counts, FLOPs,
// latencies and the module hierarchy.
//
//   TestGraphBuilder b;
//   b.Placeholder("x", 10);
//   b.Module("fc", "layers.0", {"x"}, /*total=*/90, /*output=*/10)->set_parameter_count(20);
//   b.Function("add", {"fc"}, 10, 10);
//   b.Kwarg("add", "other", "x");
//   b.Output({"add"});
//   b.AddModule("", 20);
//   b.AddModule("layers.0", 20);
//   v1::Graph graph = b.graph();
#ifndef PARTPLAN_TESTS_PLANNER_PIPELINE_PIPELINE_TEST_GRAPHS_H_
#define PARTPLAN_TESTS_PLANNER_PIPELINE_PIPELINE_TEST_GRAPHS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "partplan/v1/graph.pb.h"

namespace partplan {

class TestGraphBuilder {
 public:
  v1::Node* Placeholder(const std::string& name, int64_t bytes = 0) {
    return Add(name, v1::PLACEHOLDER, name, {}, bytes, bytes);
  }
  v1::Node* GetAttr(const std::string& name, int64_t bytes = 0) {
    return Add(name, v1::GET_ATTR, name, {}, bytes, bytes);
  }
  v1::Node* Module(const std::string& name, const std::string& target,
                   const std::vector<std::string>& args, int64_t total = 0, int64_t output = 0) {
    return Add(name, v1::CALL_MODULE, target, args, total, output);
  }
  // A call_function node (target `torch.<name>` unless given).
  v1::Node* Function(const std::string& name, const std::vector<std::string>& args,
                     int64_t total = 0, int64_t output = 0, std::string target = "") {
    if (target.empty()) target = "torch." + name;
    return Add(name, v1::CALL_FUNCTION, target, args, total, output);
  }
  v1::Node* Method(const std::string& name, const std::vector<std::string>& args) {
    return Add(name, v1::CALL_METHOD, name, args, 0, 0);
  }
  // operator.getitem(`of`, index).
  v1::Node* Getitem(const std::string& name, const std::string& of, int64_t index) {
    v1::Node* node = Add(name, v1::CALL_FUNCTION, "operator.getitem", {of}, 0, 0);
    node->add_args()->set_int_(index);
    return node;
  }
  // Returns `values` (a tuple when there are several).
  v1::Node* Output(const std::vector<std::string>& values) {
    v1::Node* node = Add("output", v1::OUTPUT, "output", {}, -1, -1);
    if (values.size() != 1) node->add_args()->set_tuple(static_cast<uint32_t>(values.size()));
    for (const std::string& value : values) node->add_args()->set_node(value);
    return node;
  }

  // Appends keyword argument `name`=`value` (a node) to `node`.
  void Kwarg(const std::string& node, const std::string& name, const std::string& value) {
    v1::KeywordArgument* kwarg = Find(node)->add_kwargs();
    kwarg->set_name(name);
    kwarg->add_value()->set_node(value);
  }
  // Appends the positional argument [values...] to `node`.
  void ListArg(const std::string& node, const std::vector<std::string>& values) {
    v1::Node* n = Find(node);
    n->add_args()->set_list(static_cast<uint32_t>(values.size()));
    for (const std::string& value : values) n->add_args()->set_node(value);
  }

  void AddModule(const std::string& qualified_name, int64_t parameters) {
    v1::Module* module = graph_.add_modules();
    module->set_qualified_name(qualified_name);
    module->set_parameter_count(parameters);
  }

  v1::Node* Find(const std::string& name) {
    for (v1::Node& node : *graph_.mutable_nodes()) {
      if (node.name() == name) return &node;
    }
    return nullptr;
  }
  const v1::Graph& graph() const { return graph_; }
  v1::Graph* mutable_graph() { return &graph_; }

 private:
  v1::Node* Add(const std::string& name, v1::Op op, const std::string& target,
                const std::vector<std::string>& args, int64_t total, int64_t output) {
    v1::Node* node = graph_.add_nodes();
    node->set_name(name);
    node->set_op(op);
    node->set_target(target);
    for (const std::string& arg : args) node->add_args()->set_node(arg);
    if (total >= 0) {
      node->mutable_size_bytes()->set_total_bytes(total);
      node->mutable_size_bytes()->set_output_bytes(output);
    }
    return node;
  }

  v1::Graph graph_;
};

}  // namespace partplan

#endif  // PARTPLAN_TESTS_PLANNER_PIPELINE_PIPELINE_TEST_GRAPHS_H_

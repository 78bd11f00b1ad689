// Small aten graphs and PlanDataParallel requests for the data-parallel
// planner's tests.
//
//   AtenGraph g;
//   g.Input("x", {4, 8})
//       .Input("w", {16, 8})
//       .Op("t", "aten.t.default", {A::Node("w")}, {{8, 16}})
//       .Op("mm", "aten.mm.default", {A::Node("x"), A::Node("t")}, {{4, 16}})
//       .Output({"mm"});
//   v1::PlanDataParallelRequest request = g.Request({{"w", v1::PARAMETER}});
#ifndef PARTPLAN_TESTS_PLANNER_DATA_PARALLEL_DP_TEST_GRAPHS_H_
#define PARTPLAN_TESTS_PLANNER_DATA_PARALLEL_DP_TEST_GRAPHS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "partplan/v1/planner_service.pb.h"

namespace partplan {

// One argument in graph.proto's flat encoding.
class A {
 public:
  static A Node(const std::string& name) {
    return A({Value([&](v1::Value* v) { v->set_node(name); })});
  }
  static A Int(int64_t i) {
    return A({Value([&](v1::Value* v) { v->set_int_(i); })});
  }
  static A Float(double f) {
    return A({Value([&](v1::Value* v) { v->set_float_(f); })});
  }
  static A Bool(bool b) {
    return A({Value([&](v1::Value* v) { v->set_bool_(b); })});
  }
  static A None() {
    return A({Value([](v1::Value* v) { v->set_none(true); })});
  }
  static A Ints(std::initializer_list<int64_t> ints) {
    std::vector<v1::Value> values = {Value([&](v1::Value* v) { v->set_list(ints.size()); })};
    for (int64_t i : ints) values.push_back(Value([&](v1::Value* v) { v->set_int_(i); }));
    return A(std::move(values));
  }
  static A Bools(std::initializer_list<bool> bools) {
    std::vector<v1::Value> values = {Value([&](v1::Value* v) { v->set_list(bools.size()); })};
    for (bool b : bools) values.push_back(Value([&](v1::Value* v) { v->set_bool_(b); }));
    return A(std::move(values));
  }
  static A Nodes(std::initializer_list<std::string> names) {
    std::vector<v1::Value> values = {Value([&](v1::Value* v) { v->set_list(names.size()); })};
    for (const std::string& name : names) {
      values.push_back(Value([&](v1::Value* v) { v->set_node(name); }));
    }
    return A(std::move(values));
  }
  const std::vector<v1::Value>& values() const { return values_; }

 private:
  template <typename Fill>
  static v1::Value Value(Fill fill) {
    v1::Value value;
    fill(&value);
    return value;
  }
  explicit A(std::vector<v1::Value> values) : values_(std::move(values)) {}
  std::vector<v1::Value> values_;
};

using Shape = std::vector<int64_t>;

class AtenGraph {
 public:
  // A placeholder with one float32 output of `shape`.
  AtenGraph& Input(const std::string& name, const Shape& shape,
                   const std::string& dtype = "torch.float32") {
    v1::Node* node = Add(name, v1::PLACEHOLDER, name);
    AddOutput(node, shape, dtype);
    return *this;
  }
  // A get_attr constant.
  AtenGraph& Constant(const std::string& name, const Shape& shape) {
    v1::Node* node = Add(name, v1::GET_ATTR, name);
    AddOutput(node, shape, "torch.float32");
    return *this;
  }
  // A call_function node; one float32 output per entry of `outputs`.
  AtenGraph& Op(const std::string& name, const std::string& target, std::vector<A> args,
                std::vector<Shape> outputs, std::vector<std::pair<std::string, A>> kwargs = {}) {
    v1::Node* node = Add(name, v1::CALL_FUNCTION, target);
    for (const A& arg : args) {
      for (const v1::Value& value : arg.values()) *node->add_args() = value;
    }
    for (const auto& [keyword, arg] : kwargs) {
      v1::KeywordArgument* kwarg = node->add_kwargs();
      kwarg->set_name(keyword);
      for (const v1::Value& value : arg.values()) *kwarg->add_value() = value;
    }
    for (const Shape& shape : outputs) AddOutput(node, shape, "torch.float32");
    return *this;
  }
  AtenGraph& Output(std::initializer_list<std::string> names) {
    v1::Node* node = Add("output", v1::OUTPUT, "output");
    node->add_args()->set_tuple(static_cast<uint32_t>(names.size()));
    for (const std::string& name : names) node->add_args()->set_node(name);
    return *this;
  }
  v1::Node* last() { return graph_.mutable_nodes(graph_.nodes_size() - 1); }
  const v1::Graph& graph() const { return graph_; }

  // A request on `devices` devices of `memory` bytes each.
  v1::PlanDataParallelRequest Request(
      std::initializer_list<std::pair<std::string, v1::PlaceholderRole>> roles = {},
      v1::DataParallelStyle style = v1::REPLICATE, int devices = 2,
      int64_t memory = int64_t{1} << 30) const {
    v1::PlanDataParallelRequest request;
    *request.mutable_graph() = graph_;
    for (const auto& [node, role] : roles) {
      v1::PlaceholderRoleEntry* entry = request.add_roles();
      entry->set_node(node);
      entry->set_role(role);
    }
    for (int i = 0; i < devices; ++i) {
      v1::Device* device = request.mutable_devices()->add_devices();
      device->set_name("gpu" + std::to_string(i));
      device->set_logical_id(i);
      device->set_available_memory_bytes(memory);
    }
    request.set_style(style);
    return request;
  }

 private:
  v1::Node* Add(const std::string& name, v1::Op op, const std::string& target) {
    v1::Node* node = graph_.add_nodes();
    node->set_name(name);
    node->set_op(op);
    node->set_target(target);
    return node;
  }
  static void AddOutput(v1::Node* node, const Shape& shape, const std::string& dtype) {
    v1::TensorMeta* meta = node->add_outputs();
    for (int64_t size : shape) meta->add_shape(size);
    meta->set_dtype(dtype);
  }

  v1::Graph graph_;
};

}  // namespace partplan

#endif  // PARTPLAN_TESTS_PLANNER_DATA_PARALLEL_DP_TEST_GRAPHS_H_

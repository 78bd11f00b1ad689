// Small hand-built graphs for planner tests.
//
//   v1::Graph graph = TestGraph()
//       .Placeholder("x", 100)
//       .Op("a", {"x"}, /*total=*/300, /*output=*/100)
//       .Output({"a"})
//       .Build();
#ifndef PARTPLAN_TESTS_PLANNER_TEST_GRAPHS_H_
#define PARTPLAN_TESTS_PLANNER_TEST_GRAPHS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "partplan/v1/device.pb.h"
#include "partplan/v1/graph.pb.h"

namespace partplan {

class TestGraph {
 public:
  TestGraph& Placeholder(const std::string& name, int64_t bytes) {
    return Add(name, v1::PLACEHOLDER, {}, bytes, bytes);
  }
  TestGraph& GetAttr(const std::string& name, int64_t bytes) {
    return Add(name, v1::GET_ATTR, {}, bytes, bytes);
  }
  // A call_function node reading `inputs` (one positional arg each).
  TestGraph& Op(const std::string& name, const std::vector<std::string>& inputs, int64_t total,
                int64_t output) {
    return Add(name, v1::CALL_FUNCTION, inputs, total, output);
  }
  TestGraph& Module(const std::string& name, const std::vector<std::string>& inputs,
                    int64_t total, int64_t output) {
    return Add(name, v1::CALL_MODULE, inputs, total, output);
  }
  TestGraph& Output(const std::vector<std::string>& inputs) {
    v1::Node* node = Add("output", v1::OUTPUT, {}, -1, -1).last();
    if (inputs.size() == 1) {
      node->add_args()->set_node(inputs[0]);
    } else {
      node->add_args()->set_tuple(static_cast<uint32_t>(inputs.size()));
      for (const std::string& input : inputs) node->add_args()->set_node(input);
    }
    return *this;
  }
  v1::Node* last() { return graph_.mutable_nodes(graph_.nodes_size() - 1); }
  v1::Graph Build() const { return graph_; }

 private:
  TestGraph& Add(const std::string& name, v1::Op op, const std::vector<std::string>& inputs,
                 int64_t total, int64_t output) {
    v1::Node* node = graph_.add_nodes();
    node->set_name(name);
    node->set_op(op);
    node->set_target(name);
    for (const std::string& input : inputs) node->add_args()->set_node(input);
    if (total >= 0) {
      node->mutable_size_bytes()->set_total_bytes(total);
      node->mutable_size_bytes()->set_output_bytes(output);
    }
    return *this;
  }

  v1::Graph graph_;
};

// Devices named dev<i> with logical id i and the given memory.
inline v1::DeviceInventory TestDevices(const std::vector<int64_t>& memory) {
  v1::DeviceInventory inventory;
  for (size_t i = 0; i < memory.size(); ++i) {
    v1::Device* device = inventory.add_devices();
    device->set_name("dev" + std::to_string(i));
    device->set_logical_id(static_cast<int32_t>(i));
    device->set_available_memory_bytes(memory[i]);
  }
  return inventory;
}

}  // namespace partplan

#endif  // PARTPLAN_TESTS_PLANNER_TEST_GRAPHS_H_

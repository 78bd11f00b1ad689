// Synthetic torch.fx-like graphs for benchmarks and scale tests.
//
//   v1::PartitionGraphRequest request = ResidualStackRequest(100000, 8);
//
// A residual stack is the graph torch.fx records for N layers of
// `x = relu(linear(x)) + x` (the shape of the reference measurements in
// shared/design/reference-planners.md): per layer a call_module Linear with
// 64x64 parameters, a call_function relu and an operator.add skip.
#ifndef PARTPLAN_TESTS_BENCH_SYNTHETIC_GRAPHS_H_
#define PARTPLAN_TESTS_BENCH_SYNTHETIC_GRAPHS_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {

// A graph of about `num_nodes` nodes (3 per layer, plus input and output).
inline v1::Graph ResidualStack(int64_t num_nodes) {
  constexpr int64_t kActivationBytes = 32 * 64 * 4;  // a 32x64 float32 batch
  constexpr int64_t kLinearParameters = 64 * 64 + 64;
  v1::Graph graph;
  graph.set_name("residual_stack");
  const int64_t layers = (num_nodes - 2) / 3;
  graph.mutable_nodes()->Reserve(static_cast<int>(3 * layers + 2));
  auto add_node = [&](const std::string& name, v1::Op op, const std::string& target,
                      int64_t total_bytes) {
    v1::Node* node = graph.add_nodes();
    node->set_name(name);
    node->set_op(op);
    node->set_target(target);
    node->mutable_size_bytes()->set_total_bytes(total_bytes);
    node->mutable_size_bytes()->set_output_bytes(kActivationBytes);
    v1::TensorMeta* meta = node->add_outputs();
    meta->add_shape(32);
    meta->add_shape(64);
    meta->set_dtype("torch.float32");
    return node;
  };
  add_node("x", v1::PLACEHOLDER, "x", kActivationBytes);
  std::string previous = "x";
  for (int64_t i = 0; i < layers; ++i) {
    const std::string linear = absl::StrCat("layers_", i, "_linear");
    const std::string relu = absl::StrCat("relu_", i);
    const std::string add = absl::StrCat("add_", i);
    v1::Node* node = add_node(linear, v1::CALL_MODULE, absl::StrCat("layers.", i, ".linear"),
                              kActivationBytes + kLinearParameters * 4);
    node->set_module_type("torch.nn.Linear");
    node->set_parameter_count(kLinearParameters);
    node->set_parameter_bytes(kLinearParameters * 4);
    node->add_args()->set_node(previous);
    node->mutable_latency()->set_compute_latency_seconds(2e-6);
    node->mutable_latency()->set_memory_latency_seconds(1e-6);
    node = add_node(relu, v1::CALL_FUNCTION, "torch.relu", kActivationBytes);
    node->add_args()->set_node(linear);
    node = add_node(add, v1::CALL_FUNCTION, "operator.add", kActivationBytes);
    node->add_args()->set_node(relu);
    node->add_args()->set_node(previous);
    previous = add;
  }
  v1::Node* output = graph.add_nodes();
  output->set_name("output");
  output->set_op(v1::OUTPUT);
  output->set_target("output");
  output->add_args()->set_node(previous);
  return graph;
}

// The graph split over `num_devices` equal devices with 10% headroom.
inline v1::PartitionGraphRequest ResidualStackRequest(int64_t num_nodes, int num_devices) {
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = ResidualStack(num_nodes);
  int64_t total = 0;
  for (const v1::Node& node : request.graph().nodes()) total += node.size_bytes().total_bytes();
  const int64_t per_device = total / num_devices + total / (10 * num_devices) + 1;
  for (int d = 0; d < num_devices; ++d) {
    v1::Device* device = request.mutable_devices()->add_devices();
    device->set_name(absl::StrCat("gpu", d));
    device->set_logical_id(d);
    device->set_available_memory_bytes(per_device);
  }
  request.mutable_devices()->set_transfer_rate_bytes_per_second(1e10);
  request.mutable_config()->set_mode(v1::PartitionerConfig::SIZE_BASED);
  return request;
}

// A recommendation model of about `num_nodes` nodes: `num_tables`
// embedding-bag lookups into tables of `table_bytes` first, then a dense
// residual stack, as DLRM-style models are traced.
inline v1::Graph RecommendationModel(int64_t num_nodes, int num_tables, int64_t table_bytes) {
  const int64_t table_parameters = table_bytes / 4;
  v1::Graph graph = ResidualStack(num_nodes - num_tables);
  graph.set_name("recommendation");
  v1::Graph result;
  result.set_name(graph.name());
  *result.add_nodes() = graph.nodes(0);  // x
  v1::Node* ids = result.add_nodes();
  *ids = graph.nodes(0);
  ids->set_name("ids");
  ids->set_target("ids");
  for (int t = 0; t < num_tables; ++t) {
    v1::Node* lookup = result.add_nodes();
    *lookup = graph.nodes(0);
    lookup->set_name(absl::StrCat("emb_", t));
    lookup->set_op(v1::CALL_MODULE);
    lookup->set_target(absl::StrCat("embeddings.", t));
    lookup->set_module_type("torch.nn.EmbeddingBag");
    lookup->set_parameter_count(table_parameters);
    lookup->mutable_size_bytes()->set_total_bytes(lookup->size_bytes().output_bytes() +
                                                  table_parameters * 4);
    lookup->add_args()->set_node("ids");
  }
  for (int i = 1; i < graph.nodes_size(); ++i) *result.add_nodes() = graph.nodes(i);
  // The first dense layer also reads every lookup.
  v1::Node* first_dense = result.mutable_nodes(2 + num_tables);
  for (int t = 0; t < num_tables; ++t) first_dense->add_args()->set_node(absl::StrCat("emb_", t));
  return result;
}

// Equal devices with 10% headroom over the graph's total size split `ways`.
inline v1::DeviceInventory EqualDevices(const v1::Graph& graph, int num_devices, int ways) {
  int64_t total = 0;
  for (const v1::Node& node : graph.nodes()) total += node.size_bytes().total_bytes();
  const int64_t per_device = total / ways + total / (10 * ways) + 1;
  v1::DeviceInventory inventory;
  for (int d = 0; d < num_devices; ++d) {
    v1::Device* device = inventory.add_devices();
    device->set_name(absl::StrCat("gpu", d));
    device->set_logical_id(d);
    device->set_available_memory_bytes(per_device);
  }
  inventory.set_transfer_rate_bytes_per_second(1e10);
  return inventory;
}

}  // namespace partplan

#endif  // PARTPLAN_TESTS_BENCH_SYNTHETIC_GRAPHS_H_

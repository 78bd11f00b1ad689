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
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {

// Appends torch.fx-like nodes to a graph: every node has sizes and one
// float32 output of `activation_shape`.
class GraphWriter {
 public:
  static constexpr int64_t kBatch = 32;
  static constexpr int64_t kWidth = 64;
  static constexpr int64_t kActivationBytes = kBatch * kWidth * 4;  // a 32x64 float32 batch
  static constexpr int64_t kLinearParameters = kWidth * kWidth + kWidth;

  GraphWriter(v1::Graph* graph, int64_t num_nodes) : graph_(graph) {
    graph_->mutable_nodes()->Reserve(static_cast<int>(num_nodes));
  }

  // A node reading `args` (node names), with `own_bytes` of parameters.
  v1::Node* Add(const std::string& name, v1::Op op, const std::string& target,
                std::initializer_list<absl::string_view> args, int64_t own_bytes = 0) {
    v1::Node* node = graph_->add_nodes();
    node->set_name(name);
    node->set_op(op);
    node->set_target(target);
    for (absl::string_view arg : args) node->add_args()->set_node(std::string(arg));
    node->mutable_size_bytes()->set_total_bytes(kActivationBytes + own_bytes);
    node->mutable_size_bytes()->set_output_bytes(kActivationBytes);
    v1::TensorMeta* meta = node->add_outputs();
    meta->add_shape(kBatch);
    meta->add_shape(kWidth);
    meta->set_dtype("torch.float32");
    return node;
  }

  // call_module of an nn.Linear(64, 64) at `target`, with latencies.
  void Linear(const std::string& name, const std::string& target, absl::string_view input) {
    v1::Node* node = Add(name, v1::CALL_MODULE, target, {input}, kLinearParameters * 4);
    node->set_module_type("torch.nn.Linear");
    node->set_parameter_count(kLinearParameters);
    node->set_parameter_bytes(kLinearParameters * 4);
    node->mutable_latency()->set_compute_latency_seconds(2e-6);
    node->mutable_latency()->set_memory_latency_seconds(1e-6);
  }

  void Output(const std::string& result) {
    v1::Node* output = graph_->add_nodes();
    output->set_name("output");
    output->set_op(v1::OUTPUT);
    output->set_target("output");
    output->add_args()->set_node(result);
  }

  int64_t size() const { return graph_->nodes_size(); }

 private:
  v1::Graph* graph_;
};

// A graph of about `num_nodes` nodes (3 per layer, plus input and output).
inline v1::Graph ResidualStack(int64_t num_nodes) {
  v1::Graph graph;
  graph.set_name("residual_stack");
  GraphWriter writer(&graph, num_nodes);
  writer.Add("x", v1::PLACEHOLDER, "x", {});
  std::string previous = "x";
  for (int64_t i = 0; writer.size() + 3 < num_nodes; ++i) {
    const std::string linear = absl::StrCat("layers_", i, "_linear");
    const std::string relu = absl::StrCat("relu_", i);
    const std::string add = absl::StrCat("add_", i);
    writer.Linear(linear, absl::StrCat("layers.", i, ".linear"), previous);
    writer.Add(relu, v1::CALL_FUNCTION, "torch.relu", {linear});
    writer.Add(add, v1::CALL_FUNCTION, "operator.add", {relu, previous});
    previous = add;
  }
  writer.Output(previous);
  return graph;
}

// The shapes of graph the planners are benchmarked on.
enum class GraphShape {
  kChain,        // Linear, ReLU, Linear, ReLU, ...: every node reads the one before
  kResidual,     // ResidualStack: a skip add per layer
  kTransformer,  // pre-norm blocks: attention (q, k, v fan out of the norm) and an MLP, two skips
  kFanOutFanIn,  // blocks of one node read by 16 parallel Linears, joined by a torch.cat
};

inline const char* GraphShapeName(GraphShape shape) {
  switch (shape) {
    case GraphShape::kChain: return "chain";
    case GraphShape::kResidual: return "residual";
    case GraphShape::kTransformer: return "transformer";
    case GraphShape::kFanOutFanIn: return "fan_out_in";
  }
  return "unknown";
}

// A graph of `shape` with about `num_nodes` nodes (whole layers or blocks,
// plus input and output).
inline v1::Graph SyntheticGraph(GraphShape shape, int64_t num_nodes) {
  if (shape == GraphShape::kResidual) return ResidualStack(num_nodes);
  v1::Graph graph;
  graph.set_name(GraphShapeName(shape));
  GraphWriter writer(&graph, num_nodes);
  writer.Add("x", v1::PLACEHOLDER, "x", {});
  std::string previous = "x";
  constexpr int kBranches = 16;
  const int64_t per_block = shape == GraphShape::kChain         ? 2
                            : shape == GraphShape::kTransformer ? 15
                                                                : kBranches + 2;
  for (int64_t i = 0; writer.size() + per_block < num_nodes; ++i) {
    const std::string block = absl::StrCat("blocks_", i, "_");
    const std::string module = absl::StrCat("blocks.", i, ".");
    switch (shape) {
      case GraphShape::kChain: {
        writer.Linear(block + "linear", module + "linear", previous);
        writer.Add(block + "relu", v1::CALL_FUNCTION, "torch.relu", {block + "linear"});
        previous = block + "relu";
        break;
      }
      case GraphShape::kTransformer: {
        writer.Add(block + "ln_1", v1::CALL_MODULE, module + "ln_1", {previous}, 2 * 64 * 4)
            ->set_module_type("torch.nn.LayerNorm");
        for (const char* projection : {"q", "k", "v"}) {
          writer.Linear(block + projection, module + "attn." + projection, block + "ln_1");
        }
        writer.Add(block + "transpose", v1::CALL_METHOD, "transpose", {block + "k"});
        writer.Add(block + "scores", v1::CALL_FUNCTION, "torch.matmul",
                   {block + "q", block + "transpose"});
        writer.Add(block + "softmax", v1::CALL_FUNCTION, "torch.softmax", {block + "scores"});
        writer.Add(block + "attn", v1::CALL_FUNCTION, "torch.matmul",
                   {block + "softmax", block + "v"});
        writer.Linear(block + "proj", module + "attn.proj", block + "attn");
        writer.Add(block + "add", v1::CALL_FUNCTION, "operator.add", {previous, block + "proj"});
        writer.Add(block + "ln_2", v1::CALL_MODULE, module + "ln_2", {block + "add"}, 2 * 64 * 4)
            ->set_module_type("torch.nn.LayerNorm");
        writer.Linear(block + "fc1", module + "mlp.fc1", block + "ln_2");
        writer.Add(block + "gelu", v1::CALL_FUNCTION, "torch.nn.functional.gelu",
                   {block + "fc1"});
        writer.Linear(block + "fc2", module + "mlp.fc2", block + "gelu");
        const std::string out = block + "add_1";
        writer.Add(out, v1::CALL_FUNCTION, "operator.add", {block + "add", block + "fc2"});
        previous = out;
        break;
      }
      case GraphShape::kFanOutFanIn: {
        v1::Node* cat = nullptr;
        std::vector<std::string> branches;
        for (int b = 0; b < kBranches; ++b) {
          branches.push_back(absl::StrCat(block, "branch_", b));
          writer.Linear(branches.back(), absl::StrCat(module, "branches.", b), previous);
        }
        // torch.cat([b0, ..., b15], dim=1): one list argument.
        cat = writer.Add(block + "cat", v1::CALL_FUNCTION, "torch.cat", {});
        cat->add_args()->set_list(kBranches);
        for (const std::string& branch : branches) cat->add_args()->set_node(branch);
        cat->mutable_size_bytes()->set_total_bytes(kBranches * GraphWriter::kActivationBytes);
        cat->mutable_size_bytes()->set_output_bytes(kBranches * GraphWriter::kActivationBytes);
        cat->mutable_outputs(0)->set_shape(1, kBranches * GraphWriter::kWidth);
        writer.Linear(block + "join", module + "join", block + "cat");
        previous = block + "join";
        break;
      }
      case GraphShape::kResidual:
        break;
    }
  }
  writer.Output(previous);
  return graph;
}

// An aten-level MLP of about `num_nodes` nodes as make_fx records it, for
// PlanDataParallel: per layer a weight placeholder, aten.mm and aten.relu;
// the loss is the sum of the last activation.
inline v1::PlanDataParallelRequest DataParallelMlpRequest(int64_t num_nodes) {
  v1::PlanDataParallelRequest request;
  v1::Graph& graph = *request.mutable_graph();
  graph.set_name("aten_mlp");
  GraphWriter writer(&graph, num_nodes);
  writer.Add("x", v1::PLACEHOLDER, "x", {});
  std::string previous = "x";
  for (int64_t i = 0; writer.size() + 3 + 2 < num_nodes; ++i) {
    const std::string weight = absl::StrCat("w_", i);
    v1::Node* node = writer.Add(weight, v1::PLACEHOLDER, weight, {});
    node->mutable_outputs(0)->set_shape(0, GraphWriter::kWidth);
    node->mutable_size_bytes()->set_total_bytes(GraphWriter::kWidth * GraphWriter::kWidth * 4);
    node->mutable_size_bytes()->set_output_bytes(GraphWriter::kWidth * GraphWriter::kWidth * 4);
    v1::PlaceholderRoleEntry* role = request.add_roles();
    role->set_node(weight);
    role->set_role(v1::PARAMETER);
    const std::string mm = absl::StrCat("mm_", i);
    writer.Add(mm, v1::CALL_FUNCTION, "aten.mm.default", {previous, weight});
    const std::string relu = absl::StrCat("relu_", i);
    writer.Add(relu, v1::CALL_FUNCTION, "aten.relu.default", {mm});
    previous = relu;
  }
  v1::Node* loss = writer.Add("sum", v1::CALL_FUNCTION, "aten.sum.default", {previous});
  loss->mutable_outputs(0)->clear_shape();
  writer.Output("sum");
  for (int d = 0; d < 8; ++d) {
    v1::Device* device = request.mutable_devices()->add_devices();
    device->set_name(absl::StrCat("gpu", d));
    device->set_logical_id(d);
    device->set_available_memory_bytes(int64_t{16} << 30);
  }
  return request;
}

// The graph split over `num_devices` equal devices with 10% headroom.
inline v1::PartitionGraphRequest PartitionRequest(v1::Graph graph, int num_devices) {
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = std::move(graph);
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

inline v1::PartitionGraphRequest ResidualStackRequest(int64_t num_nodes, int num_devices) {
  return PartitionRequest(ResidualStack(num_nodes), num_devices);
}

// The sum of the nodes' total sizes.
inline int64_t TotalBytes(const v1::Graph& graph) {
  int64_t bytes = 0;
  for (const v1::Node& node : graph.nodes()) bytes += node.size_bytes().total_bytes();
  return bytes;
}

// KL_BASED on a chain of `num_nodes` nodes over as many devices, each
// holding one node (2.2 times the mean node, less than a Linear and a
// ReLU): every trial places about `num_nodes` partitions again, each
// passing over the devices the ones before it filled, so a trial costs
// partitions x devices on top of nodes + edges.
inline v1::PartitionGraphRequest KlManyDevicesRequest(int64_t num_nodes) {
  v1::PartitionGraphRequest request =
      PartitionRequest(SyntheticGraph(GraphShape::kChain, num_nodes), static_cast<int>(num_nodes));
  const int64_t memory = TotalBytes(request.graph()) * 22 / (10 * request.graph().nodes_size());
  for (v1::Device& device : *request.mutable_devices()->mutable_devices()) {
    device.set_available_memory_bytes(memory);
  }
  request.mutable_config()->set_mode(v1::PartitionerConfig::KL_BASED);
  return request;
}

// A pipeline of about `num_nodes` nodes as fairscale's tracer records one,
// for BuildPipelineGraph: forward's input, then pipeline modules in pairs,
// the first of each reading the module before it and returning two values,
// which the second reads through a getitem each; one worker per module,
// eight workers round robin.
inline v1::BuildPipelineGraphRequest PipelineRequest(int64_t num_nodes) {
  v1::BuildPipelineGraphRequest request;
  v1::Graph& graph = *request.mutable_graph();
  const auto add_node = [&graph](const std::string& name, v1::Op op, const std::string& target) {
    v1::Node* node = graph.add_nodes();
    node->set_name(name);
    node->set_op(op);
    node->set_target(target);
    return node;
  };
  const auto add_module = [&](const std::string& name) {
    v1::Node* node = add_node(name, v1::CALL_MODULE, name);
    v1::ModuleWorker* worker = request.add_workers();
    worker->set_target(name);
    worker->set_worker(absl::StrCat("worker", request.workers_size() % 8));
    return node;
  };
  add_node("x", v1::PLACEHOLDER, "x");
  std::string previous = "x";
  for (int64_t pair = 0; 4 * pair + 2 < num_nodes; ++pair) {
    const std::string first = absl::StrCat("stage", 2 * pair);
    add_module(first)->add_args()->set_node(previous);
    v1::Node* second = add_module(absl::StrCat("stage", 2 * pair + 1));
    for (int element = 0; element < 2; ++element) {
      const std::string getitem = absl::StrCat(first, "_", element);
      v1::Node* node = add_node(getitem, v1::CALL_FUNCTION, "operator.getitem");
      node->add_args()->set_node(first);
      node->add_args()->set_int_(element);
      second->add_args()->set_node(getitem);
    }
    // The module reads its getitems, which come before it in graph order.
    graph.mutable_nodes()->SwapElements(graph.nodes_size() - 3, graph.nodes_size() - 1);
    graph.mutable_nodes()->SwapElements(graph.nodes_size() - 3, graph.nodes_size() - 2);
    previous = second->name();
  }
  add_node("output", v1::OUTPUT, "output")->add_args()->set_node(previous);
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

// A recommendation model whose embedding lookups are interleaved with the
// dense layers that consume them (as InterleavedEmbeddingModule in
// tests/fixtures/partitioner/generate.py is): per table, an nn.Embedding
// lookup of the ids, an add into the running activation, then
// `layers_per_table` Linear and ReLU pairs. sparse_nn cuts a partition at
// every lookup and after it, so a graph of N nodes starts with about
// N / (1 + layers_per_table) partitions.
inline v1::Graph InterleavedRecommendationModel(int64_t num_nodes, int layers_per_table,
                                                int64_t table_bytes) {
  v1::Graph graph;
  graph.set_name("interleaved_recommendation");
  GraphWriter writer(&graph, num_nodes);
  writer.Add("x", v1::PLACEHOLDER, "x", {});
  writer.Add("ids", v1::PLACEHOLDER, "ids", {});
  std::string previous = "x";
  for (int64_t t = 0; writer.size() + 2 + 2 * layers_per_table < num_nodes; ++t) {
    const std::string lookup = absl::StrCat("embs_", t);
    v1::Node* table =
        writer.Add(lookup, v1::CALL_MODULE, absl::StrCat("embs.", t), {"ids"}, table_bytes);
    table->set_module_type("torch.nn.Embedding");
    table->set_parameter_count(table_bytes / 4);
    previous =
        writer.Add(absl::StrCat("add_", t), v1::CALL_FUNCTION, "operator.add", {previous, lookup})
            ->name();
    for (int i = 0; i < layers_per_table; ++i) {
      const std::string linear = absl::StrCat("mix_", t, "_", i);
      writer.Linear(linear, absl::StrCat("mix.", t, ".", i), previous);
      previous =
          writer.Add(absl::StrCat("relu_", t, "_", i), v1::CALL_FUNCTION, "torch.relu", {linear})
              ->name();
    }
  }
  writer.Output(previous);
  return graph;
}

// A recommendation model whose tables all meet one shared dense layer: a
// Linear of the dense input (the hub), then per table an nn.Embedding
// lookup of the ids added to the hub's output. sparse_nn cuts a partition
// at every lookup and after it, and merges the dense ones into the hub's:
// each merge adds a table's partition to the union's parents.
inline v1::Graph HubRecommendationModel(int64_t num_nodes, int64_t table_bytes) {
  v1::Graph graph;
  graph.set_name("hub_recommendation");
  GraphWriter writer(&graph, num_nodes);
  writer.Add("x", v1::PLACEHOLDER, "x", {});
  writer.Add("ids", v1::PLACEHOLDER, "ids", {});
  writer.Linear("hub", "hub", "x");
  std::string last;
  for (int64_t t = 0; writer.size() + 3 < num_nodes; ++t) {
    const std::string lookup = absl::StrCat("embs_", t);
    v1::Node* table =
        writer.Add(lookup, v1::CALL_MODULE, absl::StrCat("embs.", t), {"ids"}, table_bytes);
    table->set_module_type("torch.nn.Embedding");
    table->set_parameter_count(table_bytes / 4);
    last = writer.Add(absl::StrCat("add_", t), v1::CALL_FUNCTION, "operator.add", {"hub", lookup})
               ->name();
  }
  writer.Output(last);
  return graph;
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

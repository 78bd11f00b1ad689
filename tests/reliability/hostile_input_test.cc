// Hostile and malformed requests against the real server (the planner
// library behind gRPC, on loopback): one table row per bad request, each
// with the status code it must get and, for INVALID_ARGUMENT, the
// google.rpc.BadRequest field path that names the offending field. Requests
// travel as raw bytes through grpc::GenericStub, so truncated, random and
// oversized messages are rows like any other.
//
// Rows of an RPC whose planner has not landed yet (it answers UNIMPLEMENTED
// to its valid example request in client/examples) are skipped with "not
// implemented yet"; as soon as the planner answers that example, the rows
// run and demand the codes and paths below.
//
// After every row the server must still answer a valid request: a bad
// request never takes it down.
#include <grpcpp/grpcpp.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/api/planner_rpcs.h"
#include "server/server.h"
#include "tests/reliability/reliability_util.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

using grpc::StatusCode;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Which server a row goes to.
enum class Server {
  kDefault,  // production defaults (ServerOptions, InputLimits)
  kSmall,    // small limits, to hit each one cheaply
};

// Limits of the kSmall server.
constexpr int kSmallMaxReceiveBytes = 1 << 20;
constexpr int64_t kSmallMaxNodes = 50;
constexpr int64_t kSmallMaxValuesPerNode = 100;
constexpr int64_t kSmallMaxValues = 200;
constexpr int64_t kSmallMaxDevices = 4;

// Each row's request is built from a valid request of its RPC; `probe` names
// that valid request, which also tells whether the RPC is implemented yet.
enum class Probe {
  kPartitionGraph,
  kSplitGraph,
  kShardGraph,
  kBuildPipelineGraph,
  kPlanDataParallel,
  kPlanTraining,
  kParallelize,
  kPlan,
  kPlanShard,  // Plan with a ShardConfig
  kValidate,
  kNone,  // rows of an RPC without rows of its own (GenericGraphRows): no probe
};

struct HostileCase {
  std::string name;
  PlannerRpc rpc;
  Probe probe;
  std::function<std::string()> request;  // The bytes sent.
  StatusCode code;
  std::string field;  // The expected BadRequest field path; "" for none.
  std::string message_contains = "";
  Server server = Server::kDefault;
};

// ---------------------------------------------------------------------------
// Valid requests the rows break.

// x (placeholder), w (get_attr) -> a (call_module) -> b -> c -> output:
//   nodes[0] x, [1] w, [2] a(x), [3] b(a, w), [4] c(b, a), [5] output(c).
// 2300 bytes in all.
v1::Graph BaseGraph() {
  v1::Graph graph;
  graph.set_name("hostile");
  auto add = [&graph](const std::string& name, v1::Op op, std::vector<std::string> inputs,
                      int64_t total, int64_t output) {
    v1::Node* node = graph.add_nodes();
    node->set_name(name);
    node->set_op(op);
    node->set_target(name);
    for (const std::string& input : inputs) node->add_args()->set_node(input);
    if (op != v1::OUTPUT) {
      node->mutable_size_bytes()->set_total_bytes(total);
      node->mutable_size_bytes()->set_output_bytes(output);
    }
    return node;
  };
  add("x", v1::PLACEHOLDER, {}, 100, 100);
  add("w", v1::GET_ATTR, {}, 1000, 1000);
  add("a", v1::CALL_MODULE, {"x"}, 1000, 100)->set_module_type("torch.nn.Linear");
  add("b", v1::CALL_FUNCTION, {"a", "w"}, 100, 100);
  add("c", v1::CALL_FUNCTION, {"b", "a"}, 100, 100);
  add("output", v1::OUTPUT, {"c"}, 0, 0);
  return graph;
}

v1::DeviceInventory Devices(const std::vector<int64_t>& memory) {
  v1::DeviceInventory inventory;
  for (size_t i = 0; i < memory.size(); ++i) {
    v1::Device* device = inventory.add_devices();
    device->set_name(absl::StrCat("dev", i));
    device->set_logical_id(static_cast<int32_t>(i));
    device->set_available_memory_bytes(memory[i]);
  }
  return inventory;
}

v1::DeviceInventory BaseDevices() { return Devices({1000000, 1000000}); }

template <typename Request>
Request FromExample(PlannerRpc rpc) {
  Request request;
  request.ParseFromString(ExampleRequest(rpc));
  return request;
}

v1::PlanRequest PlanShardRequest() {
  const auto shard = FromExample<v1::ShardGraphRequest>(PlannerRpc::kShardGraph);
  v1::PlanRequest request;
  *request.mutable_graph() = shard.graph();
  *request.mutable_shard() = shard.config();
  return request;
}

// The valid request of each probe.
std::string ProbeRequest(Probe probe) {
  switch (probe) {
    case Probe::kPartitionGraph:
      return ExampleRequest(PlannerRpc::kPartitionGraph);
    case Probe::kSplitGraph:
      return ExampleRequest(PlannerRpc::kSplitGraph);
    case Probe::kShardGraph:
      return ExampleRequest(PlannerRpc::kShardGraph);
    case Probe::kBuildPipelineGraph:
      return ExampleRequest(PlannerRpc::kBuildPipelineGraph);
    case Probe::kPlanDataParallel:
      return ExampleRequest(PlannerRpc::kPlanDataParallel);
    case Probe::kPlanTraining:
      return ExampleRequest(PlannerRpc::kPlanTraining);
    case Probe::kParallelize:
      return ExampleRequest(PlannerRpc::kParallelize);
    case Probe::kPlan:
      return ExampleRequest(PlannerRpc::kPlan);
    case Probe::kPlanShard:
      return PlanShardRequest().SerializeAsString();
    case Probe::kValidate:
    case Probe::kNone:
      return ExampleRequest(PlannerRpc::kValidate);
  }
  return "";
}

PlannerRpc RpcOf(Probe probe) {
  switch (probe) {
    case Probe::kPartitionGraph:
      return PlannerRpc::kPartitionGraph;
    case Probe::kSplitGraph:
      return PlannerRpc::kSplitGraph;
    case Probe::kShardGraph:
      return PlannerRpc::kShardGraph;
    case Probe::kBuildPipelineGraph:
      return PlannerRpc::kBuildPipelineGraph;
    case Probe::kPlanDataParallel:
      return PlannerRpc::kPlanDataParallel;
    case Probe::kPlanTraining:
      return PlannerRpc::kPlanTraining;
    case Probe::kParallelize:
      return PlannerRpc::kParallelize;
    case Probe::kPlan:
    case Probe::kPlanShard:
      return PlannerRpc::kPlan;
    case Probe::kValidate:
    case Probe::kNone:
      return PlannerRpc::kValidate;
  }
  return PlannerRpc::kValidate;
}

// ---------------------------------------------------------------------------
// Row builders: each takes a mutation of a valid request.

using GraphEdit = std::function<void(v1::Graph&)>;
using DevicesEdit = std::function<void(v1::DeviceInventory&)>;

HostileCase GraphRow(std::string name, GraphEdit edit, std::string field,
                     StatusCode code = StatusCode::INVALID_ARGUMENT) {
  return {std::move(name), PlannerRpc::kValidate, Probe::kValidate,
          [edit] {
            v1::ValidateRequest request;
            *request.mutable_graph() = BaseGraph();
            *request.mutable_devices() = BaseDevices();
            edit(*request.mutable_graph());
            return request.SerializeAsString();
          },
          code, std::move(field)};
}

HostileCase DevicesRow(std::string name, DevicesEdit edit, std::string field) {
  return {std::move(name), PlannerRpc::kValidate, Probe::kValidate,
          [edit] {
            v1::ValidateRequest request;
            *request.mutable_graph() = BaseGraph();
            *request.mutable_devices() = BaseDevices();
            edit(*request.mutable_devices());
            return request.SerializeAsString();
          },
          StatusCode::INVALID_ARGUMENT, std::move(field)};
}

HostileCase PartitionRow(std::string name, std::function<void(v1::PartitionGraphRequest&)> edit,
                         std::string field, StatusCode code = StatusCode::INVALID_ARGUMENT) {
  return {std::move(name), PlannerRpc::kPartitionGraph, Probe::kPartitionGraph,
          [edit] {
            v1::PartitionGraphRequest request;
            *request.mutable_graph() = BaseGraph();
            *request.mutable_devices() = BaseDevices();
            edit(request);
            return request.SerializeAsString();
          },
          code, std::move(field)};
}

// AOT_BASED with a, b, c in partitions 0, 1, 1, on devices 0 and 1; `edit`
// breaks it.
HostileCase AotRow(std::string name, std::function<void(v1::PartitionerConfig&)> edit,
                   std::string field) {
  return PartitionRow(
      std::move(name),
      [edit](v1::PartitionGraphRequest& request) {
        v1::PartitionerConfig& config = *request.mutable_config();
        config.set_mode(v1::PartitionerConfig::AOT_BASED);
        for (const auto& [node, partition] :
             std::vector<std::pair<std::string, int>>{{"a", 0}, {"b", 1}, {"c", 1}}) {
          v1::NodePartition* entry = config.add_node_partitions();
          entry->set_node(node);
          entry->set_partition(partition);
        }
        for (int p = 0; p < 2; ++p) {
          v1::PartitionDevices* entry = config.add_partition_devices();
          entry->set_partition(p);
          entry->add_logical_device_ids(p);
        }
        edit(config);
      },
      std::move(field));
}

// SplitGraph of the base graph with a, b, c in partitions 0, 1, 1.
HostileCase SplitRow(std::string name, std::function<void(v1::SplitGraphRequest&)> edit,
                     std::string field) {
  return {std::move(name), PlannerRpc::kSplitGraph, Probe::kSplitGraph,
          [edit] {
            v1::SplitGraphRequest request;
            *request.mutable_graph() = BaseGraph();
            for (const auto& [node, partition] :
                 std::vector<std::pair<std::string, int>>{{"a", 0}, {"b", 1}, {"c", 1}}) {
              v1::NodePartition* entry = request.add_assignments();
              entry->set_node(node);
              entry->set_partition(partition);
            }
            edit(request);
            return request.SerializeAsString();
          },
          StatusCode::INVALID_ARGUMENT, std::move(field)};
}

HostileCase PlanRow(std::string name, std::function<void(v1::PlanRequest&)> edit,
                    std::string field, Probe probe = Probe::kPlan) {
  return {std::move(name), PlannerRpc::kPlan, probe,
          [edit, probe] {
            v1::PlanRequest request;
            if (probe == Probe::kPlanShard) {
              request = PlanShardRequest();
            } else {
              *request.mutable_graph() = BaseGraph();
              *request.mutable_devices() = BaseDevices();
            }
            edit(request);
            return request.SerializeAsString();
          },
          StatusCode::INVALID_ARGUMENT, std::move(field)};
}

template <typename Request>
HostileCase ExampleRow(std::string name, PlannerRpc rpc, Probe probe,
                       std::function<void(Request&)> edit, std::string field,
                       StatusCode code = StatusCode::INVALID_ARGUMENT) {
  return {std::move(name), rpc, probe,
          [edit, rpc] {
            Request request = FromExample<Request>(rpc);
            edit(request);
            return request.SerializeAsString();
          },
          code, std::move(field)};
}

HostileCase ShardRow(std::string name, std::function<void(v1::ShardGraphRequest&)> edit,
                     std::string field) {
  return ExampleRow<v1::ShardGraphRequest>(std::move(name), PlannerRpc::kShardGraph,
                                           Probe::kShardGraph, std::move(edit), std::move(field));
}

HostileCase PipelineRow(std::string name,
                        std::function<void(v1::BuildPipelineGraphRequest&)> edit,
                        std::string field) {
  return ExampleRow<v1::BuildPipelineGraphRequest>(std::move(name),
                                                   PlannerRpc::kBuildPipelineGraph,
                                                   Probe::kBuildPipelineGraph, std::move(edit),
                                                   std::move(field));
}

HostileCase DataParallelRow(std::string name,
                            std::function<void(v1::PlanDataParallelRequest&)> edit,
                            std::string field) {
  return ExampleRow<v1::PlanDataParallelRequest>(std::move(name), PlannerRpc::kPlanDataParallel,
                                                 Probe::kPlanDataParallel, std::move(edit),
                                                 std::move(field));
}

// PlanTraining's example: an 8-layer MLP (fc1, relu1, ..., relu7, fc8: 15
// nodes to place) on gpu0..gpu3 with latencies and NodeTraining, 1F1B,
// B = 8, fc8 pinned to the last stage.
HostileCase TrainingRow(std::string name, std::function<void(v1::PlanTrainingRequest&)> edit,
                        std::string field, StatusCode code = StatusCode::INVALID_ARGUMENT,
                        std::string message_contains = "") {
  HostileCase row = ExampleRow<v1::PlanTrainingRequest>(
      std::move(name), PlannerRpc::kPlanTraining, Probe::kPlanTraining, std::move(edit),
      std::move(field), code);
  row.message_contains = std::move(message_contains);
  return row;
}

// Parallelize's example: a 40-layer transformer on 4 hosts of 8 A100s,
// one device busy.
HostileCase ParallelizeRow(std::string name, std::function<void(v1::ParallelizeRequest&)> edit,
                           std::string field, StatusCode code = StatusCode::INVALID_ARGUMENT,
                           std::string message_contains = "") {
  HostileCase row = ExampleRow<v1::ParallelizeRequest>(std::move(name), PlannerRpc::kParallelize,
                                                       Probe::kParallelize, std::move(edit),
                                                       std::move(field), code);
  row.message_contains = std::move(message_contains);
  return row;
}

v1::HostGroup& FirstHosts(v1::ParallelizeRequest& r) {
  return *r.mutable_cluster()->mutable_host_groups(0);
}

void AddPin(v1::PlanTrainingRequest& request, const std::string& node, v1::StagePin pin) {
  v1::NodePin* added = request.mutable_config()->add_pins();
  added->set_node(node);
  added->set_pin(pin);
}

HostileCase RawRow(std::string name, PlannerRpc rpc, Probe probe,
                   std::function<std::string()> bytes, StatusCode code) {
  return {std::move(name), rpc, probe, std::move(bytes), code, ""};
}

// A row for the kSmall server whose message must name the limit's flag.
HostileCase LimitRow(HostileCase row, std::string flag) {
  row.server = Server::kSmall;
  row.message_contains = std::move(flag);
  return row;
}

v1::Node* AppendNode(v1::Graph& graph, const std::string& name, v1::Op op,
                     const std::string& input) {
  v1::Node* node = graph.add_nodes();
  node->set_name(name);
  node->set_op(op);
  node->set_target(name);
  if (!input.empty()) node->add_args()->set_node(input);
  return node;
}

// A node without size_bytes whose sizes are derived from one output.
void DeriveSizes(v1::Node* node, std::vector<int64_t> shape, const std::string& dtype) {
  node->clear_size_bytes();
  v1::TensorMeta* meta = node->add_outputs();
  for (int64_t d : shape) meta->add_shape(d);
  meta->set_dtype(dtype);
}

// Rows for `rpc`, in its own request type, breaking the graph every request
// carries (and giving the inventory, when the request takes one): what any
// RPC must refuse, so that an RPC added to the table without rows of its own
// here is covered.
std::vector<HostileCase> GenericGraphRows(PlannerRpc rpc) {
  const struct {
    const char* name;
    GraphEdit edit;
    const char* field;
  } kEdits[] = {
      {"EmptyGraph", [](v1::Graph& g) { g.clear_nodes(); }, "graph.nodes"},
      {"DuplicateNodeName", [](v1::Graph& g) { g.mutable_nodes(3)->set_name("a"); },
       "graph.nodes[3].name"},
      {"UnknownArgument",
       [](v1::Graph& g) { g.mutable_nodes(3)->mutable_args(0)->set_node("nope"); },
       "graph.nodes[3].args[0]"},
  };
  std::vector<HostileCase> rows;
  for (const auto& [name, edit, field] : kEdits) {
    rows.push_back({absl::StrCat(name, RpcName(rpc)), rpc, Probe::kNone,
                    [rpc, edit = edit] {
                      v1::Graph graph = BaseGraph();
                      edit(graph);
                      return RequestWithGraph(rpc, graph, BaseDevices())->SerializeAsString();
                    },
                    StatusCode::INVALID_ARGUMENT, field});
  }
  return rows;
}

std::vector<HostileCase> Cases() {
  std::vector<HostileCase> cases;
  auto add = [&cases](HostileCase row) { cases.push_back(std::move(row)); };

  // --- The graph: structure and references (through Validate). ---
  add(GraphRow("EmptyGraph", [](v1::Graph& g) { g.clear_nodes(); }, "graph.nodes"));
  add(GraphRow("NodeWithoutName", [](v1::Graph& g) { g.mutable_nodes(2)->clear_name(); },
               "graph.nodes[2].name"));
  add(GraphRow("DuplicateNodeName", [](v1::Graph& g) { g.mutable_nodes(3)->set_name("a"); },
               "graph.nodes[3].name"));
  add(GraphRow("VeryLongDuplicateNodeName",
               [](v1::Graph& g) {
                 const std::string name(64 << 10, 'n');
                 g.mutable_nodes(2)->set_name(name);
                 g.mutable_nodes(3)->set_name(name);
                 g.mutable_nodes(3)->mutable_args(0)->set_node(name);
                 g.mutable_nodes(4)->mutable_args(1)->set_node(name);
               },
               "graph.nodes[3].name"));
  add(RawRow("VeryLongNonAsciiNodeNameInAFailedPlan", PlannerRpc::kPartitionGraph,
             Probe::kPartitionGraph,
             [] {
               // FAILED_PRECONDITION quoting a 300 KB name of 3-byte characters.
               v1::PartitionGraphRequest request;
               *request.mutable_graph() = BaseGraph();
               *request.mutable_devices() = Devices({1050, 1050, 1050});
               std::string name;
               for (int i = 0; i < 100000; ++i) name += "\xe2\x82\xac";  // U+20AC
               request.mutable_graph()->mutable_nodes(2)->set_name(name);
               request.mutable_graph()->mutable_nodes(3)->mutable_args(0)->set_node(name);
               request.mutable_graph()->mutable_nodes(4)->mutable_args(1)->set_node(name);
               return request.SerializeAsString();
             },
             StatusCode::FAILED_PRECONDITION));
  add(GraphRow("UnknownOpEnum",
               [](v1::Graph& g) { g.mutable_nodes(2)->set_op(static_cast<v1::Op>(99)); },
               "graph.nodes[2].op"));
  add(GraphRow("UnspecifiedOp", [](v1::Graph& g) { g.mutable_nodes(2)->clear_op(); },
               "graph.nodes[2].op"));
  add(GraphRow("DanglingReference",
               [](v1::Graph& g) { g.mutable_nodes(3)->mutable_args(0)->set_node("nowhere"); },
               "graph.nodes[3].args[0]"));
  add(GraphRow("ForwardReference",
               [](v1::Graph& g) { g.mutable_nodes(2)->mutable_args(0)->set_node("c"); },
               "graph.nodes[2].args[0]"));
  add(GraphRow("SelfReference",
               [](v1::Graph& g) { g.mutable_nodes(3)->mutable_args(0)->set_node("b"); },
               "graph.nodes[3].args[0]"));
  add(GraphRow("CycleThroughKeywordArgument",
               [](v1::Graph& g) {
                 // b reads c, c reads b.
                 v1::KeywordArgument* kwarg = g.mutable_nodes(3)->add_kwargs();
                 kwarg->set_name("other");
                 kwarg->add_value()->set_node("c");
               },
               "graph.nodes[3].kwargs[0].value[0]"));
  add(GraphRow("NoOutputNode", [](v1::Graph& g) { g.mutable_nodes()->RemoveLast(); },
               "graph.nodes"));
  add(GraphRow("NodeAfterOutput",
               [](v1::Graph& g) { AppendNode(g, "late", v1::CALL_FUNCTION, "c"); },
               "graph.nodes[6]"));
  add(GraphRow("TwoOutputNodes", [](v1::Graph& g) { AppendNode(g, "output2", v1::OUTPUT, "c"); },
               "graph.nodes[6]"));
  add(GraphRow("GetAttrReadsANode",
               [](v1::Graph& g) { g.mutable_nodes(1)->add_args()->set_node("x"); },
               "graph.nodes[1].args"));
  add(GraphRow("ValueWithoutKind", [](v1::Graph& g) { g.mutable_nodes(3)->add_args(); },
               "graph.nodes[3].args[2]"));

  // --- Flat argument encodings. ---
  add(GraphRow("ListLongerThanItsElements",
               [](v1::Graph& g) {
                 v1::Node* b = g.mutable_nodes(3);
                 b->clear_args();
                 b->add_args()->set_list(3);
                 b->add_args()->set_node("a");
                 b->add_args()->set_node("w");
               },
               "graph.nodes[3].args"));
  add(GraphRow("HugeTupleCount",
               [](v1::Graph& g) {
                 v1::Node* b = g.mutable_nodes(3);
                 b->clear_args();
                 b->add_args()->set_tuple(std::numeric_limits<uint32_t>::max());
                 b->add_args()->set_node("a");
               },
               "graph.nodes[3].args"));
  add(GraphRow("DeeplyNestedListsMissingTheInnermost",
               [](v1::Graph& g) {
                 // [[[[...]]]], 100k deep, with no element at the bottom.
                 v1::Node* b = g.mutable_nodes(3);
                 b->clear_args();
                 for (int i = 0; i < 100000; ++i) b->add_args()->set_list(1);
               },
               "graph.nodes[3].args"));
  add(GraphRow("DeeplyNestedListsAreWalkedWithoutRecursion",
               [](v1::Graph& g) {
                 // [[[[...[a]...]]]], 100k deep: valid, and answered.
                 v1::Node* b = g.mutable_nodes(3);
                 b->clear_args();
                 for (int i = 0; i < 100000; ++i) b->add_args()->set_list(1);
                 b->add_args()->set_node("a");
               },
               "", StatusCode::OK));
  add(GraphRow("KeywordArgumentWithoutName",
               [](v1::Graph& g) {
                 v1::KeywordArgument* kwarg = g.mutable_nodes(3)->add_kwargs();
                 kwarg->add_value()->set_int_(1);
               },
               "graph.nodes[3].kwargs[0].name"));
  add(GraphRow("DuplicateKeywordArgument",
               [](v1::Graph& g) {
                 for (int k = 0; k < 2; ++k) {
                   v1::KeywordArgument* kwarg = g.mutable_nodes(3)->add_kwargs();
                   kwarg->set_name("dim");
                   kwarg->add_value()->set_int_(k);
                 }
               },
               "graph.nodes[3].kwargs[1].name"));
  add(GraphRow("ManyKeywordArgumentsThenADuplicate",
               [](v1::Graph& g) {
                 // 200k distinct keywords: the duplicate check must not be
                 // quadratic.
                 v1::Node* b = g.mutable_nodes(3);
                 for (int k = 0; k < 200000; ++k) {
                   v1::KeywordArgument* kwarg = b->add_kwargs();
                   kwarg->set_name(absl::StrCat("k", k));
                   kwarg->add_value()->set_int_(k);
                 }
                 v1::KeywordArgument* kwarg = b->add_kwargs();
                 kwarg->set_name("k0");
                 kwarg->add_value()->set_int_(0);
               },
               "graph.nodes[3].kwargs[200000].name"));
  add(GraphRow("KeywordArgumentWithTwoValues",
               [](v1::Graph& g) {
                 v1::KeywordArgument* kwarg = g.mutable_nodes(3)->add_kwargs();
                 kwarg->set_name("dim");
                 kwarg->add_value()->set_int_(1);
                 kwarg->add_value()->set_int_(2);
               },
               "graph.nodes[3].kwargs[0].value[1]"));
  add(GraphRow("KeywordArgumentWithoutValue",
               [](v1::Graph& g) { g.mutable_nodes(3)->add_kwargs()->set_name("dim"); },
               "graph.nodes[3].kwargs[0].value"));

  // --- Sizes, shapes, counts, latencies. ---
  add(GraphRow("NegativeTotalBytes",
               [](v1::Graph& g) { g.mutable_nodes(2)->mutable_size_bytes()->set_total_bytes(-1); },
               "graph.nodes[2].size_bytes.total_bytes"));
  add(GraphRow("NegativeOutputBytes",
               [](v1::Graph& g) { g.mutable_nodes(2)->mutable_size_bytes()->set_output_bytes(-5); },
               "graph.nodes[2].size_bytes.output_bytes"));
  add(GraphRow("OutputBytesAboveTotalBytes",
               [](v1::Graph& g) {
                 g.mutable_nodes(2)->mutable_size_bytes()->set_output_bytes(1001);
               },
               "graph.nodes[2].size_bytes"));
  add(GraphRow("GraphSizeOverflows",
               [](v1::Graph& g) {
                 g.mutable_nodes(2)->mutable_size_bytes()->set_total_bytes(kInt64Max);
                 g.mutable_nodes(3)->mutable_size_bytes()->set_total_bytes(kInt64Max);
               },
               "graph.nodes[2].size_bytes"));
  add(GraphRow("NegativeShapeDimension",
               [](v1::Graph& g) { DeriveSizes(g.mutable_nodes(2), {4, -1}, "torch.float32"); },
               "graph.nodes[2].outputs[0].shape[1]"));
  add(GraphRow("ShapeProductOverflows",
               [](v1::Graph& g) {
                 DeriveSizes(g.mutable_nodes(2), {int64_t{1} << 40, int64_t{1} << 40},
                             "torch.float32");
               },
               "graph.nodes[2].outputs[0].shape"));
  add(GraphRow("UnknownDtype",
               [](v1::Graph& g) { DeriveSizes(g.mutable_nodes(2), {4, 16}, "torch.float128"); },
               "graph.nodes[2].outputs[0].dtype"));
  add(GraphRow("NegativeParameterCount",
               [](v1::Graph& g) { g.mutable_nodes(2)->set_parameter_count(-272); },
               "graph.nodes[2].parameter_count"));
  add(GraphRow("ParameterSizeOverflows",
               [](v1::Graph& g) {
                 v1::Node* a = g.mutable_nodes(2);
                 DeriveSizes(a, {4, 16}, "torch.float32");
                 a->set_parameter_count(kInt64Max / 2);
               },
               "graph.nodes[2].parameter_count"));
  add(GraphRow("NegativeParameterBytes",
               [](v1::Graph& g) { g.mutable_nodes(2)->set_parameter_bytes(-1); },
               "graph.nodes[2].parameter_bytes"));
  add(GraphRow("NaNComputeLatency",
               [](v1::Graph& g) {
                 g.mutable_nodes(2)->mutable_latency()->set_compute_latency_seconds(kNaN);
               },
               "graph.nodes[2].latency.compute_latency_seconds"));
  add(GraphRow("InfiniteMemoryLatency",
               [](v1::Graph& g) {
                 g.mutable_nodes(3)->mutable_latency()->set_memory_latency_seconds(kInf);
               },
               "graph.nodes[3].latency.memory_latency_seconds"));
  add(GraphRow("NegativeComputeLatency",
               [](v1::Graph& g) {
                 g.mutable_nodes(4)->mutable_latency()->set_compute_latency_seconds(-1e-3);
               },
               "graph.nodes[4].latency.compute_latency_seconds"));
  add(GraphRow("NaNFlops", [](v1::Graph& g) { g.mutable_nodes(2)->set_flops(kNaN); },
               "graph.nodes[2].flops"));
  add(GraphRow("NegativeInfiniteFlops", [](v1::Graph& g) { g.mutable_nodes(3)->set_flops(-kInf); },
               "graph.nodes[3].flops"));

  // --- Device inventories (through Validate). ---
  add(DevicesRow("DeviceWithoutName",
                 [](v1::DeviceInventory& d) { d.mutable_devices(1)->clear_name(); },
                 "devices.devices[1].name"));
  add(DevicesRow("DuplicateDeviceName",
                 [](v1::DeviceInventory& d) { d.mutable_devices(1)->set_name("dev0"); },
                 "devices.devices[1].name"));
  add(DevicesRow("ContradictoryLogicalIds",
                 [](v1::DeviceInventory& d) { d.mutable_devices(1)->set_logical_id(0); },
                 "devices.devices[1].logical_id"));
  add(DevicesRow("NegativeLogicalId",
                 [](v1::DeviceInventory& d) { d.mutable_devices(0)->set_logical_id(-3); },
                 "devices.devices[0].logical_id"));
  add(DevicesRow("ZeroDeviceMemory",
                 [](v1::DeviceInventory& d) { d.mutable_devices(0)->set_available_memory_bytes(0); },
                 "devices.devices[0].available_memory_bytes"));
  add(DevicesRow("NegativeDeviceMemory",
                 [](v1::DeviceInventory& d) {
                   d.mutable_devices(1)->set_available_memory_bytes(-(int64_t{1} << 40));
                 },
                 "devices.devices[1].available_memory_bytes"));
  add(DevicesRow("NaNDeviceThroughput",
                 [](v1::DeviceInventory& d) { d.mutable_devices(0)->set_compute_flops_per_second(kNaN); },
                 "devices.devices[0].compute_flops_per_second"));
  add(DevicesRow("NegativeMemoryBandwidth",
                 [](v1::DeviceInventory& d) {
                   d.mutable_devices(1)->set_memory_bandwidth_bytes_per_second(-1);
                 },
                 "devices.devices[1].memory_bandwidth_bytes_per_second"));
  add(DevicesRow("InfiniteTransferRate",
                 [](v1::DeviceInventory& d) { d.set_transfer_rate_bytes_per_second(kInf); },
                 "devices.transfer_rate_bytes_per_second"));
  add(DevicesRow("LinkToUnknownDevice",
                 [](v1::DeviceInventory& d) {
                   v1::Link* link = d.add_links();
                   link->set_logical_id_a(0);
                   link->set_logical_id_b(7);
                   link->set_bandwidth_bytes_per_second(1e9);
                 },
                 "devices.links[0].logical_id_b"));
  add(DevicesRow("LinkToItself",
                 [](v1::DeviceInventory& d) {
                   v1::Link* link = d.add_links();
                   link->set_logical_id_a(1);
                   link->set_logical_id_b(1);
                   link->set_bandwidth_bytes_per_second(1e9);
                 },
                 "devices.links[0]"));
  add(DevicesRow("LinkWithNaNBandwidth",
                 [](v1::DeviceInventory& d) {
                   v1::Link* link = d.add_links();
                   link->set_logical_id_a(0);
                   link->set_logical_id_b(1);
                   link->set_bandwidth_bytes_per_second(kNaN);
                 },
                 "devices.links[0].bandwidth_bytes_per_second"));
  add(DevicesRow("ContradictoryLinks",
                 [](v1::DeviceInventory& d) {
                   for (const auto& [a, b, bandwidth] :
                        std::vector<std::tuple<int, int, double>>{{0, 1, 1e9}, {1, 0, 2e9}}) {
                     v1::Link* link = d.add_links();
                     link->set_logical_id_a(a);
                     link->set_logical_id_b(b);
                     link->set_bandwidth_bytes_per_second(bandwidth);
                   }
                 },
                 "devices.links[1]"));
  add(DevicesRow("MeshShapeDoesNotMultiplyOut",
                 [](v1::DeviceInventory& d) {
                   d.add_mesh_shape(2);
                   d.add_mesh_shape(3);
                 },
                 "devices.mesh_shape"));
  add(DevicesRow("MeshShapeProductOverflows",
                 [](v1::DeviceInventory& d) {
                   for (int i = 0; i < 8; ++i) d.add_mesh_shape(std::numeric_limits<int32_t>::max());
                 },
                 "devices.mesh_shape"));
  add(DevicesRow("MeshShapeWithZero",
                 [](v1::DeviceInventory& d) {
                   d.add_mesh_shape(2);
                   d.add_mesh_shape(0);
                 },
                 "devices.mesh_shape[1]"));
  add(DevicesRow("MeshAxisNamesForAnotherShape",
                 [](v1::DeviceInventory& d) {
                   d.add_mesh_shape(2);
                   d.add_mesh_axis_names("dp");
                   d.add_mesh_axis_names("tp");
                 },
                 "devices.mesh_axis_names"));
  add(DevicesRow("DuplicateMeshAxisNames",
                 [](v1::DeviceInventory& d) {
                   d.add_mesh_shape(1);
                   d.add_mesh_shape(2);
                   d.add_mesh_axis_names("dp");
                   d.add_mesh_axis_names("dp");
                 },
                 "devices.mesh_axis_names[1]"));

  // --- PartitionGraph. ---
  add(PartitionRow("EmptyDeviceInventory",
                   [](v1::PartitionGraphRequest& r) { r.clear_devices(); }, "devices.devices"));
  add(PartitionRow("UnknownPartitionerMode",
                   [](v1::PartitionGraphRequest& r) {
                     r.mutable_config()->set_mode(static_cast<v1::PartitionerConfig::Mode>(42));
                   },
                   "config.mode"));
  add(PartitionRow(
      "UnknownNodeReferences",
      [](v1::PartitionGraphRequest& r) {
        r.set_node_references(static_cast<v1::NodeReferences>(3));
      },
      "node_references"));
  add(PartitionRow("GraphWithoutOperations",
                   [](v1::PartitionGraphRequest& r) {
                     v1::Graph graph;
                     *graph.add_nodes() = BaseGraph().nodes(0);
                     AppendNode(graph, "output", v1::OUTPUT, "x");
                     *r.mutable_graph() = graph;
                   },
                   "graph.nodes"));
  add(PartitionRow("SparseNnOnUnequalDevices",
                   [](v1::PartitionGraphRequest& r) {
                     *r.mutable_devices() = Devices({1500, 2000});
                     r.mutable_config()->set_mode(v1::PartitionerConfig::SPARSE_NN);
                   },
                   "devices.devices[1].available_memory_bytes"));
  add(PartitionRow("NotEnoughMemoryInTotal",
                   [](v1::PartitionGraphRequest& r) { *r.mutable_devices() = Devices({1000, 1000}); },
                   "", StatusCode::FAILED_PRECONDITION));
  add(PartitionRow("NodeLargerThanEveryDevice",
                   [](v1::PartitionGraphRequest& r) {
                     *r.mutable_devices() = Devices({1050, 1050, 1050});
                   },
                   "", StatusCode::FAILED_PRECONDITION));
  add(PartitionRow("CostAwareAboveItsBound",
                   [](v1::PartitionGraphRequest& r) {
                     v1::Graph& g = *r.mutable_graph();
                     g.mutable_nodes()->RemoveLast();
                     std::string previous = "c";
                     for (int i = 0; i < 130; ++i) {
                       const std::string name = absl::StrCat("relu", i);
                       v1::Node* node = AppendNode(g, name, v1::CALL_FUNCTION, previous);
                       node->mutable_size_bytes()->set_total_bytes(100);
                       node->mutable_size_bytes()->set_output_bytes(100);
                       previous = name;
                     }
                     AppendNode(g, "output", v1::OUTPUT, previous);
                     *r.mutable_devices() = Devices({10000, 10000, 10000});
                     r.mutable_config()->set_mode(v1::PartitionerConfig::COST_AWARE);
                   },
                   "", StatusCode::FAILED_PRECONDITION));
  add(AotRow("AotPartitionWithoutDevices",
             [](v1::PartitionerConfig& c) { c.mutable_node_partitions(1)->set_partition(2); },
             "config.node_partitions[1].partition"));
  add(AotRow("AotUnknownNode",
             [](v1::PartitionerConfig& c) { c.mutable_node_partitions(0)->set_node("ghost"); },
             "config.node_partitions[0].node"));
  add(AotRow("AotNodeWithoutPartition",
             [](v1::PartitionerConfig& c) { c.mutable_node_partitions()->RemoveLast(); },
             "config.node_partitions"));
  add(AotRow("AotUnknownDevice",
             [](v1::PartitionerConfig& c) {
               c.mutable_partition_devices(0)->set_logical_device_ids(0, 12);
             },
             "config.partition_devices[0].logical_device_ids[0]"));
  add(AotRow("AotPartitionListedTwice",
             [](v1::PartitionerConfig& c) { c.mutable_partition_devices(1)->set_partition(0); },
             "config.partition_devices[1].partition"));
  add(AotRow("AotNegativePartitionId",
             [](v1::PartitionerConfig& c) { c.mutable_node_partitions(0)->set_partition(-1); },
             "config.node_partitions[0].partition"));
  add(AotRow("AotDeviceListedTwice",
             [](v1::PartitionerConfig& c) {
               // Charging partition 0 to device 0 twice could overflow its load.
               c.mutable_partition_devices(0)->add_logical_device_ids(1);
               c.mutable_partition_devices(0)->add_logical_device_ids(0);
             },
             "config.partition_devices[0].logical_device_ids[2]"));
  add(AotRow("AotCycleBetweenPartitions",
             [](v1::PartitionerConfig& c) {
               // b (partition 1) reads a (0); c (0) reads b (1).
               c.mutable_node_partitions(2)->set_partition(0);
             },
             "config.node_partitions"));
  add(AotRow("AotOutputNodeAssigned",
             [](v1::PartitionerConfig& c) {
               v1::NodePartition* entry = c.add_node_partitions();
               entry->set_node("output");
               entry->set_partition(0);
             },
             "config.node_partitions[3].node"));
  add(AotRow("AotPartitionWithoutNodes",
             [](v1::PartitionerConfig& c) {
               v1::PartitionDevices* entry = c.add_partition_devices();
               entry->set_partition(2);
               entry->add_logical_device_ids(0);
             },
             "config.partition_devices"));
  add(PartitionRow("PartitionMemoryOverflows",
                   [](v1::PartitionGraphRequest& r) {
                     // Each of the three nodes reading `big` from another
                     // partition counts its 2^62 bytes: the partition's
                     // memory would overflow 64 bits.
                     v1::Graph graph = BaseGraph();
                     v1::Node* a = graph.mutable_nodes(2);
                     a->mutable_size_bytes()->set_total_bytes(int64_t{1} << 62);
                     a->mutable_size_bytes()->set_output_bytes(int64_t{1} << 62);
                     graph.mutable_nodes(4)->add_args()->set_node("a");
                     v1::Node* d = graph.mutable_nodes(5);
                     d->set_name("d");
                     d->set_op(v1::CALL_FUNCTION);
                     d->set_target("d");
                     d->clear_args();
                     d->add_args()->set_node("a");
                     d->mutable_size_bytes()->set_total_bytes(1);
                     d->mutable_size_bytes()->set_output_bytes(1);
                     AppendNode(graph, "output", v1::OUTPUT, "d");
                     *r.mutable_graph() = graph;
                     v1::PartitionerConfig& config = *r.mutable_config();
                     config.set_mode(v1::PartitionerConfig::AOT_BASED);
                     for (const auto& [node, partition] : std::vector<std::pair<std::string, int>>{
                              {"a", 0}, {"b", 1}, {"c", 1}, {"d", 1}}) {
                       v1::NodePartition* entry = config.add_node_partitions();
                       entry->set_node(node);
                       entry->set_partition(partition);
                     }
                     for (int p = 0; p < 2; ++p) {
                       config.add_partition_devices()->set_partition(p);
                     }
                   },
                   "graph.nodes[3]"));

  // --- SplitGraph. ---
  add(SplitRow("SplitUnknownNode",
               [](v1::SplitGraphRequest& r) { r.mutable_assignments(0)->set_node("ghost"); },
               "assignments[0].node"));
  add(SplitRow("SplitAssignsAPlaceholder",
               [](v1::SplitGraphRequest& r) { r.mutable_assignments(0)->set_node("x"); },
               "assignments[0].node"));
  add(SplitRow("SplitAssignsANodeTwice",
               [](v1::SplitGraphRequest& r) {
                 v1::NodePartition* entry = r.add_assignments();
                 entry->set_node("b");
                 entry->set_partition(0);
               },
               "assignments[3].node"));
  add(SplitRow("SplitNodeWithoutPartition",
               [](v1::SplitGraphRequest& r) { r.mutable_assignments()->RemoveLast(); },
               "assignments"));
  add(SplitRow("SplitCycleBetweenPartitions",
               [](v1::SplitGraphRequest& r) { r.mutable_assignments(2)->set_partition(0); },
               "assignments"));
  add(SplitRow("SplitKeepOriginalOrderReadsALaterPartition",
               [](v1::SplitGraphRequest& r) {
                 // b reads x and w only; c (partition 0) reads b (1), and
                 // partition 0 comes first.
                 v1::Node* b = r.mutable_graph()->mutable_nodes(3);
                 b->mutable_args(0)->set_node("x");
                 r.mutable_assignments(2)->set_partition(0);
                 r.set_keep_original_order(true);
               },
               "assignments"));
  add({"SplitDanglingReference", PlannerRpc::kSplitGraph, Probe::kSplitGraph,
       [] {
         v1::SplitGraphRequest request;
         *request.mutable_graph() = BaseGraph();
         request.mutable_graph()->mutable_nodes(4)->mutable_args(0)->set_node("gone");
         return request.SerializeAsString();
       },
       StatusCode::INVALID_ARGUMENT, "graph.nodes[4].args[0]"});

  // --- Plan: the same checks, named after Plan's own fields. ---
  add(PlanRow("PlanUnknownPartitionerMode",
              [](v1::PlanRequest& r) {
                r.mutable_partitioner()->set_mode(static_cast<v1::PartitionerConfig::Mode>(-7));
              },
              "partitioner.mode"));
  add(PlanRow(
      "PlanUnknownNodeReferences",
      [](v1::PlanRequest& r) { r.set_node_references(static_cast<v1::NodeReferences>(-2)); },
      "node_references"));
  add(PlanRow("PlanAotUnknownNode",
              [](v1::PlanRequest& r) {
                v1::PartitionerConfig& config = *r.mutable_partitioner();
                config.set_mode(v1::PartitionerConfig::AOT_BASED);
                config.add_partition_devices()->set_partition(0);
                for (const std::string node : {"a", "b", "ghost"}) {
                  v1::NodePartition* entry = config.add_node_partitions();
                  entry->set_node(node);
                }
              },
              "partitioner.node_partitions[2].node"));
  add(PlanRow("PlanAotCycle",
              [](v1::PlanRequest& r) {
                v1::PartitionerConfig& config = *r.mutable_partitioner();
                config.set_mode(v1::PartitionerConfig::AOT_BASED);
                for (int p = 0; p < 2; ++p) config.add_partition_devices()->set_partition(p);
                for (const auto& [node, partition] :
                     std::vector<std::pair<std::string, int>>{{"a", 0}, {"b", 1}, {"c", 0}}) {
                  v1::NodePartition* entry = config.add_node_partitions();
                  entry->set_node(node);
                  entry->set_partition(partition);
                }
              },
              "partitioner.node_partitions"));
  add(PlanRow("PlanNoDevices", [](v1::PlanRequest& r) { r.clear_devices(); }, "devices.devices"));
  add(PlanRow("PlanForwardReference",
              [](v1::PlanRequest& r) {
                r.mutable_graph()->mutable_nodes(3)->mutable_args(1)->set_node("c");
              },
              "graph.nodes[3].args[1]"));
  add(PlanRow("PlanShardCountZero",
              [](v1::PlanRequest& r) { r.mutable_shard()->set_shard_count(0); },
              "shard.shard_count", Probe::kPlanShard));
  add(PlanRow("PlanUnknownShardMode",
              [](v1::PlanRequest& r) {
                r.mutable_shard()->set_mode(static_cast<v1::ShardConfig::Mode>(5));
              },
              "shard.mode", Probe::kPlanShard));

  // --- ShardGraph. ---
  add(ShardRow("ShardCountZero", [](v1::ShardGraphRequest& r) { r.mutable_config()->set_shard_count(0); },
               "config.shard_count"));
  add(ShardRow("ShardCountNegative",
               [](v1::ShardGraphRequest& r) {
                 r.mutable_config()->set_shard_count(std::numeric_limits<int32_t>::min());
               },
               "config.shard_count"));
  add(ExampleRow<v1::ShardGraphRequest>(
      "ShardCountOfTwoBillion", PlannerRpc::kShardGraph, Probe::kShardGraph,
      [](v1::ShardGraphRequest& r) {
        r.mutable_config()->set_shard_count(std::numeric_limits<int32_t>::max());
      },
      "", StatusCode::OK));
  add(ExampleRow<v1::ShardGraphRequest>(
      "ExactShardCountOfTwoBillion", PlannerRpc::kShardGraph, Probe::kShardGraph,
      [](v1::ShardGraphRequest& r) {
        r.mutable_config()->set_shard_count(std::numeric_limits<int32_t>::max());
        r.mutable_config()->set_exact(true);
      },
      "", StatusCode::FAILED_PRECONDITION));
  add(ShardRow("UnknownShardMode",
               [](v1::ShardGraphRequest& r) {
                 r.mutable_config()->set_mode(static_cast<v1::ShardConfig::Mode>(9));
               },
               "config.mode"));
  add(ShardRow("ShardUnknownNodeReferences",
               [](v1::ShardGraphRequest& r) {
                 r.set_node_references(static_cast<v1::NodeReferences>(5));
               },
               "node_references"));
  add(ShardRow("ShardModuleListedTwice",
               [](v1::ShardGraphRequest& r) {
                 *r.mutable_graph()->add_modules() = r.graph().modules(1);
               },
               "graph.modules[6].qualified_name"));
  add(ShardRow("ShardBalancedWithAnotherDeviceCount",
               [](v1::ShardGraphRequest& r) {
                 r.mutable_config()->set_mode(v1::ShardConfig::BALANCED);
                 *r.mutable_devices() = Devices({1 << 30, 1 << 30, 1 << 30});
               },
               "devices.devices"));
  add(ShardRow("ShardCycle",
               [](v1::ShardGraphRequest& r) {
                 r.mutable_graph()->mutable_nodes(1)->mutable_args(0)->set_node("relu1");
               },
               "graph.nodes[1].args[0]"));

  // --- BuildPipelineGraph. ---
  add(PipelineRow("PipelineModuleWithoutWorker",
                  [](v1::BuildPipelineGraphRequest& r) { r.mutable_workers()->RemoveLast(); },
                  "workers"));
  add(PipelineRow("PipelineWorkerOfUnknownModule",
                  [](v1::BuildPipelineGraphRequest& r) {
                    v1::ModuleWorker* worker = r.add_workers();
                    worker->set_target("nowhere");
                    worker->set_worker("worker9");
                  },
                  "workers[3].target"));
  add(PipelineRow("PipelineCallMethodNode",
                  [](v1::BuildPipelineGraphRequest& r) {
                    r.mutable_graph()->mutable_nodes(4)->set_op(v1::CALL_METHOD);
                  },
                  "graph.nodes[4].op"));
  add(PipelineRow("PipelineDanglingReference",
                  [](v1::BuildPipelineGraphRequest& r) {
                    r.mutable_graph()->mutable_nodes(5)->mutable_args(0)->set_node("decoderx");
                  },
                  "graph.nodes[5].args[0]"));

  // --- PlanDataParallel. ---
  add(DataParallelRow("DataParallelMeshDoesNotMultiplyOut",
                      [](v1::PlanDataParallelRequest& r) {
                        r.mutable_devices()->set_mesh_shape(0, 3);
                      },
                      "devices.mesh_shape"));
  add(DataParallelRow("DataParallelRoleOfUnknownNode",
                      [](v1::PlanDataParallelRequest& r) {
                        r.mutable_roles(0)->set_node("z");
                      },
                      "roles[0].node"));
  add(DataParallelRow("DataParallelUnknownRole",
                      [](v1::PlanDataParallelRequest& r) {
                        r.mutable_roles(1)->set_role(static_cast<v1::PlaceholderRole>(17));
                      },
                      "roles[1].role"));
  add(DataParallelRow("DataParallelNegativeBatchDim",
                      [](v1::PlanDataParallelRequest& r) { r.set_input_batch_dim(-1); },
                      "input_batch_dim"));
  add(DataParallelRow("DataParallelUnknownStyle",
                      [](v1::PlanDataParallelRequest& r) {
                        r.set_style(static_cast<v1::DataParallelStyle>(8));
                      },
                      "style"));
  add(DataParallelRow("DataParallelUnknownMeshAxis",
                      [](v1::PlanDataParallelRequest& r) { r.set_data_parallel_axis("tp"); },
                      "data_parallel_axis"));
  add(DataParallelRow("DataParallelNoDevices",
                      [](v1::PlanDataParallelRequest& r) { r.clear_devices(); },
                      "devices.devices"));

  // --- Parallelize. ---
  add(ParallelizeRow("ParallelizeGraphGiven",
                     [](v1::ParallelizeRequest& r) { *r.mutable_graph() = BaseGraph(); }, "graph"));
  add(ParallelizeRow("ParallelizeNoModel",
                     [](v1::ParallelizeRequest& r) { r.clear_transformer(); }, "transformer"));
  add(ParallelizeRow(
      "ParallelizeHeadsNotDividingHidden",
      [](v1::ParallelizeRequest& r) { r.mutable_transformer()->set_attention_heads(48); },
      "transformer.attention_heads"));
  add(ParallelizeRow("ParallelizeNegativeLayers",
                     [](v1::ParallelizeRequest& r) { r.mutable_transformer()->set_layers(-1); },
                     "transformer.layers"));
  add(ParallelizeRow("ParallelizeTooManyLayers",
                     [](v1::ParallelizeRequest& r) { r.mutable_transformer()->set_layers(1 << 30); },
                     "transformer.layers"));
  add(ParallelizeRow("ParallelizeNoHosts",
                     [](v1::ParallelizeRequest& r) { r.mutable_cluster()->clear_host_groups(); },
                     "cluster.host_groups"));
  add(ParallelizeRow(
      "ParallelizeTwoBillionHosts",
      [](v1::ParallelizeRequest& r) {
        FirstHosts(r).set_hosts(std::numeric_limits<int32_t>::max());
      },
      "cluster.host_groups[0].hosts"));
  add(ParallelizeRow(
      "ParallelizeNaNPeak",
      [](v1::ParallelizeRequest& r) {
        FirstHosts(r).mutable_accelerator()->set_peak_flops_per_second(std::nan(""));
      },
      "cluster.host_groups[0].accelerator.peak_flops_per_second"));
  add(ParallelizeRow(
      "ParallelizeBusyDeviceNotInCluster",
      [](v1::ParallelizeRequest& r) { r.mutable_cluster()->add_busy_devices("9:0"); },
      "cluster.busy_devices[1]"));
  add(ParallelizeRow(
      "ParallelizeEveryDeviceBusy",
      [](v1::ParallelizeRequest& r) {
        r.mutable_cluster()->clear_busy_devices();
        for (int host = 0; host < 4; ++host) {
          for (int device = 0; device < 8; ++device) {
            r.mutable_cluster()->add_busy_devices(absl::StrCat(host, ":", device));
          }
        }
      },
      "cluster.busy_devices"));
  add(ParallelizeRow(
      "ParallelizeNoBatch",
      [](v1::ParallelizeRequest& r) { r.mutable_options()->set_global_batch_size(0); },
      "options.global_batch_size"));
  add(ParallelizeRow(
      "ParallelizeUnknownSchedule",
      [](v1::ParallelizeRequest& r) {
        r.mutable_options()->add_schedules(static_cast<v1::PipelineScheduleKind>(77));
      },
      "options.schedules[0]"));
  // 65,536 devices, 4,096 layers, a batch of 2^24 - 2^12 and tensor groups
  // across hosts: far too many configurations, refused within the bounds.
  add(ParallelizeRow(
      "ParallelizeLatticeTooLarge",
      [](v1::ParallelizeRequest& r) {
        r.mutable_cluster()->clear_busy_devices();
        FirstHosts(r).set_hosts(8192);
        r.mutable_transformer()->set_layers(4096);
        r.mutable_transformer()->set_hidden_size(61440);
        r.mutable_transformer()->set_attention_heads(480);
        r.mutable_options()->set_global_batch_size((1 << 24) - (1 << 12));
        r.mutable_options()->set_tensor_parallel_across_hosts(true);
      },
      "", StatusCode::FAILED_PRECONDITION, "too many"));
  add(ParallelizeRow(
      "ParallelizeNothingFits",
      [](v1::ParallelizeRequest& r) { FirstHosts(r).mutable_accelerator()->set_memory_bytes(1e9); },
      "", StatusCode::FAILED_PRECONDITION, "no configuration fits"));

  // --- PlanTraining. ---
  // Pins.
  add(TrainingRow("TrainingPinOnUnknownNode",
                  [](v1::PlanTrainingRequest& r) { AddPin(r, "ghost", v1::FIRST_STAGE); },
                  "config.pins[1].node"));
  add(TrainingRow("TrainingPinOnPlaceholder",
                  [](v1::PlanTrainingRequest& r) { AddPin(r, "x", v1::FIRST_STAGE); },
                  "config.pins[1].node"));
  add(TrainingRow("TrainingPinOnOutput",
                  [](v1::PlanTrainingRequest& r) { AddPin(r, "output", v1::LAST_STAGE); },
                  "config.pins[1].node"));
  add(TrainingRow("TrainingNodePinnedTwice",
                  [](v1::PlanTrainingRequest& r) { AddPin(r, "fc8", v1::FIRST_STAGE); },
                  "config.pins[1].node"));
  add(TrainingRow("TrainingUnknownPin",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->mutable_pins(0)->set_pin(static_cast<v1::StagePin>(9));
                  },
                  "config.pins[0].pin"));
  add(TrainingRow("TrainingUnsetPin",
                  [](v1::PlanTrainingRequest& r) { AddPin(r, "fc1", v1::STAGE_PIN_UNSPECIFIED); },
                  "config.pins[1].pin"));
  // Each pin can be met, not both: fc2 in the last stage, fc3 after it in
  // the first.
  add(TrainingRow("TrainingPinsConflict",
                  [](v1::PlanTrainingRequest& r) {
                    AddPin(r, "fc2", v1::LAST_STAGE);
                    AddPin(r, "fc3", v1::FIRST_STAGE);
                  },
                  "", StatusCode::FAILED_PRECONDITION, "pin"));
  // 15 nodes, each alone: more stages than the 4 devices have.
  add(TrainingRow("TrainingMoreOwnStagesThanStages",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->clear_pins();
                    for (const char* node : {"fc1", "fc2", "fc3", "fc4", "fc5"}) {
                      AddPin(r, node, v1::OWN_STAGE);
                    }
                  },
                  "", StatusCode::FAILED_PRECONDITION, "pin"));
  // Micro-batches and chunks.
  add(TrainingRow("TrainingNoMicroBatches",
                  [](v1::PlanTrainingRequest& r) { r.mutable_config()->set_micro_batches(0); },
                  "config.micro_batches"));
  add(TrainingRow("TrainingNegativeMicroBatches",
                  [](v1::PlanTrainingRequest& r) { r.mutable_config()->set_micro_batches(-8); },
                  "config.micro_batches"));
  add(TrainingRow("TrainingTwoBillionMicroBatches",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->set_micro_batches(std::numeric_limits<int32_t>::max());
                  },
                  "config.micro_batches", StatusCode::INVALID_ARGUMENT, "at most 4096"));
  add(TrainingRow("TrainingMicroBatchesOverTheCap",
                  [](v1::PlanTrainingRequest& r) { r.mutable_config()->set_micro_batches(4097); },
                  "config.micro_batches", StatusCode::INVALID_ARGUMENT, "at most 4096"));
  // 1,024 stages x 4,096 micro-batches: each within its cap, not together.
  add(TrainingRow("TrainingStagesTimesMicroBatchesOverTheCap",
                  [](v1::PlanTrainingRequest& r) {
                    *r.mutable_devices() = Devices(std::vector<int64_t>(1024, int64_t{1} << 30));
                    r.mutable_config()->set_micro_batches(4096);
                  },
                  "config.micro_batches", StatusCode::INVALID_ARGUMENT, "1048576"));
  add(TrainingRow("TrainingMoreStagesThanTheCap",
                  [](v1::PlanTrainingRequest& r) {
                    *r.mutable_devices() = Devices(std::vector<int64_t>(1025, int64_t{1} << 30));
                  },
                  "devices.devices", StatusCode::INVALID_ARGUMENT, "at most 1024"));
  add(TrainingRow("TrainingTwoBillionChunks",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->set_schedule(v1::INTERLEAVED_1F1B);
                    r.mutable_config()->set_chunks_per_device(std::numeric_limits<int32_t>::max());
                  },
                  "config.chunks_per_device", StatusCode::INVALID_ARGUMENT, "at most 1024"));
  add(TrainingRow("TrainingChunksWithoutInterleaving",
                  [](v1::PlanTrainingRequest& r) { r.mutable_config()->set_chunks_per_device(2); },
                  "config.chunks_per_device"));
  add(TrainingRow("TrainingInterleavedMicroBatchesNotAMultipleOfTheDevices",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->set_schedule(v1::INTERLEAVED_1F1B);
                    r.mutable_config()->set_chunks_per_device(2);
                    r.mutable_config()->set_micro_batches(6);
                  },
                  "config.micro_batches"));
  // Negative, non-finite and unknown fields.
  add(TrainingRow("TrainingNegativeChunks",
                  [](v1::PlanTrainingRequest& r) { r.mutable_config()->set_chunks_per_device(-1); },
                  "config.chunks_per_device"));
  add(TrainingRow("TrainingNegativeMicroBatchSize",
                  [](v1::PlanTrainingRequest& r) { r.mutable_config()->set_micro_batch_size(-32); },
                  "config.micro_batch_size"));
  add(TrainingRow("TrainingNegativeDataParallel",
                  [](v1::PlanTrainingRequest& r) { r.mutable_config()->set_data_parallel(-2); },
                  "config.data_parallel"));
  add(TrainingRow("TrainingNegativeSearchNodes",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->set_max_search_nodes(-1);
                  },
                  "config.max_search_nodes"));
  add(TrainingRow("TrainingNegativeWeightBytes",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->set_weight_bytes_per_parameter(-2);
                  },
                  "config.weight_bytes_per_parameter"));
  add(TrainingRow("TrainingNaNOptimizerBytes",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->set_optimizer_bytes_per_parameter(kNaN);
                  },
                  "config.optimizer_bytes_per_parameter"));
  add(TrainingRow("TrainingInfiniteGradientBytes",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->set_gradient_bytes_per_parameter(kInf);
                  },
                  "config.gradient_bytes_per_parameter"));
  add(TrainingRow("TrainingUnknownSchedule",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->set_schedule(static_cast<v1::PipelineScheduleKind>(12));
                  },
                  "config.schedule"));
  add(TrainingRow("TrainingUnknownZeroStage",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->set_zero(static_cast<v1::ZeroStageKind>(4));
                  },
                  "config.zero"));
  add(TrainingRow("TrainingUnknownRecompute",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->set_recompute(static_cast<v1::RecomputePolicy>(-1));
                  },
                  "config.recompute"));
  // NodeTraining.
  add(TrainingRow("TrainingNegativeBackwardSeconds",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_graph()->mutable_nodes(1)->mutable_training()
                        ->set_backward_input_seconds(-1);
                  },
                  "graph.nodes[1].training.backward_input_seconds"));
  add(TrainingRow("TrainingNaNBackwardFlops",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_graph()->mutable_nodes(3)->mutable_training()
                        ->set_backward_weight_flops(kNaN);
                  },
                  "graph.nodes[3].training.backward_weight_flops"));
  add(TrainingRow("TrainingNegativeSavedBytes",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_graph()->mutable_nodes(2)->mutable_training()
                        ->set_saved_activation_bytes(-1);
                  },
                  "graph.nodes[2].training.saved_activation_bytes"));
  // Latencies forward, FLOPs backward, and no one throughput to convert by.
  add(TrainingRow("TrainingBackwardFlopsWithoutASharedThroughput",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_graph()->mutable_nodes(1)->mutable_training()
                        ->set_backward_input_flops(1e9);
                    r.mutable_devices()->mutable_devices(1)->set_compute_flops_per_second(5e13);
                  },
                  "graph.nodes[1].training.backward_input_flops"));
  // Devices.
  add(TrainingRow("TrainingNoDevices",
                  [](v1::PlanTrainingRequest& r) { r.clear_devices(); }, "devices.devices"));
  add(TrainingRow("TrainingMoreDevicesThanNodes",
                  [](v1::PlanTrainingRequest& r) {
                    *r.mutable_devices() = Devices(std::vector<int64_t>(16, int64_t{1} << 30));
                  },
                  "devices.devices"));
  add(TrainingRow("TrainingMoreChunksThanNodes",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_config()->set_schedule(v1::INTERLEAVED_1F1B);
                    r.mutable_config()->set_chunks_per_device(4);
                  },
                  "devices.devices"));
  add(TrainingRow("TrainingDeviceWithoutMemory",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_devices()->mutable_devices(2)->set_available_memory_bytes(0);
                  },
                  "devices.devices[2].available_memory_bytes"));
  // One byte: no stage fits on gpu2, and the answer says so, by its name
  // and its place in the pipeline.
  add(TrainingRow("TrainingDeviceTooSmallForAnyStage",
                  [](v1::PlanTrainingRequest& r) {
                    r.mutable_devices()->mutable_devices(2)->set_available_memory_bytes(1);
                  },
                  "", StatusCode::FAILED_PRECONDITION, "device 'gpu2' (2) needs"));
  // Every device 64 MiB: fc1..fc8's model states (4M parameters x 16
  // bytes each) fit nowhere, whatever the cuts.
  add(TrainingRow("TrainingModelStatesFitNowhere",
                  [](v1::PlanTrainingRequest& r) {
                    for (v1::Device& device : *r.mutable_devices()->mutable_devices()) {
                      device.set_available_memory_bytes(64 << 20);
                    }
                  },
                  "", StatusCode::FAILED_PRECONDITION, "more than its 67108864"));

  // --- Bytes that are not a request. ---
  // Bytes that do not parse name the field where they go wrong
  // (planner/wire/parse_failure.h): here the graph, cut short.
  add({"TruncatedRequest", PlannerRpc::kPartitionGraph, Probe::kPartitionGraph,
       [] {
         const std::string bytes = ExampleRequest(PlannerRpc::kPartitionGraph);
         return bytes.substr(0, bytes.size() / 2 + 3);
       },
       StatusCode::INVALID_ARGUMENT, "graph"});
  add({"RandomBytes", PlannerRpc::kSplitGraph, Probe::kSplitGraph,
       [] {
         std::mt19937 random(20240611);
         std::string bytes(4096, '\0');
         for (char& c : bytes) c = static_cast<char>(random() & 0xff);
         // Field 1 (graph), length-delimited, longer than the rest.
         return std::string("\x0a\xff\xff\x03", 4) + bytes;
       },
       StatusCode::INVALID_ARGUMENT, "graph"});
  add({"WrongWireType", PlannerRpc::kValidate, Probe::kValidate,
       // Field 1 (graph) as a varint: protobuf keeps it as an unknown field,
       // so the request has no graph.
       [] { return std::string("\x08\x01", 2); }, StatusCode::INVALID_ARGUMENT, "graph.nodes"});
  // The server imports the graph from its bytes, a node at a time, so bytes
  // that do not parse are named by the field they are in.
  add({"InvalidUtf8InTheGraphName", PlannerRpc::kValidate, Probe::kValidate,
       [] {
         v1::ValidateRequest request;
         *request.mutable_graph() = BaseGraph();
         std::string bytes = request.SerializeAsString();
         const size_t at = bytes.find("hostile");
         bytes[at] = '\xc3';  // A UTF-8 lead byte followed by ASCII.
         return bytes;
       },
       StatusCode::INVALID_ARGUMENT, "graph"});
  for (const auto& [rpc, probe] :
       {std::pair{PlannerRpc::kValidate, Probe::kValidate},
        std::pair{PlannerRpc::kPlanDataParallel, Probe::kPlanDataParallel}}) {
    add({absl::StrCat("InvalidUtf8InANodeTarget", RpcName(rpc)), rpc, probe,
         [] {
           static_assert(int{v1::ValidateRequest::kGraphFieldNumber} ==
                         int{v1::PlanDataParallelRequest::kGraphFieldNumber});
           v1::ValidateRequest request;
           *request.mutable_graph() = BaseGraph();
           request.mutable_graph()->mutable_nodes(2)->set_target("corrupted_target");
           std::string bytes = request.SerializeAsString();
           bytes[bytes.find("corrupted_target")] = '\xc3';
           return bytes;
         },
         StatusCode::INVALID_ARGUMENT, "graph.nodes[2]"});
  }
  add({"DeeplyNestedUnknownGroups", PlannerRpc::kValidate, Probe::kValidate,
       [] {
         // 100k nested start-group tags of an unknown field: the parser
         // must give up, not recurse 100k deep.
         std::string bytes;
         for (int i = 0; i < 100000; ++i) bytes.append("\xfb\x07", 2);  // field 127, group
         return bytes;
       },
       StatusCode::INVALID_ARGUMENT, "<unknown field 127>"});
  add({"OversizedMessage", PlannerRpc::kValidate, Probe::kValidate,
       [] {
         v1::ValidateRequest request;
         *request.mutable_graph() = BaseGraph();
         request.mutable_graph()->set_name(std::string(kSmallMaxReceiveBytes, 'g'));
         return request.SerializeAsString();
       },
       StatusCode::RESOURCE_EXHAUSTED, "", "", Server::kSmall});

  // --- Valid but adversarial: answered, and fast. ---
  add({"PlaceholdersNamedLikeSubmodules", PlannerRpc::kSplitGraph, Probe::kSplitGraph,
       [] {
         // split_module names its calls submod_<partition>, skipping taken
         // names: 20k placeholders take submod_0..submod_19999 from 20k
         // partitions that each need one.
         constexpr int kCount = 20000;
         v1::SplitGraphRequest request;
         v1::Graph& g = *request.mutable_graph();
         for (int i = 0; i < kCount; ++i) AppendNode(g, absl::StrCat("submod_", i), v1::PLACEHOLDER, "");
         for (int i = 0; i < kCount; ++i) {
           const std::string op = absl::StrCat("op_", i);
           AppendNode(g, op, v1::CALL_FUNCTION, absl::StrCat("submod_", i));
           v1::NodePartition* entry = request.add_assignments();
           entry->set_node(op);
           entry->set_partition(i);
         }
         AppendNode(g, "output", v1::OUTPUT, absl::StrCat("op_", kCount - 1));
         return request.SerializeAsString();
       },
       StatusCode::OK, ""});
  add(PartitionRow("DeepModuleTargetsUnderSparseNn",
                   [](v1::PartitionGraphRequest& r) {
                     // Targets of 200k atoms: whether a node is an
                     // embedding must not cost a hash per prefix.
                     std::string target = "m";
                     for (int i = 0; i < 200000; ++i) target += ".m";
                     for (int n = 2; n <= 4; ++n) r.mutable_graph()->mutable_nodes(n)->set_target(target);
                     r.mutable_graph()->mutable_nodes(3)->set_op(v1::CALL_MODULE);
                     r.mutable_graph()->mutable_nodes(4)->set_op(v1::CALL_MODULE);
                     v1::Module* module = r.mutable_graph()->add_modules();
                     module->set_qualified_name("emb.table");
                     module->set_module_type("torch.nn.Embedding");
                     *r.mutable_devices() = Devices({1500, 1500});
                     r.mutable_config()->set_mode(v1::PartitionerConfig::SPARSE_NN);
                   },
                   "", StatusCode::OK));

  // --- Limits: the message names the flag. ---
  add(LimitRow(GraphRow("TooManyNodes",
                        [](v1::Graph& g) {
                          g.mutable_nodes()->RemoveLast();
                          for (int i = 0; i < kSmallMaxNodes; ++i) {
                            AppendNode(g, absl::StrCat("r", i), v1::CALL_FUNCTION, "c");
                          }
                          AppendNode(g, "output", v1::OUTPUT, "c");
                        },
                        "graph.nodes"),
               "--max_nodes"));
  add(LimitRow(GraphRow("TooManyValuesInOneNode",
                        [](v1::Graph& g) {
                          v1::Node* b = g.mutable_nodes(3);
                          for (int i = 0; i < kSmallMaxValuesPerNode; ++i) b->add_args()->set_int_(i);
                        },
                        "graph.nodes[3]"),
               "--max_values_per_node"));
  add(LimitRow(GraphRow("TooManyValuesInTheGraph",
                        [](v1::Graph& g) {
                          for (int n = 2; n <= 4; ++n) {
                            for (int i = 0; i < kSmallMaxValuesPerNode - 3; ++i) {
                              g.mutable_nodes(n)->add_args()->set_int_(i);
                            }
                          }
                        },
                        "graph.nodes"),
               "--max_values"));
  add(LimitRow(DevicesRow("TooManyDevices",
                          [](v1::DeviceInventory& d) {
                            d = Devices(std::vector<int64_t>(kSmallMaxDevices + 1, 1000));
                          },
                          "devices.devices"),
               "--max_devices"));
  add(LimitRow(PartitionRow("TooManyDevicesToPartition",
                            [](v1::PartitionGraphRequest& r) {
                              *r.mutable_devices() =
                                  Devices(std::vector<int64_t>(kSmallMaxDevices + 1, 1000));
                            },
                            "devices.devices"),
               "--max_devices"));
  add(LimitRow(DataParallelRow("TooManyDevicesForDataParallel",
                               [](v1::PlanDataParallelRequest& r) {
                                 *r.mutable_devices() =
                                     Devices(std::vector<int64_t>(kSmallMaxDevices + 1, 1 << 30));
                               },
                               "devices.devices"),
               "--max_devices"));
  add(LimitRow(ShardRow("TooManyDevicesForBalancedStages",
                        [](v1::ShardGraphRequest& r) {
                          r.mutable_config()->set_mode(v1::ShardConfig::BALANCED);
                          r.mutable_config()->set_shard_count(kSmallMaxDevices + 1);
                          *r.mutable_devices() =
                              Devices(std::vector<int64_t>(kSmallMaxDevices + 1, 1 << 30));
                        },
                        "devices.devices"),
               "--max_devices"));
  add(LimitRow(ShardRow("TooManyNodesToShard",
                        [](v1::ShardGraphRequest& r) {
                          v1::Graph& g = *r.mutable_graph();
                          g.mutable_nodes()->RemoveLast();
                          for (int i = 0; i < kSmallMaxNodes; ++i) {
                            AppendNode(g, absl::StrCat("r", i), v1::CALL_FUNCTION, "fc5");
                          }
                          AppendNode(g, "output", v1::OUTPUT, "fc5");
                        },
                        "graph.nodes"),
               "--max_nodes"));
  std::set<PlannerRpc> covered;
  for (const HostileCase& row : cases) covered.insert(row.rpc);
  for (const PlannerRpcMethod& method : kPlannerRpcs) {
    if (covered.count(method.rpc) > 0) continue;
    for (HostileCase& row : GenericGraphRows(method.rpc)) add(std::move(row));
  }
  return cases;
}

// ---------------------------------------------------------------------------

class HostileInputTest : public ::testing::TestWithParam<HostileCase> {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options = TestServerOptions();
    options.queue_depth = 16;
    default_server_ = StartTestServer(nullptr, options).release();

    options.max_receive_message_bytes = kSmallMaxReceiveBytes;
    options.limits.max_nodes = kSmallMaxNodes;
    options.limits.max_values_per_node = kSmallMaxValuesPerNode;
    options.limits.max_values = kSmallMaxValues;
    options.limits.max_devices = kSmallMaxDevices;
    small_server_ = StartTestServer(nullptr, options).release();
  }

  static void TearDownTestSuite() {
    delete default_server_;
    delete small_server_;
    default_server_ = small_server_ = nullptr;
  }

  static PlannerServer* server(Server which) {
    return which == Server::kSmall ? small_server_ : default_server_;
  }

  // Whether `probe`'s valid request is answered UNIMPLEMENTED (cached).
  static bool NotImplementedYet(Probe probe) {
    if (probe == Probe::kNone) return false;  // in the RPC table, so served
    static auto* answers = new std::map<Probe, bool>();
    auto it = answers->find(probe);
    if (it == answers->end()) {
      const RawReply reply =
          CallRaw(LoopbackChannel(default_server_->port()), RpcOf(probe), ProbeRequest(probe));
      const bool unimplemented = reply.status.error_code() == StatusCode::UNIMPLEMENTED;
      EXPECT_TRUE(reply.status.ok() || unimplemented)
          << "the valid request of this row's RPC fails: " << Describe(reply.status);
      it = answers->emplace(probe, unimplemented).first;
    }
    return it->second;
  }

  static PlannerServer* default_server_;
  static PlannerServer* small_server_;
};

PlannerServer* HostileInputTest::default_server_ = nullptr;
PlannerServer* HostileInputTest::small_server_ = nullptr;

TEST_P(HostileInputTest, GetsItsCodeAndFieldPath) {
  const HostileCase& row = GetParam();
  ASSERT_NE(default_server_, nullptr);
  ASSERT_NE(small_server_, nullptr);
  if (NotImplementedYet(row.probe)) {
    GTEST_SKIP() << "not implemented yet: " << RpcName(RpcOf(row.probe))
                 << " answers UNIMPLEMENTED to a valid request; this row demands "
                 << row.code << " " << row.field << " once it lands";
  }
  PlannerServer* target = server(row.server);
  const std::shared_ptr<grpc::Channel> channel = LoopbackChannel(target->port());

  // A row the server does not answer within the deadline (a hang, or work
  // without bound) fails with DEADLINE_EXCEEDED. How fast rows are refused
  // is not timed here: a loaded machine, or a sanitizer build, is many
  // times slower.
  const RawReply reply = CallRaw(channel, row.rpc, row.request(), absl::Seconds(60));

  EXPECT_EQ(reply.status.error_code(), row.code) << Describe(reply.status);
  const std::vector<std::string> fields = FieldViolations(reply.status);
  if (row.field.empty()) {
    EXPECT_TRUE(fields.empty()) << absl::StrJoin(fields, ", ");
  } else {
    EXPECT_EQ(fields, std::vector<std::string>{row.field}) << Describe(reply.status);
    // The message leads with the same path.
    EXPECT_TRUE(absl::StartsWith(reply.status.error_message(), row.field + ": "))
        << Describe(reply.status);
  }
  if (!reply.status.ok()) {
    EXPECT_FALSE(reply.status.error_message().empty());
  }
  if (!row.message_contains.empty()) {
    EXPECT_TRUE(absl::StrContains(reply.status.error_message(), row.message_contains))
        << Describe(reply.status);
  }
  // The server still serves.
  const RawReply after = CallRaw(channel, PlannerRpc::kValidate, ExampleRequest(PlannerRpc::kValidate));
  EXPECT_TRUE(after.status.ok()) << Describe(after.status);
}

// The same bytes sent in parts (PartitionPlannerInParts) get the same
// answer: code, message and field paths. Only a request over the size limit
// is told apart: gRPC refuses one message, the server the parts.
TEST_P(HostileInputTest, InPartsGetsTheSameAnswer) {
  const HostileCase& row = GetParam();
  ASSERT_NE(default_server_, nullptr);
  ASSERT_NE(small_server_, nullptr);
  if (NotImplementedYet(row.probe)) GTEST_SKIP() << "not implemented yet";
  const std::shared_ptr<grpc::Channel> channel = LoopbackChannel(server(row.server)->port());
  const std::string request = row.request();
  const RawReply unary = CallRaw(channel, row.rpc, request, absl::Seconds(60));
  const RawReply in_parts = CallRawInParts(channel, row.rpc, request, 64 << 10);
  EXPECT_EQ(in_parts.status.error_code(), unary.status.error_code())
      << Describe(in_parts.status) << " in parts; " << Describe(unary.status) << " in one";
  if (absl::StartsWith(unary.status.error_message(), "Received message larger than max")) {
    EXPECT_TRUE(absl::StrContains(in_parts.status.error_message(), "--max_receive_message_bytes"))
        << Describe(in_parts.status);
    return;
  }
  EXPECT_EQ(in_parts.status.error_message(), unary.status.error_message());
  EXPECT_EQ(FieldViolations(in_parts.status), FieldViolations(unary.status));
}

INSTANTIATE_TEST_SUITE_P(Rows, HostileInputTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<HostileCase>& info) {
                           return info.param.name;
                         });

TEST(HostileInputTableTest, HasAtLeastFortyDistinctRowsCoveringEveryRpc) {
  const std::vector<HostileCase> cases = Cases();
  EXPECT_GE(cases.size(), 40u);
  std::set<std::string> names;
  std::set<PlannerRpc> rpcs;
  std::map<PlannerRpc, int> rows_of;
  for (const HostileCase& row : cases) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    rpcs.insert(row.rpc);
    ++rows_of[row.rpc];
  }
  EXPECT_EQ(rpcs.size(), kPlannerRpcCount);
  std::printf("%zu rows:", cases.size());
  for (const auto& [rpc, count] : rows_of) std::printf(" %s %d", std::string(RpcName(rpc)).c_str(), count);
  std::printf("\n");
}

}  // namespace
}  // namespace partplan

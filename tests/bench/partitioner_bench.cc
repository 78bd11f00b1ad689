// Benchmarks of every planner behind PartitionGraph, SplitGraph, Validate and
// PlanDataParallel on synthetic graphs of 10^3 to 10^6 nodes, of four shapes
// (synthetic_graphs.h: chain, residual, transformer, fan_out_in), plus a
// recommendation model for sparse_nn and cost_aware at up to 128 call_*
// nodes (its exact search is bounded there). ShardGraph, Plan with a shard
// planner and BuildPipelineGraph are in tests/bench/pipeline:pipeline_bench.
//
//   bazel run -c opt //tests/bench:partitioner_bench -- --benchmark_filter=residual
//
// Names are BM_<planner>/<shape>/<nodes> (BM_PartitionGraphSaturateHost:
// BM_<planner>/<graph>/<devices>). Each case reports, besides time
// (and items_per_second, nodes per second: its inverse is the time per node):
//   peak_bytes      the most heap in use at once during a call, above what
//                   was in use before it (tests/bench/peak_heap.h): the
//                   import, the planner's own memory and its response, not
//                   the request's bytes;
//   request_bytes   the request serialised.
//
// Each planner runs as the server runs it: the request's fields but its
// graph parsed onto an arena, the graph imported straight from its
// serialised bytes (planner/graph/serialized_request.h), and the response on a
// fresh arena of the server's options per call (server/call_arena.h), or for
// PartitionGraph and SplitGraph serialised as the server writes it. The
// time of a call is the import (which parses each node's bytes) and the
// planner; the bytes stay serialised, as the server receives them.
//
// The reference (torch.fx 1.13, size_based) is quadratic or worse in the
// graph's size (shared/design/reference-planners.md);
// BM_PartitionGraphSizeBased/residual/16002 is there to compare with it on
// the same graph (tests/bench/fx_size_based.py; tools/perf_report.sh runs
// both).
#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "google/protobuf/arena.h"
#include "planner/api/entry_points.h"
#include "planner/graph/serialized_request.h"
#include "server/call_arena.h"
#include "tests/bench/peak_heap.h"
#include "tests/bench/synthetic_graphs.h"

namespace partplan {
namespace {

constexpr GraphShape kShapes[] = {GraphShape::kChain, GraphShape::kResidual,
                                  GraphShape::kTransformer, GraphShape::kFanOutFanIn};
constexpr int64_t kSizes[] = {1000, 10000, 100000, 1000000};

// What a call fills: a message on the call's arena, as the server makes it,
// or, for PartitionGraph and SplitGraph, the serialised response the server
// sends (PartitionGraphSerialized, SplitGraphSerialized), which it writes
// without a message.
template <typename Response>
Response* NewResponse(google::protobuf::Arena& arena) {
  if constexpr (std::is_same_v<Response, absl::Cord>) {
    return google::protobuf::Arena::Create<absl::Cord>(&arena);
  } else {
    return google::protobuf::Arena::CreateMessage<Response>(&arena);
  }
}

// Runs `entry_point` on `built` once per iteration, as the server does; the
// first call's response, out of the timing, goes to `inspect` when given.
template <typename Request, typename Response>
void RunAsServer(benchmark::State& state,
                 absl::Status (*entry_point)(const Request&, const GraphSource&, const InputLimits&,
                                             const CancellationToken&, Response*),
                 const Request& built, const std::function<void(const Response&)>& inspect = {}) {
  const std::string bytes = built.SerializeAsString();
  google::protobuf::Arena request_arena(CallArenaOptions());
  auto* request = google::protobuf::Arena::CreateMessage<Request>(&request_arena);
  const std::optional<ChunkedBytes> graph = ParseAllButGraph(bytes, request);
  if (!graph.has_value()) {
    state.SkipWithError("the request does not parse");
    return;
  }
  const CancellationToken token;
  int64_t peak_bytes = 0;
  // One call, its peak heap recorded; false after an error.
  const auto call = [&](bool first) {
    PeakHeap::Reset();
    {
      google::protobuf::Arena arena(CallArenaOptions());
      Response* response = NewResponse<Response>(arena);
      const absl::Status status =
          entry_point(*request, GraphSource::Serialized(*graph), InputLimits(), token, response);
      if (!status.ok()) {
        state.SkipWithError(std::string(status.message()).c_str());
        return false;
      }
      // Before the inspection, whose own allocations are not the call's.
      peak_bytes = std::max(peak_bytes, PeakHeap::PeakAboveReset());
      if (first && inspect) inspect(*response);
    }
    return true;
  };
  // A first call out of the timing, as a running server has made many: the
  // memory it frees is then reused instead of faulted in afresh (a cold
  // large call is dominated by faulting its memory in).
  if (!call(/*first=*/true)) return;
  for (auto _ : state) {
    if (!call(/*first=*/false)) return;
  }
  state.SetItemsProcessed(state.iterations() * built.graph().nodes_size());
  state.counters["peak_bytes"] = static_cast<double>(peak_bytes);
  state.counters["request_bytes"] = static_cast<double>(bytes.size());
}

void RunPartitionGraph(benchmark::State& state, const v1::PartitionGraphRequest& request) {
  RunAsServer<v1::PartitionGraphRequest, absl::Cord>(
      state, &PartitionGraphSerialized, request, [&state](const absl::Cord& bytes) {
        v1::PartitionGraphResponse response;
        if (response.ParseFromString(std::string(bytes))) {
          state.counters["partitions"] = response.plan().partitions_size();
        }
      });
}

// A shape's graph split over 8 devices, in `mode`.
v1::PartitionGraphRequest ShapeRequest(GraphShape shape, int64_t nodes,
                                       v1::PartitionerConfig::Mode mode) {
  v1::PartitionGraphRequest request = PartitionRequest(SyntheticGraph(shape, nodes), 8);
  request.mutable_config()->set_mode(mode);
  return request;
}

// Parse of the serialised request alone (heap, as ParseFromString does by
// default): the floor for a request/response.
void BM_ParseRequest(benchmark::State& state, GraphShape shape, int64_t nodes) {
  const std::string bytes =
      ShapeRequest(shape, nodes, v1::PartitionerConfig::SIZE_BASED).SerializeAsString();
  for (auto _ : state) {
    v1::PartitionGraphRequest request;
    benchmark::DoNotOptimize(request.ParseFromString(bytes));
  }
  state.SetItemsProcessed(state.iterations() * nodes);
  state.counters["request_bytes"] = static_cast<double>(bytes.size());
}

// Validation alone (the Validate RPC).
void BM_Validate(benchmark::State& state, GraphShape shape, int64_t nodes) {
  v1::ValidateRequest request;
  *request.mutable_graph() = SyntheticGraph(shape, nodes);
  RunAsServer<v1::ValidateRequest, v1::ValidateResponse>(state, &Validate, request);
}

// Import + validation + the partitioner + device mapping + DAG + latency +
// the serialised response, as the server makes it (PartitionGraphSerialized).
void BM_PartitionGraph(benchmark::State& state, v1::PartitionerConfig::Mode mode,
                       GraphShape shape, int64_t nodes) {
  RunPartitionGraph(state, ShapeRequest(shape, nodes, mode));
}

// The size_based plan's assignment, for the modes that take one.
std::vector<std::pair<std::string, int32_t>> SizeBasedAssignment(
    const v1::PartitionGraphRequest& request) {
  CancellationToken token;
  const v1::PartitionGraphResponse response = *PartitionGraph(request, InputLimits(), token);
  std::vector<std::pair<std::string, int32_t>> assignment;
  for (const v1::NodePartition& entry : response.plan().assignments()) {
    assignment.emplace_back(entry.node(), entry.partition());
  }
  return assignment;
}

// aot_based with the size_based plan's assignment as its node_partitions,
// in graph order as a plan lists them, or shuffled (the lookups by name
// cannot then follow the graph).
void BM_PartitionGraphAotBased(benchmark::State& state, GraphShape shape, int64_t nodes,
                               bool shuffled) {
  v1::PartitionGraphRequest request = ShapeRequest(shape, nodes, v1::PartitionerConfig::SIZE_BASED);
  auto assignment = SizeBasedAssignment(request);
  if (shuffled) std::shuffle(assignment.begin(), assignment.end(), std::mt19937(1));
  v1::PartitionerConfig* config = request.mutable_config();
  config->set_mode(v1::PartitionerConfig::AOT_BASED);
  int32_t partitions = 0;
  for (const auto& [node, partition] : assignment) {
    v1::NodePartition* entry = config->add_node_partitions();
    entry->set_node(node);
    entry->set_partition(partition);
    partitions = std::max(partitions, partition + 1);
  }
  for (int32_t p = 0; p < partitions; ++p) {
    v1::PartitionDevices* entry = config->add_partition_devices();
    entry->set_partition(p);
    entry->add_logical_device_ids(p % 8);
  }
  RunPartitionGraph(state, request);
}

void BM_SplitGraph(benchmark::State& state, GraphShape shape, int64_t nodes) {
  const v1::PartitionGraphRequest partition_request =
      ShapeRequest(shape, nodes, v1::PartitionerConfig::SIZE_BASED);
  v1::SplitGraphRequest request;
  *request.mutable_graph() = partition_request.graph();
  for (const auto& [node, partition] : SizeBasedAssignment(partition_request)) {
    v1::NodePartition* entry = request.add_assignments();
    entry->set_node(node);
    entry->set_partition(partition);
  }
  // As the server answers it: the response written as bytes.
  RunAsServer<v1::SplitGraphRequest, absl::Cord>(state, &SplitGraphSerialized, request);
}

// sparse_nn on a recommendation model (16 embedding tables, then a dense
// residual stack): it puts every dense partition beside each embedding
// partition, so devices hold the dense part and one table, which is 3x
// larger.
void BM_PartitionGraphSparseNn(benchmark::State& state, int64_t nodes) {
  int64_t dense_bytes = 0;
  const v1::Graph dense = ResidualStack(nodes);
  for (const v1::Node& node : dense.nodes()) {
    dense_bytes += node.size_bytes().total_bytes();
  }
  const int64_t table_bytes = 3 * dense_bytes;
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = RecommendationModel(nodes, 16, table_bytes);
  *request.mutable_devices() = EqualDevices(request.graph(), 16, 1);
  for (v1::Device& device : *request.mutable_devices()->mutable_devices()) {
    device.set_available_memory_bytes(dense_bytes * 11 / 10 + table_bytes * 6 / 5);
  }
  request.mutable_config()->set_mode(v1::PartitionerConfig::SPARSE_NN);
  RunPartitionGraph(state, request);
}

// sparse_nn on `graph`, whose tables are too large for two to share a
// device: a table's partition each, one device per table, and the dense
// partitions merged into one.
void RunSparseNnOneTablePerDevice(benchmark::State& state, v1::Graph graph, int64_t dense_bytes,
                                  int64_t table_bytes) {
  int tables = 0;
  for (const v1::Node& node : graph.nodes()) {
    tables += node.module_type() == "torch.nn.Embedding" ? 1 : 0;
  }
  v1::PartitionGraphRequest request;
  *request.mutable_devices() = EqualDevices(graph, tables, 1);
  for (v1::Device& device : *request.mutable_devices()->mutable_devices()) {
    device.set_available_memory_bytes(dense_bytes + table_bytes * 11 / 10);
  }
  *request.mutable_graph() = std::move(graph);
  request.mutable_config()->set_mode(v1::PartitionerConfig::SPARSE_NN);
  RunPartitionGraph(state, request);
}

// InterleavedRecommendationModel, a table per 8 dense layers (N / 18 tables
// and devices). Each dense merge shortens the chain of dense partitions, so
// it moves the DAG level of every partition after it.
void BM_PartitionGraphSparseNnInterleaved(benchmark::State& state, int64_t nodes) {
  constexpr int kLayersPerTable = 8;
  const int64_t dense_bytes = TotalBytes(InterleavedRecommendationModel(nodes, kLayersPerTable, 0));
  RunSparseNnOneTablePerDevice(
      state, InterleavedRecommendationModel(nodes, kLayersPerTable, 2 * dense_bytes), dense_bytes,
      2 * dense_bytes);
}

// HubRecommendationModel (N / 2 tables and devices): every dense merge adds
// a parent to the union.
void BM_PartitionGraphSparseNnHub(benchmark::State& state, int64_t nodes) {
  const int64_t dense_bytes = TotalBytes(HubRecommendationModel(nodes, 0));
  RunSparseNnOneTablePerDevice(state, HubRecommendationModel(nodes, 2 * dense_bytes), dense_bytes,
                               2 * dense_bytes);
}

// The batch-dimension analysis and data-parallel plan of an aten MLP.
void BM_PlanDataParallel(benchmark::State& state, int64_t nodes) {
  RunAsServer<v1::PlanDataParallelRequest, v1::PlanDataParallelResponse>(
      state, &PlanDataParallel, DataParallelMlpRequest(nodes));
}

// KlManyDevicesRequest (synthetic_graphs.h): a trial costs partitions x
// devices on top of nodes + edges.
void BM_PartitionGraphKlBasedManyDevices(benchmark::State& state, int64_t nodes) {
  RunPartitionGraph(state, KlManyDevicesRequest(nodes));
}

// saturate_host on a 1,000-node chain that fits one device, with `devices`
// equal devices: one used device, so one replica a round and devices - 1
// rounds, the case where rebuilding the idle devices each round would be
// quadratic.
void BM_PartitionGraphSaturateHost(benchmark::State& state, int devices) {
  v1::PartitionGraphRequest request =
      PartitionRequest(SyntheticGraph(GraphShape::kChain, 1000), 1);
  const int64_t memory = request.devices().devices(0).available_memory_bytes();
  request.mutable_devices()->clear_devices();
  for (int d = 0; d < devices; ++d) {
    v1::Device* device = request.mutable_devices()->add_devices();
    device->set_name(absl::StrCat("gpu", d));
    device->set_logical_id(d);
    device->set_available_memory_bytes(memory);
  }
  request.mutable_config()->set_saturate_host(true);
  RunPartitionGraph(state, request);
}

// Registers `run(shape, nodes)` as BM_<name>/<shape>/<nodes> for every
// shape and size.
template <typename Run>
void RegisterShapes(const std::string& name, Run run) {
  for (GraphShape shape : kShapes) {
    for (int64_t nodes : kSizes) {
      benchmark::RegisterBenchmark(
          absl::StrCat("BM_", name, "/", GraphShapeName(shape), "/", nodes).c_str(),
          [run, shape, nodes](benchmark::State& state) { run(state, shape, nodes); })
          ->Unit(benchmark::kMillisecond);
    }
  }
}

void RegisterAll() {
  using Mode = v1::PartitionerConfig;
  RegisterShapes("ParseRequest", BM_ParseRequest);
  RegisterShapes("Validate", BM_Validate);
  for (const auto& [name, mode] : {std::make_pair("PartitionGraphSizeBased", Mode::SIZE_BASED),
                                   std::make_pair("PartitionGraphKlBased", Mode::KL_BASED)}) {
    const Mode::Mode m = mode;
    RegisterShapes(name, [m](benchmark::State& state, GraphShape shape, int64_t nodes) {
      BM_PartitionGraph(state, m, shape, nodes);
    });
  }
  RegisterShapes("PartitionGraphAotBased",
                 [](benchmark::State& state, GraphShape shape, int64_t nodes) {
                   BM_PartitionGraphAotBased(state, shape, nodes, /*shuffled=*/false);
                 });
  // One shape is enough to show what the list's order costs.
  for (int64_t nodes : kSizes) {
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_PartitionGraphAotBasedShuffled/chain/", nodes).c_str(),
        [nodes](benchmark::State& state) {
          BM_PartitionGraphAotBased(state, GraphShape::kChain, nodes, /*shuffled=*/true);
        })
        ->Unit(benchmark::kMillisecond);
  }
  RegisterShapes("SplitGraph", BM_SplitGraph);
  // The size of the torch.fx reference measurement.
  benchmark::RegisterBenchmark("BM_PartitionGraphSizeBased/residual/16002",
                               [](benchmark::State& state) {
                                 BM_PartitionGraph(state, Mode::SIZE_BASED,
                                                   GraphShape::kResidual, 16002);
                               })
      ->Unit(benchmark::kMillisecond);
  for (int64_t nodes : kSizes) {
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_PartitionGraphSparseNn/recommendation/", nodes).c_str(),
        [nodes](benchmark::State& state) { BM_PartitionGraphSparseNn(state, nodes); })
        ->Unit(benchmark::kMillisecond);
    // Quadratic in its partitions (N / 9): too slow at 10^6 nodes for a
    // benchmark.
    if (nodes <= 100000) {
      benchmark::RegisterBenchmark(
          absl::StrCat("BM_PartitionGraphSparseNnInterleaved/interleaved/", nodes).c_str(),
          [nodes](benchmark::State& state) { BM_PartitionGraphSparseNnInterleaved(state, nodes); })
          ->Unit(benchmark::kMillisecond);
    }
    // One device per table: N / 2 of them, up to --max_devices (65,536).
    if (nodes <= 100000) {
      benchmark::RegisterBenchmark(
          absl::StrCat("BM_PartitionGraphSparseNnHub/hub/", nodes).c_str(),
          [nodes](benchmark::State& state) { BM_PartitionGraphSparseNnHub(state, nodes); })
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_PlanDataParallel/aten_mlp/", nodes).c_str(),
        [nodes](benchmark::State& state) { BM_PlanDataParallel(state, nodes); })
        ->Unit(benchmark::kMillisecond);
  }
  for (int64_t nodes : {500, 2000}) {
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_PartitionGraphKlBasedManyDevices/chain/", nodes).c_str(),
        [nodes](benchmark::State& state) { BM_PartitionGraphKlBasedManyDevices(state, nodes); })
        ->Unit(benchmark::kMillisecond);
  }
  for (int devices : {16000, 32000}) {
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_PartitionGraphSaturateHost/chain_1000/", devices).c_str(),
        [devices](benchmark::State& state) { BM_PartitionGraphSaturateHost(state, devices); })
        ->Unit(benchmark::kMillisecond);
  }
  for (int64_t nodes : {32, 128}) {
    // A residual stack on 4 devices: cost_aware's pairwise search is bounded
    // to 128 call_* nodes.
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_PartitionGraphCostAware/residual/", nodes).c_str(),
        [nodes](benchmark::State& state) {
          v1::PartitionGraphRequest request = ResidualStackRequest(nodes, 4);
          request.mutable_config()->set_mode(Mode::COST_AWARE);
          RunPartitionGraph(state, request);
        })
        ->Unit(benchmark::kMillisecond);
  }
}

const bool kRegistered = (RegisterAll(), true);

}  // namespace
}  // namespace partplan

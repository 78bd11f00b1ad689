// Benchmarks of ShardGraph: fairscale's auto_shard (FAIRSCALE) and the
// optimal balanced stages (BALANCED) on synthetic residual stacks of 10^4
// to 10^6 nodes (tests/bench/synthetic_graphs.h); of Plan with BALANCED
// stages (`BM_PlanShards`); and of BuildPipelineGraph on a pipeline of
// modules (`BM_PipelineGraph`).
//
//   bazel run -c opt //tests/bench/pipeline:pipeline_bench
//
// Each case reads the request as the server does: every field but the graph
// parsed, the graph imported from its serialised bytes (so that the planner
// reads node fields through NodeReader from those bytes). The response is
// on a protobuf arena with the server's block sizes (CallArenaOptions), or,
// for the RPCs the server answers with bytes written without a message
// (`BM_Request`: ShardGraph, `BM_PlanShards`: Plan), those bytes.
// `BM_Plan` times ShardGraphPlan on the imported graph and inventory, and
// its response's bytes (by name); `BM_Request` adds the
// import and validation and writes the response, as the server does
// (ShardGraphSerialized);
// `BM_BalancedStagesAlone` is the balanced-stage algorithm without building a
// response. fairscale's `_split_nodes` is cubic in the nodes
// (shared/design/reference-planners.md).
//
// On a residual stack every `add` reads the previous layer's `add`, which
// is never the node right before it, so auto_shard merges everything into
// one shard, as fairscale does; the `Chain` variants drop those skips, so
// that it cuts shard_count shards.
#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "google/protobuf/arena.h"
#include "planner/api/entry_points.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph_import.h"
#include "planner/graph/serialized_request.h"
#include "planner/pipeline/balanced_stages.h"
#include "planner/pipeline/shard_graph.h"
#include "planner/pipeline/stage_model.h"
#include "planner/pipeline/stage_work.h"
#include "planner/wire/shard_graph_response.h"
#include "server/call_arena.h"
#include "tests/bench/synthetic_graphs.h"

namespace partplan {
namespace {

enum class Shape { kResidual, kChain };

// The stack with its module hierarchy (root and one Linear per layer) and,
// for BALANCED, `stages` devices of alternately 1x and 2x a share of memory.
v1::ShardGraphRequest ShardRequest(int64_t num_nodes, Shape shape, v1::ShardConfig::Mode mode,
                                   int stages) {
  v1::ShardGraphRequest request;
  v1::Graph* graph = request.mutable_graph();
  *graph = ResidualStack(num_nodes);
  int64_t parameters = 0;
  int64_t total_bytes = 0;
  for (v1::Node& node : *graph->mutable_nodes()) {
    total_bytes += node.size_bytes().total_bytes();
    if (node.op() == v1::CALL_MODULE) {
      v1::Module* module = graph->add_modules();
      module->set_qualified_name(node.target());
      module->set_module_type(node.module_type());
      module->set_parameter_count(node.parameter_count());
      parameters += node.parameter_count();
    }
    if (shape == Shape::kChain && node.target() == "operator.add") {
      node.mutable_args()->RemoveLast();  // the skip
    }
  }
  v1::Module* root = graph->add_modules();
  root->set_parameter_count(parameters);
  request.mutable_config()->set_mode(mode);
  request.mutable_config()->set_shard_count(stages);
  if (mode == v1::ShardConfig::BALANCED) {
    const int64_t share = total_bytes / (stages + stages / 2) + total_bytes / (5 * stages);
    for (int s = 0; s < stages; ++s) {
      v1::Device* device = request.mutable_devices()->add_devices();
      device->set_name(absl::StrCat("gpu", s));
      device->set_logical_id(s);
      device->set_available_memory_bytes(s % 2 == 0 ? share : 2 * share);
    }
    request.mutable_devices()->set_transfer_rate_bytes_per_second(1e10);
  }
  return request;
}

// `built` as the server receives it: its fields but the graph parsed into
// `request`, and the graph's bytes, which `request` keeps alive.
template <typename Request>
class ReceivedRequest {
 public:
  explicit ReceivedRequest(const Request& built)
      : bytes_(built.SerializeAsString()),
        graph_bytes_(ParseAllButGraph(ChunkedBytes(bytes_), &fields_)) {}
  // A copy's graph would be the original's bytes.
  ReceivedRequest(const ReceivedRequest&) = delete;
  ReceivedRequest& operator=(const ReceivedRequest&) = delete;

  const Request& fields() const { return fields_; }
  // value(): a request built here always has a graph of its own to extract.
  GraphSource graph() const { return GraphSource::Serialized(graph_bytes_.value()); }

 private:
  const std::string bytes_;
  Request fields_;
  const std::optional<ChunkedBytes> graph_bytes_;
};

// What a plan looks like: its shard count and its slowest stage.
struct Outcome {
  int shards = 0;
  double bottleneck = 0;

  void Note(const v1::ShardGraphResponse& response) {
    shards = response.shards_size();
    bottleneck = 0;
    for (const v1::Shard& shard : response.shards())
      bottleneck = std::max(bottleneck, shard.cost());
  }
  void Report(benchmark::State& state, const v1::ShardGraphRequest& request) const {
    state.SetItemsProcessed(state.iterations() * request.graph().nodes_size());
    state.counters["shards"] = shards;
    state.counters["bottleneck_s"] = bottleneck;
  }
};

// ShardGraphPlan and its response's bytes as the server writes them, on the
// imported graph and inventory.
void BM_Plan(benchmark::State& state, Shape shape, v1::ShardConfig::Mode mode, int stages) {
  const v1::ShardGraphRequest request = ShardRequest(state.range(0), shape, mode, stages);
  const ReceivedRequest<v1::ShardGraphRequest> received(request);
  CancellationToken token;
  const CompactGraph graph = *ImportGraph(received.graph(), InputLimits(), token);
  const ShardOptions options = *ShardOptions::FromConfig(received.fields().config());
  const DeviceList devices = *ImportDevices(received.fields().devices(), InputLimits());
  for (auto _ : state) {
    absl::Cord bytes;
    absl::StatusOr<ShardPlan> plan = ShardGraphPlan(graph, options, devices, token);
    const absl::Status status =
        plan.ok() ? SerializeShardGraphResponse(graph, *plan, received.fields().node_references(),
                                                token, &bytes)
                  : plan.status();
    if (!status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      return;
    }
  }
  // The counters, from one more plan, outside the timing.
  v1::ShardGraphResponse response;
  if (absl::StatusOr<ShardPlan> plan = ShardGraphPlan(graph, options, devices, token);
      plan.ok() && ShardGraphResponseFromPlan(graph, *plan, token, &response).ok()) {
    Outcome outcome;
    outcome.Note(response);
    outcome.Report(state, request);
  }
}

// The balanced-stage algorithm alone (both passes and the walk back), on
// a ready StageModel: no response is built.
void BM_BalancedStagesAlone(benchmark::State& state, int stages) {
  const v1::ShardGraphRequest request =
      ShardRequest(state.range(0), Shape::kResidual, v1::ShardConfig::BALANCED, stages);
  const ReceivedRequest<v1::ShardGraphRequest> received(request);
  CancellationToken token;
  const CompactGraph graph = *ImportGraph(received.graph(), InputLimits(), token);
  const StageModel model(graph);
  const StageWork work =
      *ChooseStageWork(model, *ImportDevices(request.devices(), InputLimits()), token);
  double bottleneck = 0;
  for (auto _ : state) {
    absl::StatusOr<StagePlan> plan = PlanBalancedStages(model, work.of_item, work.devices, token);
    if (!plan.ok()) {
      state.SkipWithError(std::string(plan.status().message()).c_str());
      return;
    }
    bottleneck = plan->bottleneck;
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations() * request.graph().nodes_size());
  state.counters["bottleneck_s"] = bottleneck;
}
BENCHMARK_CAPTURE(BM_BalancedStagesAlone, 8, 8)
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BalancedStagesAlone, 32, 32)
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond);

// Import and validation, then ShardGraphPlan and the response serialised:
// what the server does (ShardGraphSerialized, which writes the plan by name
// without building it as messages). One call first, as BM_PlanShards.
void BM_Request(benchmark::State& state, Shape shape, v1::ShardConfig::Mode mode, int stages) {
  const v1::ShardGraphRequest request = ShardRequest(state.range(0), shape, mode, stages);
  const ReceivedRequest<v1::ShardGraphRequest> received(request);
  CancellationToken token;
  absl::Cord response;
  const auto call = [&] {
    const absl::Status status =
        ShardGraphSerialized(received.fields(), received.graph(), InputLimits(), token, &response);
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    return status.ok();
  };
  if (!call()) return;
  for (auto _ : state) {
    if (!call()) return;
  }
  v1::ShardGraphResponse parsed;
  if (!parsed.ParseFromString(std::string(response))) {
    state.SkipWithError("the response does not parse");
    return;
  }
  Outcome outcome;
  outcome.Note(parsed);
  outcome.Report(state, request);
  state.counters["response_bytes"] = static_cast<double>(response.size());
}

#define PARTPLAN_PIPELINE_BENCHMARK(function, name, shape, mode, stages)  \
  BENCHMARK_CAPTURE(function, name, shape, v1::ShardConfig::mode, stages) \
      ->Arg(10000)                                                        \
      ->Arg(100000)                                                       \
      ->Arg(1000000)                                                      \
      ->Unit(benchmark::kMillisecond)

PARTPLAN_PIPELINE_BENCHMARK(BM_Plan, balanced_8, Shape::kResidual, BALANCED, 8);
PARTPLAN_PIPELINE_BENCHMARK(BM_Plan, balanced_32, Shape::kResidual, BALANCED, 32);
PARTPLAN_PIPELINE_BENCHMARK(BM_Plan, fairscale_8, Shape::kResidual, FAIRSCALE, 8);
PARTPLAN_PIPELINE_BENCHMARK(BM_Plan, fairscale_chain_8, Shape::kChain, FAIRSCALE, 8);
PARTPLAN_PIPELINE_BENCHMARK(BM_Request, balanced_8, Shape::kResidual, BALANCED, 8);
PARTPLAN_PIPELINE_BENCHMARK(BM_Request, fairscale_8, Shape::kResidual, FAIRSCALE, 8);

// Plan with BALANCED stages as the server answers it (PlanSerialized): the
// stages become partitions placed on their devices, with the partition DAG,
// and the response is written by name.
void BM_PlanShards(benchmark::State& state, v1::ShardConfig::Mode mode, int stages) {
  const v1::ShardGraphRequest shard_request =
      ShardRequest(state.range(0), Shape::kResidual, mode, stages);
  v1::PlanRequest request;
  *request.mutable_graph() = shard_request.graph();
  *request.mutable_devices() = shard_request.devices();
  *request.mutable_shard() = shard_request.config();
  const ReceivedRequest<v1::PlanRequest> received(request);
  CancellationToken token;
  size_t response_bytes = 0;
  const auto call = [&] {
    absl::Cord response;
    const absl::Status status =
        PlanSerialized(received.fields(), received.graph(), InputLimits(), token, &response);
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    response_bytes = response.size();
    return status.ok();
  };
  // One call first, as a running server has made many (a fresh process's
  // first 10^6-node call faults its memory in).
  if (!call()) return;
  for (auto _ : state) {
    if (!call()) return;
  }
  state.SetItemsProcessed(state.iterations() * request.graph().nodes_size());
  state.counters["response_bytes"] = static_cast<double>(response_bytes);
}
BENCHMARK_CAPTURE(BM_PlanShards, balanced_8, v1::ShardConfig::BALANCED, 8)
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond);


// BuildPipelineGraph as the server answers it: the import and validation,
// then the pipeline graph, on the call's arena.
void BM_PipelineGraph(benchmark::State& state) {
  const v1::BuildPipelineGraphRequest request = PipelineRequest(state.range(0));
  const ReceivedRequest<v1::BuildPipelineGraphRequest> received(request);
  CancellationToken token;
  int modules = 0;
  const auto call = [&] {
    google::protobuf::Arena arena(CallArenaOptions());
    auto* response = google::protobuf::Arena::CreateMessage<v1::BuildPipelineGraphResponse>(&arena);
    const absl::Status status =
        BuildPipelineGraph(received.fields(), received.graph(), InputLimits(), token, response);
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    modules = response->modules_size();
    return status.ok();
  };
  if (!call()) return;  // as BM_PlanShards
  for (auto _ : state) {
    if (!call()) return;
  }
  state.SetItemsProcessed(state.iterations() * request.graph().nodes_size());
  state.counters["modules"] = modules;
}
BENCHMARK(BM_PipelineGraph)->Arg(10000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace partplan

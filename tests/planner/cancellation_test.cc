// Every long-running planner stops soon after its token is cancelled.
//
// One case per planner entry, each on an input that keeps it planning for
// hundreds of milliseconds to seconds in a debug build (a pathological shape
// where the planner has one: SPARSE_NN's quadratic merging, COST_AWARE's
// pairwise search, saturate_host on the largest inventory; else a large
// graph). The graph is imported first, out of the timing (ImportGraph is a
// case of its own), so that the cancel lands in the planner. Each case runs
// four times, with Cancel() called from this thread 0, 2, 30 and 250 ms
// after the planner started on another, and every run the cancel catches
// planning must return within 100 ms of Cancel(), CANCELLED (or with its
// plan, when the cancel came after the last poll); a run that misses is
// tried twice more, for a machine whose scheduler stalled the planner. At
// least one run must be caught and CANCELLED; later delays may come after
// the plan is done, as they do in an optimised build, which is about ten
// times faster.
//
// The bound holds on a loaded 2-core machine in a debug build because the
// loops poll every CancellationToken::kPollInterval steps of at most
// microseconds: by work done (CheckEvery on a counter of inner steps, or
// CheckWork), not by outer iterations, where one iteration can be large.
//
// The one timing assertion in the unit tests, as issue #24 asks; timings of
// the planners themselves are in tests/bench.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "planner/base/cancellation.h"
#include "planner/base/status_util.h"
#include "planner/data_parallel/data_parallel_options.h"
#include "planner/data_parallel/data_parallel_plan.h"
#include "planner/fx/partitioner.h"
#include "planner/fx/partitioner_options.h"
#include "planner/fx/saturate_host.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph_import.h"
#include "planner/graph/serialized_request.h"
#include "planner/pipeline/pipeline_graph.h"
#include "planner/pipeline/shard_graph.h"
#include "planner/split/split_graph.h"
#include "planner/training/stage_search.h"
#include "planner/training/training_chain.h"
#include "planner/wire/data_parallel_response.h"
#include "planner/wire/partition_plan.h"
#include "planner/wire/pipeline_graph_response.h"
#include "planner/wire/shard_graph_response.h"
#include "planner/wire/split_graph_response.h"
#include "planner/wire/training_plan_response.h"
#include "tests/bench/synthetic_graphs.h"

namespace partplan {
namespace {

constexpr absl::Duration kCancelDelays[] = {absl::ZeroDuration(), absl::Milliseconds(2),
                                            absl::Milliseconds(30), absl::Milliseconds(250)};
constexpr absl::Duration kStopWithin = absl::Milliseconds(100);
// Large enough for seconds of planning in a debug build.
constexpr int64_t kLargeGraph = 300'000;

// A planner call on a prepared input; the input outlives every call.
using Call = std::function<absl::Status(const CancellationToken&)>;

// What a case keeps alive: the request, its imported graph and devices.
struct Prepared {
  virtual ~Prepared() = default;
  Call call;
  // The calls' responses, freed after the timing: the server builds them on
  // the call's arena and frees them after answering.
  std::vector<std::shared_ptr<void>> kept;
};

// `response`, kept in `prepared` until the test frees it.
template <typename Response>
Response* Keep(Prepared* prepared, std::shared_ptr<Response> response) {
  prepared->kept.push_back(response);
  return response.get();
}

template <typename Request>
struct PreparedRequest : Prepared {
  explicit PreparedRequest(Request r) : request(std::move(r)) {
    const CancellationToken token;
    graph.emplace(ImportGraph(request.graph(), InputLimits(), token).value());
  }
  Request request;
  std::optional<CompactGraph> graph;
};

std::unique_ptr<Prepared> Partition(v1::PartitionGraphRequest request) {
  auto prepared = std::make_unique<PreparedRequest<v1::PartitionGraphRequest>>(std::move(request));
  auto devices = std::make_shared<DeviceList>(
      ImportDevices(prepared->request.devices(), InputLimits()).value());
  PreparedRequest<v1::PartitionGraphRequest>* p = prepared.get();
  prepared->call = [p, devices](const CancellationToken& token) -> absl::Status {
    PARTPLAN_ASSIGN_OR_RETURN(
        const PartitionerOptions options,
        PartitionerOptionsFromConfig(p->request.config(), *p->graph, *devices, token));
    PARTPLAN_ASSIGN_OR_RETURN(PartitionerPlan planned,
                              PartitionGraphPlan(*p->graph, *devices, options, token));
    const PartitionerPlan* kept = Keep(p, std::make_shared<PartitionerPlan>(std::move(planned)));
    return WritePartitionPlan(*p->graph, *devices, *kept, token,
                              Keep(p, std::make_shared<v1::PartitionPlan>()));
  };
  return prepared;
}

v1::PartitionGraphRequest WithMode(v1::PartitionGraphRequest request,
                                   v1::PartitionerConfig::Mode mode) {
  request.mutable_config()->set_mode(mode);
  return request;
}

// SPARSE_NN on tables interleaved with dense layers, one device per table:
// its merging is quadratic in the partitions there.
v1::PartitionGraphRequest SparseNnInterleaved(int64_t nodes) {
  const int64_t dense_bytes = TotalBytes(InterleavedRecommendationModel(nodes, 8, 0));
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = InterleavedRecommendationModel(nodes, 8, 2 * dense_bytes);
  int tables = 0;
  for (const v1::Node& node : request.graph().nodes()) {
    tables += node.module_type() == "torch.nn.Embedding" ? 1 : 0;
  }
  *request.mutable_devices() = EqualDevices(request.graph(), tables, 1);
  for (v1::Device& device : *request.mutable_devices()->mutable_devices()) {
    device.set_available_memory_bytes(dense_bytes + 2 * dense_bytes * 11 / 10);
  }
  request.mutable_config()->set_mode(v1::PartitionerConfig::SPARSE_NN);
  return request;
}

// AOT_BASED with partitions of `per_partition` call_* nodes in graph order,
// round robin on the devices.
v1::PartitionGraphRequest AotChunks(v1::PartitionGraphRequest request, int per_partition) {
  v1::PartitionerConfig* config = request.mutable_config();
  config->set_mode(v1::PartitionerConfig::AOT_BASED);
  int op_nodes = 0;
  for (const v1::Node& node : request.graph().nodes()) {
    if (node.op() != v1::CALL_MODULE && node.op() != v1::CALL_FUNCTION &&
        node.op() != v1::CALL_METHOD) {
      continue;
    }
    v1::NodePartition* entry = config->add_node_partitions();
    entry->set_node(node.name());
    entry->set_partition(op_nodes++ / per_partition);
  }
  const int partitions = (op_nodes + per_partition - 1) / per_partition;
  for (int p = 0; p < partitions; ++p) {
    v1::PartitionDevices* entry = config->add_partition_devices();
    entry->set_partition(p);
    entry->add_logical_device_ids(p % request.devices().devices_size());
  }
  return request;
}

// saturate_host on a graph that fits one device, with the most devices an
// inventory may hold: one used device, so a replica a round and a round
// per device.
v1::PartitionGraphRequest SaturateManyDevices() {
  v1::PartitionGraphRequest request =
      PartitionRequest(SyntheticGraph(GraphShape::kChain, 1000), 1);
  const int64_t memory = request.devices().devices(0).available_memory_bytes();
  request.mutable_devices()->clear_devices();
  for (int d = 0; d < InputLimits().max_devices; ++d) {
    v1::Device* device = request.mutable_devices()->add_devices();
    device->set_name(absl::StrCat("gpu", d));
    device->set_logical_id(d);
    device->set_available_memory_bytes(memory);
  }
  request.mutable_config()->set_saturate_host(true);
  return request;
}

std::unique_ptr<Prepared> Split(int64_t nodes) {
  v1::SplitGraphRequest request;
  *request.mutable_graph() = ResidualStack(nodes);
  int op_nodes = 0;
  for (const v1::Node& node : request.graph().nodes()) {
    if (node.op() != v1::CALL_MODULE && node.op() != v1::CALL_FUNCTION) continue;
    v1::NodePartition* entry = request.add_assignments();
    entry->set_node(node.name());
    entry->set_partition(op_nodes++ / 64);
  }
  auto prepared = std::make_unique<PreparedRequest<v1::SplitGraphRequest>>(std::move(request));
  PreparedRequest<v1::SplitGraphRequest>* p = prepared.get();
  prepared->call = [p](const CancellationToken& token) {
    absl::StatusOr<std::vector<int32_t>> partition_of =
        PartitionOfNodes(*p->graph, p->request.assignments(), token);
    if (!partition_of.ok()) return partition_of.status();
    absl::StatusOr<GraphSplit> split =
        SplitGraphPlan(*p->graph, *partition_of, p->request.keep_original_order(), token);
    if (!split.ok()) return split.status();
    return SplitGraphResponseFromPlan(*p->graph, *split, token,
                                      Keep(p, std::make_shared<v1::SplitGraphResponse>()));
  };
  return prepared;
}

// A residual stack with its module hierarchy (root and one Linear per
// layer); BALANCED gets `stages` devices of alternately 1x and 2x a share.
std::unique_ptr<Prepared> Shard(int64_t nodes, v1::ShardConfig::Mode mode, int stages) {
  v1::ShardGraphRequest request;
  v1::Graph* graph = request.mutable_graph();
  *graph = ResidualStack(nodes);
  int64_t parameters = 0;
  int64_t total_bytes = 0;
  for (const v1::Node& node : graph->nodes()) {
    total_bytes += node.size_bytes().total_bytes();
    if (node.op() == v1::CALL_MODULE) {
      v1::Module* module = graph->add_modules();
      module->set_qualified_name(node.target());
      module->set_module_type(node.module_type());
      module->set_parameter_count(node.parameter_count());
      parameters += node.parameter_count();
    }
  }
  graph->add_modules()->set_parameter_count(parameters);  // the root
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
  auto prepared = std::make_unique<PreparedRequest<v1::ShardGraphRequest>>(std::move(request));
  const ShardOptions options = ShardOptions::FromConfig(prepared->request.config()).value();
  auto devices = std::make_shared<DeviceList>(
      ImportDevices(prepared->request.devices(), InputLimits()).value());
  PreparedRequest<v1::ShardGraphRequest>* p = prepared.get();
  prepared->call = [p, options, devices](const CancellationToken& token) {
    absl::StatusOr<ShardPlan> plan = ShardGraphPlan(*p->graph, options, *devices, token);
    if (!plan.ok()) return plan.status();
    return SerializeShardGraphResponse(*p->graph, *plan, p->request.node_references(), token,
                                       Keep(p, std::make_shared<absl::Cord>()));
  };
  return prepared;
}

// PipelineRequest (synthetic_graphs.h): pairs of modules, the first
// returning two values the second reads through a getitem each.
std::unique_ptr<Prepared> Pipeline(int64_t nodes) {
  v1::BuildPipelineGraphRequest request = PipelineRequest(nodes);
  auto prepared =
      std::make_unique<PreparedRequest<v1::BuildPipelineGraphRequest>>(std::move(request));
  auto workers = std::make_shared<std::vector<PipelineWorker>>(
      PipelineWorkersFromRequest(prepared->request, CancellationToken()).value());
  PreparedRequest<v1::BuildPipelineGraphRequest>* p = prepared.get();
  prepared->call = [p, workers](const CancellationToken& token) {
    absl::StatusOr<PipelineGraph> pipeline = BuildPipelineGraphPlan(*p->graph, *workers, token);
    if (!pipeline.ok()) return pipeline.status();
    return PipelineGraphResponseFromPlan(
        *p->graph, *pipeline, *workers, token,
        Keep(p, std::make_shared<v1::BuildPipelineGraphResponse>()));
  };
  return prepared;
}

std::unique_ptr<Prepared> DataParallel(int64_t nodes) {
  auto prepared = std::make_unique<PreparedRequest<v1::PlanDataParallelRequest>>(
      DataParallelMlpRequest(nodes));
  auto devices = std::make_shared<DeviceList>(
      ImportDevices(prepared->request.devices(), InputLimits()).value());
  auto options = std::make_shared<DataParallelOptions>(
      DataParallelOptions::FromRequest(prepared->request, *prepared->graph, *devices).value());
  PreparedRequest<v1::PlanDataParallelRequest>* p = prepared.get();
  prepared->call = [p, options, devices](const CancellationToken& token) {
    absl::StatusOr<DataParallelPlan> plan =
        PlanDataParallelPlan(*p->graph, *options, *devices, token);
    if (!plan.ok()) return plan.status();
    return DataParallelResponseFromPlan(
        *p->graph, *plan, token, Keep(p, std::make_shared<v1::PlanDataParallelResponse>()));
  };
  return prepared;
}

// PlanTraining on a chain of Linear and ReLU (latencies, no NodeTraining:
// every backward estimated from the forward) of `nodes` nodes on `devices`
// devices with room for any plan, 1F1B with `micro_batches`.
v1::PlanTrainingRequest TrainingRequest(int64_t nodes, int devices, int micro_batches) {
  v1::PlanTrainingRequest request;
  *request.mutable_graph() = SyntheticGraph(GraphShape::kChain, nodes);
  *request.mutable_devices() = EqualDevices(request.graph(), devices, 1);
  for (v1::Device& device : *request.mutable_devices()->mutable_devices()) {
    device.set_available_memory_bytes(int64_t{1} << 50);
  }
  request.mutable_config()->set_schedule(v1::ONE_F_ONE_B);
  request.mutable_config()->set_micro_batches(micro_batches);
  return request;
}

// The whole of PlanTraining after the graph's import: the request checked
// into the chain (training_chain.cc), the stage search, the response with
// its timeline and cut reports.
// Parallelize: GPT-3 (96 layers, hidden 12,288) on 4,096 A100s, a global
// batch of 1,536 (1.6M configurations, some hundreds planned).
std::unique_ptr<Prepared> ParallelizeGpt3() {
  auto prepared = std::make_unique<Prepared>();
  auto request = std::make_shared<v1::ParallelizeRequest>();
  v1::TransformerSummary* model = request->mutable_transformer();
  model->set_layers(96);
  model->set_hidden_size(12288);
  model->set_attention_heads(96);
  model->set_sequence_length(2048);
  model->set_vocabulary_size(51200);
  v1::HostGroup* hosts = request->mutable_cluster()->add_host_groups();
  hosts->set_hosts(512);
  hosts->set_devices_per_host(8);
  hosts->mutable_accelerator()->set_memory_bytes(80.0 * (1 << 30));
  hosts->mutable_accelerator()->set_peak_flops_per_second(312e12);
  hosts->set_intra_host_bytes_per_second(300e9);
  hosts->set_inter_host_bytes_per_second(25e9);
  request->mutable_options()->set_global_batch_size(1536);
  Prepared* p = prepared.get();
  prepared->call = [p, request](const CancellationToken& token) -> absl::Status {
    return Parallelize(*request, request->graph(), InputLimits(), token,
                       Keep(p, std::make_shared<v1::ParallelizeResponse>()));
  };
  return prepared;
}

std::unique_ptr<Prepared> Training(int64_t nodes, int devices, int micro_batches) {
  auto prepared = std::make_unique<PreparedRequest<v1::PlanTrainingRequest>>(
      TrainingRequest(nodes, devices, micro_batches));
  auto inventory = std::make_shared<DeviceList>(
      ImportDevices(prepared->request.devices(), InputLimits()).value());
  PreparedRequest<v1::PlanTrainingRequest>* p = prepared.get();
  prepared->call = [p, inventory](const CancellationToken& token) -> absl::Status {
    PARTPLAN_ASSIGN_OR_RETURN(
        const TrainingProblem problem,
        TrainingProblemFromRequest(*p->graph, *inventory, p->request.config(), token));
    PARTPLAN_ASSIGN_OR_RETURN(
        const TrainingStagePlan plan,
        PlanTrainingStages(problem.options.search, problem.chain, problem.devices, token));
    return TrainingPlanResponseFromPlan(*p->graph, *inventory, problem, plan, token,
                                        Keep(p, std::make_shared<v1::PlanTrainingResponse>()));
  };
  return prepared;
}

// The PlanTraining response alone, from a plan found beforehand: the
// timeline written and each inner cut's two moves evaluated.
std::unique_ptr<Prepared> TrainingResponse(int64_t nodes, int devices, int micro_batches) {
  struct PreparedTraining : PreparedRequest<v1::PlanTrainingRequest> {
    using PreparedRequest::PreparedRequest;
    std::optional<DeviceList> inventory;
    std::optional<TrainingProblem> problem;
    std::optional<TrainingStagePlan> plan;
  };
  auto prepared =
      std::make_unique<PreparedTraining>(TrainingRequest(nodes, devices, micro_batches));
  const CancellationToken live;
  prepared->inventory.emplace(ImportDevices(prepared->request.devices(), InputLimits()).value());
  prepared->problem.emplace(TrainingProblemFromRequest(*prepared->graph, *prepared->inventory,
                                                       prepared->request.config(), live)
                                .value());
  const StageSearchOptions& search = prepared->problem->options.search;
  prepared->plan.emplace(
      PlanTrainingStages(search, prepared->problem->chain, prepared->problem->devices, live)
          .value());
  PreparedTraining* p = prepared.get();
  prepared->call = [p](const CancellationToken& token) {
    return TrainingPlanResponseFromPlan(*p->graph, *p->inventory, *p->problem, *p->plan, token,
                                        Keep(p, std::make_shared<v1::PlanTrainingResponse>()));
  };
  return prepared;
}

// The import alone, from serialised bytes as the server reads them.
std::unique_ptr<Prepared> Import(int64_t nodes) {
  struct PreparedImport : Prepared {
    std::string bytes;
  };
  auto prepared = std::make_unique<PreparedImport>();
  prepared->bytes = ResidualStack(nodes).SerializeAsString();
  PreparedImport* p = prepared.get();
  prepared->call = [p](const CancellationToken& token) {
    const ChunkedBytes bytes(p->bytes);
    return Keep(p, std::make_shared<absl::StatusOr<CompactGraph>>(
                       ImportGraph(GraphSource::Serialized(bytes), InputLimits(), token)))
        ->status();
  };
  return prepared;
}

struct Case {
  std::string name;
  std::function<std::unique_ptr<Prepared>()> prepare;
  // False where the whole plan takes only milliseconds since issue #24
  // (saturate_host, bounded by the inventory): only the bound is checked.
  bool always_running = true;
};

std::vector<Case> Cases() {
  using Mode = v1::PartitionerConfig;
  const auto large = [](GraphShape shape, int64_t nodes, int devices) {
    return PartitionRequest(SyntheticGraph(shape, nodes), devices);
  };
  // ImportGraph, AotBased, ShardGraphBalanced and BuildPipelineGraph run
  // on kLargeGraph since LocateNodes, CheckModules, AotPartition, StageModel,
  // ChooseStageWork and ReadWorkers poll. The last three cases were disabled
  // for missing the bound; their passes poll now.
  return {
      {"ImportGraph", [] { return Import(kLargeGraph); }},
      {"SizeBased",
       [=] {
         return Partition(WithMode(large(GraphShape::kResidual, 200'000, 8), Mode::SIZE_BASED));
       }},
      {"SparseNnInterleaved", [] { return Partition(SparseNnInterleaved(40'000)); }},
      {"CostAware",
       [] { return Partition(WithMode(ResidualStackRequest(128, 4), Mode::COST_AWARE)); }},
      {"KlBased",
       [=] { return Partition(WithMode(large(GraphShape::kChain, 20'000, 8), Mode::KL_BASED)); }},
      {"AotBased",
       [=] { return Partition(AotChunks(large(GraphShape::kTransformer, kLargeGraph, 8), 1000)); }},
      {"SaturateHost", [] { return Partition(SaturateManyDevices()); }, false},
      {"ShardGraphBalanced", [] { return Shard(kLargeGraph, v1::ShardConfig::BALANCED, 8); }},
      {"BuildPipelineGraph", [] { return Pipeline(kLargeGraph); }},
      {"PlanDataParallel", [] { return DataParallel(75'000); }},
      // split_graph.cc: PartitionOfNodes (a name lookup per assignment),
      // SplitGraphPlan's qualname_map, and the response built from it.
      {"SplitGraph", [] { return Split(kLargeGraph); }},
      // pipeline/auto_shard.cc: ModuleParameterCharges (the module
      // hierarchy, and every call_module's target read and looked up).
      {"ShardGraphFairscale", [] { return Shard(kLargeGraph, v1::ShardConfig::FAIRSCALE, 8); }},
      // device_mapping.cc: a KL_BASED trial here re-places 2,000 partitions
      // on 2,000 devices, each priced on every device holding one; the
      // placement polls by that work. The sweep cancels inside it too.
      {"KlBasedManyDevices", [] { return Partition(KlManyDevicesRequest(2000)); }},
      // training/: TrainingProblemFromRequest (StageModel, the chain and its
      // live bytes), the stage search (its suffix bound, seeds and search),
      // and the response. 10^5 nodes on 64 devices, B = 128.
      {"PlanTraining", [] { return Training(100'000, 64, 128); }},
      // wire/training_plan_response.cc: the timeline and 2 x 63 moves, each
      // an evaluation of the plan (EvaluateTrainingStages).
      {"PlanTrainingResponse", [] { return TrainingResponse(100'000, 64, 128); }},
      // parallelize/: the lattice enumerated and bounded, each configuration
      // planned, the returned ones planned again.
      {"Parallelize", [] { return ParallelizeGpt3(); }},
  };
}

class CancellationTest : public ::testing::TestWithParam<Case> {};

// One run cancelled `delay` after the planner started.
struct CancelledRun {
  bool caught = false;  // the cancel came before the planner returned
  absl::Duration stop;  // from Cancel() to the return, when caught
  absl::Status status;
};

CancelledRun CancelAfter(Prepared& prepared, absl::Duration delay) {
  CancellationToken token;
  absl::Notification started;
  CancelledRun run;
  absl::Time returned;
  std::thread planner([&] {
    started.Notify();
    run.status = prepared.call(token);
    returned = absl::Now();
  });
  started.WaitForNotification();
  absl::SleepFor(delay);
  const absl::Time cancelled = absl::Now();
  token.Cancel();
  planner.join();
  prepared.kept.clear();
  run.caught = returned >= cancelled;
  run.stop = returned - cancelled;
  return run;
}

// A run that misses the bound is tried again, twice at most: the scheduler
// of a loaded machine can stall the planner's thread past it once, where a
// loop that does not poll misses it every time the cancel lands there.
constexpr int kAttempts = 3;

TEST_P(CancellationTest, StopsWithin100msOfCancel) {
  const std::unique_ptr<Prepared> prepared = GetParam().prepare();
  int cancelled_runs = 0;  // runs the cancel caught planning, ended CANCELLED
  for (const absl::Duration delay : kCancelDelays) {
    SCOPED_TRACE(absl::StrCat("cancelled ", absl::FormatDuration(delay), " after the start"));
    CancelledRun run;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      run = CancelAfter(*prepared, delay);
      if (!run.caught || run.stop < kStopWithin) break;
    }
    if (!run.caught) continue;  // done before the cancel: nothing to check
    EXPECT_LT(run.stop, kStopWithin) << "returned " << absl::FormatDuration(run.stop)
                                     << " after Cancel(), " << kAttempts << " times";
    // A cancel after the planner's last poll may still see its plan.
    if (!run.status.ok()) {
      EXPECT_EQ(run.status.code(), absl::StatusCode::kCancelled) << run.status;
      ++cancelled_runs;
    }
  }
  if (GetParam().always_running) {
    EXPECT_GT(cancelled_runs, 0) << "every cancel came after the plan was done: make the input "
                                    "larger";
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Planners, CancellationTest, ::testing::ValuesIn(Cases()), CaseName);

// Not a check: for an audit, cancels each planner at 20 points across its
// uncancelled run and prints the longest stop. Run with
// --gtest_also_run_disabled_tests --gtest_filter='*Sweep*', and
// CANCELLATION_SWEEP_CASE=<name> in the environment for one case.
TEST(CancellationSweep, DISABLED_Sweep) {
  const std::vector<Case> cases = Cases();
  const char* only = std::getenv("CANCELLATION_SWEEP_CASE");  // a case name, or all
  for (const Case& c : cases) {
    if (only != nullptr && c.name != only) continue;
    const std::unique_ptr<Prepared> prepared = c.prepare();
    const CancellationToken live;
    const absl::Time start = absl::Now();
    const absl::Status uncancelled = prepared->call(live);
    const absl::Duration full = absl::Now() - start;
    prepared->kept.clear();
    absl::Duration worst;
    double worst_at = 0;
    for (int k = 1; k < 20; ++k) {
      const CancelledRun run = CancelAfter(*prepared, full * k / 20);
      if (run.caught && run.stop > worst) {
        worst = run.stop;
        worst_at = k / 20.0;
      }
    }
    std::printf("%-22s full run %-12s (%s), longest stop %-12s at %.2f of it\n", c.name.c_str(),
                absl::FormatDuration(full).c_str(), uncancelled.ok() ? "OK" : "error",
                absl::FormatDuration(worst).c_str(), worst_at);
  }
}

// saturate_host polls its token in every loop: a token that has already
// fired stops it, wherever the time goes (here 65,536 devices in rounds).
TEST(SaturateHostCancellationTest, FiredTokenStopsIt) {
  const v1::PartitionGraphRequest request = SaturateManyDevices();
  const DeviceList devices = ImportDevices(request.devices(), InputLimits()).value();
  // One partition on the first device.
  const auto plan = [&devices] {
    PartitionSet set;
    set.partitions.emplace_back();
    set.partitions[0].memory_bytes = 1;
    set.partitions[0].logical_device_ids.push_back(devices[0].logical_id);
    return set;
  };
  PartitionSet set = plan();
  CancellationToken token;
  token.Cancel();
  EXPECT_EQ(SaturateHost(devices, token, &set).code(), absl::StatusCode::kCancelled);
  // With a live token it copies the device to every other.
  set = plan();
  const CancellationToken live;
  ASSERT_TRUE(SaturateHost(devices, live, &set).ok());
  EXPECT_EQ(set.partitions[0].logical_device_ids.size(), static_cast<size_t>(devices.size()));
}

}  // namespace
}  // namespace partplan

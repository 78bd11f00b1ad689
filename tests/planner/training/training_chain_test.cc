// The training planner's edge: NodeTraining imported (from a parsed graph and
// from its bytes alike) and checked, the chain the stage search gets (costs,
// defaults, the estimated saved bytes, pins), the devices' speeds and links,
// and the TrainingConfig's defaults and faults, each naming its field.
#include "planner/training/training_chain.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "planner/graph/graph_import.h"
#include "planner/pipeline/stage_model.h"
#include "tests/planner/test_graphs.h"
#include "tests/planner/training/schedule_options.h"

namespace partplan {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

std::string FieldOf(const absl::Status& status) { return InvalidFieldPath(status).value_or(""); }

// x -> w (get_attr) -> a -> b -> c -> output; sizes in bytes, a and c with
// parameters. Latencies or FLOPs on a, b, c when asked.
v1::Graph Chain() {
  v1::Graph graph = TestGraph()
                        .Placeholder("x", 8)
                        .GetAttr("w", 400)
                        .Op("a", {"x", "w"}, 1010, 10)
                        .Op("b", {"a"}, 20, 20)
                        .Op("c", {"b"}, 2030, 30)
                        .Output({"c"})
                        .Build();
  graph.mutable_nodes(2)->set_parameter_count(100);
  graph.mutable_nodes(4)->set_parameter_count(200);
  return graph;
}

void SetLatencies(v1::Graph* graph, const std::vector<double>& seconds) {
  for (size_t i = 0; i < seconds.size(); ++i) {
    graph->mutable_nodes(static_cast<int>(i) + 2)->mutable_latency()->set_compute_latency_seconds(
        seconds[i]);
  }
}

v1::DeviceInventory Devices(int count, double flops = 0) {
  v1::DeviceInventory inventory = TestDevices(std::vector<int64_t>(count, int64_t{1} << 30));
  for (v1::Device& device : *inventory.mutable_devices()) {
    device.set_compute_flops_per_second(flops);
  }
  return inventory;
}

v1::TrainingConfig Config(int micro_batches = 4) {
  v1::TrainingConfig config;
  config.set_micro_batches(micro_batches);
  return config;
}

// Both imports of `graph` (kept with them, as imports point into it):
// parsed, and from its bytes.
struct Imported {
  v1::Graph graph;
  std::string bytes;
  absl::StatusOr<CompactGraph> parsed;
  absl::StatusOr<CompactGraph> serialized;
};
std::unique_ptr<Imported> ImportBoth(const v1::Graph& graph) {
  auto imported = std::unique_ptr<Imported>(new Imported{graph, graph.SerializeAsString(),
                                                         absl::InternalError("unset"),
                                                         absl::InternalError("unset")});
  imported->parsed = ImportGraph(imported->graph, InputLimits(), NoDeadline());
  imported->serialized = ImportGraph(
      GraphSource::Serialized(ChunkedBytes(absl::string_view(imported->bytes))), InputLimits(),
      NoDeadline());
  return imported;
}

absl::StatusOr<TrainingProblem> Problem(const CompactGraph& graph,
                                        const v1::DeviceInventory& inventory,
                                        const v1::TrainingConfig& config) {
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices, ImportDevices(inventory, InputLimits()));
  return TrainingProblemFromRequest(graph, devices, config, NoDeadline());
}

TEST(NodeTrainingImportTest, KeptOnlyWhenSomeNodeGivesIt) {
  const std::unique_ptr<Imported> plain = ImportBoth(Chain());
  ASSERT_TRUE(plain->parsed.ok()) << plain->parsed.status();
  EXPECT_FALSE(plain->parsed->has_training());
  EXPECT_EQ(plain->parsed->training(3), nullptr);

  v1::Graph graph = Chain();
  v1::NodeTraining* training = graph.mutable_nodes(3)->mutable_training();
  training->set_backward_input_seconds(1.5);
  training->set_backward_weight_seconds(2.5);
  training->set_backward_input_flops(3e9);
  training->set_backward_weight_flops(4e9);
  training->set_saved_activation_bytes(77);
  graph.mutable_nodes(4)->mutable_training();  // present, all zero
  const std::unique_ptr<Imported> imported = ImportBoth(graph);
  for (const absl::StatusOr<CompactGraph>* result : {&imported->parsed, &imported->serialized}) {
    ASSERT_TRUE(result->ok()) << result->status();
    const CompactGraph& g = **result;
    EXPECT_TRUE(g.has_training());
    EXPECT_EQ(g.training(2), nullptr);
    ASSERT_NE(g.training(3), nullptr);
    EXPECT_EQ(g.training(3)->backward_input_seconds, 1.5);
    EXPECT_EQ(g.training(3)->backward_weight_seconds, 2.5);
    EXPECT_EQ(g.training(3)->backward_input_flops, 3e9);
    EXPECT_EQ(g.training(3)->backward_weight_flops, 4e9);
    EXPECT_EQ(g.training(3)->saved_activation_bytes, 77);
    ASSERT_NE(g.training(4), nullptr);
    EXPECT_EQ(g.training(4)->saved_activation_bytes, 0);
    EXPECT_EQ(g.training(5), nullptr);  // the output
  }
}

TEST(NodeTrainingImportTest, NegativeOrNonFiniteFieldsAreNamed) {
  const double nan = std::nan("");
  const struct {
    void (*set)(v1::NodeTraining*, double);
    double value;
    const char* field;
  } cases[] = {
      {[](v1::NodeTraining* t, double x) { t->set_backward_input_seconds(x); }, -1,
       "backward_input_seconds"},
      {[](v1::NodeTraining* t, double x) { t->set_backward_weight_seconds(x); }, kInfinity,
       "backward_weight_seconds"},
      {[](v1::NodeTraining* t, double x) { t->set_backward_input_flops(x); }, nan,
       "backward_input_flops"},
      {[](v1::NodeTraining* t, double x) { t->set_backward_weight_flops(x); }, -0.5,
       "backward_weight_flops"},
      {[](v1::NodeTraining* t, double x) {
         t->set_saved_activation_bytes(static_cast<int64_t>(x));
       },
       -3, "saved_activation_bytes"},
  };
  for (const auto& c : cases) {
    v1::Graph graph = Chain();
    c.set(graph.mutable_nodes(4)->mutable_training(), c.value);
    const std::unique_ptr<Imported> imported = ImportBoth(graph);
    const std::string expected = absl::StrCat("graph.nodes[4].training.", c.field);
    EXPECT_EQ(FieldOf(imported->parsed.status()), expected) << imported->parsed.status();
    EXPECT_EQ(FieldOf(imported->serialized.status()), expected) << imported->serialized.status();
  }
}

TEST(TrainingChainTest, DefaultsWithoutNodeTraining) {
  v1::Graph graph = Chain();
  SetLatencies(&graph, {1, 2, 3});
  const std::unique_ptr<Imported> imported = ImportBoth(graph);
  ASSERT_TRUE(imported->parsed.ok());
  const absl::StatusOr<TrainingProblem> problem =
      Problem(*imported->parsed, Devices(2), Config());
  ASSERT_TRUE(problem.ok()) << problem.status();
  // Items: w, a, b, c.
  const TrainingChain& chain = problem->chain;
  ASSERT_EQ(chain.items.size(), 4u);
  EXPECT_EQ(problem->item_nodes, (std::vector<NodeId>{1, 2, 3, 4}));
  const double forward[] = {0, 1, 2, 3};
  const int64_t saved[] = {0, 10, 20, 30};  // a get_attr saves nothing
  const int64_t transient[] = {400, 10, 20, 30};
  const int64_t parameters[] = {0, 100, 0, 200};
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(chain.items[i].forward, forward[i]);
    EXPECT_EQ(chain.items[i].backward_input, forward[i]);
    EXPECT_EQ(chain.items[i].backward_weight, forward[i]);
    EXPECT_EQ(chain.items[i].saved_activation_bytes, saved[i]);
    EXPECT_EQ(chain.items[i].transient_bytes, transient[i]);
    EXPECT_EQ(chain.items[i].parameters, parameters[i]);
  }
  EXPECT_EQ(problem->estimated_saved_bytes_nodes, 3);
  EXPECT_TRUE(problem->in_seconds);
  EXPECT_TRUE(chain.placement.empty());
  const StageModel model(*imported->parsed);
  ASSERT_EQ(chain.live_bytes.size(), 5u);
  for (int c = 0; c <= 4; ++c) EXPECT_EQ(chain.live_bytes[c], model.LiveBytes(c)) << c;
  for (const TrainingDevice& device : problem->devices) {
    EXPECT_EQ(device.speed, 1);
    EXPECT_EQ(device.memory_bytes, double(int64_t{1} << 30));
    EXPECT_EQ(device.link_bytes_per_second, kInfinity);  // no transfer rate: free
  }
}

TEST(TrainingChainTest, NodeTrainingGivesTheBackwardAndTheSavedBytes) {
  v1::Graph graph = Chain();
  SetLatencies(&graph, {1, 2, 3});
  v1::NodeTraining* a = graph.mutable_nodes(2)->mutable_training();
  a->set_backward_input_seconds(4);
  a->set_backward_weight_seconds(5);
  a->set_saved_activation_bytes(1000);
  graph.mutable_nodes(3)->mutable_training();  // b: a free backward, nothing saved
  const std::unique_ptr<Imported> imported = ImportBoth(graph);
  for (const absl::StatusOr<CompactGraph>* result : {&imported->parsed, &imported->serialized}) {
    ASSERT_TRUE(result->ok()) << result->status();
    const absl::StatusOr<TrainingProblem> problem = Problem(**result, Devices(2), Config());
    ASSERT_TRUE(problem.ok()) << problem.status();
    const std::vector<TrainingItem>& items = problem->chain.items;
    EXPECT_EQ(items[1].backward_input, 4);
    EXPECT_EQ(items[1].backward_weight, 5);
    EXPECT_EQ(items[1].saved_activation_bytes, 1000);
    EXPECT_EQ(items[2].backward_input, 0);
    EXPECT_EQ(items[2].backward_weight, 0);
    EXPECT_EQ(items[2].saved_activation_bytes, 0);
    EXPECT_EQ(items[3].backward_input, 3);  // c: the default
    EXPECT_EQ(items[3].saved_activation_bytes, 30);
    EXPECT_EQ(problem->estimated_saved_bytes_nodes, 1);  // c alone
  }
}

// A storage a saves and b and c save again: b and c count it too, and the
// consecutive savers (a, b), (b, c) are the pairs the stage search counts
// once per stage. Both imports read `resaved`; a bad one is named.
TEST(TrainingChainTest, ResavedStoragesPairConsecutiveSavers) {
  v1::Graph graph = Chain();
  graph.mutable_nodes(2)->mutable_training()->set_saved_activation_bytes(1000);
  for (const int node : {3, 4}) {
    v1::ResavedStorage* resaved = graph.mutable_nodes(node)->mutable_training()->add_resaved();
    resaved->set_node("a");
    resaved->set_storage(0);
    resaved->set_bytes(600);
  }
  const std::unique_ptr<Imported> imported = ImportBoth(graph);
  for (const absl::StatusOr<CompactGraph>* result : {&imported->parsed, &imported->serialized}) {
    ASSERT_TRUE(result->ok()) << result->status();
    ASSERT_EQ((*result)->resaved(3).size(), 1u);
    EXPECT_EQ((*result)->resaved(3)[0].first_saver, 2);
    const absl::StatusOr<TrainingProblem> problem = Problem(**result, Devices(2), Config());
    ASSERT_TRUE(problem.ok()) << problem.status();
    const TrainingChain& chain = problem->chain;
    EXPECT_EQ(chain.items[1].saved_activation_bytes, 1000);  // a
    EXPECT_EQ(chain.items[2].saved_activation_bytes, 600);   // b
    EXPECT_EQ(chain.items[3].saved_activation_bytes, 600);   // c
    ASSERT_EQ(chain.shared_saves.size(), 2u);
    EXPECT_EQ(chain.shared_saves[0].first, 1);
    EXPECT_EQ(chain.shared_saves[0].second, 2);
    EXPECT_EQ(chain.shared_saves[1].first, 2);
    EXPECT_EQ(chain.shared_saves[1].second, 3);
    EXPECT_EQ(chain.shared_saves[1].bytes, 600);
  }

  v1::Graph later = Chain();
  later.mutable_nodes(2)->mutable_training()->add_resaved()->set_node("c");
  const std::unique_ptr<Imported> bad = ImportBoth(later);
  for (const absl::StatusOr<CompactGraph>* result : {&bad->parsed, &bad->serialized}) {
    EXPECT_EQ(FieldOf(result->status()), "graph.nodes[2].training.resaved[0].node")
        << result->status();
  }
  v1::Graph too_many = Chain();
  too_many.mutable_nodes(2)->mutable_training()->set_saved_activation_bytes(10);
  v1::ResavedStorage* resaved = too_many.mutable_nodes(3)->mutable_training()->add_resaved();
  resaved->set_node("a");
  resaved->set_bytes(11);
  const std::unique_ptr<Imported> excess = ImportBoth(too_many);
  ASSERT_TRUE(excess->parsed.ok()) << excess->parsed.status();
  EXPECT_EQ(FieldOf(Problem(*excess->parsed, Devices(2), Config()).status()),
            "graph.nodes[3].training.resaved[0].bytes");
}

// Tied parameters: the nodes as items, the shared parameters taken off
// each node's own and counted by the group; faults named.
TEST(TrainingChainTest, TiedParameters) {
  const std::unique_ptr<Imported> imported = ImportBoth(Chain());
  ASSERT_TRUE(imported->parsed.ok()) << imported->parsed.status();
  v1::TrainingConfig config = Config();
  v1::TiedParameters* tied = config.add_tied();
  tied->add_nodes("c");
  tied->add_nodes("a");
  tied->set_parameter_count(150);
  absl::StatusOr<TrainingProblem> problem = Problem(*imported->parsed, Devices(2), config);
  ASSERT_TRUE(problem.ok()) << problem.status();
  ASSERT_EQ(problem->chain.tied.size(), 1u);
  EXPECT_EQ(problem->chain.tied[0].items, (std::vector<int>{1, 3}));
  EXPECT_EQ(problem->chain.tied[0].parameters, 150);
  EXPECT_FALSE(problem->chain.tied[0].same_stage);
  EXPECT_EQ(problem->chain.items[1].parameters, 0);   // a: 100 - 150, floored
  EXPECT_EQ(problem->chain.items[3].parameters, 50);  // c: 200 - 150

  tied->add_nodes("x");
  problem = Problem(*imported->parsed, Devices(2), config);
  EXPECT_EQ(FieldOf(problem.status()), "config.tied[0].nodes[2]") << problem.status();
  tied->mutable_nodes()->RemoveLast();
  tied->add_nodes("a");
  problem = Problem(*imported->parsed, Devices(2), config);
  EXPECT_EQ(FieldOf(problem.status()), "config.tied[0].nodes") << problem.status();
  tied->mutable_nodes()->RemoveLast();
  tied->set_parameter_count(-1);
  problem = Problem(*imported->parsed, Devices(2), config);
  EXPECT_EQ(FieldOf(problem.status()), "config.tied[0].parameter_count") << problem.status();
}

TEST(TrainingChainTest, FlopsDivideByEachDevicesThroughput) {
  v1::Graph graph = Chain();
  for (int v = 2; v <= 4; ++v) graph.mutable_nodes(v)->set_flops(1e9 * v);
  graph.mutable_nodes(2)->mutable_training()->set_backward_input_flops(7e9);
  graph.mutable_nodes(2)->mutable_training()->set_backward_weight_seconds(0.5);
  const std::unique_ptr<Imported> imported = ImportBoth(graph);
  ASSERT_TRUE(imported->parsed.ok());
  v1::DeviceInventory inventory = Devices(2, 1e12);
  absl::StatusOr<TrainingProblem> problem = Problem(*imported->parsed, inventory, Config());
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->chain.items[1].forward, 2e9);
  EXPECT_EQ(problem->chain.items[1].backward_input, 7e9);
  // Seconds become FLOPs at the one throughput every device shares.
  EXPECT_EQ(problem->chain.items[1].backward_weight, 0.5 * 1e12);
  EXPECT_EQ(problem->devices[0].speed, 1e12);
  EXPECT_TRUE(problem->in_seconds);

  // Different throughputs: FLOPs still divide, seconds no longer convert.
  inventory.mutable_devices(1)->set_compute_flops_per_second(2e12);
  problem = Problem(*imported->parsed, inventory, Config());
  EXPECT_EQ(FieldOf(problem.status()), "graph.nodes[2].training.backward_weight_seconds")
      << problem.status();
  graph.mutable_nodes(2)->mutable_training()->clear_backward_weight_seconds();
  const std::unique_ptr<Imported> flops_only = ImportBoth(graph);
  problem = Problem(*flops_only->parsed, inventory, Config());
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->devices[1].speed, 2e12);

  // Some devices with a throughput and some without.
  inventory.mutable_devices(1)->set_compute_flops_per_second(0);
  problem = Problem(*flops_only->parsed, inventory, Config());
  EXPECT_EQ(FieldOf(problem.status()), "devices.devices[1].compute_flops_per_second")
      << problem.status();
}

TEST(TrainingChainTest, LatencyGraphsConvertBackwardFlopsByASharedThroughput) {
  v1::Graph graph = Chain();
  SetLatencies(&graph, {1, 2, 3});
  graph.mutable_nodes(3)->mutable_training()->set_backward_input_flops(4e12);
  const std::unique_ptr<Imported> imported = ImportBoth(graph);
  ASSERT_TRUE(imported->parsed.ok());
  absl::StatusOr<TrainingProblem> problem =
      Problem(*imported->parsed, Devices(2, 2e12), Config());
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->chain.items[2].backward_input, 2.0);  // seconds
  EXPECT_EQ(problem->devices[1].speed, 1);
  problem = Problem(*imported->parsed, Devices(2), Config());
  EXPECT_EQ(FieldOf(problem.status()), "graph.nodes[3].training.backward_input_flops")
      << problem.status();
}

TEST(TrainingChainTest, LinksToTheNextDevice) {
  v1::DeviceInventory inventory = Devices(3);
  inventory.set_transfer_rate_bytes_per_second(50);
  v1::Link* link = inventory.add_links();
  link->set_logical_id_a(1);
  link->set_logical_id_b(0);
  link->set_bandwidth_bytes_per_second(100);
  link = inventory.add_links();
  link->set_logical_id_a(2);
  link->set_logical_id_b(0);
  link->set_bandwidth_bytes_per_second(300);
  const absl::StatusOr<DeviceList> devices = ImportDevices(inventory, InputLimits());
  ASSERT_TRUE(devices.ok()) << devices.status();
  std::vector<TrainingDevice> training = TrainingDevicesFrom(*devices);
  ASSERT_EQ(training.size(), 3u);
  EXPECT_EQ(training[0].link_bytes_per_second, 100);  // 0 -> 1: their link
  EXPECT_EQ(training[1].link_bytes_per_second, 50);   // 1 -> 2: the transfer rate
  EXPECT_EQ(training[2].link_bytes_per_second, 300);  // 2 -> 0: their link

  inventory.set_transfer_rate_bytes_per_second(0);
  training = TrainingDevicesFrom(*ImportDevices(inventory, InputLimits()));
  EXPECT_EQ(training[1].link_bytes_per_second, kInfinity);

  // One device: its link to itself (interleaved chunks) is free.
  v1::DeviceInventory one = Devices(1);
  one.set_transfer_rate_bytes_per_second(10);
  training = TrainingDevicesFrom(*ImportDevices(one, InputLimits()));
  EXPECT_EQ(training[0].link_bytes_per_second, kInfinity);
}

TEST(TrainingOptionsTest, Defaults) {
  const absl::StatusOr<TrainingOptions> options = TrainingOptionsFromConfig(Config(8), 4);
  ASSERT_TRUE(options.ok()) << options.status();
  const StageSearchOptions& search = options->search;
  EXPECT_EQ(search.schedule.schedule, PipelineSchedule::k1F1B);
  EXPECT_EQ(search.schedule.devices, 4);
  EXPECT_EQ(search.schedule.micro_batches, 8);
  EXPECT_EQ(search.schedule.chunks_per_device, 1);
  EXPECT_EQ(options->micro_batch_size, 1);
  EXPECT_EQ(search.memory.weight_bytes, 2);
  EXPECT_EQ(search.memory.gradient_bytes, 2);
  EXPECT_EQ(search.memory.optimizer_bytes, 12);
  EXPECT_EQ(search.memory.data_parallel, 1);
  EXPECT_EQ(search.memory.zero, ZeroStage::kNone);
  EXPECT_TRUE(search.memory.activations_until_weight);
  EXPECT_EQ(search.recompute, RecomputeChoice::kAuto);
  EXPECT_EQ(search.max_search_nodes, StageSearchOptions().max_search_nodes);
}

TEST(TrainingOptionsTest, GivenValues) {
  v1::TrainingConfig config = Config(8);
  config.set_schedule(v1::INTERLEAVED_1F1B);
  config.set_chunks_per_device(2);
  config.set_micro_batch_size(16);
  config.set_weight_bytes_per_parameter(4);
  config.set_gradient_bytes_per_parameter(0);  // given as 0: not the default
  config.set_optimizer_bytes_per_parameter(8);
  config.set_data_parallel(8);
  config.set_zero(v1::ZERO_GRADIENTS);
  config.set_recompute(v1::RECOMPUTE_ALWAYS);
  config.set_activations_until_weight(false);
  config.set_max_search_nodes(99);
  const absl::StatusOr<TrainingOptions> options = TrainingOptionsFromConfig(config, 4);
  ASSERT_TRUE(options.ok()) << options.status();
  const StageSearchOptions& search = options->search;
  EXPECT_EQ(search.schedule.schedule, PipelineSchedule::kInterleaved1F1B);
  EXPECT_EQ(search.schedule.chunks_per_device, 2);
  EXPECT_EQ(options->micro_batch_size, 16);
  EXPECT_EQ(search.memory.weight_bytes, 4);
  EXPECT_EQ(search.memory.gradient_bytes, 0);
  EXPECT_EQ(search.memory.optimizer_bytes, 8);
  EXPECT_EQ(search.memory.data_parallel, 8);
  EXPECT_EQ(search.memory.zero, ZeroStage::kGradients);
  EXPECT_FALSE(search.memory.activations_until_weight);
  EXPECT_EQ(search.recompute, RecomputeChoice::kAlways);
  EXPECT_EQ(search.max_search_nodes, 99);
  for (const auto& [kind, schedule] :
       {std::pair{v1::GPIPE, PipelineSchedule::kGpipe},
        std::pair{v1::ONE_F_ONE_B, PipelineSchedule::k1F1B},
        std::pair{v1::ZERO_BUBBLE_H1, PipelineSchedule::kZeroBubbleH1}}) {
    v1::TrainingConfig other = Config(8);
    other.set_schedule(kind);
    EXPECT_EQ(TrainingOptionsFromConfig(other, 4)->search.schedule.schedule, schedule);
  }
}

TEST(TrainingOptionsTest, FaultsNameTheirField) {
  const struct {
    void (*edit)(v1::TrainingConfig*);
    const char* field;
  } cases[] = {
      {[](v1::TrainingConfig* c) { c->set_micro_batches(0); }, "config.micro_batches"},
      {[](v1::TrainingConfig* c) { c->set_micro_batches(-2); }, "config.micro_batches"},
      {[](v1::TrainingConfig* c) { c->set_micro_batches(1 << 30); }, "config.micro_batches"},
      {[](v1::TrainingConfig* c) { c->set_chunks_per_device(2); }, "config.chunks_per_device"},
      {[](v1::TrainingConfig* c) { c->set_chunks_per_device(-1); }, "config.chunks_per_device"},
      {[](v1::TrainingConfig* c) {
         c->set_schedule(v1::INTERLEAVED_1F1B);
         c->set_micro_batches(6);
       },
       "config.micro_batches"},
      {[](v1::TrainingConfig* c) { c->set_schedule(static_cast<v1::PipelineScheduleKind>(9)); },
       "config.schedule"},
      {[](v1::TrainingConfig* c) { c->set_micro_batch_size(-1); }, "config.micro_batch_size"},
      {[](v1::TrainingConfig* c) { c->set_weight_bytes_per_parameter(-1); },
       "config.weight_bytes_per_parameter"},
      {[](v1::TrainingConfig* c) { c->set_gradient_bytes_per_parameter(kInfinity); },
       "config.gradient_bytes_per_parameter"},
      {[](v1::TrainingConfig* c) { c->set_optimizer_bytes_per_parameter(std::nan("")); },
       "config.optimizer_bytes_per_parameter"},
      {[](v1::TrainingConfig* c) { c->set_data_parallel(-4); }, "config.data_parallel"},
      {[](v1::TrainingConfig* c) { c->set_zero(static_cast<v1::ZeroStageKind>(7)); },
       "config.zero"},
      {[](v1::TrainingConfig* c) { c->set_recompute(static_cast<v1::RecomputePolicy>(5)); },
       "config.recompute"},
      {[](v1::TrainingConfig* c) { c->set_max_search_nodes(-1); }, "config.max_search_nodes"},
      {[](v1::TrainingConfig* c) { c->set_micro_batches(kMaxTrainingMicroBatches + 1); },
       "config.micro_batches"},
      {[](v1::TrainingConfig* c) {
         c->set_schedule(v1::INTERLEAVED_1F1B);
         c->set_chunks_per_device(kMaxTrainingStages / 4 + 1);
       },
       "config.chunks_per_device"},
  };
  for (const auto& c : cases) {
    v1::TrainingConfig config = Config(8);
    c.edit(&config);
    const absl::StatusOr<TrainingOptions> options = TrainingOptionsFromConfig(config, 4);
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(FieldOf(options.status()), c.field) << options.status();
  }
}

// The caps of one call (training_chain.h): at them the options pass, one
// over they name the field and the cap.
TEST(TrainingOptionsTest, CapsOnMicroBatchesAndStages) {
  v1::TrainingConfig config = Config(kMaxTrainingMicroBatches);
  EXPECT_TRUE(TrainingOptionsFromConfig(config, 4).ok());
  config.set_micro_batches(kMaxTrainingMicroBatches + 1);
  absl::Status status = TrainingOptionsFromConfig(config, 4).status();
  EXPECT_EQ(FieldOf(status), "config.micro_batches") << status;
  EXPECT_NE(status.message().find("at most 4096"), absl::string_view::npos) << status;

  // One chunk: the pipeline is every device.
  config = Config(8);
  EXPECT_TRUE(TrainingOptionsFromConfig(config, kMaxTrainingStages).ok());
  status = TrainingOptionsFromConfig(config, kMaxTrainingStages + 1).status();
  EXPECT_EQ(FieldOf(status), "devices.devices") << status;
  EXPECT_NE(status.message().find("at most 1024 pipeline stages"), absl::string_view::npos)
      << status;
  // Chunks: P x v counts.
  config.set_schedule(v1::INTERLEAVED_1F1B);
  config.set_chunks_per_device(kMaxTrainingStages / 8);
  EXPECT_TRUE(TrainingOptionsFromConfig(config, 8).ok());
  config.set_chunks_per_device(kMaxTrainingStages / 8 + 1);
  status = TrainingOptionsFromConfig(config, 8).status();
  EXPECT_EQ(FieldOf(status), "config.chunks_per_device") << status;
  // Stages x micro-batches.
  config = Config(kMaxTrainingStageMicroBatches / kMaxTrainingStages);
  EXPECT_TRUE(TrainingOptionsFromConfig(config, kMaxTrainingStages).ok());
  config.set_micro_batches(config.micro_batches() + 1);
  status = TrainingOptionsFromConfig(config, kMaxTrainingStages).status();
  EXPECT_EQ(FieldOf(status), "config.micro_batches") << status;
  EXPECT_NE(status.message().find("1048576"), absl::string_view::npos) << status;
  config.set_schedule(v1::INTERLEAVED_1F1B);
  config.set_micro_batches(64);
  // The most chunks an int32 holds does not overflow the product.
  config.set_chunks_per_device(std::numeric_limits<int32_t>::max());
  status = TrainingOptionsFromConfig(config, 8).status();
  EXPECT_EQ(FieldOf(status), "config.chunks_per_device") << status;
}

TEST(TrainingChainTest, Pins) {
  const std::unique_ptr<Imported> imported = ImportBoth(Chain());
  ASSERT_TRUE(imported->parsed.ok());
  v1::TrainingConfig config = Config();
  v1::NodePin* pin = config.add_pins();
  pin->set_node("a");
  pin->set_pin(v1::FIRST_STAGE);
  pin = config.add_pins();
  pin->set_node("c");
  pin->set_pin(v1::LAST_STAGE);
  pin = config.add_pins();
  pin->set_node("b");
  pin->set_pin(v1::OWN_STAGE);
  absl::StatusOr<TrainingProblem> problem = Problem(*imported->parsed, Devices(2), config);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->chain.placement,
            (std::vector<StagePlacement>{StagePlacement::kAny, StagePlacement::kFirst,
                                         StagePlacement::kAlone, StagePlacement::kLast}));

  const struct {
    const char* node;
    v1::StagePin pin;
    const char* field;
  } faults[] = {
      {"ghost", v1::FIRST_STAGE, "config.pins[3].node"},
      {"x", v1::FIRST_STAGE, "config.pins[3].node"},       // a placeholder
      {"output", v1::LAST_STAGE, "config.pins[3].node"},   // the output
      {"a", v1::LAST_STAGE, "config.pins[3].node"},        // pinned twice
      {"w", v1::STAGE_PIN_UNSPECIFIED, "config.pins[3].pin"},
  };
  for (const auto& fault : faults) {
    v1::TrainingConfig bad = config;
    v1::NodePin* extra = bad.add_pins();
    extra->set_node(fault.node);
    extra->set_pin(fault.pin);
    problem = Problem(*imported->parsed, Devices(2), bad);
    EXPECT_EQ(FieldOf(problem.status()), fault.field) << fault.node << ": " << problem.status();
  }
}

TEST(TrainingChainTest, EveryStageNeedsANode) {
  const std::unique_ptr<Imported> imported = ImportBoth(Chain());
  ASSERT_TRUE(imported->parsed.ok());
  absl::StatusOr<TrainingProblem> problem = Problem(*imported->parsed, Devices(4), Config());
  EXPECT_TRUE(problem.ok()) << problem.status();
  problem = Problem(*imported->parsed, Devices(5), Config(5));
  EXPECT_EQ(FieldOf(problem.status()), "devices.devices") << problem.status();
  v1::TrainingConfig interleaved = Config(4);
  interleaved.set_schedule(v1::INTERLEAVED_1F1B);
  interleaved.set_chunks_per_device(3);
  problem = Problem(*imported->parsed, Devices(2), interleaved);
  EXPECT_EQ(FieldOf(problem.status()), "devices.devices") << problem.status();
  problem = Problem(*imported->parsed, Devices(0), Config());
  EXPECT_EQ(FieldOf(problem.status()), "devices.devices") << problem.status();
}

}  // namespace
}  // namespace partplan

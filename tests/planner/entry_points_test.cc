// The entry points' own duties around the planners: the server's input
// limits reach every planner, and errors name the request's own fields.
#include "planner/api/entry_points.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "planner/training/training_chain.h"
#include "planner/wire/training_plan_response.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Graph Chain() {
  return TestGraph()
      .Placeholder("x", 10)
      .Op("a", {"x"}, 50, 10)
      .Op("b", {"a"}, 50, 10)
      .Output({"b"})
      .Build();
}

std::string FieldOf(const absl::Status& status) { return InvalidFieldPath(status).value_or(""); }

// A request with an unknown argument, a duplicate name and a device of
// negative memory hears of all three at once, from Validate as from the
// planning RPCs.
TEST(EntryPointsTest, IndependentFaultsOfGraphAndDevicesComeTogether) {
  v1::Graph graph = Chain();
  graph.mutable_nodes(1)->mutable_args(0)->set_node("nowhere");
  graph.mutable_nodes(2)->set_name("a");
  v1::DeviceInventory devices = TestDevices({1000, 1000});
  devices.mutable_devices(1)->set_available_memory_bytes(-5);
  const std::vector<std::string> expected = {"graph.nodes[1].args[0]", "graph.nodes[2].name",
                                             "devices.devices[1].available_memory_bytes"};
  auto fields = [](const absl::Status& status) {
    std::vector<std::string> found;
    for (const FieldViolation& violation : FieldViolations(status)) found.push_back(violation.field);
    return found;
  };
  CancellationToken token;
  v1::ValidateRequest validate;
  *validate.mutable_graph() = graph;
  *validate.mutable_devices() = devices;
  v1::ValidateResponse validated;
  EXPECT_EQ(fields(Validate(validate, validate.graph(), InputLimits(), token, &validated)),
            expected);
  v1::PartitionGraphRequest partition;
  *partition.mutable_graph() = graph;
  *partition.mutable_devices() = devices;
  EXPECT_EQ(fields(PartitionGraph(partition, InputLimits(), token).status()), expected);
  v1::PlanRequest plan;
  *plan.mutable_graph() = graph;
  *plan.mutable_devices() = devices;
  v1::PlanResponse planned;
  EXPECT_EQ(fields(Plan(plan, plan.graph(), InputLimits(), token, &planned)), expected);
}

// Plan's partitioner options are its `partitioner` field, not `config`.
TEST(EntryPointsTest, PlanNamesItsPartitionerField) {
  v1::PlanRequest request;
  *request.mutable_graph() = Chain();
  *request.mutable_devices() = TestDevices({1000});
  request.mutable_partitioner()->set_mode(static_cast<v1::PartitionerConfig::Mode>(42));
  CancellationToken token;
  v1::PlanResponse response;
  EXPECT_EQ(FieldOf(Plan(request, InputLimits(), token, &response)), "partitioner.mode");

  v1::PartitionerConfig& config = *request.mutable_partitioner();
  config.set_mode(v1::PartitionerConfig::AOT_BASED);
  config.add_partition_devices()->set_partition(0);
  config.add_node_partitions()->set_node("a");
  config.add_node_partitions()->set_node("ghost");
  EXPECT_EQ(FieldOf(Plan(request, InputLimits(), token, &response)),
            "partitioner.node_partitions[1].node");

  // PartitionGraph keeps `config`.
  v1::PartitionGraphRequest partition;
  *partition.mutable_graph() = request.graph();
  *partition.mutable_devices() = request.devices();
  *partition.mutable_config() = config;
  v1::PartitionGraphResponse partition_response;
  EXPECT_EQ(FieldOf(PartitionGraph(partition, InputLimits(), token, &partition_response)),
            "config.node_partitions[1].node");
}

// KL_BASED and COST_AWARE minimise latency: with every latency 0 a note
// says they had nothing to minimise; with latencies, or for SIZE_BASED, or
// when one device holds the graph, there is no note.
TEST(EntryPointsTest, LatencyPlannersSayWhenEveryLatencyIsZero) {
  CancellationToken token;
  const auto notes = [&](v1::PartitionerConfig::Mode mode, bool latencies,
                         std::vector<int64_t> memory) {
    v1::PartitionGraphRequest request;
    *request.mutable_graph() = Chain();
    if (latencies) {
      for (v1::Node& node : *request.mutable_graph()->mutable_nodes()) {
        node.mutable_latency()->set_compute_latency_seconds(0.5);
      }
    }
    *request.mutable_devices() = TestDevices(memory);
    request.mutable_config()->set_mode(mode);
    v1::PartitionGraphResponse response;
    const absl::Status status = PartitionGraph(request, InputLimits(), token, &response);
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_GT(response.plan().partitions_size(), 0);
    return std::vector<std::string>(response.plan().summary().notes().begin(),
                                    response.plan().summary().notes().end());
  };
  for (const auto mode : {v1::PartitionerConfig::KL_BASED, v1::PartitionerConfig::COST_AWARE}) {
    const std::vector<std::string> zero = notes(mode, false, {70, 70, 70});
    ASSERT_EQ(zero.size(), 1u) << mode;
    EXPECT_NE(zero[0].find(mode == v1::PartitionerConfig::KL_BASED ? "KL_BASED" : "COST_AWARE"),
              std::string::npos);
    EXPECT_NE(zero[0].find("nothing to minimise"), std::string::npos);
    EXPECT_TRUE(notes(mode, true, {70, 70, 70}).empty()) << mode;
    EXPECT_TRUE(notes(mode, false, {1000}).empty()) << mode;
  }
  EXPECT_TRUE(notes(v1::PartitionerConfig::SIZE_BASED, false, {70, 70, 70}).empty());
}

// PlanSummary.bound says what bounds the plan and what more devices or
// memory would change, from plans made again on those inventories.
TEST(EntryPointsTest, PartitionPlansSayWhatBoundsThem) {
  CancellationToken token;
  const auto bound = [&](bool latencies, std::vector<int64_t> memory) {
    v1::PartitionGraphRequest request;
    *request.mutable_graph() = TestGraph()
                                   .Placeholder("x", 10)
                                   .Op("a", {"x"}, 50, 10)
                                   .Op("b", {"a"}, 50, 10)
                                   .Op("c", {"b"}, 50, 10)
                                   .Output({"c"})
                                   .Build();
    if (latencies) {
      double seconds = 0.001;
      for (v1::Node& node : *request.mutable_graph()->mutable_nodes()) {
        node.mutable_latency()->set_compute_latency_seconds(seconds);
        seconds *= 2;
      }
    }
    *request.mutable_devices() = TestDevices(memory);
    v1::PartitionGraphResponse response;
    const absl::Status status = PartitionGraph(request, InputLimits(), token, &response);
    EXPECT_TRUE(status.ok()) << status;
    return response.plan().summary().bound();
  };
  // Two nodes and their input (110 B) fit 10% more memory than 105 B.
  const std::string with_latencies = bound(true, {105, 105, 105, 105});
  EXPECT_THAT(with_latencies, HasSubstr("takes longest"));
  EXPECT_THAT(with_latencies, HasSubstr("the critical path takes"));
  EXPECT_THAT(with_latencies, HasSubstr("is the fullest device, at"));
  EXPECT_THAT(with_latencies, HasSubstr("One more device like dev0 gives"));
  EXPECT_THAT(with_latencies, HasSubstr("10% more memory on every device gives"));
  EXPECT_THAT(with_latencies,
              HasSubstr("10% more memory on every device gives 2 partitions (3 now)"));
  const std::string without = bound(false, {70, 70, 70, 70});
  EXPECT_THAT(without, HasSubstr("is the largest ("));
  EXPECT_THAT(without, HasSubstr("no node has a latency"));
  EXPECT_THAT(bound(false, {1000}), HasSubstr("The graph fits one device: dev0 holds it at"));

  // No logical id is left for one more device: that what-if is left out.
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = Chain();
  *request.mutable_devices() = TestDevices({70, 70, 70});
  request.mutable_devices()->mutable_devices(2)->set_logical_id(
      std::numeric_limits<int32_t>::max());
  v1::PartitionGraphResponse response;
  const absl::Status status = PartitionGraph(request, InputLimits(), token, &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(response.plan().summary().bound(), Not(HasSubstr("One more device")));
  EXPECT_THAT(response.plan().summary().bound(), HasSubstr("10% more memory"));
}

// Shard plans name their largest shard (and BALANCED's busiest).
TEST(EntryPointsTest, ShardPlansSayWhatBoundsThem) {
  CancellationToken token;
  v1::ShardGraphRequest request;
  *request.mutable_graph() = Chain();
  for (v1::Node& node : *request.mutable_graph()->mutable_nodes()) node.set_parameter_count(10);
  request.mutable_config()->set_shard_count(2);
  request.mutable_config()->set_mode(v1::ShardConfig::BALANCED);
  *request.mutable_devices() = TestDevices({1000, 1000});
  v1::ShardGraphResponse response;
  const absl::Status status = ShardGraph(request, InputLimits(), token, &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(response.summary().bound(), HasSubstr(" is the largest, "));
  EXPECT_THAT(response.summary().bound(), HasSubstr(" of the graph's "));
  EXPECT_THAT(response.summary().bound(), HasSubstr(" has the most work ("));

  v1::PlanRequest plan;
  *plan.mutable_graph() = Chain();
  *plan.mutable_devices() = TestDevices({1000, 1000});
  plan.mutable_shard()->set_shard_count(2);
  plan.mutable_shard()->set_mode(v1::ShardConfig::BALANCED);
  v1::PlanResponse planned;
  const absl::Status plan_status = Plan(plan, InputLimits(), token, &planned);
  ASSERT_TRUE(plan_status.ok()) << plan_status;
  EXPECT_THAT(planned.plan().summary().bound(), HasSubstr("is the fullest device"));
  EXPECT_THAT(planned.plan().summary().bound(), Not(HasSubstr("One more device")));
}

// BALANCED stages take the inventory: --max_devices holds for it too.
TEST(EntryPointsTest, BalancedShardsHoldTheDeviceLimit) {
  v1::ShardGraphRequest request;
  *request.mutable_graph() = Chain();
  request.mutable_config()->set_mode(v1::ShardConfig::BALANCED);
  request.mutable_config()->set_shard_count(3);
  *request.mutable_devices() = TestDevices({1000, 1000, 1000});
  InputLimits limits;
  limits.max_devices = 2;
  CancellationToken token;
  v1::ShardGraphResponse response;
  const absl::Status status = ShardGraph(request, limits, token, &response);
  EXPECT_EQ(FieldOf(status), "devices.devices") << status;
  EXPECT_NE(status.message().find("--max_devices"), absl::string_view::npos) << status;
}

// Data-parallel plans take the inventory too.
TEST(EntryPointsTest, DataParallelPlansHoldTheDeviceLimit) {
  v1::PlanDataParallelRequest request;
  *request.mutable_graph() = Chain();
  *request.mutable_devices() = TestDevices({1000, 1000, 1000});
  InputLimits limits;
  limits.max_devices = 2;
  CancellationToken token;
  v1::PlanDataParallelResponse response;
  const absl::Status status = PlanDataParallel(request, limits, token, &response);
  EXPECT_EQ(FieldOf(status), "devices.devices") << status;
  EXPECT_NE(status.message().find("--max_devices"), absl::string_view::npos) << status;
}

// A data-parallel plan says what it moves per step and what it guessed.
TEST(EntryPointsTest, DataParallelPlansSayWhatBoundsThem) {
  v1::PlanDataParallelRequest request;
  *request.mutable_graph() = Chain();
  for (v1::Node& node : *request.mutable_graph()->mutable_nodes()) {
    if (node.op() == v1::OUTPUT) continue;
    v1::TensorMeta* output = node.add_outputs();  // a batch of 4 along dim 0
    output->add_shape(4);
    output->add_shape(8);
    output->set_dtype("torch.float32");
  }
  *request.mutable_devices() = TestDevices({1000, 1000});
  CancellationToken token;
  v1::PlanDataParallelResponse response;
  const absl::Status status = PlanDataParallel(request, InputLimits(), token, &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(response.bound(), HasSubstr("Each step moves "));
  int ambiguous = 0;
  for (const v1::NodeSharding& node : response.nodes()) ambiguous += node.ambiguous();
  if (ambiguous > 0) {
    EXPECT_THAT(response.bound(), HasSubstr(absl::StrCat(ambiguous)));
    EXPECT_THAT(response.bound(), HasSubstr("decided without a rule"));
  }
}

// PlanTraining's request: eight nodes l0..l7 in a chain (100 bytes crossing
// every cut, 1,000 parameters each, forward latencies 1, 2, 3, 1, 2, ...
// seconds, NodeTraining on all but l7), four devices, 1F1B, B = 8.
v1::PlanTrainingRequest TrainingRequest() {
  TestGraph builder;
  builder.Placeholder("x", 100);
  std::string previous = "x";
  for (int i = 0; i < 8; ++i) {
    const std::string name = "l" + std::to_string(i);
    builder.Op(name, {previous}, 4100, 100);
    v1::Node* node = builder.last();
    node->set_parameter_count(1000);
    node->mutable_latency()->set_compute_latency_seconds(1 + i % 3);
    if (i < 7) {
      node->mutable_training()->set_backward_input_seconds(1 + i % 3);
      node->mutable_training()->set_backward_weight_seconds(0.5);
      node->mutable_training()->set_saved_activation_bytes(300);
    }
    previous = name;
  }
  builder.Output({previous});
  v1::PlanTrainingRequest request;
  *request.mutable_graph() = builder.Build();
  *request.mutable_devices() = TestDevices({1 << 30, 1 << 30, 1 << 30, 1 << 30});
  request.mutable_devices()->set_transfer_rate_bytes_per_second(1000);
  request.mutable_config()->set_schedule(v1::ONE_F_ONE_B);
  request.mutable_config()->set_micro_batches(8);
  return request;
}

// A chain of `nodes` nodes like TrainingRequest's, on `devices` devices
// with room for any plan, `schedule` with `micro_batches`.
v1::PlanTrainingRequest LongTrainingRequest(int nodes, int devices,
                                            v1::PipelineScheduleKind schedule,
                                            int micro_batches) {
  TestGraph builder;
  builder.Placeholder("x", 100);
  std::string previous = "x";
  for (int i = 0; i < nodes; ++i) {
    const std::string name = "l" + std::to_string(i);
    builder.Op(name, {previous}, 4100, 100);
    v1::Node* node = builder.last();
    node->set_parameter_count(1000);
    node->mutable_latency()->set_compute_latency_seconds(1 + i % 3);
    previous = name;
  }
  builder.Output({previous});
  v1::PlanTrainingRequest request;
  *request.mutable_graph() = builder.Build();
  *request.mutable_devices() = TestDevices(std::vector<int64_t>(devices, int64_t{1} << 40));
  request.mutable_devices()->set_transfer_rate_bytes_per_second(1000);
  request.mutable_config()->set_schedule(schedule);
  request.mutable_config()->set_micro_batches(micro_batches);
  return request;
}

// A step of more than kMaxTimelineOps ops (ZB-H1, 8 devices, B = 4,096:
// 98,304) has the ops that start first written, each device's in its
// order; the cuts' moves are still within their bound and evaluated.
TEST(EntryPointsTest, PlanTrainingBoundsTheTimeline) {
  const v1::PlanTrainingRequest request =
      LongTrainingRequest(8, 8, v1::ZERO_BUBBLE_H1, kMaxTrainingMicroBatches);
  CancellationToken token;
  const absl::StatusOr<v1::PlanTrainingResponse> response =
      PlanTraining(request, InputLimits(), token);
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::TrainingPlan& plan = response->plan();
  EXPECT_TRUE(plan.timeline_truncated());
  ASSERT_EQ(plan.timeline_size(), kMaxTimelineOps);
  std::vector<int> ops_of(8, 0);
  double last_start = -1;
  int device = -1;
  for (const v1::TimelineOp& op : plan.timeline()) {
    ASSERT_GE(op.device(), device) << "devices in order";
    if (op.device() != device) last_start = -1;
    device = op.device();
    EXPECT_GE(op.start_seconds(), last_start);
    last_start = op.start_seconds();
    ++ops_of[device];
  }
  for (int d = 0; d < 8; ++d) EXPECT_GT(ops_of[d], 0) << d;  // every device's start
  EXPECT_GT(plan.step_seconds(), last_start);
  EXPECT_FALSE(plan.cut_moves_omitted());
  ASSERT_EQ(plan.cuts_size(), 7);
  for (const v1::CutReport& cut : plan.cuts()) {
    EXPECT_TRUE(cut.has_earlier());
    EXPECT_TRUE(cut.has_later());
  }

  // Under the bound, every op and no flag.
  const absl::StatusOr<v1::PlanTrainingResponse> small =
      PlanTraining(LongTrainingRequest(8, 8, v1::ZERO_BUBBLE_H1, 64), InputLimits(), token);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_FALSE(small->plan().timeline_truncated());
  EXPECT_EQ(small->plan().timeline_size(), 3 * 8 * 64);
}

// The ops written are the first by start over all devices, ties to the
// lower device.
TEST(EntryPointsTest, TimelineOpsWrittenAreTheFirstToStart) {
  const auto op = [](double start) {
    PipelineOp result{PipelineOpKind::kForward, 0, 0};
    result.start = start;
    result.end = start + 0.5;
    return result;
  };
  const std::vector<std::vector<PipelineOp>> timeline = {
      {op(0), op(1), op(2), op(3)}, {op(0.5), op(1.5), op(2.5)}, {op(1), op(9)}};
  const CancellationToken token;
  EXPECT_EQ(*TimelineOpsWritten(timeline, 9, token), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(*TimelineOpsWritten(timeline, 100, token), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(*TimelineOpsWritten(timeline, 4, token), (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(*TimelineOpsWritten(timeline, 3, token), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(*TimelineOpsWritten(timeline, 8, token), (std::vector<int64_t>{4, 3, 1}));
  EXPECT_EQ(*TimelineOpsWritten(timeline, 0, token), (std::vector<int64_t>{0, 0, 0}));
}

// Cut moves past kMaxCutMoveWork (64 stages, 1F1B, B = 4,096: 2 x 63 x
// 524,352) are left out; the cuts are listed all the same.
TEST(EntryPointsTest, PlanTrainingOmitsCutMovesPastTheirBound) {
  v1::PlanTrainingRequest request =
      LongTrainingRequest(128, 64, v1::ONE_F_ONE_B, kMaxTrainingMicroBatches);
  CancellationToken token;
  const absl::StatusOr<v1::PlanTrainingResponse> response =
      PlanTraining(request, InputLimits(), token);
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::TrainingPlan& plan = response->plan();
  EXPECT_TRUE(plan.cut_moves_omitted());
  EXPECT_TRUE(plan.timeline_truncated());
  ASSERT_EQ(plan.cuts_size(), 63);
  for (int k = 0; k < 63; ++k) {
    const v1::CutReport& cut = plan.cuts(k);
    EXPECT_EQ(cut.before_node(), plan.stages(k + 1).first_node());
    EXPECT_EQ(cut.crossing_bytes(), 100);
    EXPECT_FALSE(cut.has_earlier());
    EXPECT_FALSE(cut.has_later());
  }
}

// The plan as the response lays it out: stages covering the nodes in order
// (stage_by_item agreeing), a report per device, every op of the timeline,
// and per inner cut the two moves evaluated.
TEST(EntryPointsTest, PlanTrainingWritesTheWholePlan) {
  const v1::PlanTrainingRequest request = TrainingRequest();
  CancellationToken token;
  const absl::StatusOr<v1::PlanTrainingResponse> response =
      PlanTraining(request, InputLimits(), token);
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::TrainingPlan& plan = response->plan();
  ASSERT_EQ(plan.stages_size(), 4);
  ASSERT_EQ(plan.stage_by_item_size(), 8);
  int item = 0;
  for (int k = 0; k < 4; ++k) {
    const v1::TrainingStage& stage = plan.stages(k);
    EXPECT_EQ(stage.stage(), k);
    EXPECT_EQ(stage.device(), "dev" + std::to_string(k));
    ASSERT_GE(stage.node_count(), 1);
    EXPECT_EQ(stage.first_node(), "l" + std::to_string(item));
    for (int i = 0; i < stage.node_count(); ++i) EXPECT_EQ(plan.stage_by_item(item++), k);
    EXPECT_EQ(stage.last_node(), "l" + std::to_string(item - 1));
    EXPECT_EQ(stage.parameters(), 1000 * stage.node_count());
    EXPECT_GT(stage.forward_seconds(), 0);
    EXPECT_GT(stage.backward_seconds(), 0);
    EXPECT_FALSE(stage.recompute());
    EXPECT_GE(stage.peak_in_flight(), 1);
    if (k < 3) {
      EXPECT_EQ(stage.output_bytes(), 100);
      EXPECT_DOUBLE_EQ(stage.transfer_seconds(), 0.1);
    } else {
      EXPECT_EQ(stage.output_bytes(), 0);
    }
  }
  EXPECT_EQ(item, 8);
  ASSERT_EQ(plan.devices_size(), 4);
  double idle = 0;
  for (int d = 0; d < 4; ++d) {
    const v1::DeviceReport& device = plan.devices(d);
    EXPECT_EQ(device.device(), "dev" + std::to_string(d));
    EXPECT_EQ(device.memory().available(), 1 << 30);
    EXPECT_LE(device.memory().peak(), device.memory().available());
    // Mixed-precision Adam, one stage per device.
    const double parameters = static_cast<double>(plan.stages(d).parameters());
    EXPECT_EQ(device.memory().weights(), 2 * parameters);
    EXPECT_EQ(device.memory().gradients(), 2 * parameters);
    EXPECT_EQ(device.memory().optimizer(), 12 * parameters);
    EXPECT_GT(device.memory().peak(), 16 * parameters);
    idle += device.bubble_fraction();
  }
  EXPECT_DOUBLE_EQ(plan.bubble_fraction(), idle / 4);
  EXPECT_EQ(plan.timeline_size(), 2 * 4 * 8);  // F and B per device and micro-batch
  EXPECT_GT(plan.step_seconds(), 0);
  EXPECT_DOUBLE_EQ(plan.samples_per_second(), 8 / plan.step_seconds());
  EXPECT_EQ(plan.crossing_bytes(), 300);
  EXPECT_TRUE(plan.proven_optimal());
  EXPECT_EQ(plan.lower_bound_seconds(), plan.step_seconds());
  EXPECT_GT(plan.search_nodes(), 0);
  EXPECT_EQ(plan.estimated_saved_bytes_nodes(), 1);  // l7

  ASSERT_EQ(plan.cuts_size(), 3);
  for (int k = 0; k < 3; ++k) {
    const v1::CutReport& cut = plan.cuts(k);
    EXPECT_EQ(cut.before_node(), plan.stages(k + 1).first_node());
    EXPECT_EQ(cut.crossing_bytes(), 100);
    EXPECT_EQ(cut.earlier().possible(), plan.stages(k).node_count() > 1) << k;
    EXPECT_EQ(cut.later().possible(), plan.stages(k + 1).node_count() > 1) << k;
    for (const v1::CutMove& move : {cut.earlier(), cut.later()}) {
      if (!move.possible()) continue;
      // The plan is optimal, and every device has room for any cut.
      EXPECT_GE(move.step_seconds(), plan.step_seconds() * (1 - 1e-12));
      EXPECT_TRUE(move.fits());
      EXPECT_GT(move.peak_bytes(), 0);
    }
  }

  // The same answer from the graph's bytes, as the server imports it.
  const std::string bytes = request.graph().SerializeAsString();
  v1::PlanTrainingResponse from_bytes;
  ASSERT_TRUE(PlanTraining(request, GraphSource::Serialized(ChunkedBytes(absl::string_view(bytes))),
                           InputLimits(), token, &from_bytes)
                  .ok());
  EXPECT_EQ(from_bytes.SerializeAsString(), response->SerializeAsString());
}

// A tied embedding (l0) and head (l7) on the first and last device: the
// response gives the all-reduce, and the step covers it.
TEST(EntryPointsTest, PlanTrainingReportsTiedAllReduce) {
  v1::PlanTrainingRequest request = TrainingRequest();
  v1::TiedParameters* tied = request.mutable_config()->add_tied();
  tied->add_nodes("l0");
  tied->add_nodes("l7");
  tied->set_parameter_count(500);  // 1,000 gradient bytes over links of 1,000 B/s
  const CancellationToken token(absl::InfiniteFuture());
  const absl::StatusOr<v1::PlanTrainingResponse> response =
      PlanTraining(request, InputLimits(), token);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->plan().tied_allreduce_seconds_size(), 1);
  EXPECT_DOUBLE_EQ(response->plan().tied_allreduce_seconds(0), 1.0);  // 2 (2 - 1) / 2 x 1,000 / 1,000
  double last_end = 0;
  for (const v1::TimelineOp& op : response->plan().timeline()) {
    last_end = std::max(last_end, op.end_seconds());
  }
  EXPECT_GE(response->plan().step_seconds(), last_end);
}

// A node pinned to a stage of its own is one, and no cut moves next to it.
TEST(EntryPointsTest, PlanTrainingKeepsPinsAndSaysWhichMovesBreakThem) {
  v1::PlanTrainingRequest request = TrainingRequest();
  v1::NodePin* pin = request.mutable_config()->add_pins();
  pin->set_node("l3");
  pin->set_pin(v1::OWN_STAGE);
  CancellationToken token;
  const absl::StatusOr<v1::PlanTrainingResponse> response =
      PlanTraining(request, InputLimits(), token);
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::TrainingPlan& plan = response->plan();
  const int stage = plan.stage_by_item(3);
  EXPECT_EQ(plan.stages(stage).node_count(), 1);
  EXPECT_EQ(plan.stages(stage).first_node(), "l3");
  if (stage > 0) {  // the cut before l3
    EXPECT_FALSE(plan.cuts(stage - 1).earlier().possible());
    EXPECT_FALSE(plan.cuts(stage - 1).later().possible());
  }
  if (stage < 3) {  // the cut after it
    EXPECT_FALSE(plan.cuts(stage).earlier().possible());
    EXPECT_FALSE(plan.cuts(stage).later().possible());
  }
}

// TrainingPlan.bound names the busiest stage and the device nearest its
// memory, and what 10% more memory or one more device would give.
TEST(EntryPointsTest, PlanTrainingSaysWhatBoundsIt) {
  CancellationToken token;
  const absl::StatusOr<v1::PlanTrainingResponse> ample =
      PlanTraining(TrainingRequest(), InputLimits(), token);
  ASSERT_TRUE(ample.ok()) << ample.status();
  const std::string& bound = ample->plan().bound();
  EXPECT_THAT(bound, HasSubstr("is the busiest, "));
  EXPECT_THAT(bound, HasSubstr("is nearest its memory, at "));
  // Memory binds nowhere; a fifth device takes work off the busiest.
  EXPECT_THAT(bound, HasSubstr("10% more memory on every device gives no faster plan"));
  EXPECT_THAT(bound, HasSubstr("one more device like dev3 gives a step of at most "));
  // With 34,000 bytes a device, memory binds: 10% more admits a faster plan.
  v1::PlanTrainingRequest request = TrainingRequest();
  *request.mutable_devices() = TestDevices({34000, 34000, 34000, 34000});
  request.mutable_devices()->set_transfer_rate_bytes_per_second(1000);
  const absl::StatusOr<v1::PlanTrainingResponse> tight = PlanTraining(request, InputLimits(), token);
  ASSERT_TRUE(tight.ok()) << tight.status();
  EXPECT_THAT(tight->plan().bound(), HasSubstr("is nearest its memory, at 99.7%"));
  EXPECT_THAT(tight->plan().bound(),
              HasSubstr("10% more memory on every device gives a step of at most 110.800 s "
                        "(113.800 s now)"));
}

TEST(EntryPointsTest, PlanTrainingThatFitsNowhereIsAFailedPrecondition) {
  v1::PlanTrainingRequest request = TrainingRequest();
  *request.mutable_devices() = TestDevices({5000, 5000, 5000, 5000});
  CancellationToken token;
  const absl::Status status = PlanTraining(request, InputLimits(), token).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
}

TEST(EntryPointsTest, PlanTrainingNamesItsFields) {
  CancellationToken token;
  v1::PlanTrainingRequest request = TrainingRequest();
  request.mutable_config()->set_micro_batches(0);
  EXPECT_EQ(FieldOf(PlanTraining(request, InputLimits(), token).status()),
            "config.micro_batches");

  request = TrainingRequest();
  request.mutable_config()->add_pins()->set_node("ghost");
  EXPECT_EQ(FieldOf(PlanTraining(request, InputLimits(), token).status()),
            "config.pins[0].node");

  request = TrainingRequest();
  request.mutable_graph()->mutable_nodes(2)->mutable_training()->set_backward_weight_seconds(
      -1);
  request.mutable_devices()->mutable_devices(3)->set_available_memory_bytes(-1);
  std::vector<std::string> fields;
  for (const FieldViolation& violation :
       FieldViolations(PlanTraining(request, InputLimits(), token).status())) {
    fields.push_back(violation.field);
  }
  EXPECT_EQ(fields, (std::vector<std::string>{"graph.nodes[2].training.backward_weight_seconds",
                                              "devices.devices[3].available_memory_bytes"}));
}

}  // namespace
}  // namespace partplan

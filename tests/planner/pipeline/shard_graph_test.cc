// ShardGraphPlan: both modes' responses worked out by hand, the choice of
// work, and every bad or infeasible request.
#include "planner/pipeline/shard_graph.h"

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "planner/base/status_util.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/pipeline/pipeline_test_graphs.h"

namespace partplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Strings(const google::protobuf::RepeatedPtrField<std::string>& s) {
  return {s.begin(), s.end()};
}

std::vector<std::pair<std::string, int>> Assignments(const v1::ShardGraphResponse& response) {
  std::vector<std::pair<std::string, int>> out;
  for (const v1::NodePartition& a : response.assignments())
    out.emplace_back(a.node(), a.partition());
  return out;
}

// The ShardGraph entry point: the request checked into ShardOptions and a
// DeviceList, ShardGraphPlan, and the response written from its ShardPlan.
absl::StatusOr<v1::ShardGraphResponse> Shard(const v1::ShardGraphRequest& request) {
  return ShardGraph(request, InputLimits(), CancellationToken());
}

// x -> l0 -> l1 -> l2, then mul(l2, w) with get_attr w; returns (mul, l1).
// Each layer has 6 parameters (18 in all), 30 bytes in total, 8 of output.
v1::ShardGraphRequest LayersRequest(v1::ShardConfig::Mode mode, int shard_count) {
  TestGraphBuilder b;
  b.Placeholder("x", 8);
  b.Module("l0", "l0", {"x"}, 30, 8)->set_parameter_count(6);
  b.Module("l1", "l1", {"l0"}, 30, 8)->set_parameter_count(6);
  b.Module("l2", "l2", {"l1"}, 30, 8)->set_parameter_count(6);
  b.GetAttr("w", 4);
  b.Function("mul", {"l2", "w"}, 8, 8);
  b.Output({"mul", "l1"});
  b.AddModule("", 18);
  for (const char* name : {"l0", "l1", "l2"}) b.AddModule(name, 6);
  v1::ShardGraphRequest request;
  *request.mutable_graph() = b.graph();
  request.mutable_config()->set_mode(mode);
  request.mutable_config()->set_shard_count(shard_count);
  return request;
}

v1::Device* AddDevice(v1::ShardGraphRequest* request, int32_t id, int64_t memory,
                      double flops = 0) {
  v1::Device* device = request->mutable_devices()->add_devices();
  device->set_name("gpu" + std::to_string(id));
  device->set_logical_id(id);
  device->set_available_memory_bytes(memory);
  device->set_compute_flops_per_second(flops);
  return device;
}

TEST(ShardGraphTest, FairscaleShardsWithTheirInputsOutputsAndMemory) {
  const absl::StatusOr<v1::ShardGraphResponse> response =
      Shard(LayersRequest(v1::ShardConfig::FAIRSCALE, 2));
  ASSERT_TRUE(response.ok()) << response.status();
  // Target 18 // 2 = 9: l1 makes 12 and closes shard 0.
  EXPECT_THAT(Assignments(*response),
              ElementsAre(std::make_pair("l0", 0), std::make_pair("l1", 0), std::make_pair("l2", 1),
                          std::make_pair("mul", 1)));
  ASSERT_EQ(response->shards_size(), 2);
  const v1::Shard& first = response->shards(0);
  EXPECT_THAT(Strings(first.nodes()), ElementsAre("l0", "l1"));
  EXPECT_EQ(first.parameter_count(), 12);
  EXPECT_THAT(Strings(first.inputs()), ElementsAre("x"));
  EXPECT_THAT(Strings(first.outputs()), ElementsAre("l1"));
  EXPECT_EQ(first.memory_bytes(), 30 + 30 + 8);  // and x
  const v1::Shard& second = response->shards(1);
  EXPECT_EQ(second.id(), 1);
  EXPECT_THAT(Strings(second.nodes()), ElementsAre("l2", "w", "mul"));
  EXPECT_EQ(second.parameter_count(), 6);
  EXPECT_THAT(Strings(second.inputs()), ElementsAre("l1"));
  EXPECT_THAT(Strings(second.outputs()), ElementsAre("mul"));
  EXPECT_EQ(second.memory_bytes(), 30 + 4 + 8 + 8);  // and l1, carried to the output
  const v1::PlanSummary& summary = response->summary();
  EXPECT_EQ(summary.planner(), "shard/fairscale");
  EXPECT_EQ(summary.node_count(), 7);
  EXPECT_EQ(summary.op_node_count(), 4);
  EXPECT_EQ(summary.partition_count(), 2);
  EXPECT_EQ(summary.devices_used(), 0);
  EXPECT_EQ(summary.graph_total_bytes(), 8 + 30 * 3 + 4 + 8);
  EXPECT_EQ(summary.max_partition_bytes(), 68);
  EXPECT_EQ(summary.cross_partition_bytes(), 8);
  EXPECT_EQ(summary.critical_path_latency_seconds(), 0);
  EXPECT_GT(summary.planner_seconds(), 0);
}

TEST(ShardGraphTest, UnspecifiedModeIsFairscale) {
  const absl::StatusOr<v1::ShardGraphResponse> response =
      Shard(LayersRequest(v1::ShardConfig::MODE_UNSPECIFIED, 2));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->summary().planner(), "shard/fairscale");
}

TEST(ShardGraphTest, BalancedStagesOnTheirDevices) {
  v1::ShardGraphRequest request = LayersRequest(v1::ShardConfig::BALANCED, 2);
  AddDevice(&request, 7, 1000, 1e9);
  AddDevice(&request, 3, 1000, 2e9);
  request.mutable_devices()->set_transfer_rate_bytes_per_second(8e9);
  const absl::StatusOr<v1::ShardGraphResponse> response = Shard(request);
  ASSERT_TRUE(response.ok()) << response.status();
  // Work = parameters [6, 6, 6, 0, 0] over 1e9 and 2e9 per second: [l0]
  // takes 6 ns, the rest 12 / 2 = 6 ns; cutting after l1 would take 12 ns.
  ASSERT_EQ(response->shards_size(), 2);
  const v1::Shard& first = response->shards(0);
  EXPECT_THAT(Strings(first.nodes()), ElementsAre("l0"));
  EXPECT_EQ(first.logical_device_id(), 7);
  EXPECT_DOUBLE_EQ(first.cost(), 6e-9);
  EXPECT_EQ(first.parameter_count(), 6);
  const v1::Shard& second = response->shards(1);
  EXPECT_THAT(Strings(second.nodes()), ElementsAre("l1", "l2", "w", "mul"));
  EXPECT_EQ(second.logical_device_id(), 3);
  EXPECT_DOUBLE_EQ(second.cost(), 6e-9);
  EXPECT_EQ(second.parameter_count(), 12);
  EXPECT_THAT(Strings(second.inputs()), ElementsAre("l0"));
  EXPECT_THAT(Strings(second.outputs()), ElementsAre("l1", "mul"));
  EXPECT_EQ(second.memory_bytes(), 30 + 30 + 4 + 8 + 8);
  const v1::PlanSummary& summary = response->summary();
  EXPECT_EQ(summary.planner(), "shard/balanced/parameters");
  EXPECT_EQ(summary.devices_used(), 2);
  EXPECT_EQ(summary.cross_partition_bytes(), 8);
  // 6 ns + 6 ns + 8 bytes at 8e9 bytes/s.
  EXPECT_DOUBLE_EQ(summary.critical_path_latency_seconds(), 13e-9);
}

TEST(ShardGraphTest, BalancedPrefersLatenciesThenFlopsThenParameters) {
  v1::ShardGraphRequest request = LayersRequest(v1::ShardConfig::BALANCED, 2);
  AddDevice(&request, 0, 1000, 1e9);
  AddDevice(&request, 1, 1000, 1e9);
  // FLOPs put all the work on mul: every cut gives the same bottleneck, and
  // the cut after l0 (8 bytes cross, as after l1) comes first.
  request.mutable_graph()->mutable_nodes(5)->set_flops(100);
  absl::StatusOr<v1::ShardGraphResponse> response = Shard(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->summary().planner(), "shard/balanced/flops");
  EXPECT_THAT(Strings(response->shards(0).nodes()), ElementsAre("l0"));
  EXPECT_EQ(response->shards(0).cost(), 0);
  EXPECT_DOUBLE_EQ(response->shards(1).cost(), 100 / 1e9);
  // A latency anywhere wins over FLOPs, and is not scaled by throughput.
  request.mutable_graph()->mutable_nodes(1)->mutable_latency()->set_compute_latency_seconds(5);
  request.mutable_graph()->mutable_nodes(1)->mutable_latency()->set_memory_latency_seconds(7);
  response = Shard(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->summary().planner(), "shard/balanced/latency");
  EXPECT_THAT(Strings(response->shards(0).nodes()), ElementsAre("l0"));
  EXPECT_DOUBLE_EQ(response->shards(0).cost(), 7);
  EXPECT_DOUBLE_EQ(response->summary().critical_path_latency_seconds(), 7);
}

TEST(ShardGraphTest, BalancedWithoutThroughputCostsWorkUnits) {
  v1::ShardGraphRequest request = LayersRequest(v1::ShardConfig::BALANCED, 3);
  for (int id = 0; id < 3; ++id) AddDevice(&request, id, 1000);
  const absl::StatusOr<v1::ShardGraphResponse> response = Shard(request);
  ASSERT_TRUE(response.ok()) << response.status();
  for (int s = 0; s < 3; ++s) EXPECT_EQ(response->shards(s).cost(), 6) << s;
  EXPECT_EQ(response->summary().critical_path_latency_seconds(), 0);
}

struct BadRequestCase {
  std::string name;
  v1::ShardConfig::Mode mode;
  std::function<void(v1::ShardGraphRequest*)> edit;
  absl::StatusCode code;
  std::string field;  // for INVALID_ARGUMENT
  std::string message;
};

// Failure messages name the case instead of dumping its bytes.
void PrintTo(const BadRequestCase& c, std::ostream* os) { *os << c.name; }

class BadRequestTest : public ::testing::TestWithParam<BadRequestCase> {};

TEST_P(BadRequestTest, FailsNamingTheFieldOrTheReason) {
  const BadRequestCase& c = GetParam();
  v1::ShardGraphRequest request = LayersRequest(c.mode, 2);
  if (c.mode == v1::ShardConfig::BALANCED) {
    AddDevice(&request, 0, 1000);
    AddDevice(&request, 1, 1000);
  }
  c.edit(&request);
  const absl::StatusOr<v1::ShardGraphResponse> response = Shard(request);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), c.code) << response.status();
  if (c.code == absl::StatusCode::kInvalidArgument) {
    EXPECT_EQ(InvalidFieldPath(response.status()).value_or("<none>"), c.field);
  }
  EXPECT_THAT(std::string(response.status().message()), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(
    AllChecks, BadRequestTest,
    ::testing::ValuesIn(std::vector<BadRequestCase>{
        {"ZeroShards", v1::ShardConfig::FAIRSCALE,
         [](v1::ShardGraphRequest* r) { r->mutable_config()->set_shard_count(0); },
         absl::StatusCode::kInvalidArgument, "config.shard_count", "must be positive, got 0"},
        {"NegativeStages", v1::ShardConfig::BALANCED,
         [](v1::ShardGraphRequest* r) { r->mutable_config()->set_shard_count(-2); },
         absl::StatusCode::kInvalidArgument, "config.shard_count", "must be positive, got -2"},
        {"UnknownMode", v1::ShardConfig::FAIRSCALE,
         [](v1::ShardGraphRequest* r) {
           r->mutable_config()->set_mode(static_cast<v1::ShardConfig::Mode>(9));
         },
         absl::StatusCode::kInvalidArgument, "config.mode", "unknown shard mode 9"},
        {"NoOperations", v1::ShardConfig::FAIRSCALE,
         [](v1::ShardGraphRequest* r) {
           v1::Graph* g = r->mutable_graph();
           g->mutable_nodes()->DeleteSubrange(1, 5);
           g->mutable_nodes(1)->clear_args();
           g->mutable_nodes(1)->add_args()->set_node("x");
         },
         absl::StatusCode::kInvalidArgument, "graph.nodes", "nothing to shard"},
        {"FairscaleWithoutModules", v1::ShardConfig::FAIRSCALE,
         [](v1::ShardGraphRequest* r) { r->mutable_graph()->clear_modules(); },
         absl::StatusCode::kInvalidArgument, "graph.modules", "lists no modules"},
        {"FairscaleExactCount", v1::ShardConfig::FAIRSCALE,
         [](v1::ShardGraphRequest* r) {
           r->mutable_config()->set_shard_count(3);
           r->mutable_config()->set_exact(true);
         },
         absl::StatusCode::kFailedPrecondition, "", "auto_shard makes 2 shards, not the 3"},
        {"BalancedDeviceCount", v1::ShardConfig::BALANCED,
         [](v1::ShardGraphRequest* r) { r->mutable_config()->set_shard_count(3); },
         absl::StatusCode::kInvalidArgument, "devices.devices",
         "needs one device per stage: 2 devices for shard_count 3"},
        {"BalancedBadDevice", v1::ShardConfig::BALANCED,
         [](v1::ShardGraphRequest* r) {
           r->mutable_devices()->mutable_devices(1)->set_available_memory_bytes(0);
         },
         absl::StatusCode::kInvalidArgument, "devices.devices[1].available_memory_bytes",
         "must have positive memory"},
        {"BalancedSomeThroughputs", v1::ShardConfig::BALANCED,
         [](v1::ShardGraphRequest* r) {
           r->mutable_devices()->mutable_devices(0)->set_compute_flops_per_second(1e12);
         },
         absl::StatusCode::kInvalidArgument, "devices.devices[1].compute_flops_per_second",
         "every device's throughput or by none"},
        {"BalancedNoThroughputOnTheFirst", v1::ShardConfig::BALANCED,
         [](v1::ShardGraphRequest* r) {
           r->mutable_devices()->mutable_devices(1)->set_compute_flops_per_second(1e12);
         },
         absl::StatusCode::kInvalidArgument, "devices.devices[0].compute_flops_per_second",
         "(devices[1] gives one, devices[0] does not)"},
        {"BalancedTooLittleMemory", v1::ShardConfig::BALANCED,
         [](v1::ShardGraphRequest* r) {
           r->mutable_devices()->mutable_devices(0)->set_available_memory_bytes(40);
           r->mutable_devices()->mutable_devices(1)->set_available_memory_bytes(40);
         },
         absl::StatusCode::kFailedPrecondition, "",
         "holds at most the first 2 of the 5 nodes to place"},
    }),
    [](const ::testing::TestParamInfo<BadRequestCase>& info) { return info.param.name; });

}  // namespace
}  // namespace partplan

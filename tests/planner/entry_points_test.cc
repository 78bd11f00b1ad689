// The entry points' own duties around the planners: the server's input
// limits reach every planner, and errors name the request's own fields.
#include "planner/api/entry_points.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

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

}  // namespace
}  // namespace partplan

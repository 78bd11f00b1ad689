// The Plan RPC: one call running the chosen planner and returning a
// PartitionPlan. With a partitioner it is PartitionGraph's plan; with a shard
// planner the shards become the partitions, placed on the devices.
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "planner/base/status_util.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

using ::testing::ElementsAre;

// The MLP of client/examples/shard_graph.json, with its module hierarchy.
v1::Graph ExampleGraph() {
  std::ifstream file("client/examples/shard_graph.json");
  std::stringstream text;
  text << file.rdbuf();
  v1::ShardGraphRequest request;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &request).ok());
  return request.graph();
}

absl::StatusOr<v1::PartitionPlan> PlanWith(const v1::PlanRequest& request) {
  CancellationToken token;
  absl::StatusOr<v1::PlanResponse> response = Plan(request, InputLimits(), token);
  if (!response.ok()) return response.status();
  return response->plan();
}

TEST(PlanTest, PartitionerPlanEqualsPartitionGraphs) {
  v1::PartitionGraphRequest partition_request;
  *partition_request.mutable_graph() = ExampleGraph();
  *partition_request.mutable_devices() = TestDevices({8 << 20, 8 << 20, 8 << 20});
  v1::PlanRequest request;
  *request.mutable_graph() = partition_request.graph();
  *request.mutable_devices() = partition_request.devices();
  request.mutable_partitioner();  // defaults: SIZE_BASED
  absl::StatusOr<v1::PartitionPlan> plan = PlanWith(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CancellationToken token;
  absl::StatusOr<v1::PartitionGraphResponse> expected =
      PartitionGraph(partition_request, InputLimits(), token);
  ASSERT_TRUE(expected.ok());
  plan->mutable_summary()->clear_planner_seconds();
  expected->mutable_plan()->mutable_summary()->clear_planner_seconds();
  EXPECT_EQ(plan->SerializeAsString(), expected->plan().SerializeAsString());
}

TEST(PlanTest, ShardPlannerShardsBecomePartitionsOnDevices) {
  v1::PlanRequest request;
  *request.mutable_graph() = ExampleGraph();
  *request.mutable_devices() = TestDevices({64 << 20, 64 << 20});
  request.mutable_shard()->set_mode(v1::ShardConfig::BALANCED);
  request.mutable_shard()->set_shard_count(2);
  absl::StatusOr<v1::PartitionPlan> plan = PlanWith(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->partitions_size(), 2);
  EXPECT_THAT(plan->partitions(0).logical_device_ids(), ElementsAre(0));
  EXPECT_THAT(plan->partitions(1).logical_device_ids(), ElementsAre(1));
  EXPECT_THAT(plan->partitions(0).children(), ElementsAre(1));
  EXPECT_EQ(plan->dag_size(), 2);
  EXPECT_EQ(plan->summary().partition_count(), 2);
  EXPECT_EQ(plan->summary().devices_used(), 2);
  EXPECT_THAT(plan->summary().planner(), ::testing::StartsWith("shard/balanced"));
  // Every call_* node is assigned.
  int op_nodes = 0;
  for (const v1::Node& node : request.graph().nodes()) {
    op_nodes += node.op() == v1::CALL_MODULE || node.op() == v1::CALL_FUNCTION ||
                node.op() == v1::CALL_METHOD;
  }
  EXPECT_EQ(plan->assignments_size(), op_nodes);
}

TEST(PlanTest, FairscaleShardsArePlacedBestFit) {
  v1::PlanRequest request;
  *request.mutable_graph() = ExampleGraph();
  *request.mutable_devices() = TestDevices({64 << 20, 64 << 20, 64 << 20});
  request.mutable_shard()->set_mode(v1::ShardConfig::FAIRSCALE);
  request.mutable_shard()->set_shard_count(2);
  absl::StatusOr<v1::PartitionPlan> plan = PlanWith(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GE(plan->partitions_size(), 1);
  for (const v1::Partition& partition : plan->partitions()) {
    EXPECT_EQ(partition.logical_device_ids_size(), 1) << partition.ShortDebugString();
  }
}

TEST(PlanTest, ShardErrorsNameThePlanRequestsField) {
  v1::PlanRequest request;
  *request.mutable_graph() = ExampleGraph();
  request.mutable_shard()->set_shard_count(0);
  absl::StatusOr<v1::PartitionPlan> plan = PlanWith(request);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InvalidFieldPath(plan.status()).value_or(""), "shard.shard_count");
}

}  // namespace
}  // namespace partplan

// Tests of requests built from the partition/plan/validate flags.
#include "client/cli/request_builder.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace cli {
namespace {

using ::testing::HasSubstr;

v1::Graph TinyGraph() {
  v1::Graph graph;
  graph.set_name("tiny");
  v1::Node* x = graph.add_nodes();
  x->set_name("x");
  x->set_op(v1::PLACEHOLDER);
  return graph;
}

TEST(BuildDeviceInventoryTest, OneDevicePerListedSize) {
  PlannerFlags flags;
  flags.device_memory = "16GiB,8GiB,1000";
  absl::StatusOr<v1::DeviceInventory> inventory = BuildDeviceInventory(flags);
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  ASSERT_EQ(inventory->devices_size(), 3);
  const int64_t expected_bytes[] = {int64_t{16} << 30, int64_t{8} << 30, 1000};
  for (int i = 0; i < 3; ++i) {
    const v1::Device& device = inventory->devices(i);
    EXPECT_EQ(device.name(), absl::StrCat("gpu", i));
    EXPECT_EQ(device.logical_id(), i);
    EXPECT_EQ(device.available_memory_bytes(), expected_bytes[i]);
  }
  EXPECT_EQ(inventory->transfer_rate_bytes_per_second(), 0);
}

TEST(BuildDeviceInventoryTest, DeviceCountRepeatsASingleSize) {
  PlannerFlags flags;
  flags.device_count = 4;
  flags.device_memory = "24GiB";
  flags.transfer_rate = "12GB";
  absl::StatusOr<v1::DeviceInventory> inventory = BuildDeviceInventory(flags);
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  ASSERT_EQ(inventory->devices_size(), 4);
  EXPECT_EQ(inventory->devices(3).name(), "gpu3");
  EXPECT_EQ(inventory->devices(3).logical_id(), 3);
  EXPECT_EQ(inventory->devices(3).available_memory_bytes(), int64_t{24} << 30);
  EXPECT_EQ(inventory->transfer_rate_bytes_per_second(), 12e9);
}

TEST(BuildDeviceInventoryTest, RejectsBadDeviceFlagsNamingTheFlag) {
  struct BadFlags {
    std::string device_memory;
    int device_count;
    std::string transfer_rate;
    std::string expected_message;
  };
  const BadFlags cases[] = {
      {"", 0, "", "--device_memory is required"},
      {"16GiB,12XB", 0, "", "--device_memory: invalid byte size '12XB'"},
      {"16GiB,0", 0, "", "--device_memory: device memory must be positive"},
      {"16GiB,16GiB", 3, "", "--devices=3 but --device_memory lists 2 sizes"},
      {"16GiB", -1, "", "--devices: must not be negative"},
      {"16GiB", 0, "fast", "--transfer_rate: invalid byte size 'fast'"},
  };
  for (const BadFlags& c : cases) {
    PlannerFlags flags;
    flags.device_memory = c.device_memory;
    flags.device_count = c.device_count;
    flags.transfer_rate = c.transfer_rate;
    absl::StatusOr<v1::DeviceInventory> inventory = BuildDeviceInventory(flags);
    ASSERT_FALSE(inventory.ok()) << c.expected_message;
    EXPECT_EQ(inventory.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(inventory.status().message()),
                HasSubstr(c.expected_message));
  }
}

TEST(ParsePartitionModeTest, AcceptsEveryModeInAnyCase) {
  EXPECT_EQ(*ParsePartitionMode("size_based"),
            v1::PartitionerConfig::SIZE_BASED);
  EXPECT_EQ(*ParsePartitionMode("sparse_nn"), v1::PartitionerConfig::SPARSE_NN);
  EXPECT_EQ(*ParsePartitionMode("COST_AWARE"),
            v1::PartitionerConfig::COST_AWARE);
  EXPECT_EQ(*ParsePartitionMode("Kl_Based"), v1::PartitionerConfig::KL_BASED);
  EXPECT_EQ(*ParsePartitionMode("aot_based"), v1::PartitionerConfig::AOT_BASED);
}

TEST(ParsePartitionModeTest, RejectsUnknownModesListingTheChoices) {
  for (const char* name : {"greedy", "", "mode_unspecified"}) {
    absl::StatusOr<v1::PartitionerConfig::Mode> mode = ParsePartitionMode(name);
    ASSERT_FALSE(mode.ok()) << name;
    EXPECT_THAT(std::string(mode.status().message()),
                HasSubstr("one of size_based, sparse_nn, cost_aware, "
                          "kl_based, aot_based"));
  }
}

TEST(BuildPartitionGraphRequestTest, CarriesGraphDevicesAndConfig) {
  PlannerFlags flags;
  flags.device_memory = "16GiB,16GiB";
  flags.mode = "cost_aware";
  flags.saturate_host = true;
  absl::StatusOr<v1::PartitionGraphRequest> request =
      BuildPartitionGraphRequest(TinyGraph(), flags);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->graph().name(), "tiny");
  EXPECT_EQ(request->devices().devices_size(), 2);
  EXPECT_EQ(request->config().mode(), v1::PartitionerConfig::COST_AWARE);
  EXPECT_TRUE(request->config().saturate_host());
}

TEST(BuildPartitionGraphRequestTest, NodeReferencesByNameUnlessAsked) {
  PlannerFlags flags;
  flags.device_memory = "16GiB";
  absl::StatusOr<v1::PartitionGraphRequest> by_name =
      BuildPartitionGraphRequest(TinyGraph(), flags);
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->node_references(), v1::NODE_REFERENCES_NAMES);

  flags.node_references = "Indices";
  absl::StatusOr<v1::PartitionGraphRequest> by_index =
      BuildPartitionGraphRequest(TinyGraph(), flags);
  ASSERT_TRUE(by_index.ok()) << by_index.status();
  EXPECT_EQ(by_index->node_references(), v1::NODE_REFERENCES_INDICES);
  absl::StatusOr<v1::PlanRequest> plan = BuildPlanRequest(TinyGraph(), flags);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->node_references(), v1::NODE_REFERENCES_INDICES);

  flags.node_references = "ids";
  absl::StatusOr<v1::PlanRequest> unknown = BuildPlanRequest(TinyGraph(), flags);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "--node_references: unknown value 'ids'; one of names, indices");
}

TEST(BuildPartitionGraphRequestTest, RejectsAnUnknownMode) {
  PlannerFlags flags;
  flags.device_memory = "16GiB";
  flags.mode = "fastest";
  absl::StatusOr<v1::PartitionGraphRequest> request =
      BuildPartitionGraphRequest(TinyGraph(), flags);
  ASSERT_FALSE(request.ok());
  EXPECT_THAT(std::string(request.status().message()),
              HasSubstr("--mode: unknown partition mode 'fastest'"));
}

TEST(BuildPlanRequestTest, RunsThePartitioner) {
  PlannerFlags flags;
  flags.device_count = 2;
  flags.device_memory = "1GiB";
  flags.mode = "kl_based";
  absl::StatusOr<v1::PlanRequest> request =
      BuildPlanRequest(TinyGraph(), flags);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->graph().name(), "tiny");
  EXPECT_EQ(request->devices().devices_size(), 2);
  ASSERT_EQ(request->planner_case(), v1::PlanRequest::kPartitioner);
  EXPECT_EQ(request->partitioner().mode(), v1::PartitionerConfig::KL_BASED);
}

TEST(BuildValidateRequestTest, DevicesOnlyWhenGiven) {
  PlannerFlags flags;
  absl::StatusOr<v1::ValidateRequest> graph_only =
      BuildValidateRequest(TinyGraph(), flags);
  ASSERT_TRUE(graph_only.ok()) << graph_only.status();
  EXPECT_EQ(graph_only->graph().nodes_size(), 1);
  EXPECT_FALSE(graph_only->has_devices());

  flags.device_memory = "2GiB";
  absl::StatusOr<v1::ValidateRequest> with_devices =
      BuildValidateRequest(TinyGraph(), flags);
  ASSERT_TRUE(with_devices.ok()) << with_devices.status();
  EXPECT_EQ(with_devices->devices().devices_size(), 1);
}

}  // namespace
}  // namespace cli
}  // namespace partplan

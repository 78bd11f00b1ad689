// PartitionGraph (size_based) on small graphs whose plans are worked out by
// hand from torch.fx 1.13's rules; the golden fixtures test compares with
// torch.fx itself on real models.
#include "planner/fx/partitioner.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "planner/base/status_util.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::PartitionGraphRequest Request(const v1::Graph& graph, const std::vector<int64_t>& memory) {
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = graph;
  *request.mutable_devices() = TestDevices(memory);
  request.mutable_config()->set_mode(v1::PartitionerConfig::SIZE_BASED);
  return request;
}

absl::StatusOr<v1::PartitionPlan> Partition(const v1::PartitionGraphRequest& request) {
  CancellationToken token;
  absl::StatusOr<v1::PartitionGraphResponse> response =
      PartitionGraph(request, InputLimits(), token);
  if (!response.ok()) return response.status();
  return response->plan();
}

std::vector<std::string> Names(const google::protobuf::RepeatedPtrField<std::string>& names) {
  return {names.begin(), names.end()};
}
std::vector<int32_t> Ids(const google::protobuf::RepeatedField<int32_t>& ids) {
  return {ids.begin(), ids.end()};
}

// x(10) -> a(50) -> b(50) -> c(50) -> d(20) -> output; outputs are 10 bytes.
v1::Graph Chain() {
  return TestGraph()
      .Placeholder("x", 10)
      .Op("a", {"x"}, 50, 10)
      .Op("b", {"a"}, 50, 10)
      .Op("c", {"b"}, 50, 10)
      .Op("d", {"c"}, 20, 10)
      .Output({"d"})
      .Build();
}

TEST(SizeBasedTest, WholeGraphOnTheLargestDeviceWhenItFits) {
  absl::StatusOr<v1::PartitionPlan> plan = Partition(Request(Chain(), {100, 180, 180}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->partitions_size(), 1);
  EXPECT_THAT(Names(plan->partitions(0).nodes()), ElementsAre("x", "a", "b", "c", "d"));
  EXPECT_EQ(plan->partitions(0).memory_bytes(), 180);
  EXPECT_THAT(Ids(plan->partitions(0).logical_device_ids()), ElementsAre(1));
  EXPECT_EQ(plan->summary().graph_total_bytes(), 180);
  ASSERT_EQ(plan->dag_size(), 1);
  EXPECT_EQ(plan->dag(0).submodule(), "submod_0");
  EXPECT_THAT(Names(plan->dag(0).input_nodes()), ElementsAre("x"));
  EXPECT_THAT(Names(plan->dag(0).output_nodes()), ElementsAre("submod_0"));
}

TEST(SizeBasedTest, FillsDevicesInOrderAndPlacesLeftoversBestFit) {
  // a (50 + x 10) and b (50) fill dev0 (120) to 10 bytes left; c needs 50,
  // so it opens dev1 (90) with 60 (itself and b's output); d then needs 20
  // (c is already there) of the 30 left and joins c.
  absl::StatusOr<v1::PartitionPlan> plan = Partition(Request(Chain(), {120, 90}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->partitions_size(), 2);
  EXPECT_THAT(Names(plan->partitions(0).nodes()), ElementsAre("x", "a", "b"));
  EXPECT_EQ(plan->partitions(0).memory_bytes(), 110);
  EXPECT_THAT(Names(plan->partitions(1).nodes()), ElementsAre("c", "d"));
  EXPECT_EQ(plan->partitions(1).memory_bytes(), 60 + 20);
  EXPECT_THAT(Ids(plan->partitions(1).logical_device_ids()), ElementsAre(1));
  EXPECT_THAT(Ids(plan->partitions(0).children()), ElementsAre(1));
  EXPECT_THAT(Ids(plan->partitions(1).parents()), ElementsAre(0));
  EXPECT_THAT(Names(plan->partitions(0).outputs()), ElementsAre("b"));
  EXPECT_THAT(Names(plan->partitions(1).inputs()), ElementsAre("b"));
}

TEST(SizeBasedTest, LeftoverNodesGetTheirOwnPartitionsOnTheTightestDevice) {
  v1::Graph graph = TestGraph()
                        .Placeholder("x", 10)
                        .Op("a", {"x"}, 50, 10)
                        .Op("b", {"a"}, 50, 10)
                        .Op("c", {"b"}, 50, 10)
                        .Op("d", {"c"}, 25, 10)
                        .Op("e", {"d"}, 5, 5)
                        .Output({"e"})
                        .Build();
  // With room for everything on two devices, nothing is left over: dev0
  // takes x, a, b; dev1 takes c (60), d (25 <= 40 left) and e (5 <= 15).
  absl::StatusOr<v1::PartitionPlan> plan = Partition(Request(graph, {120, 100}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->partitions_size(), 2);

  // With dev1 at 70, c leaves 10 bytes: d and e become leftovers.
  plan = Partition(Request(graph, {150, 70}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  // dev0 150: x, a, b (110), c: extra 50 > 40 -> dev1 (60, 10 left); d:
  // extra 25 > 10 and both devices are used -> leftover partition 2 (35);
  // e -> leftover partition 3 (5 + 10 = 15).
  ASSERT_EQ(plan->partitions_size(), 4);
  EXPECT_THAT(Names(plan->partitions(2).nodes()), ElementsAre("d"));
  EXPECT_EQ(plan->partitions(2).memory_bytes(), 35);
  EXPECT_THAT(Names(plan->partitions(3).nodes()), ElementsAre("e"));
  EXPECT_EQ(plan->partitions(3).memory_bytes(), 15);
  // Rooms left: dev0 40, dev1 10. Partition 2 (d) tries dev1 first (10 < 35:
  // c is held there, so d needs only its own 25), then dev0 (25 + c's 10 =
  // 35 <= 40).
  EXPECT_THAT(Ids(plan->partitions(2).logical_device_ids()), ElementsAre(0));
  // Rooms: dev0 5, dev1 10. Partition 3 (e) on dev0: d is held there, so e
  // needs 5 <= 5, an exact fit (torch 1.13 would refuse it and fail).
  EXPECT_THAT(Ids(plan->partitions(3).logical_device_ids()), ElementsAre(0));
  ASSERT_EQ(plan->device_usage_size(), 2);
  EXPECT_EQ(plan->device_usage(0).used_bytes(), 110 + 35 + 5);
  EXPECT_THAT(Ids(plan->device_usage(0).partitions()), ElementsAre(0, 2, 3));
  EXPECT_EQ(plan->summary().partition_count(), 4);
  EXPECT_EQ(plan->summary().devices_used(), 2);
  // The DAG follows the dependency chain.
  ASSERT_EQ(plan->dag_size(), 4);
  EXPECT_EQ(plan->dag(3).submodule(), "submod_3");
  EXPECT_THAT(Names(plan->dag(3).input_nodes()), ElementsAre("submod_2"));
}

TEST(SizeBasedTest, NotEnoughMemoryIsFailedPrecondition) {
  absl::StatusOr<v1::PartitionPlan> plan = Partition(Request(Chain(), {100, 79}));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("needs 180 bytes and the 2 devices have 179 bytes together"));
}

TEST(SizeBasedTest, NodeLargerThanEveryUnusedDeviceIsFailedPrecondition) {
  v1::Graph graph = TestGraph()
                        .Placeholder("x", 10)
                        .Op("a", {"x"}, 140, 10)
                        .Op("b", {"a"}, 20, 10)
                        .Output({"b"})
                        .Build();
  absl::StatusOr<v1::PartitionPlan> plan = Partition(Request(graph, {100, 100}));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("node 'a' is too large to fit any device: it needs 150 bytes"));
}

TEST(SizeBasedTest, LeftoverThatFitsNowhereIsFailedPrecondition) {
  absl::StatusOr<v1::PartitionPlan> plan = Partition(Request(
      TestGraph()
          .Placeholder("x", 10)
          .Op("a", {"x"}, 50, 10)
          .Op("b", {"a"}, 50, 10)
          .Op("c", {"b"}, 50, 10)
          .Op("d", {"c"}, 25, 10)
          .Output({"d"})
          .Build(),
      {120, 70}));
  // dev0: x, a, b (110, 10 left); dev1: c (60, 10 left); d needs 25+ on both.
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("partition 2 (first node 'd')"));
}

TEST(SizeBasedTest, NoDevicesAndNoOperationsAreInvalidArguments) {
  absl::StatusOr<v1::PartitionPlan> plan = Partition(Request(Chain(), {}));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InvalidFieldPath(plan.status()).value_or(""), "devices.devices");

  plan = Partition(Request(TestGraph().Placeholder("x", 1).Output({"x"}).Build(), {10}));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InvalidFieldPath(plan.status()).value_or(""), "graph.nodes");
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("no operations"));
}

TEST(SizeBasedTest, SharedInputsAreCopiedIntoEveryPartitionThatReadsThem) {
  v1::Graph graph = TestGraph()
                        .Placeholder("x", 10)
                        .GetAttr("w", 30)
                        .Op("a", {"x", "w"}, 50, 10)
                        .Op("b", {"a", "w"}, 50, 10)
                        .Output({"b"})
                        .Build();
  // Total 140. dev0 (100): a with x and w (90). b: extra 50 > 10 -> dev1.
  absl::StatusOr<v1::PartitionPlan> plan = Partition(Request(graph, {100, 100}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->partitions_size(), 2);
  EXPECT_THAT(Names(plan->partitions(0).nodes()), ElementsAre("x", "w", "a"));
  EXPECT_THAT(Names(plan->partitions(1).nodes()), ElementsAre("w", "b"));
  // b: 50 + a's output 10 (outside); w: 30 copied in.
  EXPECT_EQ(plan->partitions(1).memory_bytes(), 90);
  EXPECT_THAT(Names(plan->partitions(1).inputs()), ElementsAre("a", "w"));
  EXPECT_THAT(Names(plan->dag(1).input_nodes()), ElementsAre("submod_0", "w"));
  EXPECT_EQ(plan->summary().cross_partition_bytes(), 10);
}

TEST(SizeBasedTest, UnknownModeIsInvalidArgument) {
  v1::PartitionGraphRequest request = Request(Chain(), {1000});
  request.mutable_config()->set_mode(static_cast<v1::PartitionerConfig::Mode>(42));
  absl::StatusOr<v1::PartitionPlan> plan = Partition(request);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InvalidFieldPath(plan.status()).value_or(""), "config.mode");
}

TEST(SparseNnTest, GraphsWithoutEmbeddingsArePlacedBestFit) {
  v1::PartitionGraphRequest request = Request(Chain(), {130, 130});
  request.mutable_config()->set_mode(v1::PartitionerConfig::SPARSE_NN);
  absl::StatusOr<v1::PartitionPlan> plan = Partition(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Cuts at 130 bytes: x, a, b (110) | c, d (60 + 20); together they would
  // need 180, so they stay apart. With no embedding partition to follow,
  // they are placed best fit: one per device.
  ASSERT_EQ(plan->partitions_size(), 2);
  EXPECT_EQ(plan->partitions(0).memory_bytes(), 110);
  EXPECT_EQ(plan->partitions(1).memory_bytes(), 80);
  EXPECT_THAT(Ids(plan->partitions(0).logical_device_ids()), ElementsAre(0));
  EXPECT_THAT(Ids(plan->partitions(1).logical_device_ids()), ElementsAre(1));
}

// x(1) -> e1(40), e2(40) -> a(10) on two devices of 55: e1 and e2 are
// call_module nodes with the given targets, and the model's modules are
// listed; outputs are 1 byte.
v1::PartitionGraphRequest TwoLookups(const std::string& target_1, const std::string& target_2) {
  v1::PartitionGraphRequest request = Request(TestGraph()
                                                  .Placeholder("x", 1)
                                                  .Module("e1", {"x"}, 40, 1)
                                                  .Module("e2", {"x"}, 40, 1)
                                                  .Op("a", {"e1", "e2"}, 10, 1)
                                                  .Output({"a"})
                                                  .Build(),
                                              {55, 55});
  request.mutable_graph()->mutable_nodes(1)->set_target(target_1);
  request.mutable_graph()->mutable_nodes(2)->set_target(target_2);
  for (const auto& [name, type] : std::vector<std::pair<std::string, std::string>>{
           {"", "Model"}, {"tables", "torch.nn.ModuleList"},
           {"tables.0", "torch.nn.EmbeddingBag"}, {"tables.1", "torch.nn.Linear"}}) {
    v1::Module* module = request.mutable_graph()->add_modules();
    module->set_qualified_name(name);
    module->set_module_type(type);
  }
  request.mutable_config()->set_mode(v1::PartitionerConfig::SPARSE_NN);
  return request;
}

// torch.fx asks whether the module at each prefix of the target prints
// "Embedding"; `tables` holds an EmbeddingBag, so both lookups count, even
// tables.1 (a Linear). The embedding partitions get a device each and the
// dense partition runs on both.
TEST(SparseNnTest, ATargetUnderAModuleHoldingAnEmbeddingIsAnEmbedding) {
  absl::StatusOr<v1::PartitionPlan> plan =
      Partition(TwoLookups("tables.0.lookup", "tables.1"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->partitions_size(), 3);
  EXPECT_THAT(Names(plan->partitions(2).nodes()), ElementsAre("a"));
  EXPECT_THAT(Ids(plan->partitions(2).logical_device_ids()), ElementsAre(0, 1));
}

TEST(SparseNnTest, OnlyWholeAtomsMatch) {
  absl::StatusOr<v1::PartitionPlan> plan =
      Partition(TwoLookups("tablesX.0.lookup", "table.1"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  // No embedding: x, e1 | x, e2, a, placed best fit, one device each.
  ASSERT_EQ(plan->partitions_size(), 2);
  EXPECT_THAT(Names(plan->partitions(1).nodes()), ElementsAre("x", "e2", "a"));
  EXPECT_THAT(Ids(plan->partitions(1).logical_device_ids()), ElementsAre(1));
}

// Targets of 200k atoms: looking each prefix up was quadratic in the
// number of atoms (seconds per node, without polling the deadline).
TEST(SparseNnTest, EmbeddingLookupIsLinearInTheTargetLength) {
  std::string target = "m";
  for (int i = 0; i < 200000; ++i) target += ".m";
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::PartitionPlan> plan = Partition(TwoLookups(target, target));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->partitions_size(), 2);
}

TEST(SizeBasedTest, StopsWhenCancelled) {
  CancellationToken token;
  token.Cancel();
  EXPECT_EQ(PartitionGraph(Request(Chain(), {100, 100}), InputLimits(), token).status().code(),
            absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace partplan

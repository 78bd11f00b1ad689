// aot_based plans (the caller's maps, validated) and saturate_host
// replication, on small graphs worked out by hand.
#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "planner/base/status_util.h"
#include "planner/fx/saturate_host.h"
#include "planner/graph/devices.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// x -> a -> b -> c -> output, every node 10 bytes.
v1::PartitionGraphRequest AotRequest(const std::vector<std::pair<std::string, int>>& nodes,
                                     const std::vector<std::vector<int32_t>>& devices) {
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = TestGraph()
                                 .Placeholder("x", 10)
                                 .Op("a", {"x"}, 10, 10)
                                 .Op("b", {"a"}, 10, 10)
                                 .Op("c", {"b", "x"}, 10, 10)
                                 .Output({"c"})
                                 .Build();
  *request.mutable_devices() = TestDevices({100, 100, 100});
  v1::PartitionerConfig* config = request.mutable_config();
  config->set_mode(v1::PartitionerConfig::AOT_BASED);
  for (const auto& [node, partition] : nodes) {
    v1::NodePartition* entry = config->add_node_partitions();
    entry->set_node(node);
    entry->set_partition(partition);
  }
  for (size_t p = 0; p < devices.size(); ++p) {
    v1::PartitionDevices* entry = config->add_partition_devices();
    entry->set_partition(static_cast<int32_t>(p));
    for (int32_t id : devices[p]) entry->add_logical_device_ids(id);
  }
  return request;
}

absl::StatusOr<v1::PartitionPlan> PlanWith(const v1::PartitionGraphRequest& request) {
  CancellationToken token;
  absl::StatusOr<v1::PartitionGraphResponse> response =
      PartitionGraph(request, InputLimits(), token);
  if (!response.ok()) return response.status();
  return response->plan();
}

std::vector<int32_t> Ids(const google::protobuf::RepeatedField<int32_t>& ids) {
  return {ids.begin(), ids.end()};
}
std::vector<std::string> Names(const google::protobuf::RepeatedPtrField<std::string>& names) {
  return {names.begin(), names.end()};
}

TEST(AotBasedTest, UsesTheCallersMapsEvenWhenOneDeviceWouldDo) {
  absl::StatusOr<v1::PartitionPlan> plan =
      PlanWith(AotRequest({{"a", 0}, {"b", 1}, {"c", 1}}, {{2}, {1}}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->partitions_size(), 2);
  EXPECT_THAT(Names(plan->partitions(0).nodes()), ElementsAre("x", "a"));
  EXPECT_EQ(plan->partitions(0).memory_bytes(), 20);
  EXPECT_THAT(Ids(plan->partitions(0).logical_device_ids()), ElementsAre(2));
  // Partition 1 holds b and c, and x (read by c) copied in:
  // x 10 + b (10 + a's output 10) + c 10.
  EXPECT_THAT(Names(plan->partitions(1).nodes()), ElementsAre("x", "b", "c"));
  EXPECT_EQ(plan->partitions(1).memory_bytes(), 40);
  EXPECT_THAT(Ids(plan->partitions(1).parents()), ElementsAre(0));
  EXPECT_THAT(Ids(plan->partitions(0).children()), ElementsAre(1));
}

TEST(AotBasedTest, AnInputGivenAPartitionIsInItBesidesThePartitionsReadingIt) {
  // x is read by a and c (partition 0) and given to partition 1 alone: a
  // partition of inputs only, linked to none (inputs link no partitions).
  absl::StatusOr<v1::PartitionPlan> plan =
      PlanWith(AotRequest({{"a", 0}, {"x", 1}, {"b", 0}, {"c", 0}}, {{0}, {1}}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->partitions_size(), 2);
  EXPECT_THAT(Names(plan->partitions(0).nodes()), ElementsAre("x", "a", "b", "c"));
  EXPECT_THAT(Names(plan->partitions(1).nodes()), ElementsAre("x"));
  EXPECT_EQ(plan->partitions(1).memory_bytes(), 10);
  EXPECT_THAT(Ids(plan->partitions(1).parents()), ElementsAre());
  EXPECT_THAT(Ids(plan->partitions(1).children()), ElementsAre());
  EXPECT_THAT(Ids(plan->partitions(0).children()), ElementsAre());
}

TEST(AotBasedTest, AnInputGivenAPartitionItsReadersAreInIsThereOnce) {
  // x is given to partition 1, where c reads it, and a reads it in 0.
  absl::StatusOr<v1::PartitionPlan> plan =
      PlanWith(AotRequest({{"x", 1}, {"a", 0}, {"b", 1}, {"c", 1}}, {{0}, {1}}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Names(plan->partitions(0).nodes()), ElementsAre("x", "a"));
  EXPECT_THAT(Names(plan->partitions(1).nodes()), ElementsAre("x", "b", "c"));
  EXPECT_EQ(plan->partitions(1).memory_bytes(), 40);
}

// A graph of 600 blocks (a weight, then two call_* nodes, the first reading
// the weight and, every 50th block, the graph input x) in 4 partitions of
// consecutive blocks; and its node_partitions list in any order.
class AotListOrderTest : public ::testing::Test {
 protected:
  static constexpr int kBlocks = 600;
  static constexpr int kPartitions = 4;

  static int PartitionOfBlock(int b) { return b * kPartitions / kBlocks; }

  // The call_* nodes with their partitions, in graph order.
  static std::vector<std::pair<std::string, int>> OpEntries() {
    std::vector<std::pair<std::string, int>> entries;
    for (int b = 0; b < kBlocks; ++b) {
      entries.emplace_back(absl::StrCat("mm_", b), PartitionOfBlock(b));
      entries.emplace_back(absl::StrCat("relu_", b), PartitionOfBlock(b));
    }
    return entries;
  }

  static v1::PartitionGraphRequest Request(
      const std::vector<std::pair<std::string, int>>& entries) {
    TestGraph graph;
    graph.Placeholder("x", 10);
    std::string previous = "x";
    for (int b = 0; b < kBlocks; ++b) {
      const std::string weight = absl::StrCat("w_", b);
      graph.GetAttr(weight, 4);
      std::vector<std::string> inputs = {previous, weight};
      if (b % 50 == 49) inputs.push_back("x");
      graph.Op(absl::StrCat("mm_", b), inputs, 10, 10);
      previous = absl::StrCat("relu_", b);
      graph.Op(previous, {absl::StrCat("mm_", b)}, 10, 10);
    }
    v1::PartitionGraphRequest request = AotRequest(entries, {{0}, {1}, {2}, {0}});
    *request.mutable_graph() = graph.Output({previous}).Build();
    return request;
  }

  // Partition p's nodes worked out from the graph's construction.
  static std::vector<std::string> ExpectedNodes(int p) {
    std::vector<std::string> nodes;
    bool reads_x = p == 0;  // mm_0 reads x as its previous node
    for (int b = 0; b < kBlocks; ++b) {
      if (PartitionOfBlock(b) == p && b % 50 == 49) reads_x = true;
    }
    if (reads_x) nodes.push_back("x");
    for (int b = 0; b < kBlocks; ++b) {
      if (PartitionOfBlock(b) != p) continue;
      for (const char* prefix : {"w_", "mm_", "relu_"}) nodes.push_back(absl::StrCat(prefix, b));
    }
    return nodes;
  }
};

TEST_F(AotListOrderTest, ThePlanIsTheSameWhateverTheOrderOfTheList) {
  const std::vector<std::pair<std::string, int>> in_order = OpEntries();
  absl::StatusOr<v1::PartitionPlan> expected = PlanWith(Request(in_order));
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(expected->partitions_size(), kPartitions);
  for (int p = 0; p < kPartitions; ++p) {
    EXPECT_EQ(Names(expected->partitions(p).nodes()), ExpectedNodes(p)) << "partition " << p;
  }
  EXPECT_THAT(Ids(expected->partitions(1).parents()), ElementsAre(0));
  EXPECT_THAT(Ids(expected->partitions(1).children()), ElementsAre(2));

  std::vector<std::pair<std::string, std::vector<std::pair<std::string, int>>>> orders;
  orders.emplace_back("reversed",
                      std::vector<std::pair<std::string, int>>(in_order.rbegin(), in_order.rend()));
  std::vector<std::pair<std::string, int>> shuffled = in_order;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
  orders.emplace_back("shuffled", shuffled);
  // Shuffled, then in order: the lookups go back to guessing.
  std::vector<std::pair<std::string, int>> shuffled_head = in_order;
  std::shuffle(shuffled_head.begin(), shuffled_head.begin() + 400, std::mt19937(8));
  orders.emplace_back("shuffled head", shuffled_head);
  // Every input named too, each before its first reader and in its partition.
  std::vector<std::pair<std::string, int>> with_inputs = {{"x", 0}};
  for (int b = 0; b < kBlocks; ++b) {
    with_inputs.emplace_back(absl::StrCat("w_", b), PartitionOfBlock(b));
    with_inputs.emplace_back(absl::StrCat("mm_", b), PartitionOfBlock(b));
    with_inputs.emplace_back(absl::StrCat("relu_", b), PartitionOfBlock(b));
  }
  orders.emplace_back("with inputs", with_inputs);

  for (const auto& [order, entries] : orders) {
    absl::StatusOr<v1::PartitionPlan> plan = PlanWith(Request(entries));
    ASSERT_TRUE(plan.ok()) << order << ": " << plan.status();
    ASSERT_EQ(plan->partitions_size(), kPartitions) << order;
    for (int p = 0; p < kPartitions; ++p) {
      EXPECT_EQ(plan->partitions(p).SerializeAsString(),
                expected->partitions(p).SerializeAsString())
          << order << ", partition " << p << ":\n"
          << plan->partitions(p).DebugString();
    }
    ASSERT_EQ(plan->assignments_size(), expected->assignments_size()) << order;
    for (int i = 0; i < plan->assignments_size(); ++i) {
      EXPECT_EQ(plan->assignments(i).SerializeAsString(),
                expected->assignments(i).SerializeAsString())
          << order << ", assignments[" << i << "]";
    }
  }
}

TEST_F(AotListOrderTest, ANodeListedTwiceNamesItsFirstEntryInAnyOrder) {
  std::vector<std::pair<std::string, int>> entries = OpEntries();
  std::shuffle(entries.begin(), entries.end(), std::mt19937(9));
  const int first = 500;
  entries.push_back(entries[first]);
  absl::StatusOr<v1::PartitionPlan> plan = PlanWith(Request(entries));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(InvalidFieldPath(plan.status()).value_or("<none>"),
            absl::StrCat("config.node_partitions[", entries.size() - 1, "].node"));
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr(absl::StrCat("already assigned by config.node_partitions[", first, "]")));
}

TEST_F(AotListOrderTest, AnUnknownNameInAShuffledListIsNamed) {
  std::vector<std::pair<std::string, int>> entries = OpEntries();
  std::shuffle(entries.begin(), entries.end(), std::mt19937(10));
  entries[700].first = "mm_600";
  absl::StatusOr<v1::PartitionPlan> plan = PlanWith(Request(entries));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(InvalidFieldPath(plan.status()).value_or("<none>"), "config.node_partitions[700].node");
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("no node is called 'mm_600'"));
}

struct BadAotCase {
  std::string name;
  std::vector<std::pair<std::string, int>> nodes;
  std::vector<std::vector<int32_t>> devices;
  std::string field;
  std::string message;
};

class BadAotTest : public ::testing::TestWithParam<BadAotCase> {};

TEST_P(BadAotTest, IsInvalidArgumentNamingTheEntry) {
  absl::StatusOr<v1::PartitionPlan> plan = PlanWith(AotRequest(GetParam().nodes, GetParam().devices));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
  EXPECT_EQ(InvalidFieldPath(plan.status()).value_or("<none>"), GetParam().field)
      << plan.status();
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    AllChecks, BadAotTest,
    ::testing::ValuesIn(std::vector<BadAotCase>{
        {"UnknownNode",
         {{"a", 0}, {"zz", 0}},
         {{0}},
         "config.node_partitions[1].node",
         "no node is called 'zz'"},
        {"OutputNode", {{"output", 0}}, {{0}}, "config.node_partitions[0].node", "OUTPUT"},
        {"Twice",
         {{"a", 0}, {"a", 0}},
         {{0}},
         "config.node_partitions[1].node",
         "already assigned by config.node_partitions[0]"},
        {"InputTwice",
         {{"x", 0}, {"a", 0}, {"x", 0}},
         {{0}},
         "config.node_partitions[2].node",
         "node 'x' is already assigned by config.node_partitions[0]"},
        {"InputInUnknownPartition",
         {{"x", 3}},
         {{0}},
         "config.node_partitions[0].partition",
         "partition 3 has no config.partition_devices"},
        {"MissingWithAnInputNamed",
         {{"x", 0}, {"a", 0}, {"c", 0}},
         {{0}},
         "config.node_partitions",
         "node 'b' (graph.nodes[2]) has no partition"},
        {"Missing",
         {{"a", 0}, {"b", 0}},
         {{0}},
         "config.node_partitions",
         "node 'c' (graph.nodes[3]) has no partition"},
        {"PartitionWithoutDevices",
         {{"a", 0}, {"b", 1}, {"c", 1}},
         {{0}},
         "config.node_partitions[1].partition",
         "partition 1 has no config.partition_devices"},
        {"UnknownDevice",
         {{"a", 0}, {"b", 0}, {"c", 0}},
         {{7}},
         "config.partition_devices[0].logical_device_ids[0]",
         "no device has logical id 7"},
        {"Cycle",
         {{"a", 0}, {"b", 1}, {"c", 0}},
         {{0}, {1}},
         "config.node_partitions",
         "cycle exists between partitions: partitions 0, 1"},
        {"EmptyPartition",
         {{"a", 0}, {"b", 0}, {"c", 0}},
         {{0}, {1}},
         "config.partition_devices",
         "partition 1 has no nodes"},
        // A device listed twice would be charged the partition twice.
        {"DeviceListedTwice",
         {{"a", 0}, {"b", 0}, {"c", 0}},
         {{0, 1, 0}},
         "config.partition_devices[0].logical_device_ids[2]",
         "device 0 is listed twice for partition 0"},
    }),
    [](const ::testing::TestParamInfo<BadAotCase>& info) { return info.param.name; });

TEST(SaturateHostTest, ReplicatesEveryUsedDeviceOntoTheSmallestIdleDeviceThatFits) {
  // Two partitions on dev0 and dev1 (aot), six devices.
  v1::PartitionGraphRequest request = AotRequest({{"a", 0}, {"b", 0}, {"c", 1}}, {{0}, {1}});
  *request.mutable_devices() = TestDevices({100, 100, 25, 40, 30, 200});
  request.mutable_config()->set_saturate_host(true);
  absl::StatusOr<v1::PartitionPlan> plan = PlanWith(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Partition 0 (x, a, b: 30 bytes) on dev0; partition 1 (x, c: 30) on dev1.
  // Round 1: dev0 -> smallest idle >= 30 is dev4 (30); dev1 -> dev3 (40).
  // Round 2 needs 2 * 2 + 2 = 6 <= 6 devices: dev0 -> dev5 (200); dev1 finds
  // only dev2 (25 < 30): the round is dropped.
  EXPECT_THAT(Ids(plan->partitions(0).logical_device_ids()), ElementsAre(0, 4));
  EXPECT_THAT(Ids(plan->partitions(1).logical_device_ids()), ElementsAre(1, 3));
  EXPECT_EQ(plan->device_usage(4).used_bytes(), 30);
  EXPECT_THAT(Ids(plan->device_usage(4).partitions()), ElementsAre(0));
  EXPECT_EQ(plan->summary().devices_used(), 4);
  // The DAG lists every device of a partition.
  EXPECT_THAT(Ids(plan->dag(0).logical_device_ids()), ElementsAre(0, 4));
}

// Ten partitions on dev0 of eleven equal devices: each round appends ten
// device ids, one per partition. Without a bound there are ten rounds
// (2 * 1 + 9 <= 11 before the last), 100 ids; a bound of 35 keeps the
// three rounds whose 30 ids fit under it.
TEST(SaturateHostTest, AppendsNoMoreDeviceIdsThanItsBound) {
  const DeviceList devices =
      ImportDevices(TestDevices(std::vector<int64_t>(11, 100)), InputLimits()).value();
  const auto plan = [] {
    PartitionSet set;
    set.partitions.resize(10);
    for (Partition& partition : set.partitions) {
      partition.memory_bytes = 10;
      partition.logical_device_ids = {0};
    }
    return set;
  };
  const CancellationToken token;
  PartitionSet bounded = plan();
  ASSERT_TRUE(SaturateHost(devices, token, &bounded, /*max_device_ids=*/35).ok());
  for (const Partition& partition : bounded.partitions) {
    EXPECT_THAT(partition.logical_device_ids, ElementsAre(0, 1, 2, 3));
  }
  PartitionSet unbounded = plan();
  ASSERT_TRUE(SaturateHost(devices, token, &unbounded).ok());
  for (const Partition& partition : unbounded.partitions) {
    EXPECT_EQ(partition.logical_device_ids.size(), 11u);
  }
  // The default bound: as many ids as a request's graph may hold values.
  EXPECT_EQ(kMaxSaturateDeviceIds, InputLimits().max_values);
}

}  // namespace
}  // namespace partplan

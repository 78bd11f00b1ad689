#include "planner/fx/latency.h"

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "planner/fx/partition.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;

void SetLatency(v1::Node* node, double compute, double memory) {
  node->mutable_latency()->set_compute_latency_seconds(compute);
  node->mutable_latency()->set_memory_latency_seconds(memory);
}

// Builds a PartitionSet from a partition per call_* node and device ids.
PartitionSet MakeSet(const CompactGraph& graph, const std::vector<int32_t>& partition_of,
                     const std::vector<std::vector<int32_t>>& devices_of_partition) {
  PartitionSet set;
  set.partition_of = partition_of;
  set.partitions.resize(devices_of_partition.size());
  for (size_t p = 0; p < devices_of_partition.size(); ++p) {
    set.partitions[p].logical_device_ids = devices_of_partition[p];
  }
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (partition_of[v] >= 0) set.partitions[partition_of[v]].nodes.push_back(v);
  }
  LinkPartitions(graph, CancellationToken(), &set).IgnoreError();  // never fires
  return set;
}

class LatencyTest : public ::testing::Test {
 protected:
  // x -> a -> b -> d, a -> c -> d (a diamond), d -> output. Latencies:
  // a 1 (compute), b 2 (memory), c 5, d 1; outputs 100 bytes.
  void SetUp() override {
    proto_ = TestGraph()
                 .Placeholder("x", 100)
                 .Op("a", {"x"}, 100, 100)
                 .Op("b", {"a"}, 100, 100)
                 .Op("c", {"a"}, 100, 100)
                 .Op("d", {"b", "c"}, 100, 100)
                 .Output({"d"})
                 .Build();
    SetLatency(proto_.mutable_nodes(1), 1, 0.5);
    SetLatency(proto_.mutable_nodes(2), 0.1, 2);
    SetLatency(proto_.mutable_nodes(3), 5, 0);
    SetLatency(proto_.mutable_nodes(4), 1, 1);
    graph_.emplace(*ImportGraph(proto_, InputLimits(), token_));
  }

  DeviceList Devices(double transfer_rate) {
    v1::DeviceInventory inventory = TestDevices({1000, 1000, 1000});
    inventory.set_transfer_rate_bytes_per_second(transfer_rate);
    v1::Link* link = inventory.add_links();
    link->set_logical_id_a(2);
    link->set_logical_id_b(0);
    link->set_bandwidth_bytes_per_second(1000);
    return *ImportDevices(inventory, InputLimits());
  }

  CancellationToken token_;
  v1::Graph proto_;
  absl::optional<CompactGraph> graph_;
};

TEST_F(LatencyTest, OnePartitionTakesItsLongestPath) {
  PartitionSet set = MakeSet(*graph_, {-1, 0, 0, 0, 0, -1}, {{0}});
  absl::StatusOr<PlanLatency> latency = EstimatePlanLatency(*graph_, Devices(100), set, token_);
  ASSERT_TRUE(latency.ok()) << latency.status();
  // a (1) -> c (5) -> d (1).
  EXPECT_THAT(latency->partition_seconds, ElementsAre(DoubleEq(7)));
  EXPECT_DOUBLE_EQ(latency->critical_path_seconds, 7);
}

TEST_F(LatencyTest, CriticalPathAddsTransfersOverTheRateOrTheLink) {
  // p0 = {a} on dev0, p1 = {b} on dev1, p2 = {c, d} on dev2.
  PartitionSet set = MakeSet(*graph_, {-1, 0, 1, 2, 2, -1}, {{0}, {1}, {2}});
  absl::StatusOr<PlanLatency> latency = EstimatePlanLatency(*graph_, Devices(100), set, token_);
  ASSERT_TRUE(latency.ok()) << latency.status();
  EXPECT_THAT(latency->partition_seconds, ElementsAre(DoubleEq(1), DoubleEq(2), DoubleEq(6)));
  // Paths: p0 (1) + a over the dev0-dev2 link (100 B / 1000 B/s) + p2 (6)
  // = 7.1; p0 + 1 s (100 B / 100 B/s) + p1 (2) + 1 s + p2 (6) = 11.
  EXPECT_DOUBLE_EQ(latency->critical_path_seconds, 11);
}

TEST_F(LatencyTest, ZeroTransferRateMeansFreeTransfers) {
  PartitionSet set = MakeSet(*graph_, {-1, 0, 1, 2, 2, -1}, {{0}, {1}, {2}});
  absl::StatusOr<PlanLatency> latency = EstimatePlanLatency(*graph_, Devices(0), set, token_);
  ASSERT_TRUE(latency.ok()) << latency.status();
  // p0 -> p1 -> p2 = 1 + 2 + 6, and the link still costs 0.1 on p0 -> p2.
  EXPECT_DOUBLE_EQ(latency->critical_path_seconds, 9);
}

TEST_F(LatencyTest, PartitionsOnTheSameDevicesTransferForFree) {
  PartitionSet set = MakeSet(*graph_, {-1, 0, 1, 2, 2, -1}, {{0}, {0}, {0}});
  absl::StatusOr<PlanLatency> latency = EstimatePlanLatency(*graph_, Devices(1), set, token_);
  ASSERT_TRUE(latency.ok()) << latency.status();
  EXPECT_DOUBLE_EQ(latency->critical_path_seconds, 9);
}

TEST_F(LatencyTest, DerivesMissingLatenciesFromDeviceThroughput) {
  v1::Graph proto = TestGraph().Placeholder("x", 100).Op("a", {"x"}, 300, 100).Output({"a"}).Build();
  proto.mutable_nodes(1)->set_flops(4000);
  CompactGraph graph = *ImportGraph(proto, InputLimits(), token_);
  v1::DeviceInventory inventory = TestDevices({1000});
  inventory.mutable_devices(0)->set_compute_flops_per_second(1000);
  inventory.mutable_devices(0)->set_memory_bandwidth_bytes_per_second(50);
  DeviceList devices = *ImportDevices(inventory, InputLimits());
  PartitionSet set = MakeSet(graph, {-1, 0, -1}, {{0}});
  absl::StatusOr<PlanLatency> latency = EstimatePlanLatency(graph, devices, set, token_);
  ASSERT_TRUE(latency.ok()) << latency.status();
  // compute 4000 / 1000 = 4 s; memory (300 + 100) / 50 = 8 s.
  EXPECT_DOUBLE_EQ(latency->critical_path_seconds, 8);
}

TEST_F(LatencyTest, ResidualStacksAreLinearNotExponential) {
  // 2000 layers, each adding the previous two: torch.fx's path enumeration
  // would visit ~phi^2000 paths.
  TestGraph builder;
  builder.Placeholder("x", 1).Op("n0", {"x"}, 1, 1).Op("n1", {"n0"}, 1, 1);
  for (int i = 2; i < 2000; ++i) {
    builder.Op("n" + std::to_string(i),
               {"n" + std::to_string(i - 1), "n" + std::to_string(i - 2)}, 1, 1);
  }
  v1::Graph proto = builder.Output({"n1999"}).Build();
  for (int i = 1; i <= 2000; ++i) SetLatency(proto.mutable_nodes(i), 0.5, 0);
  CompactGraph graph = *ImportGraph(proto, InputLimits(), token_);
  std::vector<int32_t> partition_of(graph.num_nodes(), -1);
  for (int i = 1; i <= 2000; ++i) partition_of[i] = i <= 1000 ? 0 : 1;
  PartitionSet set = MakeSet(graph, partition_of, {{0}, {1}});
  absl::StatusOr<PlanLatency> latency =
      EstimatePlanLatency(graph, *ImportDevices(TestDevices({9, 9}), InputLimits()), set, token_);
  ASSERT_TRUE(latency.ok()) << latency.status();
  EXPECT_DOUBLE_EQ(latency->critical_path_seconds, 1000);
}

// torch.fx's accounting (charge_shared_graph_inputs) adds to an edge the
// graph inputs the child reads and the parent holds too. Here n parents
// p_j = {x_j, a_j} feed one child {x_0 .. x_n-1, c} whose c reads every a_j
// and every x_j: edge j carries a_j (100 bytes) and x_j (10). Testing each of
// the child's n inputs against each parent took n^2 lookups (9 x 10^8 at
// n = 30,000); the shorter side of each edge is walked now, n in all. The
// deadline fails the test should the work grow quadratic again.
TEST_F(LatencyTest, SharedGraphInputsAreChargedInWorkLinearInOneSideOfEachEdge) {
  constexpr int n = 30'000;
  TestGraph builder;
  std::vector<std::string> read_by_c;
  for (int j = 0; j < n; ++j) builder.Placeholder("x" + std::to_string(j), 10);
  for (int j = 0; j < n; ++j) {
    builder.Op("a" + std::to_string(j), {"x" + std::to_string(j)}, 100, 100);
    read_by_c.push_back("a" + std::to_string(j));
  }
  for (int j = 0; j < n; ++j) read_by_c.push_back("x" + std::to_string(j));
  const v1::Graph proto = builder.Op("c", read_by_c, 100, 100).Output({"c"}).Build();
  const CompactGraph graph = *ImportGraph(proto, InputLimits(), token_);
  PartitionSet set;
  set.partition_of.assign(graph.num_nodes(), -1);
  set.partitions.resize(n + 1);
  for (NodeId j = 0; j < n; ++j) {
    set.partitions[j].nodes = {j, n + j};  // x_j, a_j
    set.partition_of[n + j] = j;
    set.partitions[n].nodes.push_back(j);
  }
  set.partitions[n].nodes.push_back(2 * n);  // c
  set.partition_of[2 * n] = n;
  ASSERT_TRUE(LinkPartitions(graph, CancellationToken(), &set).ok());
  // No devices on the partitions and no latencies: only transfers count, at
  // 1 byte/s.
  v1::DeviceInventory inventory = TestDevices({1000});
  inventory.set_transfer_rate_bytes_per_second(1);
  const DeviceList devices = *ImportDevices(inventory, InputLimits());
  const CancellationToken token(absl::Now() + absl::Seconds(20));
  LatencyOptions options;
  absl::StatusOr<PlanLatency> latency = EstimatePlanLatency(graph, devices, set, token, options);
  ASSERT_TRUE(latency.ok()) << latency.status();
  EXPECT_DOUBLE_EQ(latency->critical_path_seconds, 100);
  options.charge_shared_graph_inputs = true;
  latency = EstimatePlanLatency(graph, devices, set, token, options);
  ASSERT_TRUE(latency.ok()) << latency.status();
  EXPECT_DOUBLE_EQ(latency->critical_path_seconds, 110);
}

// Finite figures whose times exceed the largest double are refused, naming
// the figure, instead of planning with infinite latencies (which the
// searches then compare).
TEST_F(LatencyTest, TimesBeyondTheLargestDoubleAreInvalidArguments) {
  v1::Graph proto = TestGraph().Placeholder("x", 100).Op("a", {"x"}, 300, 100).Output({"a"}).Build();
  CompactGraph graph = *ImportGraph(proto, InputLimits(), token_);
  PartitionSet set = MakeSet(graph, {-1, 0, -1}, {{0}});
  v1::DeviceInventory inventory = TestDevices({1000});
  inventory.mutable_devices(0)->set_memory_bandwidth_bytes_per_second(4.9e-324);  // denormal
  absl::StatusOr<PlanLatency> latency =
      EstimatePlanLatency(graph, *ImportDevices(inventory, InputLimits()), set, token_);
  EXPECT_EQ(InvalidFieldPath(latency.status()).value_or(""),
            "devices.devices[0].memory_bandwidth_bytes_per_second")
      << latency.status();

  // Two latencies of 1e308 in a row.
  SetLatency(proto_.mutable_nodes(1), 1e308, 0);
  SetLatency(proto_.mutable_nodes(2), 1e308, 0);
  CompactGraph diamond = *ImportGraph(proto_, InputLimits(), token_);
  latency = EstimatePlanLatency(diamond, Devices(100),
                                MakeSet(diamond, {-1, 0, 0, 0, 0, -1}, {{0}}), token_);
  EXPECT_EQ(InvalidFieldPath(latency.status()).value_or(""), "graph.nodes[2]") << latency.status();
}

}  // namespace
}  // namespace partplan

// What every OK PartitionGraph plan promises, whatever the mode: every
// partition is on a device, and no device holds more than it has (an input
// shared by two partitions on one device counted once). Checked on the golden
// fixtures' requests and on random graphs with shared inputs and tight
// memory, for every mode with and without saturate_host; and the COST_AWARE
// search names the figure that makes its times infinite.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fixtures.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "planner/base/status_util.h"
#include "tests/bench/synthetic_graphs.h"
#include "tests/planner/fixture_files.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

using ::testing::HasSubstr;

// The first broken promise of an OK plan, or "" when it keeps them all.
// AOT_BASED plans place partitions where the request says, so only the
// first promise applies to them.
std::string BrokenPromise(const v1::PartitionPlan& plan, bool check_capacity) {
  for (const v1::Partition& partition : plan.partitions()) {
    if (partition.logical_device_ids().empty()) {
      return absl::StrCat("partition ", partition.id(), " is on no device");
    }
  }
  if (!check_capacity) return "";
  for (const v1::DeviceUsage& usage : plan.device_usage()) {
    if (usage.used_bytes() > usage.available_bytes()) {
      return absl::StrCat("device ", usage.logical_id(), " holds ", usage.used_bytes(), " of ",
                          usage.available_bytes(), " bytes");
    }
  }
  return "";
}

TEST(PlacedPlanTest, EveryOkFixturePlanIsPlacedWithinMemory) {
  int ok_plans = 0;
  for (const char* mode : {"size_based", "sparse_nn", "saturate_host", "cost_aware", "kl_based",
                           "aot_based"}) {
    for (const std::string& path :
         FixturePaths(absl::StrCat("tests/fixtures/partitioner/", mode))) {
      const auto fixture = LoadJsonFixture<testing::PartitionerFixture>(path);
      CancellationToken token;
      absl::StatusOr<v1::PartitionGraphResponse> response =
          PartitionGraph(fixture.request(), InputLimits(), token);
      if (!response.ok()) continue;
      ++ok_plans;
      EXPECT_EQ(BrokenPromise(response->plan(), std::string(mode) != "aot_based"), "")
          << path;
    }
  }
  EXPECT_GT(ok_plans, 50);
}

// A random graph in topological order: a few graph inputs (placeholders and
// get_attrs, which partitions copy in and may share) and call_* nodes each
// reading one to three earlier nodes, with latencies.
v1::Graph RandomGraph(std::mt19937* rng, int op_count) {
  TestGraph graph;
  std::vector<std::string> names;
  const int inputs = 1 + static_cast<int>((*rng)() % 3);
  for (int i = 0; i < inputs; ++i) {
    const std::string name = absl::StrCat("in", i);
    const int64_t bytes = 4 + (*rng)() % 40;
    if (i % 2 == 0) {
      graph.Placeholder(name, bytes);
    } else {
      graph.GetAttr(name, bytes);
    }
    names.push_back(name);
  }
  for (int i = 0; i < op_count; ++i) {
    std::vector<std::string> args;
    const int arity = 1 + static_cast<int>((*rng)() % 3);
    for (int a = 0; a < arity; ++a) {
      const std::string& arg = names[(*rng)() % names.size()];
      if (std::find(args.begin(), args.end(), arg) == args.end()) args.push_back(arg);
    }
    const std::string name = absl::StrCat("op", i);
    const int64_t output = 2 + (*rng)() % 20;
    graph.Op(name, args, output + (*rng)() % 40, output);
    v1::NodeLatency* latency = graph.last()->mutable_latency();
    latency->set_compute_latency_seconds(1 + (*rng)() % 8);
    latency->set_memory_latency_seconds(1 + (*rng)() % 8);
    names.push_back(name);
  }
  graph.Output({names.back()});
  return graph.Build();
}

TEST(PlacedPlanTest, EveryOkRandomPlanIsPlacedWithinMemory) {
  std::mt19937 rng(20261126);
  int ok_plans = 0;
  int multi_partition_plans = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const v1::Graph graph = RandomGraph(&rng, 3 + static_cast<int>(rng() % 10));
    int64_t total = 0;
    for (const v1::Node& node : graph.nodes()) total += node.size_bytes().total_bytes();
    // Between a quarter and all of the graph per device: tight enough that
    // plans split, share inputs across partitions and sometimes fail.
    const int device_count = 2 + static_cast<int>(rng() % 4);
    std::vector<int64_t> memory(device_count);
    const bool equal = rng() % 2 == 0;  // SPARSE_NN wants equal devices
    for (int64_t& bytes : memory) {
      bytes = equal && &bytes != &memory[0] ? memory[0]
                                            : total / 4 + static_cast<int64_t>(rng() % (total + 1));
    }
    for (const v1::PartitionerConfig::Mode mode :
         {v1::PartitionerConfig::SIZE_BASED, v1::PartitionerConfig::SPARSE_NN,
          v1::PartitionerConfig::COST_AWARE, v1::PartitionerConfig::KL_BASED}) {
      v1::PartitionGraphRequest request;
      *request.mutable_graph() = graph;
      *request.mutable_devices() = TestDevices(memory);
      request.mutable_devices()->set_transfer_rate_bytes_per_second(1 + rng() % 4);
      request.mutable_config()->set_mode(mode);
      request.mutable_config()->set_saturate_host(rng() % 2 == 0);
      CancellationToken token;
      absl::StatusOr<v1::PartitionGraphResponse> response =
          PartitionGraph(request, InputLimits(), token);
      if (!response.ok()) {
        EXPECT_NE(response.status().code(), absl::StatusCode::kInternal) << response.status();
        continue;
      }
      ++ok_plans;
      if (response->plan().partitions_size() > 1) ++multi_partition_plans;
      ASSERT_EQ(BrokenPromise(response->plan(), /*check_capacity=*/true), "")
          << "trial " << trial << ", " << v1::PartitionerConfig::Mode_Name(mode) << "\n"
          << request.DebugString();
    }
  }
  EXPECT_GT(ok_plans, 400);
  EXPECT_GT(multi_partition_plans, 200);
}

// Two partitions on one device that both copy in the graph input `w`: the
// device holds w once.
TEST(PlacedPlanTest, AnInputSharedOnOneDeviceCountsOnce) {
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = TestGraph()
                                 .GetAttr("w", 60)
                                 .Op("a", {"w"}, 30, 10)
                                 .Op("b", {"a", "w"}, 30, 10)
                                 .Output({"b"})
                                 .Build();
  // 150 bytes in all: the first device cannot take it whole.
  *request.mutable_devices() = TestDevices({120, 100});
  v1::PartitionerConfig& config = *request.mutable_config();
  config.set_mode(v1::PartitionerConfig::AOT_BASED);
  for (const char* node : {"a", "b"}) {
    v1::NodePartition* assignment = config.add_node_partitions();
    assignment->set_node(node);
    assignment->set_partition(node[0] == 'a' ? 0 : 1);
  }
  for (int p = 0; p < 2; ++p) {
    v1::PartitionDevices* devices = config.add_partition_devices();
    devices->set_partition(p);
    devices->add_logical_device_ids(0);
  }
  CancellationToken token;
  absl::StatusOr<v1::PartitionGraphResponse> response =
      PartitionGraph(request, InputLimits(), token);
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::PartitionPlan& plan = response->plan();
  ASSERT_EQ(plan.partitions_size(), 2);
  // Each partition alone: w (60) + its node (30), and b reads a (10).
  EXPECT_EQ(plan.partitions(0).memory_bytes(), 90);
  EXPECT_EQ(plan.partitions(1).memory_bytes(), 100);
  // The device: w once, a, b; a is b's input inside the device.
  EXPECT_EQ(plan.device_usage(0).used_bytes(), 60 + 30 + 30);
  EXPECT_EQ(plan.device_usage(1).used_bytes(), 0);
}

// Latencies that add up beyond the largest double name the node whose path
// overflows, not the config or a cycle; so does a transfer rate that makes
// every transfer infinite.
TEST(PlacedPlanTest, CostAwareNamesTheFigureThatMakesTimesInfinite) {
  TestGraph chain;
  chain.Placeholder("x", 10);
  std::string previous = "x";
  for (int i = 0; i < 6; ++i) {
    const std::string name = absl::StrCat("op", i);
    chain.Op(name, {previous}, 40, 10);
    chain.last()->mutable_latency()->set_compute_latency_seconds(9e307);
    previous = name;
  }
  chain.Output({previous});
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = chain.Build();
  *request.mutable_devices() = TestDevices({100, 100, 100});
  request.mutable_devices()->set_transfer_rate_bytes_per_second(1);
  request.mutable_config()->set_mode(v1::PartitionerConfig::COST_AWARE);
  CancellationToken token;
  absl::StatusOr<v1::PartitionGraphResponse> response =
      PartitionGraph(request, InputLimits(), token);
  ASSERT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_THAT(InvalidFieldPath(response.status()).value_or(""), HasSubstr("graph.nodes"))
      << response.status();
  EXPECT_THAT(std::string(response.status().message()),
              ::testing::Not(HasSubstr("cycle")));

  for (v1::Node& node : *request.mutable_graph()->mutable_nodes()) {
    if (node.has_latency()) node.mutable_latency()->set_compute_latency_seconds(1);
  }
  request.mutable_devices()->set_transfer_rate_bytes_per_second(5e-324);
  response = PartitionGraph(request, InputLimits(), token);
  ASSERT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_EQ(InvalidFieldPath(response.status()).value_or(""),
            "devices.transfer_rate_bytes_per_second")
      << response.status();
}

// When the partitions COST_AWARE placed already take every device past its
// memory (they hold copies of the graph inputs they read), the partition
// left over is refused saying so, not with a negative room left.
TEST(PlacedPlanTest, DevicesAlreadyOverTheirMemoryAreSaidToBe) {
  v1::PartitionGraphRequest request = PartitionRequest(SyntheticGraph(GraphShape::kChain, 20), 8);
  request.mutable_config()->set_mode(v1::PartitionerConfig::COST_AWARE);
  const absl::Status status =
      PartitionGraph(request, InputLimits(), CancellationToken(absl::InfiniteFuture())).status();
  ASSERT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()),
              ::testing::HasSubstr("every device is already over its memory"));
  EXPECT_THAT(std::string(status.message()), ::testing::Not(::testing::HasSubstr("has -")));
}

}  // namespace
}  // namespace partplan

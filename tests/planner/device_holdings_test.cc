// DeviceHoldings against the sum written out per device (the union of its
// partitions' nodes, each at its total size, plus the outputs of their
// inputs outside the union), on random graphs and random placements where
// most partitions sit on most devices, some devices lack some of them, and
// partitions share nodes; and on SPARSE_NN's plan of the hub model, where
// every device holds the dense partition.
#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "planner/fx/device_mapping.h"
#include "planner/fx/partition.h"
#include "planner/fx/partitioner.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph_import.h"
#include "tests/bench/synthetic_graphs.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

// What each device holds, priced device by device from scratch.
std::vector<DeviceLoad> HoldingsWrittenOut(const CompactGraph& graph, const DeviceList& devices,
                                           const PartitionSet& set) {
  std::vector<DeviceLoad> loads(devices.size());
  for (int d = 0; d < devices.size(); ++d) {
    std::set<int32_t> partitions;
    for (int32_t p = 0; p < static_cast<int32_t>(set.partitions.size()); ++p) {
      for (int32_t id : set.partitions[p].logical_device_ids) {
        if (id == devices[d].logical_id) partitions.insert(p);
      }
    }
    loads[d].partitions.assign(partitions.begin(), partitions.end());
    if (partitions.empty()) continue;
    if (partitions.size() == 1) {
      loads[d].used_bytes = set.partitions[*partitions.begin()].memory_bytes;
      continue;
    }
    std::set<NodeId> held;
    for (int32_t p : partitions) {
      held.insert(set.partitions[p].nodes.begin(), set.partitions[p].nodes.end());
    }
    int64_t bytes = 0;
    for (NodeId v : held) {
      bytes += graph.total_bytes(v);
      for (NodeId u : graph.inputs(v)) {
        if (held.count(u) == 0) bytes += graph.output_bytes(u);
      }
    }
    loads[d].used_bytes = bytes;
  }
  return loads;
}

void ExpectSameHoldings(const std::vector<DeviceLoad>& got, const std::vector<DeviceLoad>& want,
                        const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t d = 0; d < got.size(); ++d) {
    EXPECT_EQ(got[d].used_bytes, want[d].used_bytes) << where << ", device " << d;
    EXPECT_EQ(got[d].partitions, want[d].partitions) << where << ", device " << d;
  }
}

// Placeholders and get_attrs, then ops reading 1 to 3 earlier nodes, every
// seventh up to 30.
CompactGraph RandomGraph(std::mt19937& random, v1::Graph* message) {
  TestGraph builder;
  std::vector<std::string> names;
  const int inputs = 2 + random() % 12;
  for (int i = 0; i < inputs; ++i) {
    names.push_back(absl::StrCat("x", i));
    if (i % 3 == 2) {
      builder.GetAttr(names.back(), 1 + random() % 100);
    } else {
      builder.Placeholder(names.back(), 1 + random() % 100);
    }
  }
  const int ops = 4 + random() % 120;
  for (int i = 0; i < ops; ++i) {
    const int reads = i % 7 == 0 ? 1 + random() % 30 : 1 + random() % 3;
    std::vector<std::string> args;
    for (int k = 0; k < reads; ++k) args.push_back(names[random() % names.size()]);
    names.push_back(absl::StrCat("op", i));
    const int64_t output = 1 + random() % 100;
    builder.Op(names.back(), args, output + random() % 1000, output);
  }
  builder.Output({names.back()});
  *message = builder.Build();
  return ImportGraph(*message, InputLimits(), CancellationToken()).value();
}

// Partitions as torch.fx's planners make them: each call_* node in one,
// with copies of the placeholders and get_attrs it reads; sometimes a few
// other nodes too, so partitions overlap in call_* nodes as well.
PartitionSet RandomPartitions(std::mt19937& random, const CompactGraph& graph) {
  PartitionSet set;
  set.partitions.resize(1 + random() % 12);
  const int num_partitions = static_cast<int>(set.partitions.size());
  set.partition_of.assign(graph.num_nodes(), -1);
  std::vector<std::set<NodeId>> nodes(num_partitions);
  for (NodeId v = 0; v < graph.output_node(); ++v) {
    if (!graph.is_op_node(v)) continue;
    const int32_t p = random() % num_partitions;
    set.partition_of[v] = p;
    nodes[p].insert(v);
    for (NodeId u : graph.inputs(v)) {
      if (graph.is_input_node(u)) nodes[p].insert(u);
    }
  }
  NodeSetMemory memory(graph);
  for (int p = 0; p < num_partitions; ++p) {
    if (random() % 4 == 0) {
      for (int k = random() % 4; k > 0; --k) nodes[p].insert(random() % graph.output_node());
    }
    if (nodes[p].empty()) nodes[p].insert(random() % graph.output_node());
    Partition& partition = set.partitions[p];
    partition.nodes.assign(nodes[p].begin(), nodes[p].end());
    // A partition alone on a device is charged its memory_bytes, whatever
    // they are: sometimes not its nodes' memory.
    partition.memory_bytes = random() % 5 == 0 ? random() % 5000 : memory.Compute(partition.nodes);
  }
  return set;
}

DeviceList RandomDevices(std::mt19937& random, int num_devices) {
  std::vector<int32_t> ids(num_devices);
  for (int d = 0; d < num_devices; ++d) ids[d] = 3 * d + 5;
  std::shuffle(ids.begin(), ids.end(), random);
  v1::DeviceInventory inventory;
  for (int d = 0; d < num_devices; ++d) {
    v1::Device* device = inventory.add_devices();
    device->set_name(absl::StrCat("gpu", ids[d]));
    device->set_logical_id(ids[d]);
    device->set_available_memory_bytes(1 << 20);
  }
  return ImportDevices(inventory, InputLimits()).value();
}

// Most partitions on most devices (each device missing each with a small
// chance), the others on one to three devices, a few on none; devices listed
// in random order, some twice (as saturate_host may).
void PlaceRandomly(std::mt19937& random, const DeviceList& devices, PartitionSet* set) {
  std::uniform_real_distribution<double> unit(0, 1);
  const double shared_share = unit(random);
  const double holds_shared = 0.5 + unit(random) / 2;
  for (Partition& partition : set->partitions) {
    std::vector<int32_t>& ids = partition.logical_device_ids;
    const double kind = unit(random);
    if (kind < shared_share) {
      for (int d = 0; d < devices.size(); ++d) {
        if (unit(random) < holds_shared) ids.push_back(devices[d].logical_id);
      }
    } else if (kind < 0.95) {
      for (int k = 1 + random() % 3; k > 0; --k) {
        ids.push_back(devices[random() % devices.size()].logical_id);
      }
    }
    if (!ids.empty() && random() % 6 == 0) ids.push_back(ids[random() % ids.size()]);
    std::shuffle(ids.begin(), ids.end(), random);
  }
}

TEST(DeviceHoldingsTest, MatchesTheSumWrittenOutOnRandomPlacements) {
  std::mt19937 random(11);
  for (int trial = 0; trial < 400; ++trial) {
    v1::Graph message;
    const CompactGraph graph = RandomGraph(random, &message);
    const DeviceList devices = RandomDevices(random, 1 + random() % 40);
    for (int placement = 0; placement < 5; ++placement) {
      PartitionSet set = RandomPartitions(random, graph);
      PlaceRandomly(random, devices, &set);
      const absl::StatusOr<std::vector<DeviceLoad>> holdings =
          DeviceHoldings(graph, devices, set, CancellationToken());
      ASSERT_TRUE(holdings.ok()) << holdings.status();
      ExpectSameHoldings(*holdings, HoldingsWrittenOut(graph, devices, set),
                         absl::StrCat("trial ", trial, ", placement ", placement));
      if (testing::Test::HasFailure()) return;
    }
  }
}

// Every partition on every device, and every partition on every device but
// one (a different one each): the base is all partitions, and each device
// is priced by what it lacks of it.
TEST(DeviceHoldingsTest, MatchesTheSumWrittenOutWhenDevicesLackOneSharedPartition) {
  std::mt19937 random(12);
  for (int trial = 0; trial < 100; ++trial) {
    v1::Graph message;
    const CompactGraph graph = RandomGraph(random, &message);
    const DeviceList devices = RandomDevices(random, 2 + random() % 20);
    PartitionSet set = RandomPartitions(random, graph);
    const int num_partitions = static_cast<int>(set.partitions.size());
    for (int32_t p = 0; p < num_partitions; ++p) {
      for (int d = 0; d < devices.size(); ++d) {
        if (trial % 2 == 0 || d % num_partitions != p) {
          set.partitions[p].logical_device_ids.push_back(devices[d].logical_id);
        }
      }
    }
    const absl::StatusOr<std::vector<DeviceLoad>> holdings =
        DeviceHoldings(graph, devices, set, CancellationToken());
    ASSERT_TRUE(holdings.ok()) << holdings.status();
    ExpectSameHoldings(*holdings, HoldingsWrittenOut(graph, devices, set),
                       absl::StrCat("trial ", trial));
    if (testing::Test::HasFailure()) return;
  }
}

// SPARSE_NN on the hub model: a table's partition per device, and the dense
// partition on all of them.
TEST(DeviceHoldingsTest, MatchesTheSumWrittenOutOnTheHubModelsPlan) {
  const int64_t nodes = 2001;
  const int64_t dense_bytes = TotalBytes(HubRecommendationModel(nodes, 0));
  const v1::Graph message = HubRecommendationModel(nodes, 2 * dense_bytes);
  int tables = 0;
  for (const v1::Node& node : message.nodes()) {
    tables += node.module_type() == "torch.nn.Embedding" ? 1 : 0;
  }
  v1::DeviceInventory inventory = EqualDevices(message, tables, 1);
  for (v1::Device& device : *inventory.mutable_devices()) {
    device.set_available_memory_bytes(dense_bytes + 2 * dense_bytes * 11 / 10);
  }
  const CompactGraph graph = ImportGraph(message, InputLimits(), CancellationToken()).value();
  const DeviceList devices = ImportDevices(inventory, InputLimits()).value();
  PartitionerOptions options;
  options.mode = PartitionerMode::kSparseNn;
  const absl::StatusOr<PartitionerPlan> plan =
      PartitionGraphPlan(graph, devices, options, CancellationToken());
  ASSERT_TRUE(plan.ok()) << plan.status();
  int shared = 0;
  for (const Partition& partition : plan->set.partitions) {
    shared += partition.logical_device_ids.size() == static_cast<size_t>(tables) ? 1 : 0;
  }
  EXPECT_GE(shared, 1) << "no partition on every device";
  ExpectSameHoldings(plan->holdings, HoldingsWrittenOut(graph, devices, plan->set), "hub");
}

TEST(DeviceHoldingsTest, StopsWhenCancelled) {
  std::mt19937 random(13);
  v1::Graph message;
  const CompactGraph graph = RandomGraph(random, &message);
  const DeviceList devices = RandomDevices(random, 8);
  PartitionSet set = RandomPartitions(random, graph);
  for (Partition& partition : set.partitions) {
    for (int d = 0; d < devices.size(); ++d) {
      partition.logical_device_ids.push_back(devices[d].logical_id);
    }
  }
  CancellationToken token;
  token.Cancel();
  EXPECT_EQ(DeviceHoldings(graph, devices, set, token).status().code(),
            absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace partplan

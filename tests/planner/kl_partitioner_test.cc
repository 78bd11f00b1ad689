// KL_BASED's work budget: a search is bounded by what its trials really
// cost, partitions x devices included, not by their count or node and edge
// visits alone. No timing here: the trials and work the search reports
// (KlStats) are checked against bounds that do not depend on how the budget
// prices a trial (tests/bench:partitioner_bench times the same shapes).
#include "planner/fx/kl_partitioner.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "planner/fx/size_based_partitioner.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

// A chain x -> a0 -> a1 -> ... of `length` call_* nodes of 100 bytes each,
// and `length` devices of 250 bytes: a node and its input fit one, two
// nodes do not, so SIZE_BASED makes one partition a device and every
// placement of a trial passes over the devices the partitions before it
// filled.
struct ChainOnManyDevices {
  explicit ChainOnManyDevices(int length) {
    TestGraph builder;
    builder.Placeholder("x", 100);
    std::string previous = "x";
    for (int i = 0; i < length; ++i) {
      const std::string name = "a" + std::to_string(i);
      builder.Op(name, {previous}, 100, 100);
      previous = name;
    }
    proto = builder.Output({previous}).Build();
    inventory = TestDevices(std::vector<int64_t>(length, 250));
  }

  v1::Graph proto;
  v1::DeviceInventory inventory;
};

struct Searched {
  KlStats stats;
  int64_t partitions = 0;  // in the SIZE_BASED plan every trial starts from
  int64_t devices = 0;
};

Searched Search(const ChainOnManyDevices& chain, const KlOptions& options) {
  const CancellationToken token;
  absl::StatusOr<CompactGraph> graph = ImportGraph(chain.proto, InputLimits(), token);
  EXPECT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<DeviceList> devices = ImportDevices(chain.inventory, InputLimits());
  EXPECT_TRUE(devices.ok()) << devices.status();
  Searched searched;
  if (!graph.ok() || !devices.ok()) return searched;
  absl::StatusOr<PartitionSet> size_based = SizeBasedPartition(*graph, *devices, token);
  EXPECT_TRUE(size_based.ok()) << size_based.status();
  if (size_based.ok()) searched.partitions = static_cast<int64_t>(size_based->partitions.size());
  searched.devices = devices->size();
  absl::StatusOr<PartitionSet> set = KlPartition(*graph, *devices, options, token, &searched.stats);
  EXPECT_TRUE(set.ok()) << set.status();
  return searched;
}

// Every trial places about `partitions` partitions again, and each passes
// over devices on its way: partitions x devices is a floor on a trial's
// work that any honest budget must pay.
void ExpectTrialsPaidFor(const Searched& searched, int64_t max_work) {
  ASSERT_EQ(searched.partitions, searched.devices) << "the chain should fill one device a node";
  EXPECT_GT(searched.stats.trials, 0) << "the budget should pay for some trials";
  EXPECT_LE(searched.stats.trials * searched.partitions * searched.devices, max_work)
      << searched.stats.trials << " trials of " << searched.partitions << " partitions on "
      << searched.devices << " devices";
  EXPECT_LE(searched.stats.work, max_work);
  EXPECT_TRUE(searched.stats.out_of_work);
}

// The boundary pass (over max_exhaustive_nodes): its node + edge budget
// alone allowed max_boundary_trials trials of 300 x 300 device visits each.
TEST(KlBudgetTest, BoundaryPassPaysForPartitionsTimesDevices) {
  KlOptions options;
  options.max_work = 2'000'000;
  const Searched searched = Search(ChainOnManyDevices(300), options);
  ExpectTrialsPaidFor(searched, options.max_work);
  EXPECT_LE(searched.stats.trials, options.max_boundary_trials);
}

// The exhaustive pass (up to max_exhaustive_nodes) had no budget at all:
// every node with every partner, about 2 x 64 x 63 trials here.
TEST(KlBudgetTest, ExhaustivePassIsBudgetedToo) {
  KlOptions options;
  options.max_work = 200'000;
  const Searched searched = Search(ChainOnManyDevices(64), options);
  ExpectTrialsPaidFor(searched, options.max_work);
}

// A graph the budget covers is searched in full, as torch.fx searches it.
TEST(KlBudgetTest, SmallGraphsAreSearchedInFull) {
  const Searched searched = Search(ChainOnManyDevices(8), KlOptions());
  EXPECT_FALSE(searched.stats.out_of_work);
  // Each of the 8 nodes is tried in the 7 other partitions, alone and with
  // that partition's one node.
  EXPECT_EQ(searched.stats.trials, 8 * 7 * 2);
  EXPECT_GT(searched.stats.work, 0);
}

TEST(KlBudgetTest, NegativeBudgetIsRefused) {
  KlOptions options;
  options.max_work = -1;
  EXPECT_EQ(options.CheckAndSetup().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace partplan

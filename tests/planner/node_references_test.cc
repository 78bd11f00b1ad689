// NODE_REFERENCES_INDICES gives the same plan as NODE_REFERENCES_NAMES with
// indices in the request's Graph.nodes in place of the per-node name lists,
// over every golden fixture of every planner that lists nodes per partition:
// PartitionGraph, Plan with a partitioner or a shard planner, and
// ShardGraph.
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "planner/base/status_util.h"
#include "tests/planner/fixture_files.h"

namespace partplan {
namespace {

using Assignments = std::vector<std::pair<std::string, int32_t>>;

// `assignments` as (node, partition) pairs.
Assignments NamedAssignments(
    const google::protobuf::RepeatedPtrField<v1::NodePartition>& assignments) {
  Assignments pairs;
  for (const v1::NodePartition& assignment : assignments) {
    pairs.emplace_back(assignment.node(), assignment.partition());
  }
  return pairs;
}

// The same pairs from the partition of every node by index: the nodes with
// one, in graph order.
Assignments IndexedAssignments(const v1::Graph& graph,
                               const google::protobuf::RepeatedField<int32_t>& partition_of) {
  EXPECT_EQ(partition_of.size(), graph.nodes_size());
  Assignments pairs;
  for (int i = 0; i < graph.nodes_size() && i < partition_of.size(); ++i) {
    EXPECT_GE(partition_of[i], -1) << "node " << i;
    if (partition_of[i] >= 0) pairs.emplace_back(graph.nodes(i).name(), partition_of[i]);
  }
  return pairs;
}

// Checks that a partition's or shard's `node_indices` name its `nodes`, and
// that each form fills only its own field; then clears both, so that what
// is left can be compared whole.
template <typename PartitionOrShard>
void ExpectSameNodesAndClear(const v1::Graph& graph, PartitionOrShard& named,
                             PartitionOrShard& indexed) {
  EXPECT_EQ(named.node_indices_size(), 0);
  EXPECT_EQ(indexed.nodes_size(), 0);
  std::vector<std::string> nodes_from_indices;
  for (int32_t i : indexed.node_indices()) {
    ASSERT_TRUE(i >= 0 && i < graph.nodes_size()) << i;
    nodes_from_indices.push_back(graph.nodes(i).name());
  }
  EXPECT_EQ(nodes_from_indices,
            std::vector<std::string>(named.nodes().begin(), named.nodes().end()))
      << "partition or shard " << named.id();
  named.clear_nodes();
  indexed.clear_node_indices();
}

void ExpectEqualButTiming(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  google::protobuf::util::MessageDifferencer differencer;
  differencer.IgnoreField(v1::PlanSummary::descriptor()->FindFieldByName("planner_seconds"));
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(a, b)) << differences;
}

// Checks that `by_index` is `by_name` with indices for names.
// `group_of_node(plan)` and `groups(plan)` give a plan's partition (or
// shard) of every node by index and its partitions (or shards).
template <typename Plan, typename GroupOfNode, typename Groups>
void ExpectSameGroups(const v1::Graph& graph, Plan by_name, Plan by_index,
                      GroupOfNode group_of_node, Groups groups) {
  EXPECT_EQ(group_of_node(by_name).size(), 0);
  EXPECT_EQ(by_index.assignments_size(), 0);
  EXPECT_EQ(IndexedAssignments(graph, group_of_node(by_index)),
            NamedAssignments(by_name.assignments()));
  auto& named = groups(by_name);
  auto& indexed = groups(by_index);
  ASSERT_EQ(named.size(), indexed.size());
  for (int i = 0; i < named.size(); ++i) {
    ExpectSameNodesAndClear(graph, *named.Mutable(i), *indexed.Mutable(i));
  }
  by_name.clear_assignments();
  group_of_node(by_index).Clear();
  ExpectEqualButTiming(by_name, by_index);
}

void ExpectSamePlan(const v1::Graph& graph, const v1::PartitionPlan& by_name,
                    const v1::PartitionPlan& by_index) {
  ExpectSameGroups(
      graph, by_name, by_index,
      [](v1::PartitionPlan & plan) -> auto& { return *plan.mutable_partition_by_node_index(); },
      [](v1::PartitionPlan & plan) -> auto& { return *plan.mutable_partitions(); });
}

void ExpectSameResponse(const v1::Graph& graph, const v1::PartitionGraphResponse& by_name,
                        const v1::PartitionGraphResponse& by_index) {
  ExpectSamePlan(graph, by_name.plan(), by_index.plan());
}
void ExpectSameResponse(const v1::Graph& graph, const v1::PlanResponse& by_name,
                        const v1::PlanResponse& by_index) {
  ExpectSamePlan(graph, by_name.plan(), by_index.plan());
}
void ExpectSameResponse(const v1::Graph& graph, const v1::ShardGraphResponse& by_name,
                        const v1::ShardGraphResponse& by_index) {
  ExpectSameGroups(
      graph, by_name, by_index, [](v1::ShardGraphResponse & shards) -> auto& {
        return *shards.mutable_shard_by_node_index();
      },
      [](v1::ShardGraphResponse & shards) -> auto& { return *shards.mutable_shards(); });
}

// Runs `request` asking for names, then for indices: the same status, and
// when OK the same plan; `*compared` says whether it was OK.
template <typename Request, typename Response>
void ExpectSameBothReferences(absl::Status (*entry_point)(const Request&, const InputLimits&,
                                                          const CancellationToken&, Response*),
                              Request request, bool* compared) {
  CancellationToken token;
  request.set_node_references(v1::NODE_REFERENCES_NAMES);
  Response by_name;
  const absl::Status name_status = entry_point(request, InputLimits(), token, &by_name);
  request.set_node_references(v1::NODE_REFERENCES_INDICES);
  Response by_index;
  const absl::Status index_status = entry_point(request, InputLimits(), token, &by_index);
  ASSERT_EQ(name_status, index_status);
  if (name_status.ok()) ExpectSameResponse(request.graph(), by_name, by_index);
  *compared = name_status.ok();
}

class PartitionerNodeReferencesTest : public ::testing::TestWithParam<std::string> {};
TEST_P(PartitionerNodeReferencesTest, IndicesNameTheSameNodes) {
  const auto request = LoadFixtureRequest<v1::PartitionGraphRequest>(GetParam());
  bool compared = false;
  ExpectSameBothReferences<v1::PartitionGraphRequest, v1::PartitionGraphResponse>(
      &PartitionGraph, request, &compared);
  v1::PlanRequest plan;
  *plan.mutable_graph() = request.graph();
  *plan.mutable_devices() = request.devices();
  *plan.mutable_partitioner() = request.config();
  ExpectSameBothReferences<v1::PlanRequest, v1::PlanResponse>(&Plan, plan, &compared);
}
INSTANTIATE_TEST_SUITE_P(Fixtures, PartitionerNodeReferencesTest,
                         ::testing::ValuesIn(FixturePathsUnder(PartitionerFixtureDirs())),
                         FixturePathCaseName);

// ShardGraph, and Plan with a shard planner, whose shards become the plan's
// partitions.
class ShardNodeReferencesTest : public ::testing::TestWithParam<std::string> {};
TEST_P(ShardNodeReferencesTest, IndicesNameTheSameNodes) {
  auto shard_request = LoadFixtureRequest<v1::ShardGraphRequest>(GetParam());
  for (const v1::ShardConfig::Mode mode : {v1::ShardConfig::FAIRSCALE, v1::ShardConfig::BALANCED}) {
    shard_request.mutable_config()->set_mode(mode);
    // BALANCED places stage i on devices[i]; the fixtures have none.
    if (mode == v1::ShardConfig::BALANCED) {
      *shard_request.mutable_devices() = RoomyDevices(shard_request.config().shard_count());
    }
    bool compared = false;
    ExpectSameBothReferences<v1::ShardGraphRequest, v1::ShardGraphResponse>(
        &ShardGraph, shard_request, &compared);
    // Every fixture plans both ways: its graph has modules, and BALANCED
    // has a device per stage.
    EXPECT_TRUE(compared) << v1::ShardConfig::Mode_Name(mode);
    v1::PlanRequest plan;
    *plan.mutable_graph() = shard_request.graph();
    *plan.mutable_devices() = shard_request.devices();
    *plan.mutable_shard() = shard_request.config();
    ExpectSameBothReferences<v1::PlanRequest, v1::PlanResponse>(&Plan, plan, &compared);
    EXPECT_TRUE(compared) << "Plan " << v1::ShardConfig::Mode_Name(mode);
  }
}
INSTANTIATE_TEST_SUITE_P(
    Fixtures, ShardNodeReferencesTest,
    ::testing::ValuesIn(FixturePathsUnder({"tests/fixtures/pipeline/auto_shard"})),
    FixturePathCaseName);

// A value this server does not know is the caller's error, named, whatever
// the planner.
TEST(NodeReferencesTest, UnknownValueIsInvalidArgumentOnTheField) {
  const auto fixture = FixturePaths("tests/fixtures/partitioner/size_based");
  ASSERT_FALSE(fixture.empty());
  auto request = LoadFixtureRequest<v1::PartitionGraphRequest>(fixture.front());
  request.set_node_references(static_cast<v1::NodeReferences>(7));
  v1::PartitionGraphResponse response;
  absl::Status status = PartitionGraph(request, InputLimits(), CancellationToken(), &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InvalidFieldPath(status), "node_references");
  EXPECT_NE(status.message().find("unknown node_references 7"), absl::string_view::npos)
      << status;

  v1::PlanRequest plan;
  *plan.mutable_graph() = request.graph();
  *plan.mutable_devices() = request.devices();
  plan.set_node_references(static_cast<v1::NodeReferences>(-1));
  for (const bool shard : {false, true}) {
    if (shard) plan.mutable_shard()->set_shard_count(2);
    v1::PlanResponse plan_response;
    status = Plan(plan, InputLimits(), CancellationToken(), &plan_response);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << shard;
    EXPECT_EQ(InvalidFieldPath(status), "node_references") << shard;
  }

  v1::ShardGraphRequest shard_request;
  *shard_request.mutable_graph() = request.graph();
  shard_request.mutable_config()->set_shard_count(2);
  shard_request.set_node_references(static_cast<v1::NodeReferences>(2));
  v1::ShardGraphResponse shard_response;
  status = ShardGraph(shard_request, InputLimits(), CancellationToken(), &shard_response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InvalidFieldPath(status), "node_references");
}

}  // namespace
}  // namespace partplan

// NODE_REFERENCES_INDICES gives the same plan as NODE_REFERENCES_NAMES with
// indices in the request's Graph.nodes in place of the per-node name lists,
// over every golden fixture of every planner that returns a PartitionPlan
// (PartitionGraph, and Plan with a partitioner or a shard planner).
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "planner/entry_points.h"
#include "planner/status_util.h"
#include "tests/planner/fixture_files.h"

namespace partplan {
namespace {

// Checks that `by_index` is `by_name` with indices for names, and that each
// fills only its own per-node fields.
void ExpectSamePlan(const v1::Graph& graph, v1::PartitionPlan by_name,
                    v1::PartitionPlan by_index) {
  EXPECT_EQ(by_name.partition_by_node_index_size(), 0);
  EXPECT_EQ(by_index.assignments_size(), 0);
  ASSERT_EQ(by_index.partition_by_node_index_size(), graph.nodes_size());

  // `assignments` lists the nodes with a partition, in graph order.
  std::vector<std::pair<std::string, int32_t>> assignments_from_indices;
  for (int i = 0; i < graph.nodes_size(); ++i) {
    const int32_t partition = by_index.partition_by_node_index(i);
    ASSERT_GE(partition, -1) << "node " << i;
    if (partition >= 0) assignments_from_indices.emplace_back(graph.nodes(i).name(), partition);
  }
  std::vector<std::pair<std::string, int32_t>> assignments;
  for (const v1::NodePartition& assignment : by_name.assignments()) {
    assignments.emplace_back(assignment.node(), assignment.partition());
  }
  EXPECT_EQ(assignments_from_indices, assignments);

  ASSERT_EQ(by_name.partitions_size(), by_index.partitions_size());
  for (int p = 0; p < by_name.partitions_size(); ++p) {
    v1::Partition& named = *by_name.mutable_partitions(p);
    v1::Partition& indexed = *by_index.mutable_partitions(p);
    EXPECT_EQ(named.node_indices_size(), 0);
    EXPECT_EQ(indexed.nodes_size(), 0);
    std::vector<std::string> nodes_from_indices;
    for (int32_t i : indexed.node_indices()) {
      ASSERT_TRUE(i >= 0 && i < graph.nodes_size()) << i;
      nodes_from_indices.push_back(graph.nodes(i).name());
    }
    EXPECT_EQ(nodes_from_indices, std::vector<std::string>(named.nodes().begin(),
                                                           named.nodes().end()))
        << "partition " << p;
    named.clear_nodes();
    indexed.clear_node_indices();
  }

  // Everything else is the same.
  by_name.clear_assignments();
  by_index.clear_partition_by_node_index();
  google::protobuf::util::MessageDifferencer differencer;
  differencer.IgnoreField(v1::PlanSummary::descriptor()->FindFieldByName("planner_seconds"));
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(by_name, by_index)) << differences;
}

template <typename Request, typename Response>
void ExpectSameBothReferences(
    absl::Status (*entry_point)(const Request&, const InputLimits&, const CancellationToken&,
                                Response*),
    Request request) {
  CancellationToken token;
  request.set_node_references(v1::NODE_REFERENCES_NAMES);
  Response by_name;
  const absl::Status name_status = entry_point(request, InputLimits(), token, &by_name);
  request.set_node_references(v1::NODE_REFERENCES_INDICES);
  Response by_index;
  const absl::Status index_status = entry_point(request, InputLimits(), token, &by_index);
  ASSERT_EQ(name_status, index_status);
  if (name_status.ok()) ExpectSamePlan(request.graph(), by_name.plan(), by_index.plan());
}

class PartitionerNodeReferencesTest : public ::testing::TestWithParam<std::string> {};
TEST_P(PartitionerNodeReferencesTest, IndicesNameTheSameNodes) {
  const auto request = LoadFixtureRequest<v1::PartitionGraphRequest>(GetParam());
  ExpectSameBothReferences<v1::PartitionGraphRequest, v1::PartitionGraphResponse>(
      &PartitionGraph, request);
  v1::PlanRequest plan;
  *plan.mutable_graph() = request.graph();
  *plan.mutable_devices() = request.devices();
  *plan.mutable_partitioner() = request.config();
  ExpectSameBothReferences<v1::PlanRequest, v1::PlanResponse>(&Plan, plan);
}
INSTANTIATE_TEST_SUITE_P(
    Fixtures, PartitionerNodeReferencesTest,
    ::testing::ValuesIn(FixturePathsUnder({"tests/fixtures/partitioner/size_based",
                                           "tests/fixtures/partitioner/aot_based",
                                           "tests/fixtures/partitioner/cost_aware",
                                           "tests/fixtures/partitioner/kl_based",
                                           "tests/fixtures/partitioner/saturate_host",
                                           "tests/fixtures/partitioner/sparse_nn"})),
    FixturePathCaseName);

// Plan with a shard planner: its shards become the plan's partitions.
class ShardPlanNodeReferencesTest : public ::testing::TestWithParam<std::string> {};
TEST_P(ShardPlanNodeReferencesTest, IndicesNameTheSameNodes) {
  const auto shard_request = LoadFixtureRequest<v1::ShardGraphRequest>(GetParam());
  for (const v1::ShardConfig::Mode mode : {v1::ShardConfig::FAIRSCALE, v1::ShardConfig::BALANCED}) {
    v1::PlanRequest plan;
    *plan.mutable_graph() = shard_request.graph();
    *plan.mutable_devices() = shard_request.devices();
    *plan.mutable_shard() = shard_request.config();
    plan.mutable_shard()->set_mode(mode);
    ExpectSameBothReferences<v1::PlanRequest, v1::PlanResponse>(&Plan, plan);
  }
}
INSTANTIATE_TEST_SUITE_P(Fixtures, ShardPlanNodeReferencesTest,
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
}

}  // namespace
}  // namespace partplan

// Every entry point answers a request whose graph is serialised (the
// server's way: GraphSource::Serialized), whole or in pieces, exactly as it
// answers the parsed request, over every golden fixture of every planner: the same plan, or
// the same error.
#include <string>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "tests/planner/fixture_files.h"

namespace partplan {
namespace {

template <typename Request, typename Response>
using EntryPoint = absl::Status (*)(const Request&, const GraphSource&, const InputLimits&,
                                    const CancellationToken&, Response*);

template <typename Request, typename Response>
void ExpectSameBothWays(EntryPoint<Request, Response> entry_point, const Request& request) {
  CancellationToken token;
  Response from_parsed;
  const absl::Status parsed_status =
      entry_point(request, request.graph(), InputLimits(), token, &from_parsed);

  const std::string graph_bytes = request.graph().SerializeAsString();
  Request without_graph = request;
  without_graph.clear_graph();
  Response from_serialized;
  const absl::Status serialized_status = entry_point(
      without_graph, GraphSource::Serialized(graph_bytes), InputLimits(), token, &from_serialized);

  // And in pieces of 7 bytes, as gRPC delivers a request in slices: most
  // nodes straddle two pieces here.
  std::vector<absl::string_view> pieces;
  for (size_t at = 0; at < graph_bytes.size(); at += 7) {
    pieces.push_back(absl::string_view(graph_bytes).substr(at, 7));
  }
  Response from_pieces;
  const absl::Status pieces_status =
      entry_point(without_graph, GraphSource::Serialized(ChunkedBytes(pieces)), InputLimits(),
                  token, &from_pieces);

  ASSERT_EQ(parsed_status, serialized_status);
  ASSERT_EQ(parsed_status, pieces_status);
  if (!parsed_status.ok()) return;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.IgnoreField(
      v1::PlanSummary::descriptor()->FindFieldByName("planner_seconds"));  // timing
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(from_parsed, from_serialized)) << differences;
  EXPECT_TRUE(differencer.Compare(from_parsed, from_pieces)) << differences;
}

class PartitionGraphBothWaysTest : public ::testing::TestWithParam<std::string> {};
TEST_P(PartitionGraphBothWaysTest, SameAnswer) {
  const auto request = LoadFixtureRequest<v1::PartitionGraphRequest>(GetParam());
  ExpectSameBothWays<v1::PartitionGraphRequest, v1::PartitionGraphResponse>(&PartitionGraph,
                                                                            request);
  // The same graphs through Plan, which wraps the partitioners.
  v1::PlanRequest plan;
  *plan.mutable_graph() = request.graph();
  *plan.mutable_devices() = request.devices();
  *plan.mutable_partitioner() = request.config();
  ExpectSameBothWays<v1::PlanRequest, v1::PlanResponse>(&Plan, plan);
  v1::ValidateRequest validate;
  *validate.mutable_graph() = request.graph();
  *validate.mutable_devices() = request.devices();
  ExpectSameBothWays<v1::ValidateRequest, v1::ValidateResponse>(&Validate, validate);
}
INSTANTIATE_TEST_SUITE_P(Fixtures, PartitionGraphBothWaysTest,
                         ::testing::ValuesIn(FixturePathsUnder(PartitionerFixtureDirs())),
                         FixturePathCaseName);

class SplitGraphBothWaysTest : public ::testing::TestWithParam<std::string> {};
TEST_P(SplitGraphBothWaysTest, SameAnswer) {
  ExpectSameBothWays<v1::SplitGraphRequest, v1::SplitGraphResponse>(
      &SplitGraph, LoadFixtureRequest<v1::SplitGraphRequest>(GetParam()));
}
INSTANTIATE_TEST_SUITE_P(
    Fixtures, SplitGraphBothWaysTest,
    ::testing::ValuesIn(FixturePathsUnder({"tests/fixtures/split_module/cases"})),
    FixturePathCaseName);

class ShardGraphBothWaysTest : public ::testing::TestWithParam<std::string> {};
TEST_P(ShardGraphBothWaysTest, SameAnswer) {
  v1::ShardGraphRequest request = LoadFixtureRequest<v1::ShardGraphRequest>(GetParam());
  ExpectSameBothWays<v1::ShardGraphRequest, v1::ShardGraphResponse>(&ShardGraph, request);
  // BALANCED reads latencies, FLOPs or parameter counts; FAIRSCALE modules.
  request.mutable_config()->set_mode(v1::ShardConfig::BALANCED);
  *request.mutable_devices() = RoomyDevices(request.config().shard_count());
  ExpectSameBothWays<v1::ShardGraphRequest, v1::ShardGraphResponse>(&ShardGraph, request);
}
INSTANTIATE_TEST_SUITE_P(
    Fixtures, ShardGraphBothWaysTest,
    ::testing::ValuesIn(FixturePathsUnder({"tests/fixtures/pipeline/auto_shard"})),
    FixturePathCaseName);

class BuildPipelineGraphBothWaysTest : public ::testing::TestWithParam<std::string> {};
TEST_P(BuildPipelineGraphBothWaysTest, SameAnswer) {
  ExpectSameBothWays<v1::BuildPipelineGraphRequest, v1::BuildPipelineGraphResponse>(
      &BuildPipelineGraph, LoadFixtureRequest<v1::BuildPipelineGraphRequest>(GetParam()));
}
INSTANTIATE_TEST_SUITE_P(
    Fixtures, BuildPipelineGraphBothWaysTest,
    ::testing::ValuesIn(FixturePathsUnder({"tests/fixtures/pipeline/create_graph"})),
    FixturePathCaseName);

class PlanDataParallelBothWaysTest : public ::testing::TestWithParam<std::string> {};
TEST_P(PlanDataParallelBothWaysTest, SameAnswer) {
  ExpectSameBothWays<v1::PlanDataParallelRequest, v1::PlanDataParallelResponse>(
      &PlanDataParallel, LoadFixtureRequest<v1::PlanDataParallelRequest>(GetParam()));
}
INSTANTIATE_TEST_SUITE_P(
    Fixtures, PlanDataParallelBothWaysTest,
    ::testing::ValuesIn(FixturePathsUnder({"tests/fixtures/data_parallel/cases"})),
    FixturePathCaseName);

}  // namespace
}  // namespace partplan

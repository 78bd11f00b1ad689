// ShardGraph (FAIRSCALE) and BuildPipelineGraph against fairscale's own code
// (tests/fixtures/pipeline, made by generate.py there from fairscale
// 146f1602 on torch 1.13).
//
// auto_shard: every node's shard and every shard's parameters equal those
// of fairscale's `_split_nodes` run with partplan's two fixes; where no
// fixed defect triggers (`defects` empty) that is fairscale's unmodified
// answer. With `exact`, any other count than shard_count fails.
// create_graph: the modules, their inputs, workers and cardinalities, and
// the graph's outputs; where no defect triggers, the modules equal what
// fairscale built. Graphs fairscale rejects are INVALID_ARGUMENT here.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "pipeline_fixtures.pb.h"
#include "planner/api/entry_points.h"
#include "planner/base/status_util.h"
#include "planner/graph/graph_import.h"
#include "planner/pipeline/pipeline_graph.h"
#include "planner/pipeline/shard_graph.h"

namespace partplan {
namespace {

using testing::pipeline::AutoShardFixture;
using testing::pipeline::AutoShardRun;
using testing::pipeline::PipelineGraphFixture;

constexpr char kAutoShardDir[] = "tests/fixtures/pipeline/auto_shard";
constexpr char kCreateGraphDir[] = "tests/fixtures/pipeline/create_graph";

// tests/planner/fixture_files.h has these, but its target is private to
// tests/planner; these are the two this test needs.
std::vector<std::string> FixturePaths(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

template <typename Fixture>
Fixture LoadJsonFixture(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  Fixture fixture;
  const auto status = google::protobuf::util::JsonStringToMessage(text.str(), &fixture);
  EXPECT_TRUE(status.ok()) << path << ": " << status.ToString();
  return fixture;
}

// The test's name: the fixture's stem (case names are identifiers already).
std::string CaseName(const ::testing::TestParamInfo<std::string>& info) {
  return std::filesystem::path(info.param).stem().string();
}

bool Equal(const google::protobuf::Message& a, const google::protobuf::Message& b,
           std::string* differences) {
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(differences);
  return differencer.Compare(a, b);
}

class AutoShardFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AutoShardFixtureTest, MatchesFairscaleWithTheFixes) {
  const auto fixture = LoadJsonFixture<AutoShardFixture>(GetParam());
  SCOPED_TRACE(fixture.name() + ": " + fixture.description());
  CancellationToken token;
  const absl::StatusOr<CompactGraph> graph =
      ImportGraph(fixture.request().graph(), InputLimits(), token);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const absl::StatusOr<v1::ShardGraphResponse> response =
      ShardGraph(fixture.request(), InputLimits(), token);
  ASSERT_TRUE(response.ok()) << response.status();

  const AutoShardRun& expected = fixture.expected();
  ASSERT_EQ(response->shards_size(), expected.shard_parameters_size());
  std::map<std::string, int> shard_of;
  for (const v1::Shard& shard : response->shards()) {
    EXPECT_EQ(shard.parameter_count(), expected.shard_parameters(shard.id())) << shard.id();
    for (const std::string& node : shard.nodes()) shard_of[node] = shard.id();
  }
  int assignment = 0;
  int compared = 0;
  for (const v1::NodePartition& entry : expected.shard_of()) {
    const NodeId v = graph->Find(entry.node());
    ASSERT_GE(v, 0) << entry.node();
    if (graph->op(v) == v1::PLACEHOLDER) continue;  // graph inputs belong to no shard here
    ++compared;
    EXPECT_EQ(shard_of[entry.node()], entry.partition()) << entry.node();
    if (graph->is_op_node(v)) {
      ASSERT_LT(assignment, response->assignments_size());
      EXPECT_EQ(response->assignments(assignment).node(), entry.node());
      EXPECT_EQ(response->assignments(assignment).partition(), entry.partition());
      ++assignment;
    }
  }
  EXPECT_EQ(assignment, response->assignments_size());
  EXPECT_EQ(compared, static_cast<int>(shard_of.size()));

  std::string differences;
  if (fixture.defects().empty()) {
    EXPECT_TRUE(Equal(fixture.fairscale(), expected, &differences))
        << "no defect, yet fairscale differs:\n"
        << differences;
  } else {
    EXPECT_FALSE(Equal(fixture.fairscale(), expected, &differences));
  }

  v1::ShardGraphRequest exact = fixture.request();
  exact.mutable_config()->set_exact(true);
  const absl::StatusOr<v1::ShardGraphResponse> exact_response =
      ShardGraph(exact, InputLimits(), token);
  if (expected.shard_parameters_size() == exact.config().shard_count()) {
    EXPECT_TRUE(exact_response.ok()) << exact_response.status();
  } else {
    EXPECT_EQ(exact_response.status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(AutoShardFixtures, AreThere) {
  int defect_free = 0;
  const std::vector<std::string> paths = FixturePaths(kAutoShardDir);
  for (const std::string& path : paths) {
    defect_free += LoadJsonFixture<AutoShardFixture>(path).defects().empty();
  }
  EXPECT_GE(paths.size(), 12u);
  EXPECT_GE(defect_free, 8);
}

INSTANTIATE_TEST_SUITE_P(Fairscale, AutoShardFixtureTest,
                         ::testing::ValuesIn(FixturePaths(kAutoShardDir)), CaseName);

class PipelineGraphFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelineGraphFixtureTest, MatchesCreateGraph) {
  const auto fixture = LoadJsonFixture<PipelineGraphFixture>(GetParam());
  SCOPED_TRACE(fixture.name() + ": " + fixture.description());
  CancellationToken token;
  const absl::StatusOr<CompactGraph> graph =
      ImportGraph(fixture.request().graph(), InputLimits(), token);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const absl::StatusOr<v1::BuildPipelineGraphResponse> response =
      BuildPipelineGraph(fixture.request(), InputLimits(), token);
  if (!fixture.expected_invalid_field().empty()) {
    EXPECT_TRUE(!fixture.fairscale_error().empty() || !fixture.defects().empty());
    ASSERT_FALSE(response.ok());
    EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(InvalidFieldPath(response.status()).value_or("<none>"),
              fixture.expected_invalid_field());
    return;
  }
  ASSERT_TRUE(fixture.fairscale_error().empty());
  ASSERT_TRUE(response.ok()) << response.status();
  std::string differences;
  EXPECT_TRUE(Equal(fixture.expected(), *response, &differences)) << differences;
  // What fairscale computes: the modules, without workers.
  v1::BuildPipelineGraphResponse modules = *response;
  modules.clear_outputs();
  for (v1::PipelineModule& module : *modules.mutable_modules()) module.clear_worker();
  differences.clear();
  EXPECT_EQ(Equal(fixture.fairscale(), modules, &differences), fixture.defects().empty())
      << differences;
}

TEST(PipelineGraphFixtures, AreThere) { EXPECT_GE(FixturePaths(kCreateGraphDir).size(), 8u); }

INSTANTIATE_TEST_SUITE_P(Fairscale, PipelineGraphFixtureTest,
                         ::testing::ValuesIn(FixturePaths(kCreateGraphDir)), CaseName);

}  // namespace
}  // namespace partplan

// PlanDataParallel on make_fx graphs of real models' train steps
// (tests/fixtures/data_parallel, made by generate.py there): an MLP, a
// ResNet block, a Transformer block and an MLP whose every dim is the batch
// size, each under REPLICATE, FULLY_SHARD (one on a 2-D mesh) and
// MEMORY_AWARE; an MLP with flips, rot90, cumsum and softmax, and a conv
// block with training-mode BatchNorm, under REPLICATE. The expected plans were worked out by hand and checked by
// running each model sharded as planned; every field but the notes is
// compared.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "data_parallel_fixture.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "planner/data_parallel/data_parallel_plan.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/data_parallel/plan_request.h"

namespace partplan {
namespace {

constexpr char kFixtureDir[] = "tests/fixtures/data_parallel/cases";

std::vector<std::string> FixturePaths() {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(kFixtureDir)) {
    if (entry.path().extension() == ".json") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

testing::DataParallelFixture LoadFixture(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  testing::DataParallelFixture fixture;
  const auto status = google::protobuf::util::JsonStringToMessage(text.str(), &fixture);
  EXPECT_TRUE(status.ok()) << path << ": " << status.ToString();
  return fixture;
}

std::string CaseName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = std::filesystem::path(info.param).stem().string();
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class DataParallelFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DataParallelFixtureTest, MatchesThePlanWorkedOutByHand) {
  const testing::DataParallelFixture fixture = LoadFixture(GetParam());
  SCOPED_TRACE(fixture.name());
  CancellationToken token;
  absl::StatusOr<CompactGraph> graph = ImportGraph(fixture.request().graph(), InputLimits(), token);
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<v1::PlanDataParallelResponse> response =
      PlanRequest(*graph, fixture.request(), token);
  ASSERT_TRUE(response.ok()) << response.status();

  // Under MEMORY_AWARE every parameter and optimizer state says why.
  if (fixture.request().style() == v1::MEMORY_AWARE) {
    for (const v1::PlaceholderRoleEntry& role : fixture.request().roles()) {
      if (role.role() == v1::ACTIVATION) continue;
      const auto it =
          std::find_if(response->nodes().begin(), response->nodes().end(),
                       [&](const v1::NodeSharding& n) { return n.node() == role.node(); });
      ASSERT_NE(it, response->nodes().end()) << role.node();
      EXPECT_TRUE(absl::StartsWith(it->note(), "MEMORY_AWARE: "))
          << role.node() << ": " << it->note();
      EXPECT_THAT(it->note(), ::testing::HasSubstr(it->placement().kind() == v1::Placement::SHARD
                                                       ? "sharded on dim 0"
                                                       : "replicated"));
    }
  }
  v1::PlanDataParallelResponse actual = *response;
  for (v1::NodeSharding& node : *actual.mutable_nodes()) node.clear_note();
  google::protobuf::util::MessageDifferencer differencer;
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(fixture.expected(), actual))
      << "differences (expected -> actual):\n"
      << differences;
}

TEST(DataParallelFixtures, AreThere) { EXPECT_GE(FixturePaths().size(), 12u); }

INSTANTIATE_TEST_SUITE_P(Models, DataParallelFixtureTest, ::testing::ValuesIn(FixturePaths()),
                         CaseName);

}  // namespace
}  // namespace partplan

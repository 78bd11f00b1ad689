// SplitGraph against golden outputs of torch.fx 1.13's split_module
// (tests/fixtures/split_module, made by generate.py there): submodules in
// construction order with their nodes, inputs, outputs, dependencies and
// dependents; the top-level graph's calls with split_module's node names;
// the qualname map and the output values. Each "cycle exists between
// partitions!" must be INVALID_ARGUMENT here.
#include <string>

#include "absl/strings/cord.h"
#include "fixtures.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "tests/planner/fixture_files.h"

namespace partplan {
namespace {

using ::testing::HasSubstr;

constexpr char kFixtureDir[] = "tests/fixtures/split_module/cases";

class SplitGraphFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitGraphFixtureTest, MatchesTorchFx) {
  const auto fixture = LoadJsonFixture<testing::SplitModuleFixture>(GetParam());
  SCOPED_TRACE(fixture.name());
  CancellationToken token;
  absl::StatusOr<v1::SplitGraphResponse> response =
      SplitGraph(fixture.request(), InputLimits(), token);
  if (!fixture.expected_error().empty()) {
    ASSERT_EQ(fixture.expected_error(), "cycle exists between partitions!")
        << "an error this test does not know";
    ASSERT_FALSE(response.ok());
    EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(response.status().message()),
                HasSubstr("cycle exists between partitions"));
    return;
  }
  ASSERT_TRUE(response.ok()) << response.status();
  google::protobuf::util::MessageDifferencer differencer;
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(fixture.expected(), *response))
      << "differences (expected -> actual):\n"
      << differences;
}

// The bytes the server sends (SplitGraphSerialized, which writes them
// without building the response as messages) are protobuf's serialisation
// of the response, or the same error.
TEST_P(SplitGraphFixtureTest, SerializedIsProtobufsSerialization) {
  const auto fixture = LoadJsonFixture<testing::SplitModuleFixture>(GetParam());
  const absl::StatusOr<v1::SplitGraphResponse> message =
      SplitGraph(fixture.request(), InputLimits(), CancellationToken());
  absl::Cord bytes;
  const absl::Status status = SplitGraphSerialized(fixture.request(), fixture.request().graph(),
                                                   InputLimits(), CancellationToken(), &bytes);
  ASSERT_EQ(status, message.status());
  if (!status.ok()) return;
  EXPECT_EQ(std::string(bytes), message->SerializeAsString());
  v1::SplitGraphResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(std::string(bytes)));
  EXPECT_EQ(std::string(bytes), parsed.SerializeAsString());
}

TEST(SplitGraphFixtures, AreThere) { EXPECT_GE(FixturePaths(kFixtureDir).size(), 15u); }

INSTANTIATE_TEST_SUITE_P(SplitModule, SplitGraphFixtureTest,
                         ::testing::ValuesIn(FixturePaths(kFixtureDir)), FixtureCaseName);

}  // namespace
}  // namespace partplan

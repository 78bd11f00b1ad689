// PartitionGraph against golden outputs of torch.fx 1.13's Partitioner
// (tests/fixtures/partitioner, made by generate.py there): every node
// assignment, every partition's nodes, memory, devices, parents, children,
// split_module inputs and outputs, and every DAG entry must be equal; each
// error torch.fx raised must be raised here with the matching status code.
#include <string>

#include "google/protobuf/util/message_differencer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "fixtures.pb.h"
#include "planner/entry_points.h"
#include "tests/planner/fixture_files.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace partplan {
namespace {

using ::testing::HasSubstr;

constexpr char kFixtureDir[] = "tests/fixtures/partitioner/size_based";

// The status code and message fragment torch.fx's RuntimeError maps to.
struct ExpectedError {
  absl::StatusCode code;
  std::string fragment;
};

ExpectedError TranslateTorchError(const std::string& torch_error) {
  if (torch_error == "No devices") return {absl::StatusCode::kInvalidArgument, "no devices"};
  if (absl::StartsWith(torch_error, "No Partition since no operations")) {
    return {absl::StatusCode::kInvalidArgument, "no operations"};
  }
  if (absl::StartsWith(torch_error, "Devices have no enough memory")) {
    return {absl::StatusCode::kFailedPrecondition, "devices have not enough memory"};
  }
  if (absl::EndsWith(torch_error, "is too large to fit any device")) {
    const std::string node = torch_error.substr(0, torch_error.size() - 30);
    return {absl::StatusCode::kFailedPrecondition,
            "node '" + node + "' is too large to fit any device"};
  }
  if (absl::StartsWith(torch_error, "Cannot Get a Valid Partition to Logical Device Mapping")) {
    return {absl::StatusCode::kFailedPrecondition, "cannot place every partition on a device"};
  }
  ADD_FAILURE() << "fixture has an error this test does not know: " << torch_error;
  return {absl::StatusCode::kUnknown, torch_error};
}

// Keeps only what torch.fx reports, so the comparison covers every field
// it has and nothing it lacks.
v1::PartitionPlan ComparableView(const v1::PartitionPlan& plan, const v1::PartitionPlan& like) {
  v1::PartitionPlan view = plan;
  view.clear_summary();
  view.clear_device_usage();
  for (int p = 0; p < view.partitions_size(); ++p) {
    v1::Partition* partition = view.mutable_partitions(p);
    partition->clear_latency_seconds();
    if (p < like.partitions_size() && like.partitions(p).inputs_size() == 0 &&
        like.partitions(p).outputs_size() == 0) {
      partition->clear_inputs();
      partition->clear_outputs();
    }
  }
  return view;
}

class PartitionerFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PartitionerFixtureTest, MatchesTorchFx) {
  const auto fixture = LoadJsonFixture<testing::PartitionerFixture>(GetParam());
  SCOPED_TRACE(fixture.name());
  CancellationToken token;
  absl::StatusOr<v1::PartitionGraphResponse> response =
      PartitionGraph(fixture.request(), InputLimits(), token);
  if (!fixture.expected_error().empty()) {
    const ExpectedError expected = TranslateTorchError(fixture.expected_error());
    ASSERT_FALSE(response.ok()) << "torch.fx raised: " << fixture.expected_error();
    EXPECT_EQ(response.status().code(), expected.code) << response.status();
    EXPECT_THAT(absl::AsciiStrToLower(response.status().message()),
                HasSubstr(absl::AsciiStrToLower(expected.fragment)));
    return;
  }
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::PartitionPlan actual = ComparableView(response->plan(), fixture.expected());
  google::protobuf::util::MessageDifferencer differencer;
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(fixture.expected(), actual))
      << "differences (expected -> actual):\n"
      << differences;
}

TEST(PartitionerFixtures, AreThere) { EXPECT_GE(FixturePaths(kFixtureDir).size(), 20u); }

INSTANTIATE_TEST_SUITE_P(SizeBased, PartitionerFixtureTest,
                         ::testing::ValuesIn(FixturePaths(kFixtureDir)), FixtureCaseName);

}  // namespace
}  // namespace partplan

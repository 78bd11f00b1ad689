// PartitionGraph against golden outputs of torch.fx 1.13's Partitioner
// (tests/fixtures/partitioner/<mode>/, made by generate.py there).
//
// size_based, sparse_nn, aot_based, saturate_host, cost_aware: every node
// assignment, every partition's nodes, memory, devices, parents, children,
// split_module inputs and outputs, and every DAG entry must be equal.
// cost_aware and kl_based: the plan's critical-path latency must not exceed
// torch.fx's.
// Each error torch.fx raised must be raised here with the matching code, and
// a plan where torch.fx left a partition on no device is FAILED_PRECONDITION
// naming it.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fixtures.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "tests/planner/fixture_files.h"

namespace partplan {
namespace {

using ::testing::HasSubstr;

constexpr char kFixtureRoot[] = "tests/fixtures/partitioner";

std::vector<std::string> AllFixturePaths() {
  std::vector<std::string> paths;
  for (const auto& mode_dir : std::filesystem::directory_iterator(kFixtureRoot)) {
    if (!mode_dir.is_directory()) continue;
    for (std::string& path : FixturePaths(mode_dir.path().string())) {
      paths.push_back(std::move(path));
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// The mode directory a fixture lives in.
std::string ModeOf(const std::string& path) {
  return std::filesystem::path(path).parent_path().filename().string();
}

// The status code and message fragment torch.fx's RuntimeError maps to.
struct ExpectedError {
  absl::StatusCode code;
  std::string fragment;
};

ExpectedError TranslateTorchError(const std::string& torch_error) {
  using absl::StatusCode;
  if (torch_error == "No devices") return {StatusCode::kInvalidArgument, "no devices"};
  if (absl::StartsWith(torch_error, "No Partition since no operations")) {
    return {StatusCode::kInvalidArgument, "no operations"};
  }
  if (absl::StartsWith(torch_error, "Devices have no enough memory")) {
    return {StatusCode::kFailedPrecondition, "devices have not enough memory"};
  }
  if (absl::EndsWith(torch_error, "is too large to fit any device")) {
    const std::string node = torch_error.substr(0, torch_error.size() - 30);
    return {StatusCode::kFailedPrecondition, "node '" + node + "' is too large to fit any device"};
  }
  if (absl::EndsWith(torch_error, "is too large to fit into a device")) {
    const std::string target = torch_error.substr(0, torch_error.size() - 33);
    return {StatusCode::kFailedPrecondition,
            "(target " + target + ") is too large to fit into a device"};
  }
  if (absl::StartsWith(torch_error, "Cannot Get a Valid Partition to Logical Device Mapping")) {
    return {StatusCode::kFailedPrecondition, "cannot place every partition on a device"};
  }
  if (torch_error == "All devices must have same memory size!") {
    return {StatusCode::kInvalidArgument, "needs devices of the same memory size"};
  }
  if (absl::StartsWith(torch_error, "Need ") &&
      absl::StrContains(torch_error, " devices, but only ")) {
    return {StatusCode::kFailedPrecondition, absl::AsciiStrToLower(torch_error)};
  }
  if (absl::StartsWith(torch_error, "partition_") &&
      absl::EndsWith(torch_error,
                     "(embedding partition) and non embedding partitions can not fit into one "
                     "device")) {
    const std::string id = torch_error.substr(10, torch_error.find('(') - 10);
    return {StatusCode::kFailedPrecondition, "partition " + id + " (an embedding partition"};
  }
  if (torch_error == "cycle exists between partitions!") {
    return {StatusCode::kInvalidArgument, "cycle exists between partitions"};
  }
  ADD_FAILURE() << "fixture has an error this test does not know: " << torch_error;
  return {StatusCode::kUnknown, torch_error};
}

// torch.fx's sparse_nn gives all non-embedding partitions one shared device
// list, so saturate_host appends each replica to it once per partition.
// partplan keeps one entry per device: compare against the list deduplicated.
void DeduplicateDevices(google::protobuf::RepeatedField<int32_t>* ids) {
  std::vector<int32_t> seen;
  for (int32_t id : *ids) {
    if (std::find(seen.begin(), seen.end(), id) == seen.end()) seen.push_back(id);
  }
  *ids = {seen.begin(), seen.end()};
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
  const std::string mode = ModeOf(GetParam());
  SCOPED_TRACE(mode + "/" + fixture.name());
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
  // torch.fx may return partitions on no device (its mapping stops at the
  // first partition that fits nowhere); partplan's plans place every
  // partition, so it refuses those, naming the first one torch.fx left out.
  for (const v1::Partition& partition : fixture.expected().partitions()) {
    if (!partition.logical_device_ids().empty()) continue;
    ASSERT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition)
        << "torch.fx left partition " << partition.id() << " on no device";
    EXPECT_THAT(std::string(response.status().message()),
                HasSubstr(absl::StrCat("cannot place every partition on a device: partition ",
                                       partition.id(), " ")));
    return;
  }
  ASSERT_TRUE(response.ok()) << response.status();
  if (mode == "cost_aware" || mode == "kl_based") {
    // At most torch.fx's critical-path latency (a relative 1e-9 absorbs
    // summation order).
    const double torch_latency = fixture.expected_critical_path_seconds();
    ASSERT_GT(torch_latency, 0) << "fixture lacks torch.fx's critical path";
    EXPECT_LE(response->plan().summary().critical_path_latency_seconds(),
              torch_latency * (1 + 1e-9));
    // kl_based deliberately departs from torch.fx's defective search; its
    // plan is not torch.fx's. cost_aware reproduces torch.fx's search and
    // must also give its plan.
    if (mode == "kl_based") return;
  }
  v1::PartitionPlan expected = fixture.expected();
  if (mode == "saturate_host") {
    for (v1::Partition& partition : *expected.mutable_partitions()) {
      DeduplicateDevices(partition.mutable_logical_device_ids());
    }
    for (v1::DagNode& node : *expected.mutable_dag()) {
      DeduplicateDevices(node.mutable_logical_device_ids());
    }
  }
  const v1::PartitionPlan actual = ComparableView(response->plan(), expected);
  google::protobuf::util::MessageDifferencer differencer;
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(expected, actual)) << "differences (expected -> actual):\n"
                                                     << differences;
}

TEST(PartitionerFixtures, CoverEveryMode) {
  std::vector<std::string> modes;
  for (const std::string& path : AllFixturePaths()) {
    if (modes.empty() || modes.back() != ModeOf(path)) modes.push_back(ModeOf(path));
  }
  EXPECT_THAT(modes, ::testing::UnorderedElementsAre("aot_based", "cost_aware", "kl_based",
                                                     "saturate_host", "size_based", "sparse_nn"));
  EXPECT_GE(AllFixturePaths().size(), 100u);
}

std::string ModeAndCaseName(const ::testing::TestParamInfo<std::string>& info) {
  return ModeOf(info.param) + "_" + FixtureCaseName(info);
}

INSTANTIATE_TEST_SUITE_P(TorchFx, PartitionerFixtureTest, ::testing::ValuesIn(AllFixturePaths()),
                         ModeAndCaseName);

}  // namespace
}  // namespace partplan

// Golden-fixture files: listing a directory of JSON fixtures, parsing one
// into its proto message, and naming parameterised test cases after them.
//
//   INSTANTIATE_TEST_SUITE_P(Cases, MyTest,
//       ::testing::ValuesIn(FixturePaths("tests/fixtures/x/cases")), FixtureCaseName);
//   MyFixture fixture = LoadJsonFixture<MyFixture>(GetParam());
#ifndef PARTPLAN_TESTS_PLANNER_FIXTURE_FILES_H_
#define PARTPLAN_TESTS_PLANNER_FIXTURE_FILES_H_

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "partplan/v1/device.pb.h"

namespace partplan {

// The directories of the Partitioner's golden fixtures, one per mode and
// saturate_host: each holds PartitionGraph requests.
inline std::vector<std::string> PartitionerFixtureDirs() {
  return {"tests/fixtures/partitioner/size_based",    "tests/fixtures/partitioner/aot_based",
          "tests/fixtures/partitioner/cost_aware",    "tests/fixtures/partitioner/kl_based",
          "tests/fixtures/partitioner/saturate_host", "tests/fixtures/partitioner/sparse_nn"};
}

// `count` devices with room for any fixture, for running a fixture's graph
// through a planner that needs an inventory its fixture has none of (e.g.
// BALANCED stages for an auto_shard fixture).
inline v1::DeviceInventory RoomyDevices(int count) {
  v1::DeviceInventory inventory;
  for (int i = 0; i < count; ++i) {
    v1::Device* device = inventory.add_devices();
    device->set_name("gpu" + std::to_string(i));
    device->set_logical_id(i);
    device->set_available_memory_bytes(int64_t{1} << 40);
  }
  return inventory;
}

// The .json files of `dir` (relative to the workspace root), sorted.
inline std::vector<std::string> FixturePaths(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// The .json files of each of `dirs`, directory by directory.
inline std::vector<std::string> FixturePathsUnder(const std::vector<std::string>& dirs) {
  std::vector<std::string> paths;
  for (const std::string& dir : dirs) {
    for (std::string& path : FixturePaths(dir)) paths.push_back(std::move(path));
  }
  return paths;
}

template <typename Message>
Message LoadJsonFixture(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  Message message;
  const auto status = google::protobuf::util::JsonStringToMessage(text.str(), &message);
  EXPECT_TRUE(status.ok()) << path << ": " << status.ToString();
  return message;
}

// The fixture's `request`, whatever else the fixture holds: for tests that
// run every planner's fixtures through one property.
template <typename Request>
Request LoadFixtureRequest(const std::string& path) {
  const auto fixture = LoadJsonFixture<google::protobuf::Struct>(path);
  std::string json;
  EXPECT_TRUE(
      google::protobuf::util::MessageToJsonString(fixture.fields().at("request"), &json).ok());
  Request request;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &request).ok()) << path;
  return request;
}

// A test name from a fixture path: its stem with non-alphanumerics as `_`.
inline std::string FixtureCaseName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = std::filesystem::path(info.param).stem().string();
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

// The same with the fixture's directories under tests/fixtures/, for suites
// that run several planners' fixtures, whose names repeat.
inline std::string FixturePathCaseName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(info.param.find("fixtures/") + 9);
  name = name.substr(0, name.rfind('.'));
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

}  // namespace partplan

#endif  // PARTPLAN_TESTS_PLANNER_FIXTURE_FILES_H_

#include "server/flags.h"

#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "gtest/gtest.h"

namespace partplan {
namespace {

// A fake environment.
std::function<const char*(const char*)> Environment(
    const std::map<std::string, std::string>& variables) {
  return [variables](const char* name) -> const char* {
    const auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
}

TEST(FlagsTest, DefaultsDescribeTheDocumentedServer) {
  absl::FlagSaver saver;
  absl::StatusOr<ServerOptions> options = ServerOptionsFromFlags();
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->host, "0.0.0.0");
  EXPECT_EQ(options->port, 50051);
  EXPECT_EQ(options->metrics_port, 9090);
  EXPECT_GE(options->planner_threads, 1);
  EXPECT_EQ(options->queue_depth, 64);
  EXPECT_EQ(options->max_receive_message_bytes, 256 << 20);
  EXPECT_EQ(options->retained_heap_bytes, 256 << 20);
  EXPECT_EQ(options->drain_deadline, absl::Seconds(20));
  EXPECT_EQ(options->limits.max_nodes, InputLimits().max_nodes);
  EXPECT_EQ(LogFormatFromFlags(), LogFormat::kText);
}

TEST(FlagsTest, EnvironmentOverridesDefaultsAndCommandLineOverridesEnvironment) {
  absl::FlagSaver saver;
  ASSERT_TRUE(ApplyEnvironmentOverrides(Environment({{"PARTPLAN_PORT", "6000"},
                                                     {"PARTPLAN_QUEUE_DEPTH", "7"},
                                                     {"PARTPLAN_LOG_FORMAT", "json"},
                                                     {"PARTPLAN_MAX_NODES", "1000"},
                                                     {"PORT", "1"}}))
                  .ok());
  // What ParseServerCommandLine does next: the command line wins.
  std::vector<char*> argv = {const_cast<char*>("partplan_server"),
                             const_cast<char*>("--port=7000")};
  absl::ParseCommandLine(static_cast<int>(argv.size()), argv.data());

  absl::StatusOr<ServerOptions> options = ServerOptionsFromFlags();
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->port, 7000);
  EXPECT_EQ(options->queue_depth, 7);
  EXPECT_EQ(options->limits.max_nodes, 1000);
  EXPECT_EQ(LogFormatFromFlags(), LogFormat::kJson);
}

TEST(FlagsTest, BadEnvironmentValueNamesTheVariable) {
  absl::FlagSaver saver;
  const absl::Status status =
      ApplyEnvironmentOverrides(Environment({{"PARTPLAN_PLANNER_THREADS", "many"}}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("PARTPLAN_PLANNER_THREADS"), absl::string_view::npos) << status;
}

TEST(FlagsTest, OutOfRangeValuesAreRejected) {
  absl::FlagSaver saver;
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"port", "70000"},
                                                        {"planner_threads", "0"},
                                                        {"queue_depth", "-1"},
                                                        {"max_receive_message_bytes", "-1"},
                                                        {"drain_deadline_seconds", "-1"},
                                                        {"max_nodes", "0"},
                                                        {"retained_heap_bytes", "-1"},
                                                        {"retained_heap_bytes", "2147483648"}}) {
    absl::FlagSaver inner_saver;
    std::string error;
    ASSERT_TRUE(absl::FindCommandLineFlag(name)->ParseFrom(value, &error)) << name << error;
    EXPECT_FALSE(ServerOptionsFromFlags().ok()) << "--" << name << "=" << value;
  }
}

}  // namespace
}  // namespace partplan

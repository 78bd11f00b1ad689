// Tests of partplan's command-line parsing: flag forms, positional
// arguments, and errors that name the flag instead of exiting.
#include "client/cli/flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace partplan {
namespace cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class FlagsTest : public ::testing::Test {
 private:
  // Restores every flag after each test.
  absl::FlagSaver saver_;
};

TEST_F(FlagsTest, SetsFlagsInEveryFormAndKeepsPositionalArguments) {
  absl::StatusOr<CommandLine> command_line = ParseCommandLine(
      {"call", "--target=planner:443", "Validate", "--deadline", "2s",
       "-request=-", "--saturate_host", "--output", "table", "--devices=4"});
  ASSERT_TRUE(command_line.ok()) << command_line.status();
  EXPECT_THAT(command_line->positional, ElementsAre("call", "Validate"));
  EXPECT_FALSE(command_line->help);
  EXPECT_EQ(absl::GetFlag(FLAGS_target), "planner:443");
  EXPECT_EQ(absl::GetFlag(FLAGS_deadline), absl::Seconds(2));
  EXPECT_EQ(absl::GetFlag(FLAGS_request), "-");
  EXPECT_TRUE(absl::GetFlag(FLAGS_saturate_host));
  EXPECT_EQ(absl::GetFlag(FLAGS_output), "table");
  EXPECT_EQ(absl::GetFlag(FLAGS_devices), 4);
}

TEST_F(FlagsTest, NoPrefixClearsABoolAndDoubleDashEndsFlags) {
  absl::StatusOr<CommandLine> command_line =
      ParseCommandLine({"--saturate_host", "--nosaturate_host", "plan", "--",
                        "--not-a-flag", "-"});
  ASSERT_TRUE(command_line.ok()) << command_line.status();
  EXPECT_FALSE(absl::GetFlag(FLAGS_saturate_host));
  EXPECT_THAT(command_line->positional,
              ElementsAre("plan", "--not-a-flag", "-"));
}

TEST_F(FlagsTest, HelpInAnyForm) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"--help"}, {"-h"}, {"help"}, {"call", "--help"}}) {
    absl::StatusOr<CommandLine> command_line = ParseCommandLine(args);
    ASSERT_TRUE(command_line.ok()) << command_line.status();
    EXPECT_TRUE(command_line->help) << args.front();
  }
}

TEST_F(FlagsTest, BadFlagsAreErrorsNamingTheFlag) {
  struct BadArgs {
    std::vector<std::string> args;
    std::string expected_message;
  };
  const BadArgs cases[] = {
      {{"--bogus=1"}, "unknown flag '--bogus=1'"},
      {{"--nobogus"}, "unknown flag '--nobogus'"},
      {{"--notarget"}, "unknown flag '--notarget'"},
      {{"--deadline=soon"}, "--deadline: invalid value 'soon'"},
      {{"--devices=two"}, "--devices: invalid value 'two'"},
      {{"--saturate_host=maybe"}, "--saturate_host: invalid value 'maybe'"},
      {{"call", "--target"}, "flag --target needs a value"},
  };
  for (const BadArgs& c : cases) {
    absl::StatusOr<CommandLine> command_line = ParseCommandLine(c.args);
    ASSERT_FALSE(command_line.ok()) << c.expected_message;
    EXPECT_THAT(std::string(command_line.status().message()),
                HasSubstr(c.expected_message));
  }
}

TEST_F(FlagsTest, OptionsFromFlags) {
  ASSERT_TRUE(ParseCommandLine({"--target=dns:///p:50051", "--deadline=1m",
                                "--request_id=abc", "--max_message_bytes=64MiB",
                                "--output=table", "--graph=g.json",
                                "--device_memory=16GiB", "--devices=2",
                                "--mode=cost_aware", "--transfer_rate=12GB"})
                  .ok());
  absl::StatusOr<CliOptions> options = CliOptionsFromFlags();
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->connection.target, "dns:///p:50051");
  EXPECT_EQ(options->connection.deadline, absl::Minutes(1));
  EXPECT_EQ(options->connection.request_id, "abc");
  EXPECT_EQ(options->connection.max_message_bytes, 64 << 20);
  EXPECT_EQ(options->output, OutputFormat::kTable);
  EXPECT_EQ(options->graph_path, "g.json");
  EXPECT_EQ(options->planner.device_memory, "16GiB");
  EXPECT_EQ(options->planner.device_count, 2);
  EXPECT_EQ(options->planner.mode, "cost_aware");
  EXPECT_EQ(options->planner.transfer_rate, "12GB");
}

TEST_F(FlagsTest, DefaultOptions) {
  absl::StatusOr<CliOptions> options = CliOptionsFromFlags();
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->connection.target, "localhost:50051");
  EXPECT_EQ(options->connection.deadline, absl::Seconds(30));
  EXPECT_EQ(options->connection.max_message_bytes, 256 << 20);
  EXPECT_EQ(options->output, OutputFormat::kJson);
  EXPECT_EQ(options->planner.mode, "size_based");
  EXPECT_THAT(options->request_path, IsEmpty());
}

TEST_F(FlagsTest, BadOptionValuesNameTheFlag) {
  struct BadValue {
    std::string flag;
    std::string expected_message;
  };
  const BadValue cases[] = {
      {"--output=yaml", "--output: unknown format 'yaml'"},
      {"--max_message_bytes=lots", "--max_message_bytes: invalid byte size"},
      {"--max_message_bytes=4GiB", "--max_message_bytes: '4GiB' is not"},
      {"--deadline=0s", "--deadline: must be positive"},
  };
  for (const BadValue& c : cases) {
    absl::FlagSaver saver;
    ASSERT_TRUE(ParseCommandLine({c.flag}).ok()) << c.flag;
    absl::StatusOr<CliOptions> options = CliOptionsFromFlags();
    ASSERT_FALSE(options.ok()) << c.flag;
    EXPECT_THAT(std::string(options.status().message()),
                HasSubstr(c.expected_message));
  }
}

TEST_F(FlagsTest, HelpListsSubcommandsAndFlags) {
  const std::string help = HelpText();
  EXPECT_THAT(help, HasSubstr("partplan call <Method> --request=FILE"));
  EXPECT_THAT(help, HasSubstr("partplan partition --graph=FILE"));
  EXPECT_THAT(help, HasSubstr("--device_memory (default: \"\")"));
  EXPECT_THAT(help, HasSubstr("--target (default: localhost:50051)"));
}

}  // namespace
}  // namespace cli
}  // namespace partplan

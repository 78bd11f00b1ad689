// The partplan flags (absl flags) and a command-line parser over them that
// reports every bad flag as an error instead of exiting.
//
//   absl::StatusOr<partplan::cli::CommandLine> command_line =
//       partplan::cli::ParseCommandLine({"call", "Validate",
//       "--request=x.json"});
//   // command_line->positional == {"call", "Validate"}; FLAGS_request set.
//   absl::StatusOr<partplan::cli::CliOptions> options =
//       partplan::cli::CliOptionsFromFlags();
//
// absl::ParseCommandLine exits with status 1 on an unknown or malformed
// flag; partplan promises exit status 2 for any bad local input, so it
// parses argv itself with absl's flag registry. Accepted forms: --name=value,
// --name value, --bool, --nobool, and -- to end the flags. Flags and
// positional arguments may be interleaved.
#ifndef PARTPLAN_CLIENT_CLI_FLAGS_H_
#define PARTPLAN_CLIENT_CLI_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/cli/cli.h"

ABSL_DECLARE_FLAG(std::string, target);
ABSL_DECLARE_FLAG(absl::Duration, deadline);
ABSL_DECLARE_FLAG(std::string, request_id);
ABSL_DECLARE_FLAG(std::string, max_message_bytes);
ABSL_DECLARE_FLAG(std::string, output);
ABSL_DECLARE_FLAG(std::string, request);
ABSL_DECLARE_FLAG(std::string, graph);
ABSL_DECLARE_FLAG(std::string, device_memory);
ABSL_DECLARE_FLAG(int, devices);
ABSL_DECLARE_FLAG(std::string, mode);
ABSL_DECLARE_FLAG(std::string, transfer_rate);
ABSL_DECLARE_FLAG(bool, saturate_host);
ABSL_DECLARE_FLAG(bool, tls);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_server_name);
ABSL_DECLARE_FLAG(std::string, token);
ABSL_DECLARE_FLAG(std::string, token_file);
ABSL_DECLARE_FLAG(int, concurrency);
ABSL_DECLARE_FLAG(absl::Duration, duration);
ABSL_DECLARE_FLAG(int64_t, requests);
ABSL_DECLARE_FLAG(bool, compare_noop);
ABSL_DECLARE_FLAG(std::string, expected_codes);

namespace partplan {
namespace cli {

struct CommandLine {
  // The non-flag arguments: subcommand and operands.
  std::vector<std::string> positional;
  // --help, -h or the `help` subcommand was given.
  bool help = false;
};

// Sets the partplan flags named in `args` (argv without the program name).
// INVALID_ARGUMENT naming the flag for unknown flags, missing values and
// values the flag's type rejects.
absl::StatusOr<CommandLine> ParseCommandLine(
    absl::Span<const std::string> args);

// The flags' current values, checked and converted; reads the --tls_* and
// --token_file files.
absl::StatusOr<CliOptions> CliOptionsFromFlags();

// The --help text: subcommands, then every partplan flag with its default.
std::string HelpText();

}  // namespace cli
}  // namespace partplan

#endif  // PARTPLAN_CLIENT_CLI_FLAGS_H_

// The partplan command line: each subcommand turns flags and files into one
// PartitionPlanner request, sends it, and prints the response or the error.
//
//   partplan::cli::CliOptions options;
//   options.request_path = "client/examples/validate.json";
//   int exit_code = partplan::cli::RunCli({"call", "Validate"}, options,
//                                         partplan::cli::CliEnvironment());
//
// Exit codes: 0 on success; kBadInputExitCode for bad local input (flags,
// unreadable or malformed files), found before anything is sent; otherwise
// the failed call's gRPC status code (e.g. 3 for INVALID_ARGUMENT, 14 for
// UNAVAILABLE). Flags are parsed in flags.h.
#ifndef PARTPLAN_CLIENT_CLI_CLI_H_
#define PARTPLAN_CLIENT_CLI_CLI_H_

#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "absl/types/span.h"
#include "client/cli/load_generator.h"
#include "client/cli/output.h"
#include "client/cli/planner_client.h"
#include "client/cli/request_builder.h"
#include "grpcpp/channel.h"

namespace partplan {
namespace cli {

// Exit code for input rejected before calling the server.
inline constexpr int kBadInputExitCode = 2;

// Everything the flags say, already typed.
struct CliOptions {
  ConnectionOptions connection;
  OutputFormat output = OutputFormat::kJson;
  // `call`: the request file (JSON or binary; "-" for stdin).
  std::string request_path;
  // `report`: the response file (JSON or binary; "-" for stdin).
  std::string response_path;
  // `partition`, `plan`, `validate`: the Graph file (JSON or binary).
  std::string graph_path;
  // `partition`, `plan`, `validate`: devices and partitioner options.
  PlannerFlags planner;
  // `load`: concurrency, duration or request count, no-op comparison.
  LoadOptions load;
};

// Where the CLI reads and writes and how it reaches the server. Tests swap
// in string streams and an in-process channel.
struct CliEnvironment {
  std::istream* in = &std::cin;
  std::ostream* out = &std::cout;
  std::ostream* err = &std::cerr;
  std::function<std::shared_ptr<grpc::ChannelInterface>(
      const ConnectionOptions&)>
      connect = ConnectToPlanner;
};

// Runs the subcommand `args[0]` with operands `args[1..]` (the positional
// arguments left after flag parsing) and returns the exit code.
int RunCli(absl::Span<const std::string> args, const CliOptions& options,
           const CliEnvironment& environment);

// One line per subcommand, its synopsis and what it does, for --help.
std::string SubcommandHelp();

}  // namespace cli
}  // namespace partplan

#endif  // PARTPLAN_CLIENT_CLI_CLI_H_

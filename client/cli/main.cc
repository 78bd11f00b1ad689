// partplan: command-line client of the partplan.v1.PartitionPlanner service.
//
//   partplan call Validate --request=client/examples/validate.json
//   partplan partition --graph=client/examples/graph_mlp.json
//       --device_memory=10MiB,10MiB,10MiB --output=table
//
// See cli.h for the subcommands and flags.h for the flags.
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpc/grpc.h"
#include "client/cli/cli.h"
#include "client/cli/flags.h"

int main(int argc, char** argv) {
  // gRPC stays initialised until the process ends. Otherwise the channel's
  // destruction shuts it down, and that shutdown waits (up to 10 s) for
  // connections still closing in the background, which a process about to
  // exit has no need to wait for.
  grpc_init();
  using partplan::cli::kBadInputExitCode;
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<partplan::cli::CommandLine> command_line =
      partplan::cli::ParseCommandLine(args);
  if (!command_line.ok()) {
    std::cerr << "error: " << command_line.status().message() << "\n";
    return kBadInputExitCode;
  }
  if (command_line->help) {
    std::cout << partplan::cli::HelpText();
    return 0;
  }
  absl::StatusOr<partplan::cli::CliOptions> options =
      partplan::cli::CliOptionsFromFlags();
  if (!options.ok()) {
    std::cerr << "error: " << options.status().message() << "\n";
    return kBadInputExitCode;
  }
  return partplan::cli::RunCli(command_line->positional, *options,
                               partplan::cli::CliEnvironment());
}

// Command-line flags of partplan_server, with environment overrides.
//
// Every flag defined in flags.cc can also be set through the environment
// variable PARTPLAN_<FLAG NAME IN UPPER CASE>, e.g. PARTPLAN_PORT=8080 or
// PARTPLAN_LOG_FORMAT=json. Precedence: command line, then environment, then
// the built-in default. (Container images set the environment; a person
// debugging adds a flag, and the flag wins.)
//
//   int main(int argc, char** argv) {
//     partplan::ParseServerCommandLine(argc, argv);  // exits on --help, --version, errors
//     partplan::ConfigureLogging(partplan::LogFormatFromFlags());
//     absl::StatusOr<partplan::ServerOptions> options = partplan::ServerOptionsFromFlags();
//     ...
//   }
#ifndef PARTPLAN_SERVER_FLAGS_H_
#define PARTPLAN_SERVER_FLAGS_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/logging.h"
#include "server/server.h"

namespace partplan {

// Printed by --version.
inline constexpr char kServerVersion[] = "partplan_server 0.1.0";

// Prefix of the environment variables that override flag defaults.
inline constexpr char kFlagEnvironmentPrefix[] = "PARTPLAN_";

// Sets --help's usage text and --version's string, applies the environment
// overrides, then parses argv (so the command line wins). Handles --help and
// --version (print, exit 0); prints the error and exits 1 on a bad flag or
// environment value.
void ParseServerCommandLine(int argc, char** argv);

// For every flag of flags.cc whose PARTPLAN_* variable `getenv` returns,
// sets the flag from it. INVALID_ARGUMENT naming the variable when a value
// does not parse.
absl::Status ApplyEnvironmentOverrides(const std::function<const char*(const char*)>& getenv);

// The options the flags describe; INVALID_ARGUMENT when one is out of range
// (see ValidateServerOptions).
absl::StatusOr<ServerOptions> ServerOptionsFromFlags();

LogFormat LogFormatFromFlags();

}  // namespace partplan

#endif  // PARTPLAN_SERVER_FLAGS_H_

#include "client/cli/flags.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/cli/byte_size.h"
#include "client/cli/message_io.h"

ABSL_FLAG(std::string, target, "localhost:50051",
          "gRPC target of the partplan server, e.g. "
          "dns:///partplan.ns.svc.cluster.local:50051");
ABSL_FLAG(absl::Duration, deadline, absl::Seconds(30),
          "Time allowed for the call, e.g. 500ms, 30s, 2m; inf for none");
ABSL_FLAG(std::string, request_id, "",
          "Sent as x-request-id metadata, to find the call in server logs");
ABSL_FLAG(std::string, max_message_bytes, "256MiB",
          "Largest request or response message, e.g. 64MiB");
ABSL_FLAG(std::string, output, "json",
          "json: the response as proto3 JSON; table: plans as tables; html: "
          "the self-contained report page; dot: Graphviz of the partition DAG "
          "or the stages (table and dot print other responses as JSON)");
ABSL_FLAG(std::string, request, "",
          "call, load, report: request file, proto3 JSON (.json or starting with '{') or "
          "binary protobuf; - for stdin");
ABSL_FLAG(std::string, response, "",
          "report: response file, proto3 JSON or binary protobuf; - for stdin");
ABSL_FLAG(std::string, graph, "",
          "partition, plan, validate: partplan.v1.Graph file, JSON or "
          "binary; - for stdin");
ABSL_FLAG(std::string, device_memory, "",
          "Memory of each device, comma-separated (16GiB,16GiB), or one size "
          "for all --devices; suffixes K/M/G/T (1000s), KiB/MiB/GiB/TiB "
          "(1024s)");
ABSL_FLAG(int, devices, 0,
          "Number of devices when --device_memory gives one size for all; 0 "
          "for one device per --device_memory entry");
ABSL_FLAG(std::string, mode, "size_based",
          "Partitioner mode: size_based, sparse_nn, cost_aware, kl_based, "
          "aot_based");
ABSL_FLAG(std::string, transfer_rate, "",
          "Bytes per second between devices, e.g. 12GB or 1.2e10; unset "
          "means transfers are free");
ABSL_FLAG(bool, saturate_host, false, "Replicate partitions onto idle devices");
ABSL_FLAG(std::string, node_references, "names",
          "How the plan refers to nodes: names, or indices in the graph's "
          "nodes (about an eighth of the bytes for large graphs)");
ABSL_FLAG(bool, tls, false,
          "Connect over TLS, verifying the server with gRPC's default roots "
          "(implied by --tls_ca, --tls_cert and --tls_key)");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM file of the CAs to verify the server's certificate with; "
          "implies --tls");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate chain for mutual TLS (with --tls_key); "
          "implies --tls");
ABSL_FLAG(std::string, tls_key, "",
          "PEM private key of --tls_cert; implies --tls");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name the server's certificate must carry, when it is not the host "
          "of --target (e.g. an IP address or a port-forward)");
ABSL_FLAG(std::string, token, "",
          "Bearer token sent as 'authorization: Bearer <token>'; prefer "
          "--token_file, since arguments are visible to other users");
ABSL_FLAG(std::string, token_file, "",
          "File holding the bearer token (surrounding whitespace ignored)");
ABSL_FLAG(int, concurrency, 16,
          "load: calls in flight at once, one closed-loop client thread each, "
          "all on one channel");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "load: how long to send calls, e.g. 10s (the default when "
          "--requests is not given)");
ABSL_FLAG(int64_t, requests, 0,
          "load: calls to make in all instead of a timed run");
ABSL_FLAG(bool, compare_noop, false,
          "load: also run the same load against Validate carrying the "
          "request's graph and devices, and print the throughput ratio");
ABSL_FLAG(std::string, expected_codes, "",
          "load: status codes besides OK that do not make the exit status "
          "non-zero, e.g. RESOURCE_EXHAUSTED,DEADLINE_EXCEEDED");

namespace partplan {
namespace cli {
namespace {

// Only flags defined in this file are partplan's; gRPC or Abseil may
// register others that a user has no reason to set.
bool IsPartplanFlag(const absl::CommandLineFlag& flag) {
  return absl::EndsWith(flag.Filename(), "client/cli/flags.cc");
}

absl::CommandLineFlag* FindPartplanFlag(absl::string_view name) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  return flag != nullptr && IsPartplanFlag(*flag) ? flag : nullptr;
}

// The contents of the file named by flag `flag` (value `path`), or "" when
// the flag is empty.
absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag,
                                         const std::string& path) {
  if (path.empty()) return std::string();
  absl::StatusOr<std::string> contents = ReadFile(path);
  if (!contents.ok()) return FlagError(flag, contents.status());
  return contents;
}

// The --tls* and --token* flags into `connection`.
absl::Status SecurityFromFlags(ConnectionOptions& connection) {
  const std::string ca = absl::GetFlag(FLAGS_tls_ca);
  const std::string cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_tls_key);
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key must be given together");
  }
  connection.tls = absl::GetFlag(FLAGS_tls) || !ca.empty() || !cert.empty();
  connection.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  if (!connection.tls_server_name.empty() && !connection.tls) {
    return absl::InvalidArgumentError(
        "--tls_server_name needs TLS (--tls or --tls_ca)");
  }
  for (auto [flag, path, field] :
       {std::make_tuple("tls_ca", ca, &connection.tls_root_certs),
        std::make_tuple("tls_cert", cert, &connection.tls_cert_chain),
        std::make_tuple("tls_key", key, &connection.tls_private_key)}) {
    absl::StatusOr<std::string> contents = ReadFlagFile(flag, path);
    if (!contents.ok()) return contents.status();
    *field = *std::move(contents);
  }

  const std::string token = absl::GetFlag(FLAGS_token);
  const std::string token_file = absl::GetFlag(FLAGS_token_file);
  if (!token.empty() && !token_file.empty()) {
    return absl::InvalidArgumentError("give --token or --token_file, not both");
  }
  absl::StatusOr<std::string> from_file =
      ReadFlagFile("token_file", token_file);
  if (!from_file.ok()) return from_file.status();
  connection.token = std::string(
      absl::StripAsciiWhitespace(token.empty() ? *from_file : token));
  if (!token_file.empty() && connection.token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--token_file: '", token_file, "' is empty"));
  }
  return absl::OkStatus();
}

absl::Status UnknownFlag(absl::string_view argument) {
  return absl::InvalidArgumentError(
      absl::StrCat("unknown flag '", argument, "' (see --help)"));
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(
    absl::Span<const std::string> args) {
  CommandLine command_line;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& argument = args[i];
    if (argument == "--") {
      command_line.positional.insert(command_line.positional.end(),
                                     args.begin() + i + 1, args.end());
      break;
    }
    // "-" alone is an operand (stdin), as is anything not starting with '-'.
    absl::string_view text = argument;
    if (text.size() < 2 || text.front() != '-') {
      command_line.positional.push_back(argument);
      continue;
    }
    if (!absl::ConsumePrefix(&text, "--")) absl::ConsumePrefix(&text, "-");
    const size_t equals = text.find('=');
    const absl::string_view name = text.substr(0, equals);
    const bool has_value = equals != absl::string_view::npos;
    if (name == "help" || name == "h") {
      command_line.help = true;
      continue;
    }

    absl::CommandLineFlag* flag = FindPartplanFlag(name);
    std::string value = has_value ? std::string(text.substr(equals + 1)) : "";
    if (flag == nullptr && !has_value && absl::StartsWith(name, "no")) {
      // --nosaturate_host
      flag = FindPartplanFlag(name.substr(2));
      if (flag == nullptr || !flag->IsOfType<bool>()) {
        return UnknownFlag(argument);
      }
      value = "false";
    } else if (flag == nullptr) {
      return UnknownFlag(argument);
    } else if (!has_value && flag->IsOfType<bool>()) {
      value = "true";
    } else if (!has_value) {
      if (i + 1 == args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value"));
      }
      value = args[++i];
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag->Name(), ": invalid value '", value, "': ", error));
    }
  }
  if (!command_line.positional.empty() &&
      command_line.positional.front() == "help") {
    command_line.help = true;
  }
  return command_line;
}

absl::StatusOr<CliOptions> CliOptionsFromFlags() {
  CliOptions options;
  options.connection.target = absl::GetFlag(FLAGS_target);
  options.connection.deadline = absl::GetFlag(FLAGS_deadline);
  if (options.connection.deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--deadline: must be positive (or inf for none)");
  }
  options.connection.request_id = absl::GetFlag(FLAGS_request_id);

  const std::string max_message = absl::GetFlag(FLAGS_max_message_bytes);
  absl::StatusOr<int64_t> max_message_bytes = ParseByteSize(max_message);
  if (!max_message_bytes.ok()) {
    return FlagError("max_message_bytes", max_message_bytes.status());
  }
  // gRPC takes an int; 0 would refuse every message.
  if (*max_message_bytes <= 0 || *max_message_bytes > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_message_bytes: '", max_message,
                     "' is not between 1 byte and 2 GiB"));
  }
  options.connection.max_message_bytes = static_cast<int>(*max_message_bytes);
  if (absl::Status status = SecurityFromFlags(options.connection);
      !status.ok()) {
    return status;
  }

  absl::StatusOr<OutputFormat> output =
      ParseOutputFormat(absl::GetFlag(FLAGS_output));
  if (!output.ok()) return output.status();
  options.output = *output;

  options.request_path = absl::GetFlag(FLAGS_request);
  options.response_path = absl::GetFlag(FLAGS_response);
  options.graph_path = absl::GetFlag(FLAGS_graph);
  options.planner.device_memory = absl::GetFlag(FLAGS_device_memory);
  options.planner.device_count = absl::GetFlag(FLAGS_devices);
  options.planner.mode = absl::GetFlag(FLAGS_mode);
  options.planner.transfer_rate = absl::GetFlag(FLAGS_transfer_rate);
  options.planner.saturate_host = absl::GetFlag(FLAGS_saturate_host);
  options.planner.node_references = absl::GetFlag(FLAGS_node_references);
  options.load.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.load.duration = absl::GetFlag(FLAGS_duration);
  options.load.requests = absl::GetFlag(FLAGS_requests);
  options.load.compare_noop = absl::GetFlag(FLAGS_compare_noop);
  options.load.expected_codes = absl::GetFlag(FLAGS_expected_codes);
  if (absl::Status status = LoadOptions(options.load).CheckAndSetup();
      !status.ok()) {
    return status;
  }
  return options;
}

std::string HelpText() {
  std::string text =
      "partplan: calls the partplan.v1.PartitionPlanner gRPC service.\n\n"
      "Usage:\n";
  absl::StrAppend(&text, SubcommandHelp(),
                  "\nExit status: 0 on success, 2 for bad flags or input "
                  "files, else the gRPC status code of the failed call.\n\n"
                  "Flags:\n");
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& name_and_flag : absl::GetAllFlags()) {
    if (IsPartplanFlag(*name_and_flag.second)) {
      flags.push_back(name_and_flag.second);
    }
  }
  std::sort(flags.begin(), flags.end(),
            [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) {
              return a->Name() < b->Name();
            });
  for (const absl::CommandLineFlag* flag : flags) {
    absl::StrAppend(
        &text, "  --", flag->Name(), " (default: ",
        flag->DefaultValue().empty() ? "\"\"" : flag->DefaultValue(),
        ")\n      ", flag->Help(), "\n");
  }
  return text;
}

}  // namespace cli
}  // namespace partplan

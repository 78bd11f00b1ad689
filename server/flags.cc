#include "server/flags.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace {

int DefaultPlannerThreads() {
  const unsigned int cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : static_cast<int>(cores);
}

constexpr partplan::InputLimits kDefaultLimits;

}  // namespace

ABSL_FLAG(std::string, host, "0.0.0.0",
          "Address to listen on for gRPC and metrics (0.0.0.0: every IPv4 interface, which "
          "Kubernetes probes need).");
ABSL_FLAG(int32_t, port, 50051, "gRPC port; 0 picks a free port (logged at startup).");
ABSL_FLAG(int32_t, metrics_port, 9090,
          "Port of the Prometheus endpoint /metrics; 0 picks a free port, -1 disables it.");
ABSL_FLAG(int32_t, planner_threads, DefaultPlannerThreads(),
          "Threads running planners (default: the number of hardware threads).");
ABSL_FLAG(int32_t, queue_depth, 64,
          "Calls that may wait for a planner thread; beyond them calls get RESOURCE_EXHAUSTED "
          "at once.");
ABSL_FLAG(int64_t, plan_cache_bytes, 64 << 20,
          "Bytes of plans kept to answer a repeated identical request without planning "
          "(least recently used first out); 0 disables the cache.");
ABSL_FLAG(int64_t, retained_heap_bytes, partplan::kDefaultRetainedHeapBytes,
          "Freed memory each malloc arena keeps for later calls instead of returning it to the "
          "kernel, so that large calls do not fault their memory in afresh; 0: glibc's "
          "defaults. At most 2147483647.");
ABSL_FLAG(int32_t, max_receive_message_bytes, 256 << 20,
          "Largest request accepted, in bytes (positive; never unlimited).");
ABSL_FLAG(double, max_call_seconds, 300,
          "Longest a call may plan, from its arrival, whatever deadline its client set; beyond it "
          "the planner stops and the call gets DEADLINE_EXCEEDED naming this flag.");
ABSL_FLAG(double, drain_deadline_seconds, 20,
          "On SIGTERM/SIGINT, seconds calls in flight get to finish before they are cancelled.");
ABSL_FLAG(partplan::LogFormat, log_format, partplan::LogFormat::kText,
          "Log line format: text or json (one JSON object per line).");
ABSL_FLAG(int64_t, max_nodes, kDefaultLimits.max_nodes, "Most nodes in one request graph.");
ABSL_FLAG(int64_t, max_values_per_node, kDefaultLimits.max_values_per_node,
          "Most flat argument elements (args and kwargs) of one node.");
ABSL_FLAG(int64_t, max_values, kDefaultLimits.max_values,
          "Most flat argument elements in one request graph.");
ABSL_FLAG(int64_t, max_devices, kDefaultLimits.max_devices,
          "Most devices in one device inventory.");
ABSL_FLAG(int32_t, max_connection_age_seconds, 0,
          "Connections older than this are asked to close (GOAWAY; calls in flight finish), so "
          "clients re-resolve DNS and spread over new pods; 0: no limit.");
ABSL_FLAG(int32_t, health_port, -1,
          "Extra plaintext port serving only grpc.health.v1.Health, for Kubernetes gRPC probes "
          "(which cannot speak TLS); 0 picks a free port, -1 means none. Health is always served "
          "on --port too.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of the server; with --tls_key, serves gRPC over TLS only. "
          "Re-read every --credentials_reload_seconds.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key (unencrypted) matching --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM bundle of CAs signing client certificates; when set, clients must present one "
          "(mutual TLS). Needs --tls_cert and --tls_key.");
ABSL_FLAG(std::string, auth_tokens_file, "",
          "File of accepted bearer tokens, one per line ('#' comments); when set, calls need "
          "metadata 'authorization: Bearer <token>' (health never does) or get UNAUTHENTICATED.");
ABSL_FLAG(bool, reflection_requires_auth, true,
          "With --auth_tokens_file: whether server reflection needs a token too.");
ABSL_FLAG(int32_t, credentials_reload_seconds, 60,
          "How often the TLS files and the tokens file are re-read, so rotated secrets apply "
          "without a restart (at least 1).");

namespace partplan {
namespace {

// The flags this file defines (absl records the defining file of each).
bool IsServerFlagFile(absl::string_view filename) { return filename == __FILE__; }

constexpr char kUsage[] =
    "Serves partplan.v1.PartitionPlanner over gRPC.\n"
    "\n"
    "Every flag below can also be set by the environment variable PARTPLAN_<FLAG> (the flag\n"
    "name in upper case, e.g. PARTPLAN_PORT=8080, PARTPLAN_LOG_FORMAT=json). A flag given\n"
    "on the command line wins over its variable, which wins over the default.\n"
    "\n"
    "Usage: partplan_server [--port=50051] [--metrics_port=9090] [flags]";

}  // namespace

void ParseServerCommandLine(int argc, char** argv) {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = IsServerFlagFile;
  config.contains_helpshort_flags = IsServerFlagFile;
  config.version_string = [] { return absl::StrCat(kServerVersion, "\n"); };
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(kUsage);

  if (absl::Status status =
          ApplyEnvironmentOverrides([](const char* name) { return std::getenv(name); });
      !status.ok()) {
    std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
    std::exit(1);
  }
  absl::ParseCommandLine(argc, argv);
}

absl::Status ApplyEnvironmentOverrides(const std::function<const char*(const char*)>& getenv) {
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!IsServerFlagFile(flag->Filename())) continue;
    const std::string variable = absl::StrCat(kFlagEnvironmentPrefix, absl::AsciiStrToUpper(name));
    const char* value = getenv(variable.c_str());
    if (value == nullptr) continue;
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable ", variable, "='", value, "': ", error));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ServerOptions> ServerOptionsFromFlags() {
  ServerOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.planner_threads = absl::GetFlag(FLAGS_planner_threads);
  options.queue_depth = absl::GetFlag(FLAGS_queue_depth);
  options.plan_cache_bytes = absl::GetFlag(FLAGS_plan_cache_bytes);
  options.retained_heap_bytes = absl::GetFlag(FLAGS_retained_heap_bytes);
  options.max_receive_message_bytes = absl::GetFlag(FLAGS_max_receive_message_bytes);
  const double drain_seconds = absl::GetFlag(FLAGS_drain_deadline_seconds);
  // Also rejects NaN.
  if (!(drain_seconds >= 0 && drain_seconds <= 24 * 3600)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--drain_deadline_seconds must be in [0, 86400], got ", drain_seconds));
  }
  options.drain_deadline = absl::Seconds(drain_seconds);
  const double max_call_seconds = absl::GetFlag(FLAGS_max_call_seconds);
  // Also rejects NaN.
  if (!(max_call_seconds > 0 && max_call_seconds <= 7 * 24 * 3600)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_call_seconds must be in (0, 604800], got ", max_call_seconds));
  }
  options.max_call_duration = absl::Seconds(max_call_seconds);
  options.limits.max_nodes = absl::GetFlag(FLAGS_max_nodes);
  options.limits.max_values_per_node = absl::GetFlag(FLAGS_max_values_per_node);
  options.limits.max_values = absl::GetFlag(FLAGS_max_values);
  options.limits.max_devices = absl::GetFlag(FLAGS_max_devices);
  options.health_port = absl::GetFlag(FLAGS_health_port);
  options.max_connection_age = absl::Seconds(absl::GetFlag(FLAGS_max_connection_age_seconds));
  const absl::Duration reload = absl::Seconds(absl::GetFlag(FLAGS_credentials_reload_seconds));
  options.tls.cert_path = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_path = absl::GetFlag(FLAGS_tls_key);
  options.tls.client_ca_path = absl::GetFlag(FLAGS_tls_client_ca);
  options.tls.reload_interval = reload;
  options.auth.tokens_path = absl::GetFlag(FLAGS_auth_tokens_file);
  options.auth.reflection_requires_auth = absl::GetFlag(FLAGS_reflection_requires_auth);
  options.auth.reload_interval = reload;
  if (absl::Status status = ValidateServerOptions(options); !status.ok()) return status;
  return options;
}

LogFormat LogFormatFromFlags() { return absl::GetFlag(FLAGS_log_format); }

}  // namespace partplan

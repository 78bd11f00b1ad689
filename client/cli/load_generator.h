// `partplan load`: a closed-loop load generator for any PartitionPlanner
// method, reporting throughput, latency percentiles and status codes, and
// optionally the same load against the no-op RPC (Validate) carrying the same
// graph and devices.
//
//   partplan::cli::LoadOptions options;
//   options.concurrency = 16;
//   options.duration = absl::Seconds(10);
//   options.compare_noop = true;
//   if (absl::Status s = options.CheckAndSetup(); !s.ok()) { ... }
//   absl::StatusOr<v1::ValidateRequest> noop =
//       partplan::cli::NoopRequestFor(request);  // fails without a graph
//   int exit_code = partplan::cli::RunLoadCommand(
//       partplan::cli::ConnectToPlanner(connection), *method, request,
//       &*noop, connection, options, std::cout, std::cerr);
//
// How the load is made:
// - `concurrency` client threads share one channel, hence one HTTP/2
//   connection, as one client process (a scheduler, the CLI, the Python
//   client) talks to the server; gRPC multiplexes the calls as streams.
// - Each thread is a closed loop: it sends a call, waits for its answer and
//   sends the next, so `concurrency` calls are in flight at any time.
// - The request is serialised once; every call sends the same bytes and the
//   responses are received but not parsed, so the client's CPU goes to gRPC
//   alone (it shares the machine with the server when run on loopback).
// - One call is made first and not counted: it connects the channel, and a
//   server that is unreachable or rejects the request is reported at once
//   instead of as a run of failures. With the server's plan cache, that call
//   also primes the cache, so every counted call of a repeated request is a
//   hit.
// - A run stops after `requests` calls in all, or once `duration` has passed
//   (calls in flight then finish and are counted). Throughput is the counted
//   calls over the time from the first to the last of them.
//
// Exit code of RunLoadCommand: 0 when every call (the first included) ended
// OK or with a code listed in `expected_codes`; otherwise the gRPC status code
// that most calls failed with among the unexpected ones (the smaller code on
// a tie), as `partplan call` exits with the failed call's code.
#ifndef PARTPLAN_CLIENT_CLI_LOAD_GENERATOR_H_
#define PARTPLAN_CLIENT_CLI_LOAD_GENERATOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cli/planner_client.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/status.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace cli {

// Duration of a run when neither `duration` nor `requests` is given.
inline constexpr absl::Duration kDefaultLoadDuration = absl::Seconds(10);
// Most client threads a run may start.
inline constexpr int kMaxLoadConcurrency = 1024;

struct LoadOptions {
  // Calls in flight at once: one client thread each.
  int concurrency = 16;
  // How long to send calls; zero: kDefaultLoadDuration unless `requests` is
  // set. Give this or `requests`, not both.
  absl::Duration duration = absl::ZeroDuration();
  // Calls to make in all (over every thread); 0 for a timed run.
  int64_t requests = 0;
  // Also run the same load against Validate, with the request's graph and
  // devices, and print both reports and the ratio of their throughputs.
  bool compare_noop = false;
  // Status codes, besides OK, that do not make the run fail: comma-separated
  // names in any case or numbers, e.g. "RESOURCE_EXHAUSTED,deadline_exceeded".
  std::string expected_codes;

  // Set by CheckAndSetup(): OK and the codes of `expected_codes`.
  std::set<grpc::StatusCode> expected;

  // Checks the options (INVALID_ARGUMENT naming the flag otherwise), fills
  // `expected` and applies the default duration.
  absl::Status CheckAndSetup();
};

// The outcome of one run: per-call latencies and status codes.
class LoadReport {
 public:
  // The method's short name ("PartitionGraph"), for printing.
  std::string method;
  int concurrency = 0;
  // Size of the serialised request every call sent.
  int64_t request_bytes = 0;
  // From the start of the first counted call to the end of the last.
  absl::Duration elapsed = absl::ZeroDuration();

  // Records one call.
  void Add(grpc::StatusCode code, absl::Duration latency);
  // Adds every call of `other` (a thread's share) to this report.
  void Merge(const LoadReport& other);

  int64_t calls() const { return static_cast<int64_t>(latencies_.size()); }
  // Calls per code, by code.
  const std::map<grpc::StatusCode, int64_t>& codes() const { return codes_; }
  // Calls per second of `elapsed`; 0 when nothing was timed.
  double Throughput() const;
  // The nearest-rank percentile of the latencies of all calls, whatever
  // their code: the smallest latency that at least `fraction` (in (0, 1]) of
  // the calls did not exceed. Zero without calls.
  absl::Duration Percentile(double fraction) const;
  absl::Duration Max() const { return Percentile(1.0); }

 private:
  // Sorted on demand by Percentile().
  mutable std::vector<absl::Duration> latencies_;
  mutable bool sorted_ = true;
  std::map<grpc::StatusCode, int64_t> codes_;
};

// The report as a few lines:
//   PartitionGraph: 16 clients on 1 channel, request 9.8 KiB
//     calls    41234 in 10.00 s: 4123.4 calls/s
//     latency  p50 3.712 ms  p90 5.104 ms  p99 8.921 ms  max 21.503 ms
//     codes    OK 41234
std::string FormatLoadReport(const LoadReport& report);

// One line comparing a method's report with the no-op's:
//   PartitionGraph / Validate throughput: 0.91 (4123.4 / 4531.0 calls/s)
std::string FormatComparison(const LoadReport& method, const LoadReport& noop);

// The ValidateRequest carrying `request`'s `graph` field and, when its type
// has one, its `devices` field, copied by descriptor. INVALID_ARGUMENT when
// the request's type has no partplan.v1.Graph field named `graph`, or when
// the request has no graph (Validate would only reject it).
absl::StatusOr<v1::ValidateRequest> NoopRequestFor(
    const google::protobuf::Message& request);

// Runs one load of `method` with `request` over `channel`. First makes the
// uncounted first call; when that ends with a code outside
// `options.expected`, returns its status and leaves `*report` empty.
// Otherwise fills `*report` and returns OK. `options` must have passed
// CheckAndSetup(). Deadline, request id and token come from `connection`.
grpc::Status RunLoad(std::shared_ptr<grpc::ChannelInterface> channel,
                     const google::protobuf::MethodDescriptor& method,
                     const google::protobuf::Message& request,
                     const ConnectionOptions& connection,
                     const LoadOptions& options, LoadReport* report);

// The exit code for runs with these reports: 0 when every code is expected,
// else the most frequent unexpected code.
int LoadExitCode(const std::vector<const LoadReport*>& reports,
                 const std::set<grpc::StatusCode>& expected);

// `partplan load`: runs the load, and then, when `noop_request` is not null
// (NoopRequestFor(request)), the same load against Validate with it; prints
// the report(s) and the comparison to `out` and a failed first call to
// `err`; returns the exit code described at the top of this file.
int RunLoadCommand(std::shared_ptr<grpc::ChannelInterface> channel,
                   const google::protobuf::MethodDescriptor& method,
                   const google::protobuf::Message& request,
                   const v1::ValidateRequest* noop_request,
                   const ConnectionOptions& connection,
                   const LoadOptions& options, std::ostream& out,
                   std::ostream& err);

}  // namespace cli
}  // namespace partplan

#endif  // PARTPLAN_CLIENT_CLI_LOAD_GENERATOR_H_

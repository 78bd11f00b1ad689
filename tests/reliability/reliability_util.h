// Helpers of the reliability tests (hostile input, faults under load,
// determinism) and of the soak client. They add to tests/server/test_util.h
// (in-process servers, fake backends, metrics scraping), which they reuse:
//
//   std::unique_ptr<PlannerServer> server = StartTestServer(nullptr);  // real planner
//   RawReply reply = CallRaw(LoopbackChannel(server->port()), PlannerRpc::kValidate, "\xff\xff");
//   reply.status.error_code();                 // what gRPC and the server answered
//   FieldViolations(reply.status);             // google.rpc.BadRequest field paths
//
//   ServerProcess process = ServerProcess::Start({"--planner_threads=2"});
//   process.Signal(SIGTERM);  process.WaitForExit(absl::Seconds(30));
#ifndef PARTPLAN_TESTS_RELIABILITY_RELIABILITY_UTIL_H_
#define PARTPLAN_TESTS_RELIABILITY_RELIABILITY_UTIL_H_

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/limits.h"
#include "server/planner_backend.h"
#include "planner/api/planner_rpcs.h"

namespace partplan {

// "/partplan.v1.PartitionPlanner/<Method>".
std::string MethodPath(PlannerRpc rpc);

// A channel to 127.0.0.1:`port` that accepts responses of any size (plans
// of large graphs exceed gRPC's default 4 MiB) and never shares its
// connection with another channel.
std::shared_ptr<grpc::Channel> LoopbackChannel(int port);

struct RawReply {
  grpc::Status status;
  std::string response;  // The serialised response; empty unless OK.
};

// Sends `request` -- any bytes, not necessarily a valid message -- as the
// request of `rpc`, through grpc::GenericStub, and waits for the answer.
// `cancel_after` cancels the call from the client after that long.
RawReply CallRaw(const std::shared_ptr<grpc::Channel>& channel, PlannerRpc rpc, const std::string& request,
                 absl::Duration timeout = absl::Seconds(60),
                 absl::Duration cancel_after = absl::InfiniteDuration());

// Sends `request` as CallRaw does, but through PartitionPlannerInParts.Call
// in parts of `part_bytes` (at least one part, naming `rpc`), and joins the
// response's parts.
RawReply CallRawInParts(const std::shared_ptr<grpc::Channel>& channel, PlannerRpc rpc,
                        const std::string& request, size_t part_bytes);

// A call like CallRaw's, in flight while the test does something else:
//
//   auto call = std::make_unique<PendingRawCall>(channel, PlannerRpc::kPlan, bytes);
//   call->Cancel();                         // from the client, at any time
//   ASSERT_TRUE(call->Wait(absl::Seconds(5)));
//   call->reply().status.error_code();
class PendingRawCall {
 public:
  PendingRawCall(const std::shared_ptr<grpc::Channel>& channel, PlannerRpc rpc,
                 const std::string& request, absl::Duration timeout = absl::Seconds(60));
  // Waits for the answer (the call must end before it is destroyed).
  ~PendingRawCall();

  void Cancel() { context_.TryCancel(); }
  // True once answered; false after `timeout`.
  bool Wait(absl::Duration timeout);
  bool done() const { return done_.HasBeenNotified(); }
  // Valid once done.
  const RawReply& reply() const { return reply_; }
  // When the answer came.
  absl::Time answered_at() const { return answered_at_; }

 private:
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  RawReply reply_;
  absl::Time answered_at_;
  absl::Notification done_;
};

// The field paths of the google.rpc.BadRequest in `status`'s details, in
// order; empty when it carries none.
std::vector<std::string> FieldViolations(const grpc::Status& status);

// "CODE: message" for test failure messages.
std::string Describe(const grpc::Status& status);

// Serialised deterministically (map order fixed), for byte comparisons.
std::string DeterministicBytes(const google::protobuf::Message& message);

// The contents of a workspace file (tests run in the workspace root).
std::string ReadWorkspaceFile(const std::string& path);

// A workspace proto3 JSON file parsed into `message`; false on failure.
bool ParseJsonFile(const std::string& path, google::protobuf::Message* message);

// A request for `rpc` from its client/examples/*.json file: a valid request
// every implemented planner answers OK.
std::string ExampleRequest(PlannerRpc rpc);

// A request of `rpc` holding `graph`, and `devices` when it takes an
// inventory: what every request has room for.
std::unique_ptr<google::protobuf::Message> RequestWithGraph(PlannerRpc rpc, const v1::Graph& graph,
                                                         const v1::DeviceInventory& devices);

// A PartitionGraphRequest whose plan takes the real planner about
// `plan_time` in this build on this machine, polling its token throughout:
// what cancellation and deadline tests cancel mid-plan. It is
// InterleavedPartitionRequest(SlowPlanLayers(plan_time)).
v1::PartitionGraphRequest SlowPartitionRequest(absl::Duration plan_time);

// sparse_nn merging the partitions of a graph that alternates `layers` times
// between embedding and dense nodes, the dense ones a chain: O(layers^2).
// The plan ends in FAILED_PRECONDITION (the merged partitions do not fit).
v1::PartitionGraphRequest InterleavedPartitionRequest(int layers);

// The layers for which InterleavedPartitionRequest plans in about
// `plan_time`. How long a number of layers takes depends on the build (a
// fastbuild plans 800 layers in about a second, an optimised build 40 times
// faster, a sanitizer's build slower) and on the machine, so the first call
// in a process times a few plans (a few hundred milliseconds) and later
// calls reuse the fit. The plans are timed in CPU time: on a busy machine a
// plan takes longer than `plan_time`. The cost is taken as quadratic in the
// layers, which overstates it where the linear part still counts, so on an
// idle machine the plan takes `plan_time` or somewhat less (down to about
// three quarters).
int SlowPlanLayers(absl::Duration plan_time);

// Resident set size of process `pid` in KiB (VmRSS), or -1.
int64_t ResidentKib(pid_t pid);

// The real planner library behind a recorder: counts calls started and
// finished and remembers when the last one finished, so tests can tell how
// long a planner ran on after its call was cancelled.
class RecordingBackend final : public PlannerBackend {
 public:
  explicit RecordingBackend(const InputLimits& limits = InputLimits());

  int started();
  int finished();
  // Waits until `n` calls have finished; false after `timeout`.
  bool WaitForFinished(int n, absl::Duration timeout);
  // Waits until `n` calls have started; false after `timeout`.
  bool WaitForStarted(int n, absl::Duration timeout);
  // When the last call finished (InfinitePast before any).
  absl::Time last_finish();
  // The status codes of finished calls, in finishing order.
  std::vector<absl::StatusCode> codes();

  absl::Status Answer(const PlannerRpcMethod& rpc, const PlannerRequest& request,
                      const CancellationToken& token, google::protobuf::Arena* arena,
                      absl::Cord* response_bytes) override;

 private:
  const std::unique_ptr<PlannerBackend> library_;
  absl::Mutex mu_;
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_finish_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::vector<absl::StatusCode> codes_ ABSL_GUARDED_BY(mu_);
};

// The real partplan_server binary in a child process, on a free port
// (--port=0; the port is read from its log), with metrics disabled unless
// the arguments say otherwise. Its log goes to a file under TEST_TMPDIR (or
// /tmp). The destructor kills it if it still runs.
class ServerProcess {
 public:
  // `binary` empty: $PARTPLAN_SERVER, else server/partplan_server (a test
  // data dependency, relative to the workspace root).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::vector<std::string>& flags, const std::string& binary = "");
  ~ServerProcess();

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  // The metrics port from the log, or -1 (disabled).
  int metrics_port() const { return metrics_port_; }
  const std::string& log_path() const { return log_path_; }
  std::string Log() const;

  void Signal(int signal);
  // The exit status (as from waitpid) once the process has exited, or an
  // error after `timeout`.
  absl::StatusOr<int> WaitForExit(absl::Duration timeout);

 private:
  ServerProcess() = default;

  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = -1;
  bool exited_ = false;
  std::string log_path_;
};

}  // namespace partplan

#endif  // PARTPLAN_TESTS_RELIABILITY_RELIABILITY_UTIL_H_

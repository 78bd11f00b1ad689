// In-process partplan servers for tests, with a fake planner backend that
// can answer at once, block until released, or wait for its cancellation
// token, so that queue-full, deadline and cancellation behaviour can be
// tested without timing guesses.
//
//   absl::Notification release;
//   EventCounter started;
//   auto backend = std::make_unique<FakePlannerBackend>(BlockUntil(release, started));
//   std::unique_ptr<PlannerServer> server = StartTestServer(std::move(backend));
//   auto stub = NewPlannerStub(*server);
//   std::unique_ptr<PendingValidate> call = StartValidate(*stub);
//   ASSERT_TRUE(started.WaitFor(1));   // the planner is running the call
//   release.Notify();
//   ASSERT_TRUE(WaitForCall(*call));
#ifndef PARTPLAN_TESTS_SERVER_TEST_UTIL_H_
#define PARTPLAN_TESTS_SERVER_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.grpc.pb.h"
#include "planner/api/planner_request.h"
#include "planner/api/planner_rpcs.h"
#include "planner/base/cancellation.h"
#include "server/planner_backend.h"
#include "server/server.h"

namespace partplan {

// Upper bound of every wait in these tests: long enough never to fire on a
// loaded machine, short enough that a bug fails the test instead of hanging.
inline constexpr absl::Duration kTestTimeout = absl::Seconds(20);

// A count other threads can wait on.
class EventCounter {
 public:
  void Increment();
  // True once the count reaches `n`; false after kTestTimeout.
  bool WaitFor(int n);
  int count();

 private:
  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

// A PlannerBackend answering every row of the RPC table with a canned
// response (default: empty), after running a hook that may block or fail the
// call; or with bytes set by set_response_bytes.
class FakePlannerBackend final : public PlannerBackend {
 public:
  // Runs first in every call; a non-OK status is returned instead of the
  // canned response.
  using Hook = std::function<absl::Status(const CancellationToken&)>;

  explicit FakePlannerBackend(Hook hook = nullptr);

  // The canned response of type Response (set before the server starts).
  template <typename Response>
  Response& canned() {
    for (const std::unique_ptr<google::protobuf::Message>& response : canned_) {
      if (response->GetDescriptor() == Response::descriptor()) {
        return static_cast<Response&>(*response);
      }
    }
    ADD_FAILURE() << "no RPC answers " << Response::descriptor()->full_name();
    static Response unused;
    return unused;
  }

  // Bytes every call is answered with (after the hook) instead of a canned
  // response (set before the server starts).
  void set_response_bytes(std::string bytes) { response_bytes_ = std::move(bytes); }

  absl::Status Answer(const PlannerRpcMethod& rpc, const PlannerRequest& request,
                      const CancellationToken& token, google::protobuf::Arena* arena,
                      absl::Cord* response_bytes) override;

 private:
  const Hook hook_;
  // One per row of kPlannerRpcs, of the row's response type.
  std::vector<std::unique_ptr<google::protobuf::Message>> canned_;
  std::optional<std::string> response_bytes_;
};

// Hook: counts the call in `started`, then blocks until `release` is
// notified (whatever the token says, like a planner that ignores it).
FakePlannerBackend::Hook BlockUntil(absl::Notification& release, EventCounter& started);

// What a planner that polls its token saw.
struct TokenProbe {
  EventCounter started;
  absl::Notification stopped;
  absl::Status stop_status;  // Written before `stopped` is notified.
};

// Hook: counts the call in `probe.started`, polls the token like a planner
// until it fires, records its status in `probe` and returns it.
FakePlannerBackend::Hook WaitForToken(TokenProbe& probe);

// Loopback, any free port, metrics disabled, 2 planner threads, 4 queued
// calls, 10 s drain deadline.
ServerOptions TestServerOptions();

// Starts a server with `backend` (null: the planner library); fails the
// test (returns null) when it cannot.
std::unique_ptr<PlannerServer> StartTestServer(std::unique_ptr<PlannerBackend> backend,
                                               const ServerOptions& options = TestServerOptions());

std::shared_ptr<grpc::Channel> ConnectTo(const PlannerServer& server);
std::unique_ptr<v1::PartitionPlanner::Stub> NewPlannerStub(const PlannerServer& server);

// A Validate call made with the stub's callback API, to keep several in
// flight from one test thread.
struct PendingValidate {
  grpc::ClientContext context;
  v1::ValidateRequest request;
  v1::ValidateResponse response;
  grpc::Status status;
  absl::Notification done;
};

// Starts Validate() with an empty request; counts its completion in
// `finished` when given.
std::unique_ptr<PendingValidate> StartValidate(v1::PartitionPlanner::Stub& stub,
                                               EventCounter* finished = nullptr);

// Waits for `call` to finish; false after kTestTimeout.
bool WaitForCall(PendingValidate& call);

// What a PartitionPlannerInParts.Call returned: its status and each
// response part's data.
struct PartsReply {
  grpc::Status status;
  std::vector<std::string> parts;

  std::string Joined() const;
};

// Sends `request` through PartitionPlannerInParts.Call in parts of
// `part_bytes` (at least one part): the first naming `method`, the others
// `later_method`; then reads the response's parts.
PartsReply CallInParts(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                       const std::string& request, size_t part_bytes,
                       const std::string& later_method = "");

// The body of GET http://127.0.0.1:<port><path>.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

// The value of the sample `series` (metric name and labels exactly as
// exposed, e.g. `up{job="x"}`) in a Prometheus text exposition, or -1 when
// it is absent.
double SampleValue(const std::string& exposition, const std::string& series);

// Scrapes http://127.0.0.1:<metrics_port>/metrics until `series` reads
// `value`; false after kTestTimeout. For states with no other observable
// signal, such as calls waiting in the planner queue.
bool WaitForSample(int metrics_port, const std::string& series, double value);

}  // namespace partplan

#endif  // PARTPLAN_TESTS_SERVER_TEST_UTIL_H_

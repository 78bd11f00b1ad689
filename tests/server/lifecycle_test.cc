// Server lifecycle: start failures, and draining (calls in flight when
// shutdown begins are answered; a drain that runs out of time cancels the
// planners still running).
#include <grpcpp/grpcpp.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

TEST(ShutdownTest, CallsInFlightWhenShutdownBeginsAreAllAnswered) {
  absl::Notification release;
  EventCounter started;
  ServerOptions options = TestServerOptions();
  options.metrics_port = 0;  // To see when the queued calls have arrived.
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(BlockUntil(release, started)), options);
  ASSERT_NE(server, nullptr);
  auto stub = NewPlannerStub(*server);

  // Two calls running on the two planner threads, three more queued.
  std::vector<std::unique_ptr<PendingValidate>> calls;
  for (int i = 0; i < 2; ++i) calls.push_back(StartValidate(*stub));
  ASSERT_TRUE(started.WaitFor(2));
  for (int i = 0; i < 3; ++i) calls.push_back(StartValidate(*stub));
  ASSERT_TRUE(WaitForSample(server->metrics_port(), "partplan_planner_queue_depth", 3));

  // Shutdown has begun once readiness turns NOT_SERVING (a Watch stream
  // opened before sees it); only then let the planners finish.
  std::unique_ptr<Health::Stub> health = Health::NewStub(ConnectTo(*server));
  grpc::ClientContext watch_context;
  HealthCheckRequest watch_request;
  watch_request.set_service(kReadinessServiceName);
  auto watch = health->Watch(&watch_context, watch_request);
  HealthCheckResponse health_response;
  ASSERT_TRUE(watch->Read(&health_response));
  ASSERT_EQ(health_response.status(), HealthCheckResponse::SERVING);

  std::thread shutdown([&server] { server->Shutdown(); });
  ASSERT_TRUE(watch->Read(&health_response));
  ASSERT_EQ(health_response.status(), HealthCheckResponse::NOT_SERVING);
  watch_context.TryCancel();
  watch->Finish();
  release.Notify();

  for (const auto& call : calls) {
    ASSERT_TRUE(WaitForCall(*call));
    EXPECT_TRUE(call->status.ok())
        << call->status.error_code() << ": " << call->status.error_message();
  }
  shutdown.join();
  EXPECT_EQ(started.count(), 5);
}

TEST(ShutdownTest, DrainDeadlineCancelsPlannersStillRunning) {
  TokenProbe probe;
  ServerOptions options = TestServerOptions();
  options.drain_deadline = absl::Milliseconds(100);
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(WaitForToken(probe)), options);
  ASSERT_NE(server, nullptr);
  auto stub = NewPlannerStub(*server);

  std::unique_ptr<PendingValidate> call = StartValidate(*stub);
  ASSERT_TRUE(probe.started.WaitFor(1));
  const absl::Time start = absl::Now();
  server->Shutdown();

  EXPECT_LT(absl::Now() - start, kTestTimeout);
  ASSERT_TRUE(probe.stopped.HasBeenNotified());
  EXPECT_TRUE(absl::IsCancelled(probe.stop_status)) << probe.stop_status;
  ASSERT_TRUE(WaitForCall(*call));
  EXPECT_FALSE(call->status.ok());
}

TEST(ShutdownTest, RefusesCallsAfterShutdown) {
  std::unique_ptr<PlannerServer> server = StartTestServer(std::make_unique<FakePlannerBackend>());
  ASSERT_NE(server, nullptr);
  auto stub = NewPlannerStub(*server);
  server->Shutdown();
  server->Wait();  // Returns at once once shut down.

  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ValidateResponse response;
  EXPECT_EQ(stub->Validate(&context, v1::ValidateRequest(), &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST(StartTest, FailsWhenThePortIsTaken) {
  std::unique_ptr<PlannerServer> first = StartTestServer(std::make_unique<FakePlannerBackend>());
  ASSERT_NE(first, nullptr);
  ServerOptions options = TestServerOptions();
  options.port = first->port();
  absl::StatusOr<std::unique_ptr<PlannerServer>> second =
      PlannerServer::Start(options, std::make_unique<FakePlannerBackend>());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

TEST(StartTest, RejectsInvalidOptions) {
  ServerOptions options = TestServerOptions();
  options.planner_threads = 0;
  EXPECT_EQ(PlannerServer::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace partplan

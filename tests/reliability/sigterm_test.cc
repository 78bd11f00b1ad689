// SIGTERM with calls in flight, against the real partplan_server binary in a
// child process (as Kubernetes stops a pod): every call the server accepted
// is answered, new calls are refused, and the process exits 0 within its
// drain deadline.
#include <signal.h>
#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/reliability/reliability_util.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

using grpc::StatusCode;

std::string SlowRequest(absl::Duration plan_time, int i) {
  v1::PartitionGraphRequest request = SlowPartitionRequest(plan_time);
  request.mutable_graph()->set_name(absl::StrCat("slow_", i));
  return request.SerializeAsString();
}

std::unique_ptr<ServerProcess> StartServer(double drain_seconds) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> process = ServerProcess::Start(
      {"--planner_threads=2", "--queue_depth=8", "--plan_cache_bytes=0", "--metrics_port=0",
       absl::StrCat("--drain_deadline_seconds=", drain_seconds)});
  EXPECT_TRUE(process.ok()) << process.status();
  return process.ok() ? *std::move(process) : nullptr;
}

// Six slow calls: two planning, four queued, as the server's gauges say.
std::vector<std::unique_ptr<PendingRawCall>> FillThePool(const ServerProcess& server,
                                                         absl::Duration plan_time) {
  const std::shared_ptr<grpc::Channel> channel = LoopbackChannel(server.port());
  std::vector<std::unique_ptr<PendingRawCall>> calls;
  for (int i = 0; i < 6; ++i) {
    calls.push_back(std::make_unique<PendingRawCall>(
        channel, PlannerRpc::kPartitionGraph, SlowRequest(plan_time, i), absl::Seconds(120)));
  }
  EXPECT_TRUE(WaitForSample(server.metrics_port(), "partplan_planner_in_flight", 2));
  EXPECT_TRUE(WaitForSample(server.metrics_port(), "partplan_planner_queue_depth", 4));
  return calls;
}

TEST(SigtermTest, CallsInFlightAreAllAnsweredThenTheServerExits) {
  std::unique_ptr<ServerProcess> server = StartServer(/*drain_seconds=*/60);
  ASSERT_NE(server, nullptr);
  // Plans of about a second each: they all fit in the drain deadline.
  std::vector<std::unique_ptr<PendingRawCall>> calls = FillThePool(*server, absl::Seconds(1));
  ASSERT_FALSE(calls[0]->done()) << "the plans finished before SIGTERM";

  const absl::Time sigterm = absl::Now();
  server->Signal(SIGTERM);
  // Calls after SIGTERM are refused (the port closes or the server refuses).
  absl::SleepFor(absl::Milliseconds(200));
  const RawReply late = CallRaw(LoopbackChannel(server->port()), PlannerRpc::kValidate,
                                ExampleRequest(PlannerRpc::kValidate), absl::Seconds(10));
  EXPECT_EQ(late.status.error_code(), StatusCode::UNAVAILABLE) << Describe(late.status);

  // Every accepted call gets the planner's own answer (this request's plan
  // ends in FAILED_PRECONDITION: see SlowPartitionRequest).
  for (auto& call : calls) {
    ASSERT_TRUE(call->Wait(absl::Seconds(90)));
    EXPECT_EQ(call->reply().status.error_code(), StatusCode::FAILED_PRECONDITION)
        << Describe(call->reply().status);
  }
  absl::StatusOr<int> exit_status = server->WaitForExit(absl::Seconds(90));
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  EXPECT_TRUE(WIFEXITED(*exit_status) && WEXITSTATUS(*exit_status) == 0) << *exit_status;
  const absl::Duration took = absl::Now() - sigterm;
  std::printf("drained 6 calls and exited %.2f s after SIGTERM\n", absl::ToDoubleSeconds(took));
  const std::string log = server->Log();
  EXPECT_TRUE(absl::StrContains(log, "\"msg\":\"draining\"")) << log;
  EXPECT_TRUE(absl::StrContains(log, "\"msg\":\"stopped\"")) << log;
}

TEST(SigtermTest, CallsOutlastingTheDrainDeadlineAreCancelledAndTheServerExitsOnTime) {
  constexpr double kDrainSeconds = 1;
  std::unique_ptr<ServerProcess> server = StartServer(kDrainSeconds);
  ASSERT_NE(server, nullptr);
  // Plans of several seconds each.
  std::vector<std::unique_ptr<PendingRawCall>> calls = FillThePool(*server, absl::Seconds(4));

  const absl::Time sigterm = absl::Now();
  server->Signal(SIGTERM);
  absl::StatusOr<int> exit_status = server->WaitForExit(absl::Seconds(60));
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  const absl::Duration took = absl::Now() - sigterm;
  EXPECT_TRUE(WIFEXITED(*exit_status) && WEXITSTATUS(*exit_status) == 0) << *exit_status;
  // The drain deadline, then planners stopping at their next token check.
  EXPECT_LT(took, absl::Seconds(kDrainSeconds) + absl::Seconds(3));
  std::printf("exited %.2f s after SIGTERM (drain deadline %.0f s)\n", absl::ToDoubleSeconds(took),
              kDrainSeconds);

  // Every accepted call was answered, none left to our own deadline.
  for (auto& call : calls) {
    ASSERT_TRUE(call->Wait(absl::Seconds(10)));
    const StatusCode code = call->reply().status.error_code();
    EXPECT_TRUE(code == StatusCode::CANCELLED || code == StatusCode::UNAVAILABLE)
        << Describe(call->reply().status);
    EXPECT_LT(call->answered_at() - sigterm, absl::Seconds(kDrainSeconds) + absl::Seconds(3));
  }
}

}  // namespace
}  // namespace partplan

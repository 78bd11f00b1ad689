// Faults under load, against the real planner (the library backend, behind a
// recorder that tells when each planner call returns) in an in-process
// server on loopback: concurrent clients cancelling mid-plan, deadlines
// expiring, a full queue and its recovery, oversized messages among good
// ones. tests/server covers the same paths with fake planners; here the
// planners are real, so "the planner stops" means partplan's own loops
// noticed the token.
//
// The slow request is SlowPartitionRequest (reliability_util.h): sparse_nn
// merging partitions for several seconds uncancelled, whatever the build,
// polling its token between merges.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/reliability/reliability_util.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

using grpc::StatusCode;

// How long the slow request plans uncancelled: longer than every wait below
// (the 800 ms deadline, the 700 ms limit) with room to spare.
constexpr absl::Duration kSlowPlan = absl::Seconds(4);

// A planner that stopped within this of its call's cancellation stopped
// "promptly": a merge round of the slow request takes milliseconds, the
// whole plan seconds. Generous for sanitizer builds and a loaded machine.
constexpr absl::Duration kPrompt = absl::Seconds(2);

std::string SlowRequest(int i) {
  v1::PartitionGraphRequest request = SlowPartitionRequest(kSlowPlan);
  request.mutable_graph()->set_name(absl::StrCat("slow_", i));  // no two alike
  return request.SerializeAsString();
}

class FaultsTest : public ::testing::Test {
 protected:
  void StartServer(int max_receive_message_bytes = 256 << 20,
                   absl::Duration max_call_duration = absl::Minutes(5)) {
    auto backend = std::make_unique<RecordingBackend>();
    backend_ = backend.get();
    ServerOptions options = TestServerOptions();  // 2 planner threads, 4 queued calls
    options.metrics_port = 0;
    options.plan_cache_bytes = 0;  // every call plans
    options.max_receive_message_bytes = max_receive_message_bytes;
    options.max_call_duration = max_call_duration;
    server_ = StartTestServer(std::move(backend), options);
    ASSERT_NE(server_, nullptr);
    channel_ = LoopbackChannel(server_->port());
  }

  // The planner pool is idle again: nothing running, nothing queued.
  void ExpectIdle() {
    EXPECT_TRUE(WaitForSample(server_->metrics_port(), "partplan_planner_in_flight", 0));
    EXPECT_TRUE(WaitForSample(server_->metrics_port(), "partplan_planner_queue_depth", 0));
  }

  // Good requests are answered, promptly.
  void ExpectServing() {
    for (const PlannerRpc rpc : {PlannerRpc::kValidate, PlannerRpc::kPartitionGraph,
                                 PlannerRpc::kSplitGraph, PlannerRpc::kPlan}) {
      const absl::Time start = absl::Now();
      const RawReply reply = CallRaw(channel_, rpc, ExampleRequest(rpc), absl::Seconds(30));
      EXPECT_TRUE(reply.status.ok()) << RpcName(rpc) << ": " << Describe(reply.status);
      EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << RpcName(rpc);
    }
  }

  RecordingBackend* backend_ = nullptr;  // owned by server_
  std::unique_ptr<PlannerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// The slow request's size follows the time asked for, as a quadratic cost
// does (four times the time, twice the layers), whatever this build's speed.
TEST(SlowPlanLayersTest, LayersGrowAsTheSquareRootOfThePlanTime) {
  const int one_second = SlowPlanLayers(absl::Seconds(1));
  EXPECT_GE(one_second, 10);
  EXPECT_NEAR(SlowPlanLayers(absl::Seconds(4)), 2 * one_second, 2);
  EXPECT_NEAR(SlowPlanLayers(absl::Milliseconds(250)), one_second / 2, 2);
  EXPECT_GE(SlowPlanLayers(absl::ZeroDuration()), 1);
  EXPECT_EQ(InterleavedPartitionRequest(one_second).graph().nodes_size(), 2 * one_second + 2);
}

TEST_F(FaultsTest, ClientsCancellingMidPlanStopTheirPlannersAndThePoolServesOn) {
  StartServer();
  // Six clients at once: two plans run, four wait in the queue.
  std::vector<std::unique_ptr<PendingRawCall>> calls;
  for (int i = 0; i < 6; ++i) {
    calls.push_back(
        std::make_unique<PendingRawCall>(channel_, PlannerRpc::kPartitionGraph, SlowRequest(i)));
  }
  ASSERT_TRUE(backend_->WaitForStarted(2, kTestTimeout));
  ASSERT_TRUE(WaitForSample(server_->metrics_port(), "partplan_planner_queue_depth", 4));
  absl::SleepFor(absl::Milliseconds(300));  // mid-plan
  ASSERT_EQ(backend_->finished(), 0) << "the slow plan finished before it could be cancelled";

  const absl::Time cancelled = absl::Now();
  for (auto& call : calls) call->Cancel();
  for (auto& call : calls) {
    ASSERT_TRUE(call->Wait(kTestTimeout));
    EXPECT_EQ(call->reply().status.error_code(), StatusCode::CANCELLED)
        << Describe(call->reply().status);
  }
  // The running planners return CANCELLED promptly; the queued calls are
  // answered without planning (or, if a worker took one before its
  // cancellation arrived, stop as promptly).
  ExpectIdle();
  EXPECT_EQ(backend_->finished(), backend_->started());
  EXPECT_LT(backend_->last_finish() - cancelled, kPrompt);
  std::printf("%d planners stopped %.1f ms after their calls were cancelled\n", backend_->started(),
              absl::ToDoubleMilliseconds(backend_->last_finish() - cancelled));
  for (const absl::StatusCode code : backend_->codes()) EXPECT_EQ(code, absl::StatusCode::kCancelled);
  ExpectServing();
}

TEST_F(FaultsTest, ExpiredDeadlinesStopTheirPlanners) {
  StartServer();
  constexpr absl::Duration kDeadline = absl::Milliseconds(800);
  std::vector<std::unique_ptr<PendingRawCall>> calls;
  const absl::Time start = absl::Now();
  for (int i = 0; i < 4; ++i) {
    calls.push_back(std::make_unique<PendingRawCall>(channel_, PlannerRpc::kPartitionGraph,
                                                     SlowRequest(i), kDeadline));
  }
  for (auto& call : calls) {
    ASSERT_TRUE(call->Wait(kTestTimeout));
    EXPECT_EQ(call->reply().status.error_code(), StatusCode::DEADLINE_EXCEEDED)
        << Describe(call->reply().status);
  }
  ExpectIdle();
  EXPECT_EQ(backend_->finished(), backend_->started());
  EXPECT_LT(backend_->last_finish() - (start + kDeadline), kPrompt);
  std::printf("%d planners stopped %.1f ms after their deadline\n", backend_->started(),
              absl::ToDoubleMilliseconds(backend_->last_finish() - (start + kDeadline)));
  for (const absl::StatusCode code : backend_->codes()) {
    // The token fires on its deadline, or on gRPC's cancellation of the
    // expired call, whichever comes first.
    EXPECT_TRUE(code == absl::StatusCode::kDeadlineExceeded || code == absl::StatusCode::kCancelled)
        << code;
  }
  ExpectIdle();
  ExpectServing();
}

// A client without a deadline cannot hold a planner thread past the
// server's own limit (--max_call_seconds), and the answer names it.
TEST_F(FaultsTest, CallsWithoutADeadlineStopAtTheServersLimit) {
  constexpr absl::Duration kLimit = absl::Milliseconds(700);
  StartServer(256 << 20, kLimit);
  const absl::Time start = absl::Now();
  std::vector<std::unique_ptr<PendingRawCall>> calls;
  for (int i = 0; i < 3; ++i) {
    calls.push_back(std::make_unique<PendingRawCall>(channel_, PlannerRpc::kPartitionGraph,
                                                     SlowRequest(i), absl::Hours(1)));
  }
  for (auto& call : calls) {
    ASSERT_TRUE(call->Wait(kTestTimeout));
    EXPECT_EQ(call->reply().status.error_code(), StatusCode::DEADLINE_EXCEEDED)
        << Describe(call->reply().status);
    EXPECT_NE(call->reply().status.error_message().find("--max_call_seconds"), std::string::npos)
        << Describe(call->reply().status);
    EXPECT_LT(call->answered_at() - start, kLimit + kPrompt);
  }
  ExpectIdle();
  EXPECT_EQ(backend_->finished(), backend_->started());
  ExpectServing();
}

TEST_F(FaultsTest, AFullQueueRefusesAtOnceThenRecovers) {
  StartServer();
  std::vector<std::unique_ptr<PendingRawCall>> slow;
  for (int i = 0; i < 6; ++i) {
    slow.push_back(
        std::make_unique<PendingRawCall>(channel_, PlannerRpc::kPartitionGraph, SlowRequest(i)));
  }
  ASSERT_TRUE(backend_->WaitForStarted(2, kTestTimeout));
  ASSERT_TRUE(WaitForSample(server_->metrics_port(), "partplan_planner_queue_depth", 4));

  // Full: more calls, of every kind, are refused at once.
  for (const PlannerRpc rpc : {PlannerRpc::kValidate, PlannerRpc::kPartitionGraph,
                               PlannerRpc::kShardGraph, PlannerRpc::kPlan, PlannerRpc::kValidate}) {
    const absl::Time start = absl::Now();
    const RawReply reply = CallRaw(channel_, rpc, ExampleRequest(rpc), absl::Seconds(30));
    EXPECT_EQ(reply.status.error_code(), StatusCode::RESOURCE_EXHAUSTED)
        << RpcName(rpc) << ": " << Describe(reply.status);
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  }
  EXPECT_TRUE(WaitForSample(server_->metrics_port(),
                            "partplan_rejected_calls_total{reason=\"queue_full\"}", 5));

  // The slow calls' clients give up; every one is answered, and the server
  // recovers.
  for (auto& call : slow) call->Cancel();
  for (auto& call : slow) {
    ASSERT_TRUE(call->Wait(kTestTimeout));
    EXPECT_EQ(call->reply().status.error_code(), StatusCode::CANCELLED);
  }
  ExpectIdle();
  EXPECT_EQ(backend_->finished(), backend_->started());
  ExpectServing();
  // A burst as large as the pool and queue is accepted again.
  std::vector<std::unique_ptr<PendingRawCall>> burst;
  for (int i = 0; i < 6; ++i) {
    burst.push_back(std::make_unique<PendingRawCall>(
        channel_, PlannerRpc::kPartitionGraph, ExampleRequest(PlannerRpc::kPartitionGraph)));
  }
  for (auto& call : burst) {
    ASSERT_TRUE(call->Wait(kTestTimeout));
    EXPECT_TRUE(call->reply().status.ok()) << Describe(call->reply().status);
  }
}

TEST_F(FaultsTest, OversizedMessagesAreRefusedWhileGoodCallsGoOn) {
  StartServer(/*max_receive_message_bytes=*/1 << 20);
  v1::ValidateRequest oversized;
  oversized.ParseFromString(ExampleRequest(PlannerRpc::kValidate));
  oversized.mutable_graph()->set_name(std::string(2 << 20, 'o'));
  const std::string oversized_bytes = oversized.SerializeAsString();

  std::atomic<int> good_ok{0}, good_other{0}, big_refused{0}, big_other{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&, t] {
      const std::shared_ptr<grpc::Channel> channel = LoopbackChannel(server_->port());
      for (int i = 0; i < 15; ++i) {
        const PlannerRpc rpc = (t + i) % 2 == 0 ? PlannerRpc::kValidate : PlannerRpc::kSplitGraph;
        const RawReply reply = CallRaw(channel, rpc, ExampleRequest(rpc), absl::Seconds(30));
        (reply.status.ok() ? good_ok : good_other)++;
      }
    });
  }
  for (int t = 0; t < 2; ++t) {
    clients.emplace_back([&] {
      const std::shared_ptr<grpc::Channel> channel = LoopbackChannel(server_->port());
      for (int i = 0; i < 5; ++i) {
        const RawReply reply =
            CallRaw(channel, PlannerRpc::kValidate, oversized_bytes, absl::Seconds(30));
        (reply.status.error_code() == StatusCode::RESOURCE_EXHAUSTED ? big_refused : big_other)++;
      }
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(good_ok, 45);
  EXPECT_EQ(good_other, 0);
  EXPECT_EQ(big_refused, 10);
  EXPECT_EQ(big_other, 0);
  ExpectServing();
}

}  // namespace
}  // namespace partplan

// A call's planner slot is free by the time its client has the answer
// (issue #24, item 19: a burst sent right after calls were answered got
// RESOURCE_EXHAUSTED on a loaded machine, because a worker counted itself
// idle only after it had answered, logged and returned). Each test holds the
// thread between "slot released" and "task returned" open, so neither
// depends on timing.
#include <grpcpp/grpcpp.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/bounded_thread_pool.h"
#include "server/server.h"
#include "tests/reliability/reliability_util.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

using ScheduleResult = BoundedThreadPool::ScheduleResult;

TEST(BoundedThreadPoolSlotTest, AReleasedSlotTakesOneMoreTaskWhichRunsOnceTheFirstReturns) {
  absl::Notification released, finish, second_ran;
  std::atomic<bool> first_returned{false};
  std::atomic<bool> second_saw_first_returned{false};
  BoundedThreadPool pool(/*num_threads=*/1, /*max_queued=*/0);
  ASSERT_EQ(pool.TrySchedule([&](BoundedThreadPool::Slot& slot) {
    slot.Release();
    slot.Release();  // idempotent: still one slot
    released.Notify();
    finish.WaitForNotification();
    first_returned = true;
  }),
            ScheduleResult::kScheduled);
  ASSERT_TRUE(released.WaitForNotificationWithTimeout(kTestTimeout));

  // The only worker still runs the first task, but gave its slot back.
  const ScheduleResult second = pool.TrySchedule([&] {
    second_saw_first_returned = first_returned.load();
    second_ran.Notify();
  });
  EXPECT_EQ(second, ScheduleResult::kScheduled);
  // One slot given back takes one task, however often it was released.
  EXPECT_EQ(pool.TrySchedule([] {}), ScheduleResult::kQueueFull);

  finish.Notify();
  if (second == ScheduleResult::kScheduled) {
    ASSERT_TRUE(second_ran.WaitForNotificationWithTimeout(kTestTimeout));
    EXPECT_TRUE(second_saw_first_returned) << "the second task ran beside the first";
  }
  pool.Shutdown();
}

TEST(BoundedThreadPoolSlotTest, ATaskThatDoesNotReleaseHoldsItsSlotUntilItReturns) {
  absl::Notification running, finish;
  BoundedThreadPool pool(/*num_threads=*/1, /*max_queued=*/0);
  ASSERT_EQ(pool.TrySchedule([&](BoundedThreadPool::Slot&) {
    running.Notify();
    finish.WaitForNotification();
  }),
            ScheduleResult::kScheduled);
  ASSERT_TRUE(running.WaitForNotificationWithTimeout(kTestTimeout));
  EXPECT_EQ(pool.TrySchedule([] {}), ScheduleResult::kQueueFull);
  finish.Notify();
  pool.Shutdown();
}

// A log sink that holds the first "rpc" line (written as the call is
// answered, on its planner thread) until released; every other line passes.
// No lock is held while it waits, so other threads log on.
class HoldingSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  absl::Notification holding;
  absl::Notification release;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string body(msg.payload.data(), msg.payload.size());
    if (body.rfind("rpc ", 0) != 0 || held_.exchange(true)) return;
    holding.Notify();
    release.WaitForNotificationWithTimeout(kTestTimeout);
  }
  void flush_() override {}

 private:
  std::atomic<bool> held_{false};
};

// One planner thread, no queue: while the first call's thread is still
// logging its answer, a second call is accepted (it waits for the thread),
// not refused.
TEST(PlannerServiceSlotTest, ACallsSlotIsFreeBeforeItIsAnswered) {
  const std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  auto sink = std::make_shared<HoldingSink>();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("slot_test", sink));
  {
    ServerOptions options = TestServerOptions();
    options.planner_threads = 1;
    options.queue_depth = 0;
    options.metrics_port = 0;
    options.plan_cache_bytes = 0;
    std::unique_ptr<PlannerServer> server =
        StartTestServer(std::make_unique<FakePlannerBackend>(), options);
    ASSERT_NE(server, nullptr);
    const std::shared_ptr<grpc::Channel> channel = LoopbackChannel(server->port());
    v1::ValidateRequest request;
    request.mutable_graph()->add_nodes()->set_name("x");
    const std::string bytes = request.SerializeAsString();

    PendingRawCall first(channel, PlannerRpc::kValidate, bytes, kTestTimeout);
    ASSERT_TRUE(sink->holding.WaitForNotificationWithTimeout(kTestTimeout));
    EXPECT_FALSE(first.done());

    // Accepted: it waits in the queue for the only thread. Refused: it is
    // answered at once.
    PendingRawCall second(channel, PlannerRpc::kValidate, bytes, kTestTimeout);
    const absl::Time give_up = absl::Now() + kTestTimeout;
    bool queued = false;
    while (!second.done() && !queued && absl::Now() < give_up) {
      const absl::StatusOr<std::string> metrics = HttpGet(server->metrics_port(), "/metrics");
      queued = metrics.ok() && SampleValue(*metrics, "partplan_planner_queue_depth") == 1;
      if (!queued) absl::SleepFor(absl::Milliseconds(2));
    }
    EXPECT_TRUE(queued) << (second.done() ? Describe(second.reply().status) : "neither");

    sink->release.Notify();
    ASSERT_TRUE(first.Wait(kTestTimeout));
    ASSERT_TRUE(second.Wait(kTestTimeout));
    EXPECT_TRUE(first.reply().status.ok()) << Describe(first.reply().status);
    EXPECT_TRUE(second.reply().status.ok()) << Describe(second.reply().status);
  }
  spdlog::set_default_logger(previous);
}

}  // namespace
}  // namespace partplan

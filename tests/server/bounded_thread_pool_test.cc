#include "server/bounded_thread_pool.h"

#include <atomic>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace partplan {
namespace {

using ScheduleResult = BoundedThreadPool::ScheduleResult;

TEST(BoundedThreadPoolTest, RunsEveryAcceptedTask) {
  std::atomic<int> ran{0};
  {
    BoundedThreadPool pool(4, 100);
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ(pool.TrySchedule([&ran] { ++ran; }), ScheduleResult::kScheduled);
    }
  }  // The destructor drains.
  EXPECT_EQ(ran.load(), 100);
}

TEST(BoundedThreadPoolTest, AcceptsThreadsPlusQueueDepthThenRefuses) {
  absl::Notification release;
  absl::BlockingCounter running(2);
  BoundedThreadPool pool(/*num_threads=*/2, /*max_queued=*/3);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(pool.TrySchedule([&] {
      running.DecrementCount();
      release.WaitForNotification();
    }),
              ScheduleResult::kScheduled);
  }
  running.Wait();  // Both threads busy.
  std::atomic<int> queued_ran{0};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(pool.TrySchedule([&queued_ran] { ++queued_ran; }), ScheduleResult::kScheduled);
  }
  EXPECT_EQ(pool.TrySchedule([] {}), ScheduleResult::kQueueFull);

  release.Notify();
  pool.Shutdown();
  EXPECT_EQ(queued_ran.load(), 3);
}

TEST(BoundedThreadPoolTest, ZeroQueueDepthAcceptsOnlyIdleThreads) {
  absl::Notification release;
  BoundedThreadPool pool(/*num_threads=*/1, /*max_queued=*/0);
  // Right after construction, before the worker ever ran.
  ASSERT_EQ(pool.TrySchedule([&release] { release.WaitForNotification(); }),
            ScheduleResult::kScheduled);
  EXPECT_EQ(pool.TrySchedule([] {}), ScheduleResult::kQueueFull);
  release.Notify();
}

TEST(BoundedThreadPoolTest, RefusesAfterShutdown) {
  BoundedThreadPool pool(1, 1);
  pool.Shutdown();
  EXPECT_EQ(pool.TrySchedule([] {}), ScheduleResult::kShutDown);
  pool.Shutdown();  // Idempotent.
}

}  // namespace
}  // namespace partplan

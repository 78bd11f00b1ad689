#include "server/bounded_thread_pool.h"

#include <utility>

namespace partplan {

BoundedThreadPool::BoundedThreadPool(int num_threads, int max_queued)
    : max_queued_(max_queued < 0 ? 0 : max_queued) {
  if (num_threads < 1) num_threads = 1;
  // Counted idle from the start, not from when each thread first runs, so
  // that a task scheduled right after construction is never refused.
  idle_workers_ = num_threads;
  workers_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

BoundedThreadPool::~BoundedThreadPool() { Shutdown(); }

void BoundedThreadPool::Slot::Release() {
  if (released_) return;
  released_ = true;
  absl::MutexLock lock(&pool_->mu_);
  ++pool_->idle_workers_;
}

BoundedThreadPool::ScheduleResult BoundedThreadPool::TrySchedule(std::function<void()> task) {
  return TrySchedule(std::function<void(Slot&)>([task = std::move(task)](Slot&) { task(); }));
}

BoundedThreadPool::ScheduleResult BoundedThreadPool::TrySchedule(
    std::function<void(Slot&)> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return ScheduleResult::kShutDown;
  // Tasks already queued will take the idle workers first; only the idle
  // workers left over, plus the queue's own room, can take this one.
  const int waiting = static_cast<int>(queue_.size());
  if (waiting >= idle_workers_ + max_queued_) return ScheduleResult::kQueueFull;
  queue_.push_back(std::move(task));
  return ScheduleResult::kScheduled;
}

void BoundedThreadPool::Shutdown() {
  absl::MutexLock join_lock(&join_mu_);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

bool BoundedThreadPool::HasWorkOrStopping() const { return !queue_.empty() || stopping_; }

void BoundedThreadPool::WorkerLoop() {
  while (true) {
    std::function<void(Slot&)> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &BoundedThreadPool::HasWorkOrStopping));
      // Accepted tasks run even when stopping: each one owes its caller an
      // answer.
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      --idle_workers_;
    }
    Slot slot(this);
    task(slot);
    task = nullptr;  // Release what it captured before taking more work.
    slot.Release();  // Unless the task did.
  }
}

}  // namespace partplan

// BoundedThreadPool: a fixed set of worker threads behind a queue of bounded
// depth, for work that must be refused rather than piled up when the server
// is saturated (a planner call can take seconds; an unbounded queue would
// only turn overload into deadline misses and memory growth).
//
//   BoundedThreadPool pool(/*num_threads=*/8, /*max_queued=*/64);
//   switch (pool.TrySchedule([] { Plan(); })) {
//     case BoundedThreadPool::ScheduleResult::kScheduled: break;
//     case BoundedThreadPool::ScheduleResult::kQueueFull:  // answer RESOURCE_EXHAUSTED
//     case BoundedThreadPool::ScheduleResult::kShutDown:   // answer UNAVAILABLE
//   }
//   pool.Shutdown();   // runs what is queued, then joins the workers
//
// A task is accepted when a worker is idle or fewer than `max_queued` tasks
// wait, so at most num_threads + max_queued tasks are ever accepted and not
// finished. A task scheduled with a Slot may give its worker back before it
// returns (Slot::Release): a server releases the slot just before it answers
// the call, so that a client holding its answer finds the slot free, however
// long the worker then takes to get back to the queue:
//
//   pool.TrySchedule([](BoundedThreadPool::Slot& slot) {
//     Plan();
//     slot.Release();   // counted idle from here
//     Answer();         // a task accepted meanwhile runs once this returns
//   });
//
// At most num_threads + max_queued tasks are then accepted and not finished
// or released. All methods are thread-safe.
#ifndef PARTPLAN_SERVER_BOUNDED_THREAD_POOL_H_
#define PARTPLAN_SERVER_BOUNDED_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace partplan {

class BoundedThreadPool {
 public:
  enum class ScheduleResult { kScheduled, kQueueFull, kShutDown };

  // A running task's hold on its worker. Only the task's own thread uses it.
  class Slot {
   public:
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;

    // Counts the worker idle from now on, so that one more task is accepted;
    // it waits until this task returns. Idempotent; a task that never calls
    // it gives its slot back when it returns.
    void Release();

   private:
    friend class BoundedThreadPool;
    explicit Slot(BoundedThreadPool* pool) : pool_(pool) {}

    BoundedThreadPool* const pool_;
    bool released_ = false;
  };

  // `num_threads` >= 1, `max_queued` >= 0 (0: accept only when a worker is
  // idle).
  BoundedThreadPool(int num_threads, int max_queued);
  // Shutdown().
  ~BoundedThreadPool();

  BoundedThreadPool(const BoundedThreadPool&) = delete;
  BoundedThreadPool& operator=(const BoundedThreadPool&) = delete;

  // Queues `task` for a worker, or refuses it at once without running it.
  ScheduleResult TrySchedule(std::function<void()> task);
  // The same for a task that may release its slot before it returns.
  ScheduleResult TrySchedule(std::function<void(Slot&)> task);

  // Refuses new tasks, lets the workers finish every accepted task, and joins
  // them. Idempotent.
  void Shutdown();

 private:
  void WorkerLoop();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_queued_;
  absl::Mutex mu_;
  std::deque<std::function<void(Slot&)>> queue_ ABSL_GUARDED_BY(mu_);
  // Workers not running a task, or running one that released its slot.
  int idle_workers_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;  // Joined by the first Shutdown() only.
  absl::Mutex join_mu_;               // Serialises Shutdown() callers.
};

}  // namespace partplan

#endif  // PARTPLAN_SERVER_BOUNDED_THREAD_POOL_H_

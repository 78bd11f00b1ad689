// CancellationToken: how a caller stops a running planner.
//
// The server creates one token per call, with the call's deadline, and
// cancels it when the client goes away or the server drains. Every planner
// polls it inside its loops and returns the token's status when it fires:
//
//   CancellationToken token(absl::Now() + absl::Seconds(5));
//   ...                                 // on another thread: token.Cancel();
//   for (int i = 0; i < n; ++i) {
//     if (i % kPollInterval == 0) PARTPLAN_RETURN_IF_ERROR(token.Check());
//     ...
//   }
#ifndef PARTPLAN_PLANNER_BASE_CANCELLATION_H_
#define PARTPLAN_PLANNER_BASE_CANCELLATION_H_

#include <atomic>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace partplan {

class CancellationToken {
 public:
  // Loops poll the token once per this many iterations: often enough to stop
  // within microseconds, rarely enough that the clock read costs nothing.
  static constexpr int kPollInterval = 4096;

  // A token that fires only when cancelled.
  CancellationToken() = default;
  // A token that also fires once `deadline` has passed.
  explicit CancellationToken(absl::Time deadline) : deadline_(deadline) {}

  CancellationToken(const CancellationToken&) = delete;
  CancellationToken& operator=(const CancellationToken&) = delete;

  // Fires the token. Thread-safe; idempotent.
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }

  // OK while the work may go on; CANCELLED or DEADLINE_EXCEEDED once not.
  absl::Status Check() const {
    if (cancelled_.load(std::memory_order_relaxed)) {
      return absl::CancelledError("planning cancelled");
    }
    if (deadline_ != absl::InfiniteFuture() && absl::Now() >= deadline_) {
      return absl::DeadlineExceededError("planning deadline exceeded");
    }
    return absl::OkStatus();
  }

  // Check() every kPollInterval-th call with `iteration`, OK otherwise.
  absl::Status CheckEvery(int64_t iteration) const {
    return iteration % kPollInterval == 0 ? Check() : absl::OkStatus();
  }

  // For a loop whose steps differ in size (a step calls something linear in
  // a partition): adds the step's `units` of work to `*work`, and Check()s
  // when the sum was at or passes a multiple of kPollInterval (so at the
  // first step, as CheckEvery(0) does); OK otherwise. Counters shared with
  // CheckEvery count from 0 (CheckEvery(work++)).
  absl::Status CheckWork(int64_t units, int64_t* work) const {
    const int64_t before = *work;
    *work += units;
    return before % kPollInterval == 0 || before / kPollInterval != *work / kPollInterval
               ? Check()
               : absl::OkStatus();
  }

 private:
  std::atomic<bool> cancelled_{false};
  absl::Time deadline_ = absl::InfiniteFuture();
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_BASE_CANCELLATION_H_

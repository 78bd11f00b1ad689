// The schedule options and token the training tests share.
//
//   const PipelineTimeline timeline =
//       *SimulateSchedule(Options(PipelineSchedule::k1F1B, 4, 8), costs, NoDeadline());
#ifndef PARTPLAN_TESTS_PLANNER_TRAINING_SCHEDULE_OPTIONS_H_
#define PARTPLAN_TESTS_PLANNER_TRAINING_SCHEDULE_OPTIONS_H_

#include "absl/time/time.h"
#include "planner/base/cancellation.h"
#include "planner/training/schedule.h"

namespace partplan {

inline const CancellationToken& NoDeadline() {
  static const CancellationToken* token = new CancellationToken(absl::InfiniteFuture());
  return *token;
}

inline ScheduleOptions Options(PipelineSchedule schedule, int devices, int micro_batches,
                               int chunks = 1) {
  ScheduleOptions options;
  options.schedule = schedule;
  options.devices = devices;
  options.micro_batches = micro_batches;
  options.chunks_per_device = chunks;
  return options;
}

}  // namespace partplan

#endif  // PARTPLAN_TESTS_PLANNER_TRAINING_SCHEDULE_OPTIONS_H_

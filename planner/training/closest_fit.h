// When no plan fits (internal to stage_search): whether any plan fits
// within an allowance of bytes per device, and the FAILED_PRECONDITION that
// names the device short the most in the plan that comes closest.
//
//   PARTPLAN_ASSIGN_OR_RETURN(bool fits, FitsWithAllowance(options, table,
//       devices, /*allowance=*/0, token, &cuts, &recompute));
//   return NoPlan(options, table, devices, token);
#ifndef PARTPLAN_PLANNER_TRAINING_CLOSEST_FIT_H_
#define PARTPLAN_PLANNER_TRAINING_CLOSEST_FIT_H_

#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/training/stage_search.h"
#include "planner/training/stage_table.h"

namespace partplan {
namespace stage_search_internal {

// With one chunk per device: whether some plan has every device within its
// memory plus `allowance` bytes, and if so such cuts and choices. Stage by
// stage, the starts reachable so far each reach an interval of ends per
// recompute choice (memory only grows with the end): O(P n log n).
absl::StatusOr<bool> FitsWithAllowance(const StageSearchOptions& options, const StageTable& table,
                                       const std::vector<TrainingDevice>& devices, double allowance,
                                       const CancellationToken& token, std::vector<int>* cuts,
                                       std::vector<bool>* recompute);

// The device short the most in the plan of `cuts` and `recompute`: its
// index, its peak and by how many bytes (negative when every device fits).
struct Shortfall {
  int device = 0;
  double peak = 0;
  double bytes = -std::numeric_limits<double>::infinity();
};
Shortfall LargestShortfall(const StageTable& table, const std::vector<TrainingDevice>& devices,
                           const std::vector<int>& cuts, const std::vector<bool>& recompute);

// A plan's cuts and recompute choices.
struct ClosePlan {
  std::vector<int> cuts;  // empty: none
  std::vector<bool> recompute;
};

// The FAILED_PRECONDITION when no plan exists: the pins, or memory, naming
// the device short the most, and by how much, in the plan that comes
// closest: with one chunk per device, the least largest shortfall over
// every cut and recompute choice (bisection on FitsWithAllowance, to the
// byte); with several, the better of the nodes spread evenly and `close`
// (null: none; stage_search.cc's ClosestPlan).
absl::Status NoPlan(const StageSearchOptions& options, const StageTable& table,
                    const std::vector<TrainingDevice>& devices, const CancellationToken& token,
                    const ClosePlan* close);

}  // namespace stage_search_internal
}  // namespace partplan

#endif  // PARTPLAN_PLANNER_TRAINING_CLOSEST_FIT_H_

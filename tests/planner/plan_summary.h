// The summary of a response that holds a plan: tests comparing two
// responses to one request copy its planner_seconds, the time each call took
// for itself, from one to the other first.
//
//   SummaryOf(expected)->set_planner_seconds(SummaryOf(actual)->planner_seconds());
//   EXPECT_EQ(expected.SerializeAsString(), actual.SerializeAsString());
#ifndef PARTPLAN_TESTS_PLANNER_PLAN_SUMMARY_H_
#define PARTPLAN_TESTS_PLANNER_PLAN_SUMMARY_H_

#include "partplan/v1/planner_service.pb.h"

namespace partplan {

inline v1::PlanSummary* SummaryOf(v1::PartitionGraphResponse& response) {
  return response.mutable_plan()->mutable_summary();
}
inline v1::PlanSummary* SummaryOf(v1::PlanResponse& response) {
  return response.mutable_plan()->mutable_summary();
}
inline v1::PlanSummary* SummaryOf(v1::ShardGraphResponse& response) {
  return response.mutable_summary();
}

}  // namespace partplan

#endif  // PARTPLAN_TESTS_PLANNER_PLAN_SUMMARY_H_

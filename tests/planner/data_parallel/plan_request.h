// PlanRequest: a PlanDataParallelRequest planned on its imported graph the
// way the entry point plans it (planner/api/plan_data_parallel.cc): the
// inventory imported once (default limits), the options validated, the
// planner run and its plan written as the response. For the tests and
// tools that start from a request.
//
//   PARTPLAN_ASSIGN_OR_RETURN(CompactGraph graph,
//                             ImportGraph(request.graph(), InputLimits(), token));
//   absl::StatusOr<v1::PlanDataParallelResponse> response =
//       PlanRequest(graph, request, token);
#ifndef PARTPLAN_TESTS_PLANNER_DATA_PARALLEL_PLAN_REQUEST_H_
#define PARTPLAN_TESTS_PLANNER_DATA_PARALLEL_PLAN_REQUEST_H_

#include "absl/status/statusor.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/base/limits.h"
#include "planner/base/status_util.h"
#include "planner/data_parallel/data_parallel_options.h"
#include "planner/data_parallel/data_parallel_plan.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"
#include "planner/wire/data_parallel_response.h"

namespace partplan {

inline absl::StatusOr<v1::PlanDataParallelResponse> PlanRequest(
    const CompactGraph& graph, const v1::PlanDataParallelRequest& request,
    const CancellationToken& token) {
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices,
                            ImportDevices(request.devices(), InputLimits()));
  PARTPLAN_ASSIGN_OR_RETURN(const DataParallelOptions options,
                            DataParallelOptions::FromRequest(request, graph, devices));
  PARTPLAN_ASSIGN_OR_RETURN(const DataParallelPlan plan,
                            PlanDataParallelPlan(graph, options, devices, token));
  v1::PlanDataParallelResponse response;
  PARTPLAN_RETURN_IF_ERROR(DataParallelResponseFromPlan(graph, plan, token, &response));
  return response;
}

}  // namespace partplan

#endif  // PARTPLAN_TESTS_PLANNER_DATA_PARALLEL_PLAN_REQUEST_H_

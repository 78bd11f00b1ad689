// The PlanDataParallel response, written from a DataParallelPlan
// (data_parallel/data_parallel_plan.h): the plan's nodes and redistributions
// by name, its placements as v1::Placement.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const DataParallelPlan plan,
//                             PlanDataParallelPlan(graph, options, devices, token));
//   PARTPLAN_RETURN_IF_ERROR(
//       DataParallelResponseFromPlan(graph, plan, token, response));
//
// A placement states only what its kind has: `dim` and `interleave` (when
// above 1) for a Shard; `reduce_op` for a Partial and a local scalar's
// Shard; `scale` when above 1. A node that is not a tensor has no
// placement.
#ifndef PARTPLAN_PLANNER_WIRE_DATA_PARALLEL_RESPONSE_H_
#define PARTPLAN_PLANNER_WIRE_DATA_PARALLEL_RESPONSE_H_

#include "absl/status/status.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/data_parallel/data_parallel_plan.h"
#include "planner/graph/graph.h"

namespace partplan {

// Fills `*response` (which may live on an arena, and is cleared first) with
// the plan `graph`'s planner returned. Polls `token` by the nodes and
// redistributions it writes; on error `*response` is unspecified.
absl::Status DataParallelResponseFromPlan(const CompactGraph& graph,
                                          const DataParallelPlan& plan,
                                          const CancellationToken& token,
                                          v1::PlanDataParallelResponse* response);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_WIRE_DATA_PARALLEL_RESPONSE_H_

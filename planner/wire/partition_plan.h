// WritePartitionPlan: a PartitionerPlan (fx/partitioner.h) as the
// v1::PartitionPlan that PartitionGraph and Plan answer, its nodes by index.
// A plan by name is written from this one and the graph's names
// (plan_with_names.h), so there is one writer of plans.
//
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionerPlan planned,
//                             PartitionGraphPlan(graph, devices, options, token));
//   PARTPLAN_RETURN_IF_ERROR(
//       WritePartitionPlan(graph, devices, planned, token, response.mutable_plan()));
//
// Fills every field but summary.planner_seconds, which the entry point times.
// Polls `token` by the entries written.
#ifndef PARTPLAN_PLANNER_WIRE_PARTITION_PLAN_H_
#define PARTPLAN_PLANNER_WIRE_PARTITION_PLAN_H_

#include "absl/status/status.h"
#include "partplan/v1/plan.pb.h"
#include "planner/base/cancellation.h"
#include "planner/fx/partitioner.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

absl::Status WritePartitionPlan(const CompactGraph& graph, const DeviceList& devices,
                                const PartitionerPlan& planned, const CancellationToken& token,
                                v1::PartitionPlan* plan);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_WIRE_PARTITION_PLAN_H_

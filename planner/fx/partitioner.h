// PartitionGraphPlan: torch.fx's Partitioner.partition_graph, end to end.
//
// Runs torch.fx's checks in its order, then the chosen mode, then places the
// partitions on devices and derives the partition DAG of the split module:
//   1. no devices, no call_* node, a bad AOT_BASED plan: INVALID_ARGUMENT,
//      found by PartitionerOptionsFromConfig (partitioner_options.h)
//   3. the graph fits the largest device   -> one partition on it, any mode
//   4. the graph exceeds all devices' sum  -> FAILED_PRECONDITION
//   5. the mode's partitioning, then best-fit placement of what it left
//      unplaced (FAILED_PRECONDITION naming the first partition that fits
//      nowhere; torch.fx's cost_aware and kl_based would return it on no
//      device). An OK plan has every partition on a device.
//
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionerOptions options,
//                             PartitionerOptionsFromConfig(config, graph, devices, token));
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionerPlan plan,
//                             PartitionGraphPlan(graph, devices, options, token));
//   // wire/partition_plan.h writes it as a v1::PartitionPlan.
#ifndef PARTPLAN_PLANNER_FX_PARTITIONER_H_
#define PARTPLAN_PLANNER_FX_PARTITIONER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "planner/base/cancellation.h"
#include "planner/fx/device_mapping.h"
#include "planner/fx/latency.h"
#include "planner/fx/partition.h"
#include "planner/fx/partitioner_options.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"
#include "planner/split/module_split.h"

namespace partplan {

// A plan of partitions on devices, as PartitionPlan reports it: the
// partitions with their devices and DAG, split_module's view of them, their
// latency, and what each device holds.
struct PartitionerPlan {
  std::string planner;  // e.g. "partitioner/size_based"
  PartitionSet set;
  ModuleSplit split;
  PlanLatency latency;
  std::vector<DeviceLoad> holdings;  // per device, DeviceHoldings
  // PlanSummary.notes: what the figures do not say, one sentence each.
  std::vector<std::string> notes;
  // PlanSummary.bound: what bounds the plan (the entry point says it).
  std::string bound;
};

absl::StatusOr<PartitionerPlan> PartitionGraphPlan(const CompactGraph& graph,
                                                   const DeviceList& devices,
                                                   const PartitionerOptions& options,
                                                   const CancellationToken& token);

// The PartitionerPlan of partitions any planner made: split_module's view,
// the latency and the devices' holdings. A cycle between partitions is
// INVALID_ARGUMENT on `assignment_field`.
absl::StatusOr<PartitionerPlan> DescribePartitions(const CompactGraph& graph,
                                                   const DeviceList& devices, PartitionSet set,
                                                   absl::string_view planner,
                                                   absl::string_view assignment_field,
                                                   const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_PARTITIONER_H_

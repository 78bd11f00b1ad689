// PartitionGraphPlan: torch.fx's Partitioner.partition_graph, end to end.
//
// Runs torch.fx's checks in its order, then the chosen mode, then places the
// partitions on devices and derives the partition DAG of the split module:
//   1. no devices                          -> INVALID_ARGUMENT (devices)
//   2. no call_* node                      -> INVALID_ARGUMENT (graph.nodes)
//   3. the graph fits the largest device   -> one partition on it, any mode
//   4. the graph exceeds all devices' sum  -> FAILED_PRECONDITION
//   5. the mode's partitioning, then best-fit placement of what it left
//      unplaced (FAILED_PRECONDITION naming the first partition that fits
//      nowhere; torch.fx's cost_aware and kl_based would return it on no
//      device). An OK plan has every partition on a device.
//
//   PARTPLAN_RETURN_IF_ERROR(PartitionGraphPlan(graph, devices, request.config(),
//                                               request.node_references(), token, &plan));
#ifndef PARTPLAN_PLANNER_FX_PARTITIONER_H_
#define PARTPLAN_PLANNER_FX_PARTITIONER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "partplan/v1/plan.pb.h"
#include "planner/base/cancellation.h"
#include "planner/fx/device_mapping.h"
#include "planner/fx/partition.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

// Fills `*plan` (which may live on an arena), naming its nodes as
// `node_references` asks.
absl::Status PartitionGraphPlan(const CompactGraph& graph, const DeviceList& devices,
                                const v1::PartitionerConfig& config,
                                v1::NodeReferences node_references, const CancellationToken& token,
                                v1::PartitionPlan* plan);

// The PartitionPlan of partitions any planner made: assignments (by name or
// by index, as `node_references` asks), partitions with split_module's
// inputs and outputs, the DAG, what each device holds (DeviceHoldings) and
// the latency report. A cycle between partitions is INVALID_ARGUMENT on
// `assignment_field`.
absl::Status DescribePlan(const CompactGraph& graph, const DeviceList& devices,
                          const PartitionSet& set, absl::string_view planner,
                          absl::string_view assignment_field,
                          v1::NodeReferences node_references, const CancellationToken& token,
                          v1::PartitionPlan* plan);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_PARTITIONER_H_

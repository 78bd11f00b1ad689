// PartitionerOptions: what PartitionGraphPlan is asked to do, validated once
// at the edge from the request's PartitionerConfig against the graph and the
// inventory, so that the partitioners take plain values.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const PartitionerOptions options,
//                             PartitionerOptionsFromConfig(request.config(), graph, devices, token));
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionerPlan plan,
//                             PartitionGraphPlan(graph, devices, options, token));
//
// The checks run in torch.fx's order, each INVALID_ARGUMENT naming its field:
// the mode; an inventory with devices (CheckPartitionable); a graph with a
// call_* node; for AOT_BASED, the partition_devices entries (ids 0..P-1, each
// once, devices that exist, each once per entry) and the node_partitions
// entries (nodes that exist, not the output, each once, partitions that have
// an entry).
#ifndef PARTPLAN_PLANNER_FX_PARTITIONER_OPTIONS_H_
#define PARTPLAN_PLANNER_FX_PARTITIONER_OPTIONS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "partplan/v1/plan.pb.h"
#include "planner/base/cancellation.h"
#include "planner/fx/aot_partitioner.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

// torch.fx's Partitioner modes.
enum class PartitionerMode { kSizeBased, kSparseNn, kCostAware, kKlBased, kAotBased };

// The mode's name in plans: "size_based", "sparse_nn", ...
absl::string_view PartitionerModeName(PartitionerMode mode);

struct PartitionerOptions {
  PartitionerMode mode = PartitionerMode::kSizeBased;
  // torch.fx's saturate_host: copy the partitions onto the idle devices.
  bool saturate_host = false;
  // The caller's plan, for kAotBased.
  AotAssignment aot;
};

// What every mode needs: a device, and a call_* node to partition.
absl::Status CheckPartitionable(const CompactGraph& graph, const DeviceList& devices);

// Polls `token` by the entries and devices it reads.
absl::StatusOr<PartitionerOptions> PartitionerOptionsFromConfig(const v1::PartitionerConfig& config,
                                                                const CompactGraph& graph,
                                                                const DeviceList& devices,
                                                                const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_PARTITIONER_OPTIONS_H_

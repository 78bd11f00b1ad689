// DataParallelOptions: what PlanDataParallelPlan works with, validated at
// the edge from a PlanDataParallelRequest: the placeholders' roles by node
// id, the batch dim, the parameter style and the size of the data-parallel
// mesh axis.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices,
//                             ImportDevices(request.devices(), limits));
//   PARTPLAN_ASSIGN_OR_RETURN(const DataParallelOptions options,
//                             DataParallelOptions::FromRequest(request, graph, devices));
//   options.group_size;        // devices along the data-parallel mesh axis
//   options.batch.roles[v];    // the role of placeholder v
//
// FromRequest's errors are INVALID_ARGUMENT naming the request field, in
// this order: `roles[2].node` (unknown, not a placeholder, named twice),
// `roles[2].role`, `input_batch_dim` (negative), `style`, `devices.devices`
// (a data-parallel plan needs at least one device), `data_parallel_axis` (a
// mesh axis the inventory does not name, or none given for an N-D mesh).
// The inventory itself is checked once, by the ImportDevices that made
// `devices` (devices.h), with the caller's limits.
#ifndef PARTPLAN_PLANNER_DATA_PARALLEL_DATA_PARALLEL_OPTIONS_H_
#define PARTPLAN_PLANNER_DATA_PARALLEL_DATA_PARALLEL_OPTIONS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/data_parallel/batch_dim_analysis.h"
#include "planner/data_parallel/parameter_placement.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

struct DataParallelOptions {
  BatchDimOptions batch;  // roles by node id, the batch dim (set up for the graph)
  DataParallelStyle style = DataParallelStyle::kMemoryAware;
  int32_t group_size = 1;  // devices along the data-parallel axis

  // The request's options checked against `graph` and `devices` (the
  // request's inventory, imported), which the result is for.
  static absl::StatusOr<DataParallelOptions> FromRequest(
      const v1::PlanDataParallelRequest& request, const CompactGraph& graph,
      const DeviceList& devices);
};

// The role a request gives a placeholder (kUnspecified for an unknown one,
// which FromRequest refuses).
InputRole InputRoleOf(v1::PlaceholderRole role);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_DATA_PARALLEL_DATA_PARALLEL_OPTIONS_H_

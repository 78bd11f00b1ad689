// DataParallelOptions: a PlanDataParallelRequest's roles, batch dim, mesh
// axis, style and inventory, checked against the graph and resolved into
// what the planner works with.
//
//   DataParallelOptions options = DataParallelOptions::FromRequest(request);
//   PARTPLAN_RETURN_IF_ERROR(options.CheckAndSetup(graph));
//   options.group_size;        // devices along the data-parallel mesh axis
//   options.batch.roles[v];    // the role of placeholder v
//
// CheckAndSetup's errors are INVALID_ARGUMENT naming the request field:
// `roles[2].node` (unknown, not a placeholder, named twice), `roles[2].role`,
// `style`, `devices...` (see devices.h; at least one device is needed),
// `data_parallel_axis` (a mesh axis the inventory does not name, or none
// given for an N-D mesh), `input_batch_dim` (negative).
#ifndef PARTPLAN_PLANNER_DATA_PARALLEL_DATA_PARALLEL_OPTIONS_H_
#define PARTPLAN_PLANNER_DATA_PARALLEL_DATA_PARALLEL_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/data_parallel/batch_dim_analysis.h"
#include "planner/graph/graph.h"

namespace partplan {

struct DataParallelOptions {
  // As asked (FromRequest copies them from the request).
  google::protobuf::RepeatedPtrField<v1::PlaceholderRoleEntry> roles;
  int32_t input_batch_dim = 0;
  v1::DeviceInventory devices;
  std::string data_parallel_axis;
  v1::DataParallelStyle style = v1::STYLE_UNSPECIFIED;

  // Set by CheckAndSetup.
  BatchDimOptions batch;                                    // roles by node id, the batch dim
  v1::DataParallelStyle resolved_style = v1::MEMORY_AWARE;  // never STYLE_UNSPECIFIED
  int32_t group_size = 1;                                   // devices along the data-parallel axis
  int64_t device_memory_bytes = 0;                          // the smallest device's memory
  std::string smallest_device;                              // its name (the first such)

  static DataParallelOptions FromRequest(const v1::PlanDataParallelRequest& request);

  absl::Status CheckAndSetup(const CompactGraph& graph);
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_DATA_PARALLEL_DATA_PARALLEL_OPTIONS_H_

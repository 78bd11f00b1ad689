#include "planner/data_parallel/data_parallel_options.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

// The size of the data-parallel axis: the named mesh axis, the only one,
// or every device when the inventory has no mesh.
absl::StatusOr<int32_t> DataParallelGroupSize(const v1::DeviceInventory& devices,
                                              const std::string& axis) {
  const auto& shape = devices.mesh_shape();
  const auto& names = devices.mesh_axis_names();
  const std::string known = names.empty()
                                ? std::string("the inventory names no mesh axes")
                                : absl::StrCat("the mesh axes are ", absl::StrJoin(names, ", "));
  if (axis.empty()) {
    if (shape.empty()) return devices.devices_size();
    if (shape.size() == 1) return shape[0];
    return InvalidFieldError(
        "data_parallel_axis",
        absl::StrCat("a ", shape.size(), "-D mesh needs the data-parallel axis named (", known,
                     ")"));
  }
  for (int i = 0; i < names.size(); ++i) {
    if (names[i] == axis) return shape[i];
  }
  return InvalidFieldError("data_parallel_axis",
                           absl::StrCat("no mesh axis is called '", axis, "' (", known, ")"));
}

// The request's style; STYLE_UNSPECIFIED is MEMORY_AWARE.
absl::StatusOr<DataParallelStyle> StyleOf(v1::DataParallelStyle style) {
  switch (style) {
    case v1::REPLICATE:
      return DataParallelStyle::kReplicate;
    case v1::FULLY_SHARD:
      return DataParallelStyle::kFullyShard;
    case v1::STYLE_UNSPECIFIED:
    case v1::MEMORY_AWARE:
      return DataParallelStyle::kMemoryAware;
    default:
      return InvalidFieldError("style", absl::StrCat("unknown style ", style));
  }
}

}  // namespace

InputRole InputRoleOf(v1::PlaceholderRole role) {
  switch (role) {
    case v1::PARAMETER:
      return InputRole::kParameter;
    case v1::OPTIMIZER_STATE:
      return InputRole::kOptimizerState;
    case v1::ACTIVATION:
      return InputRole::kActivation;
    default:
      return InputRole::kUnspecified;
  }
}

absl::StatusOr<DataParallelOptions> DataParallelOptions::FromRequest(
    const v1::PlanDataParallelRequest& request, const CompactGraph& graph,
    const DeviceList& devices) {
  DataParallelOptions options;
  BatchDimOptions& batch = options.batch;
  batch.roles.assign(graph.num_nodes(), InputRole::kUnspecified);
  std::vector<int> named_by(graph.num_nodes(), -1);
  const auto& roles = request.roles();
  for (int i = 0; i < roles.size(); ++i) {
    const v1::PlaceholderRoleEntry& entry = roles[i];
    const std::string at = absl::StrCat("roles[", i, "]");
    const NodeId v = graph.Find(entry.node());
    if (v < 0) {
      return InvalidFieldError(absl::StrCat(at, ".node"),
                               absl::StrCat("no node is called '", entry.node(), "'"));
    }
    if (graph.op(v) != v1::PLACEHOLDER) {
      return InvalidFieldError(
          absl::StrCat(at, ".node"),
          absl::StrCat("node '", entry.node(), "' is a ", v1::Op_Name(graph.op(v)),
                       "; roles are given to placeholders"));
    }
    if (named_by[v] >= 0) {
      return InvalidFieldError(absl::StrCat(at, ".node"),
                               absl::StrCat("placeholder '", entry.node(),
                                            "' already has a role (roles[", named_by[v], "])"));
    }
    if (!v1::PlaceholderRole_IsValid(entry.role())) {
      return InvalidFieldError(absl::StrCat(at, ".role"),
                               absl::StrCat("unknown role ", entry.role()));
    }
    named_by[v] = i;
    batch.roles[v] = InputRoleOf(entry.role());
  }
  batch.input_batch_dim = request.input_batch_dim();
  PARTPLAN_RETURN_IF_ERROR(batch.CheckAndSetup(graph));

  PARTPLAN_ASSIGN_OR_RETURN(options.style, StyleOf(request.style()));
  if (devices.empty()) {
    return InvalidFieldError("devices.devices", "a data-parallel plan needs at least one device");
  }
  PARTPLAN_ASSIGN_OR_RETURN(options.group_size,
                            DataParallelGroupSize(request.devices(), request.data_parallel_axis()));
  return options;
}

}  // namespace partplan

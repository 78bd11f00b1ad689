// Requests built from command-line flags, for the `partition`, `plan` and
// `validate` subcommands: a graph from a file plus a device inventory and
// partitioner options described by a few flags.
//
//   partplan::cli::PlannerFlags flags;
//   flags.device_memory = "16GiB,16GiB";
//   flags.mode = "cost_aware";
//   absl::StatusOr<partplan::v1::PartitionGraphRequest> request =
//       partplan::cli::BuildPartitionGraphRequest(graph, flags);
//   // devices gpu0 and gpu1, logical ids 0 and 1, 16 GiB each; COST_AWARE.
//
// Errors are INVALID_ARGUMENT naming the flag, e.g.
// "--device_memory: invalid byte size '12XB': ...".
#ifndef PARTPLAN_CLIENT_CLI_REQUEST_BUILDER_H_
#define PARTPLAN_CLIENT_CLI_REQUEST_BUILDER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace cli {

// The planning flags as typed, before validation.
struct PlannerFlags {
  // Comma-separated device memory sizes, one device per entry ("16GiB,8GiB");
  // or a single size shared by `device_count` devices.
  std::string device_memory;
  // Number of devices; 0 means one per `device_memory` entry.
  int device_count = 0;
  // PartitionerConfig.Mode in lower case: size_based, sparse_nn, cost_aware,
  // kl_based, aot_based.
  std::string mode = "size_based";
  // Bytes per second between devices (a byte size, e.g. "12GB" or "1.2e10");
  // empty leaves the proto default (free transfers).
  std::string transfer_rate;
  // PartitionerConfig.saturate_host.
  bool saturate_host = false;
  // The request's NodeReferences in lower case without its prefix: names or
  // indices.
  std::string node_references = "names";
};

// `status` with the flag whose value caused it in front, e.g.
// "--graph: cannot read 'g.json': No such file or directory".
absl::Status FlagError(absl::string_view flag, const absl::Status& status);

// Parses a PartitionerConfig.Mode by its name, in any case ("kl_based").
absl::StatusOr<v1::PartitionerConfig::Mode> ParsePartitionMode(
    absl::string_view name);

// Parses a NodeReferences by its name without the prefix, in any case
// ("indices").
absl::StatusOr<v1::NodeReferences> ParseNodeReferences(absl::string_view name);

// Devices named gpu0, gpu1, ... with logical ids 0, 1, ... and the memory of
// `flags.device_memory`, plus the transfer rate.
absl::StatusOr<v1::DeviceInventory> BuildDeviceInventory(
    const PlannerFlags& flags);

// The partitioner options: mode and saturate_host.
absl::StatusOr<v1::PartitionerConfig> BuildPartitionerConfig(
    const PlannerFlags& flags);

absl::StatusOr<v1::PartitionGraphRequest> BuildPartitionGraphRequest(
    const v1::Graph& graph, const PlannerFlags& flags);

// A PlanRequest running the accelerator partitioner.
absl::StatusOr<v1::PlanRequest> BuildPlanRequest(const v1::Graph& graph,
                                                 const PlannerFlags& flags);

// Validation of the graph alone, or of the graph and the devices when
// `flags.device_memory` is set.
absl::StatusOr<v1::ValidateRequest> BuildValidateRequest(
    const v1::Graph& graph, const PlannerFlags& flags);

}  // namespace cli
}  // namespace partplan

#endif  // PARTPLAN_CLIENT_CLI_REQUEST_BUILDER_H_

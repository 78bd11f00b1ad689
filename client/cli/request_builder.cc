#include "client/cli/request_builder.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/types/optional.h"
#include "client/cli/byte_size.h"
#include "google/protobuf/descriptor.h"

namespace partplan {
namespace cli {

absl::Status FlagError(absl::string_view flag, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("--", flag, ": ", status.message()));
}

namespace {

absl::StatusOr<std::vector<int64_t>> ParseDeviceMemory(
    const PlannerFlags& flags) {
  if (flags.device_memory.empty()) {
    return absl::InvalidArgumentError(
        "--device_memory is required: the memory of each device, e.g. "
        "--device_memory=16GiB,16GiB or --devices=2 --device_memory=16GiB");
  }
  std::vector<int64_t> sizes;
  for (absl::string_view entry : absl::StrSplit(flags.device_memory, ',')) {
    absl::StatusOr<int64_t> bytes = ParseByteSize(entry);
    if (!bytes.ok()) return FlagError("device_memory", bytes.status());
    if (*bytes <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device_memory: device memory must be positive, got '",
                       entry, "'"));
    }
    sizes.push_back(*bytes);
  }
  if (flags.device_count < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--devices: must not be negative, got ", flags.device_count));
  }
  if (flags.device_count == 0) return sizes;
  if (sizes.size() == 1) {
    return std::vector<int64_t>(static_cast<size_t>(flags.device_count),
                                sizes.front());
  }
  if (sizes.size() != static_cast<size_t>(flags.device_count)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--devices=", flags.device_count, " but --device_memory lists ",
        sizes.size(), " sizes; give one size, or one per device"));
  }
  return sizes;
}

// The number of the value of `descriptor` named `prefix` followed by `name`
// in upper case, but `excluded`; otherwise an error on `--flag` listing the
// choices as typed (lower case, without the prefix).
absl::StatusOr<int> ParseEnumFlag(absl::string_view flag, absl::string_view what,
                                  absl::string_view name,
                                  const google::protobuf::EnumDescriptor* descriptor,
                                  absl::string_view prefix, absl::optional<int> excluded) {
  const google::protobuf::EnumValueDescriptor* value =
      descriptor->FindValueByName(absl::StrCat(prefix, absl::AsciiStrToUpper(name)));
  if (value != nullptr && value->number() != excluded) return value->number();
  std::vector<std::string> choices;
  for (int i = 0; i < descriptor->value_count(); ++i) {
    if (descriptor->value(i)->number() == excluded) continue;
    choices.push_back(absl::AsciiStrToLower(descriptor->value(i)->name().substr(prefix.size())));
  }
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": unknown ", what, " '", name,
                                                 "'; one of ", absl::StrJoin(choices, ", ")));
}

// The fields PartitionGraphRequest and PlanRequest share.
template <typename Request>
absl::Status BuildPartitionerInputs(const PlannerFlags& flags, v1::PartitionerConfig* config,
                                    Request* request) {
  absl::StatusOr<v1::DeviceInventory> built_devices =
      BuildDeviceInventory(flags);
  if (!built_devices.ok()) return built_devices.status();
  absl::StatusOr<v1::PartitionerConfig> built_config =
      BuildPartitionerConfig(flags);
  if (!built_config.ok()) return built_config.status();
  absl::StatusOr<v1::NodeReferences> node_references = ParseNodeReferences(flags.node_references);
  if (!node_references.ok()) return node_references.status();
  *request->mutable_devices() = *std::move(built_devices);
  *config = *std::move(built_config);
  request->set_node_references(*node_references);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::PartitionerConfig::Mode> ParsePartitionMode(
    absl::string_view name) {
  absl::StatusOr<int> mode =
      ParseEnumFlag("mode", "partition mode", name, v1::PartitionerConfig::Mode_descriptor(),
                    /*prefix=*/"", /*excluded=*/v1::PartitionerConfig::MODE_UNSPECIFIED);
  if (!mode.ok()) return mode.status();
  return static_cast<v1::PartitionerConfig::Mode>(*mode);
}

absl::StatusOr<v1::NodeReferences> ParseNodeReferences(absl::string_view name) {
  absl::StatusOr<int> value =
      ParseEnumFlag("node_references", "value", name, v1::NodeReferences_descriptor(),
                    /*prefix=*/"NODE_REFERENCES_", /*excluded=*/absl::nullopt);
  if (!value.ok()) return value.status();
  return static_cast<v1::NodeReferences>(*value);
}

absl::StatusOr<v1::DeviceInventory> BuildDeviceInventory(
    const PlannerFlags& flags) {
  absl::StatusOr<std::vector<int64_t>> sizes = ParseDeviceMemory(flags);
  if (!sizes.ok()) return sizes.status();
  v1::DeviceInventory inventory;
  for (size_t i = 0; i < sizes->size(); ++i) {
    v1::Device* device = inventory.add_devices();
    device->set_name(absl::StrCat("gpu", i));
    device->set_logical_id(static_cast<int32_t>(i));
    device->set_available_memory_bytes((*sizes)[i]);
  }
  if (!flags.transfer_rate.empty()) {
    absl::StatusOr<int64_t> rate = ParseByteSize(flags.transfer_rate);
    if (!rate.ok()) return FlagError("transfer_rate", rate.status());
    inventory.set_transfer_rate_bytes_per_second(static_cast<double>(*rate));
  }
  return inventory;
}

absl::StatusOr<v1::PartitionerConfig> BuildPartitionerConfig(
    const PlannerFlags& flags) {
  absl::StatusOr<v1::PartitionerConfig::Mode> mode =
      ParsePartitionMode(flags.mode);
  if (!mode.ok()) return mode.status();
  v1::PartitionerConfig config;
  config.set_mode(*mode);
  config.set_saturate_host(flags.saturate_host);
  return config;
}

absl::StatusOr<v1::PartitionGraphRequest> BuildPartitionGraphRequest(
    const v1::Graph& graph, const PlannerFlags& flags) {
  v1::PartitionGraphRequest request;
  const absl::Status status = BuildPartitionerInputs(flags, request.mutable_config(), &request);
  if (!status.ok()) return status;
  *request.mutable_graph() = graph;
  return request;
}

absl::StatusOr<v1::PlanRequest> BuildPlanRequest(const v1::Graph& graph,
                                                 const PlannerFlags& flags) {
  v1::PlanRequest request;
  const absl::Status status =
      BuildPartitionerInputs(flags, request.mutable_partitioner(), &request);
  if (!status.ok()) return status;
  *request.mutable_graph() = graph;
  return request;
}

absl::StatusOr<v1::ValidateRequest> BuildValidateRequest(
    const v1::Graph& graph, const PlannerFlags& flags) {
  v1::ValidateRequest request;
  *request.mutable_graph() = graph;
  if (!flags.device_memory.empty()) {
    absl::StatusOr<v1::DeviceInventory> devices = BuildDeviceInventory(flags);
    if (!devices.ok()) return devices.status();
    *request.mutable_devices() = *std::move(devices);
  }
  return request;
}

}  // namespace cli
}  // namespace partplan

#include "planner/graph/devices.h"

#include <cmath>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

bool IsFiniteNonNegative(double x) { return std::isfinite(x) && x >= 0; }

}  // namespace

absl::StatusOr<DeviceList> ImportDevices(const v1::DeviceInventory& inventory,
                                         const InputLimits& limits, absl::string_view field) {
  DeviceList result;
  const int64_t n = inventory.devices_size();
  if (n > limits.max_devices) {
    return InvalidFieldError(absl::StrCat(field, ".devices"),
                             absl::StrCat(n, " devices are above the limit of ",
                                          limits.max_devices, " (--max_devices)"));
  }
  absl::flat_hash_map<absl::string_view, int> index_of_name;
  result.devices_.reserve(n);
  // Each device's faults are its own: every device is checked, and the
  // request gets all their violations at once (up to kMaxFieldViolations).
  std::vector<FieldViolation> violations;
  auto check_device = [&](int i) -> absl::Status {
    const v1::Device& device = inventory.devices(i);
    const std::string at = absl::StrCat(field, ".devices[", i, "]");
    if (device.name().empty()) {
      return InvalidFieldError(absl::StrCat(at, ".name"), "the device has no name");
    }
    if (auto [it, inserted] = index_of_name.try_emplace(device.name(), i); !inserted) {
      return InvalidFieldError(absl::StrCat(at, ".name"),
                               absl::StrCat("duplicate device name '", device.name(),
                                            "' (first used by devices[", it->second, "])"));
    }
    if (device.logical_id() < 0) {
      return InvalidFieldError(absl::StrCat(at, ".logical_id"), "must not be negative");
    }
    if (auto [it, inserted] = result.index_of_logical_id_.try_emplace(device.logical_id(), i);
        !inserted) {
      return InvalidFieldError(absl::StrCat(at, ".logical_id"),
                               absl::StrCat("duplicate logical id ", device.logical_id(),
                                            " (first used by devices[", it->second, "])"));
    }
    if (device.available_memory_bytes() <= 0) {
      return InvalidFieldError(absl::StrCat(at, ".available_memory_bytes"),
                               absl::StrCat("device '", device.name(),
                                            "' must have positive memory, got ",
                                            device.available_memory_bytes()));
    }
    if (!IsFiniteNonNegative(device.compute_flops_per_second())) {
      return InvalidFieldError(absl::StrCat(at, ".compute_flops_per_second"),
                               "must be finite and not negative");
    }
    if (!IsFiniteNonNegative(device.memory_bandwidth_bytes_per_second())) {
      return InvalidFieldError(absl::StrCat(at, ".memory_bandwidth_bytes_per_second"),
                               "must be finite and not negative");
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < n; ++i) {
    const v1::Device& device = inventory.devices(i);
    if (const absl::Status checked = check_device(i); !checked.ok()) {
      std::vector<FieldViolation> found = FieldViolations(checked);
      violations.insert(violations.end(), found.begin(), found.end());
      if (violations.size() >= static_cast<size_t>(kMaxFieldViolations)) break;
      continue;
    }
    result.devices_.push_back(
        DeviceSpec{device.name(), device.available_memory_bytes(), device.logical_id()});
    result.compute_flops_.push_back(device.compute_flops_per_second());
    result.memory_bandwidth_.push_back(device.memory_bandwidth_bytes_per_second());
  }
  if (!IsFiniteNonNegative(inventory.transfer_rate_bytes_per_second())) {
    violations.push_back({absl::StrCat(field, ".transfer_rate_bytes_per_second"),
                          "must be finite and not negative"});
  }
  if (!violations.empty()) return InvalidFieldErrors(violations);
  result.transfer_rate_ = inventory.transfer_rate_bytes_per_second();

  for (int i = 0; i < inventory.links_size(); ++i) {
    const v1::Link& link = inventory.links(i);
    const std::string at = absl::StrCat(field, ".links[", i, "]");
    for (const auto& [end, id] : {std::pair<const char*, int32_t>{"logical_id_a", link.logical_id_a()},
                                  {"logical_id_b", link.logical_id_b()}}) {
      if (result.IndexOf(id) < 0) {
        return InvalidFieldError(absl::StrCat(at, ".", end),
                                 absl::StrCat("no device has logical id ", id));
      }
    }
    if (link.logical_id_a() == link.logical_id_b()) {
      return InvalidFieldError(at, "a link must join two different devices");
    }
    if (!std::isfinite(link.bandwidth_bytes_per_second()) ||
        link.bandwidth_bytes_per_second() <= 0) {
      return InvalidFieldError(absl::StrCat(at, ".bandwidth_bytes_per_second"),
                               "must be finite and positive");
    }
    if (!result.link_bandwidth_
             .try_emplace(DeviceList::LinkKey(link.logical_id_a(), link.logical_id_b()),
                          link.bandwidth_bytes_per_second())
             .second) {
      return InvalidFieldError(at, absl::StrCat("a second link between devices ",
                                                link.logical_id_a(), " and ",
                                                link.logical_id_b()));
    }
  }

  if (inventory.mesh_shape_size() > 0) {
    int64_t product = 1;
    for (int i = 0; i < inventory.mesh_shape_size(); ++i) {
      if (inventory.mesh_shape(i) <= 0) {
        return InvalidFieldError(absl::StrCat(field, ".mesh_shape[", i, "]"),
                                 "mesh sizes must be positive");
      }
      product *= inventory.mesh_shape(i);
      if (product > n) break;  // also keeps the product from overflowing
    }
    if (product != n) {
      return InvalidFieldError(absl::StrCat(field, ".mesh_shape"),
                               absl::StrCat("the mesh shape does not multiply out to the ", n,
                                            " devices"));
    }
  }
  if (inventory.mesh_axis_names_size() > 0 &&
      inventory.mesh_axis_names_size() != inventory.mesh_shape_size()) {
    return InvalidFieldError(absl::StrCat(field, ".mesh_axis_names"),
                             absl::StrCat(inventory.mesh_axis_names_size(),
                                          " axis names for a mesh of ",
                                          inventory.mesh_shape_size(), " axes"));
  }
  absl::flat_hash_set<absl::string_view> axis_names;
  for (int i = 0; i < inventory.mesh_axis_names_size(); ++i) {
    if (inventory.mesh_axis_names(i).empty() ||
        !axis_names.insert(inventory.mesh_axis_names(i)).second) {
      return InvalidFieldError(absl::StrCat(field, ".mesh_axis_names[", i, "]"),
                               "axis names must be non-empty and unique");
    }
  }
  return result;
}

}  // namespace partplan

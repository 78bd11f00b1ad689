// DeviceList: the validated device inventory planners work with.
//
//   PARTPLAN_ASSIGN_OR_RETURN(DeviceList devices,
//                             ImportDevices(request.devices(), limits, "devices"));
//   for (int i = 0; i < devices.size(); ++i) devices[i].available_memory_bytes;
//
// Checks (each INVALID_ARGUMENT naming the field): within InputLimits;
// unique non-empty names; unique non-negative logical ids; positive memory;
// finite non-negative rates; links between known, distinct devices with
// positive bandwidth; a mesh shape of positive sizes whose product is the
// device count, with one name per axis when names are given. An empty list
// is valid here; planners that need devices say so.
#ifndef PARTPLAN_PLANNER_GRAPH_DEVICES_H_
#define PARTPLAN_PLANNER_GRAPH_DEVICES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "partplan/v1/device.pb.h"
#include "planner/base/limits.h"

namespace partplan {

struct DeviceSpec {
  std::string name;
  int64_t available_memory_bytes = 0;
  int32_t logical_id = 0;
};

class DeviceList {
 public:
  int size() const { return static_cast<int>(devices_.size()); }
  bool empty() const { return devices_.empty(); }
  const DeviceSpec& operator[](int i) const { return devices_[i]; }
  const std::vector<DeviceSpec>& devices() const { return devices_; }
  // Position of the device with `logical_id`, or -1.
  int IndexOf(int32_t logical_id) const {
    auto it = index_of_logical_id_.find(logical_id);
    return it == index_of_logical_id_.end() ? -1 : it->second;
  }
  // Bytes/s between devices without a link of their own; 0 means transfers
  // cost nothing.
  double transfer_rate_bytes_per_second() const { return transfer_rate_; }
  // Bytes/s from one device to another: their link's bandwidth if the
  // inventory has one, else the transfer rate.
  double BandwidthBetween(int32_t logical_id_a, int32_t logical_id_b) const {
    auto it = link_bandwidth_.find(LinkKey(logical_id_a, logical_id_b));
    return it == link_bandwidth_.end() ? transfer_rate_ : it->second;
  }
  // Throughputs of device `i` (0 when not given).
  double compute_flops_per_second(int i) const { return compute_flops_[i]; }
  double memory_bandwidth_bytes_per_second(int i) const { return memory_bandwidth_[i]; }

 private:
  friend absl::StatusOr<DeviceList> ImportDevices(const v1::DeviceInventory&,
                                                  const InputLimits&, absl::string_view);
  static uint64_t LinkKey(int32_t a, int32_t b) {
    if (a > b) std::swap(a, b);
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  std::vector<DeviceSpec> devices_;
  std::vector<double> compute_flops_;
  std::vector<double> memory_bandwidth_;
  absl::flat_hash_map<int32_t, int> index_of_logical_id_;
  absl::flat_hash_map<uint64_t, double> link_bandwidth_;
  double transfer_rate_ = 0;
};

// `field` is the request's path to the inventory, the prefix of error fields.
absl::StatusOr<DeviceList> ImportDevices(const v1::DeviceInventory& inventory,
                                         const InputLimits& limits,
                                         absl::string_view field = "devices");

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_GRAPH_DEVICES_H_

// InputLimits: bounds on request size that the importer enforces, so that a
// hostile or mistaken request fails fast with a clear error instead of
// exhausting memory or time. The server sets them from flags.
//
//   InputLimits limits;
//   limits.max_nodes = 100000;
//   PARTPLAN_RETURN_IF_ERROR(limits.CheckAndSetup());
#ifndef PARTPLAN_PLANNER_BASE_LIMITS_H_
#define PARTPLAN_PLANNER_BASE_LIMITS_H_

#include <cstdint>

#include "absl/status/status.h"

namespace partplan {

struct InputLimits {
  // Nodes in one graph.
  int64_t max_nodes = 4'000'000;
  // Flat argument elements (Value) of one node, args and kwargs together.
  int64_t max_values_per_node = 1'000'000;
  // Flat argument elements of the whole graph.
  int64_t max_values = 64'000'000;
  // Devices in one inventory.
  int64_t max_devices = 65'536;

  // INVALID_ARGUMENT naming the first limit that is not positive.
  absl::Status CheckAndSetup() const;
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_BASE_LIMITS_H_

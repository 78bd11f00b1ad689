#include "planner/base/limits.h"

#include "absl/strings/str_cat.h"

namespace partplan {

absl::Status InputLimits::CheckAndSetup() const {
  const struct {
    const char* name;
    int64_t value;
  } limits[] = {{"max_nodes", max_nodes},
                {"max_values_per_node", max_values_per_node},
                {"max_values", max_values},
                {"max_devices", max_devices}};
  for (const auto& limit : limits) {
    if (limit.value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("limit ", limit.name, " must be positive, got ", limit.value));
    }
  }
  return absl::OkStatus();
}

}  // namespace partplan

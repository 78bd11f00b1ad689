#include "planner/status_util.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace partplan {
namespace {

// Payload key of the field path; any URL-like unique string will do.
constexpr absl::string_view kFieldPayloadUrl = "type.partplan.dev/invalid-field";

}  // namespace

absl::Status InvalidFieldError(absl::string_view field,
                               absl::string_view description) {
  absl::Status status = absl::InvalidArgumentError(
      field.empty() ? std::string(description)
                    : absl::StrCat(field, ": ", description));
  status.SetPayload(kFieldPayloadUrl, absl::Cord(field));
  return status;
}

absl::optional<std::string> InvalidFieldPath(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kFieldPayloadUrl);
  if (!payload.has_value()) return absl::nullopt;
  return std::string(*payload);
}

std::string InvalidFieldDescription(const absl::Status& status) {
  absl::optional<std::string> field = InvalidFieldPath(status);
  absl::string_view message = status.message();
  if (field.has_value() && !field->empty() &&
      absl::StartsWith(message, absl::StrCat(*field, ": "))) {
    message.remove_prefix(field->size() + 2);
  }
  return std::string(message);
}

absl::Status WithFieldPrefix(const absl::Status& status, absl::string_view from,
                             absl::string_view to) {
  absl::optional<std::string> field = InvalidFieldPath(status);
  if (!field.has_value() || !absl::StartsWith(*field, from)) return status;
  return InvalidFieldError(absl::StrCat(to, field->substr(from.size())),
                           InvalidFieldDescription(status));
}

}  // namespace partplan

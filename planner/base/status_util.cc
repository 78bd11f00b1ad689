#include "planner/base/status_util.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace partplan {
namespace {

// Payload key of the field path; any URL-like unique string will do.
constexpr absl::string_view kFieldPayloadUrl = "type.partplan.dev/invalid-field";
// Payload key of every violation of InvalidFieldErrors, each field and
// description as <size>:<bytes>.
constexpr absl::string_view kViolationsPayloadUrl = "type.partplan.dev/invalid-fields";

void AppendSized(absl::string_view text, std::string* out) {
  absl::StrAppend(out, text.size(), ":", text);
}

// The next <size>:<bytes> of `*in`, consumed; nullopt when malformed.
absl::optional<std::string> TakeSized(absl::string_view* in) {
  const size_t colon = in->find(':');
  size_t size = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(in->substr(0, colon), &size) ||
      size > in->size() - colon - 1) {
    return absl::nullopt;
  }
  std::string text(in->substr(colon + 1, size));
  in->remove_prefix(colon + 1 + size);
  return text;
}

}  // namespace

absl::Status InvalidFieldErrors(absl::Span<const FieldViolation> violations) {
  if (violations.size() == 1) {
    return InvalidFieldError(violations[0].field, violations[0].description);
  }
  const size_t kept = std::min<size_t>(violations.size(), kMaxFieldViolations);
  std::string message = violations[0].field.empty()
                            ? violations[0].description
                            : absl::StrCat(violations[0].field, ": ", violations[0].description);
  absl::StrAppend(&message, " (and ", kept - 1, " more:");
  std::string encoded;
  for (size_t i = 0; i < kept; ++i) {
    AppendSized(violations[i].field, &encoded);
    AppendSized(violations[i].description, &encoded);
    if (i > 0) {
      absl::StrAppend(&message, i > 1 ? ";" : "", " ", violations[i].field, ": ",
                      violations[i].description);
    }
  }
  absl::StrAppend(&message, ")");
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kFieldPayloadUrl, absl::Cord(violations[0].field));
  status.SetPayload(kViolationsPayloadUrl, absl::Cord(encoded));
  return status;
}

std::vector<FieldViolation> FieldViolations(const absl::Status& status) {
  std::vector<FieldViolation> violations;
  if (absl::optional<absl::Cord> all = status.GetPayload(kViolationsPayloadUrl); all.has_value()) {
    const std::string flat(*all);
    absl::string_view in = flat;
    while (!in.empty()) {
      absl::optional<std::string> field = TakeSized(&in);
      absl::optional<std::string> description =
          field.has_value() ? TakeSized(&in) : absl::nullopt;
      if (!description.has_value()) break;
      violations.push_back({*std::move(field), *std::move(description)});
    }
    if (!violations.empty()) return violations;
  }
  if (absl::optional<std::string> field = InvalidFieldPath(status); field.has_value()) {
    violations.push_back({*field, InvalidFieldDescription(status)});
  }
  return violations;
}

absl::Status WithMoreViolations(const absl::Status& first, const absl::Status& second) {
  std::vector<FieldViolation> violations = FieldViolations(first);
  std::vector<FieldViolation> more = FieldViolations(second);
  if (violations.empty() || more.empty()) return first;
  violations.insert(violations.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  return InvalidFieldErrors(violations);
}

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
  if (status.GetPayload(kViolationsPayloadUrl).has_value()) {
    std::vector<FieldViolation> violations = FieldViolations(status);
    if (!violations.empty()) return violations.front().description;
  }
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
  std::vector<FieldViolation> violations = FieldViolations(status);
  bool renamed = false;
  for (FieldViolation& violation : violations) {
    if (!absl::StartsWith(violation.field, from)) continue;
    violation.field = absl::StrCat(to, violation.field.substr(from.size()));
    renamed = true;
  }
  return renamed ? InvalidFieldErrors(violations) : status;
}

}  // namespace partplan

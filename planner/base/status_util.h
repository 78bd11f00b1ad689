// Status helpers shared by the planner library.
//
// Input errors name the offending request field so that the server can turn
// them into google.rpc.BadRequest field violations without parsing text:
//
//   return InvalidFieldError("graph.nodes[3].args[0]",
//                            "refers to unknown node 'foo'");
//   ...
//   absl::optional<std::string> field = InvalidFieldPath(status);
//   // -> "graph.nodes[3].args[0]"
//
// A request with several independent faults gets them all at once, up to
// kMaxFieldViolations, so that it can be fixed in one round trip:
//
//   std::vector<FieldViolation> found = ...;
//   return InvalidFieldErrors(found);
//   ...
//   for (const FieldViolation& v : FieldViolations(status)) ...
//
// PARTPLAN_RETURN_IF_ERROR and PARTPLAN_ASSIGN_OR_RETURN propagate errors.
#ifndef PARTPLAN_PLANNER_BASE_STATUS_UTIL_H_
#define PARTPLAN_PLANNER_BASE_STATUS_UTIL_H_

#include <string>
#include <vector>

#include "absl/types/optional.h"
#include "absl/types/span.h"

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace partplan {

// INVALID_ARGUMENT whose message starts with `field` and which carries
// `field` as a payload for InvalidFieldPath().
absl::Status InvalidFieldError(absl::string_view field,
                               absl::string_view description);

// One fault of a request: the field's path and what is wrong with it.
struct FieldViolation {
  std::string field;
  std::string description;
};

// The most violations one status carries (and one google.rpc.BadRequest
// lists): enough to fix a request at once, few enough that the error stays
// far below gRPC's trailer limit.
inline constexpr int kMaxFieldViolations = 20;

// INVALID_ARGUMENT carrying `violations` (not empty; the first
// kMaxFieldViolations). The first is its InvalidFieldPath and heads the
// message, which then counts and lists the others.
absl::Status InvalidFieldErrors(absl::Span<const FieldViolation> violations);

// Every violation an InvalidFieldError or InvalidFieldErrors carries, in
// order; empty for any other status.
std::vector<FieldViolation> FieldViolations(const absl::Status& status);

// `first`'s violations followed by `second`'s when both carry some (up to
// kMaxFieldViolations); otherwise `first`.
absl::Status WithMoreViolations(const absl::Status& first, const absl::Status& second);

// The field path of an InvalidFieldError, if `status` is one.
absl::optional<std::string> InvalidFieldPath(const absl::Status& status);

// The description of an InvalidFieldError (its message without the field),
// or of the first violation of InvalidFieldErrors.
std::string InvalidFieldDescription(const absl::Status& status);

// `status` with each field path's `from` prefix replaced by `to`, for a
// request embedding another (e.g. PlanRequest.shard is a ShardGraphRequest's
// config); any other status as it is.
absl::Status WithFieldPrefix(const absl::Status& status, absl::string_view from,
                             absl::string_view to);

}  // namespace partplan

#define PARTPLAN_STATUS_CONCAT_INNER_(a, b) a##b
#define PARTPLAN_STATUS_CONCAT_(a, b) PARTPLAN_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define PARTPLAN_RETURN_IF_ERROR(expr)              \
  do {                                              \
    ::absl::Status partplan_status_ = (expr);       \
    if (!partplan_status_.ok()) return partplan_status_; \
  } while (0)

// `lhs = value of expr` (an absl::StatusOr), or returns its error.
#define PARTPLAN_ASSIGN_OR_RETURN(lhs, expr)                                  \
  PARTPLAN_ASSIGN_OR_RETURN_IMPL_(                                            \
      PARTPLAN_STATUS_CONCAT_(partplan_statusor_, __LINE__), lhs, expr)
#define PARTPLAN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                    \
  if (!statusor.ok()) return statusor.status();              \
  lhs = std::move(statusor).value()

#endif  // PARTPLAN_PLANNER_BASE_STATUS_UTIL_H_

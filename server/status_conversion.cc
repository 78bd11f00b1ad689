#include "server/status_conversion.h"

#include <grpcpp/support/error_details.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

// Messages quote names from the request, which can be of any length; but
// the message travels in the trailers, twice with the details (grpc-message
// percent-encoded, grpc-status-details-bin in base64), and a client refuses
// trailers above its metadata limit (8 KiB by default) with
// RESOURCE_EXHAUSTED instead of the real status. So messages, and the first
// violation's description, are cut to this many bytes, on a UTF-8 character
// boundary; the violations after the first share kMaxMoreViolationBytes.
constexpr size_t kMaxMessageBytes = 1000;
constexpr size_t kMaxMoreViolationBytes = 1200;

std::string Bounded(absl::string_view text, size_t limit = kMaxMessageBytes) {
  if (text.size() <= limit) return std::string(text);
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "... (", text.size() - cut, " more bytes)");
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering (both follow
  // google.rpc.Code).
  grpc::Status converted(static_cast<grpc::StatusCode>(status.code()), Bounded(status.message()));
  const std::vector<FieldViolation> violations = FieldViolations(status);
  if (status.code() != absl::StatusCode::kInvalidArgument || violations.empty()) {
    return converted;
  }

  google::rpc::BadRequest bad_request;
  size_t more_bytes = 0;
  for (const FieldViolation& found : violations) {
    const bool first = bad_request.field_violations().empty();
    std::string field = Bounded(found.field, first ? kMaxMessageBytes : 200);
    std::string description = Bounded(found.description, first ? kMaxMessageBytes : 300);
    if (!first) {
      more_bytes += field.size() + description.size();
      if (more_bytes > kMaxMoreViolationBytes) break;  // the message still counts them
    }
    google::rpc::BadRequest::FieldViolation* violation = bad_request.add_field_violations();
    violation->set_field(std::move(field));
    violation->set_description(std::move(description));
  }

  google::rpc::Status details;
  details.set_code(static_cast<int>(status.code()));
  details.set_message(converted.error_message());
  details.add_details()->PackFrom(bad_request);
  // Only fails for a null output or an out-of-range code, neither possible.
  grpc::SetErrorDetails(details, &converted);
  return converted;
}

}  // namespace partplan

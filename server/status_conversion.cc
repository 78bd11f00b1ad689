#include "server/status_conversion.h"

#include <grpcpp/support/error_details.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "planner/status_util.h"

namespace partplan {
namespace {

// Messages quote names from the request, which can be of any length; but
// the message travels in the trailers, twice with the details (grpc-message
// percent-encoded, grpc-status-details-bin in base64), and a client refuses
// trailers above its metadata limit (8 KiB by default) with
// RESOURCE_EXHAUSTED instead of the real status. So messages are cut to
// this many bytes, on a UTF-8 character boundary.
constexpr size_t kMaxMessageBytes = 1000;

std::string Bounded(absl::string_view text) {
  if (text.size() <= kMaxMessageBytes) return std::string(text);
  size_t cut = kMaxMessageBytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "... (", text.size() - cut, " more bytes)");
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering (both follow
  // google.rpc.Code).
  grpc::Status converted(static_cast<grpc::StatusCode>(status.code()), Bounded(status.message()));
  const absl::optional<std::string> field = InvalidFieldPath(status);
  if (status.code() != absl::StatusCode::kInvalidArgument || !field.has_value()) {
    return converted;
  }

  google::rpc::BadRequest bad_request;
  google::rpc::BadRequest::FieldViolation* violation = bad_request.add_field_violations();
  violation->set_field(*field);
  violation->set_description(Bounded(InvalidFieldDescription(status)));

  google::rpc::Status details;
  details.set_code(static_cast<int>(status.code()));
  details.set_message(converted.error_message());
  details.add_details()->PackFrom(bad_request);
  // Only fails for a null output or an out-of-range code, neither possible.
  grpc::SetErrorDetails(details, &converted);
  return converted;
}

}  // namespace partplan

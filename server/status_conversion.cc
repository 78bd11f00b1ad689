#include "server/status_conversion.h"

#include <grpcpp/support/error_details.h>

#include <string>

#include "absl/types/optional.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "planner/status_util.h"

namespace partplan {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering (both follow
  // google.rpc.Code).
  grpc::Status converted(static_cast<grpc::StatusCode>(status.code()),
                         std::string(status.message()));
  const absl::optional<std::string> field = InvalidFieldPath(status);
  if (status.code() != absl::StatusCode::kInvalidArgument || !field.has_value()) {
    return converted;
  }

  google::rpc::BadRequest bad_request;
  google::rpc::BadRequest::FieldViolation* violation = bad_request.add_field_violations();
  violation->set_field(*field);
  violation->set_description(InvalidFieldDescription(status));

  google::rpc::Status details;
  details.set_code(static_cast<int>(status.code()));
  details.set_message(std::string(status.message()));
  details.add_details()->PackFrom(bad_request);
  // Only fails for a null output or an out-of-range code, neither possible.
  grpc::SetErrorDetails(details, &converted);
  return converted;
}

}  // namespace partplan

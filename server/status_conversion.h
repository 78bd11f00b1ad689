// Conversion of the planner library's absl::Status into the grpc::Status a
// handler finishes its call with.
//
// The code and message carry over unchanged. An INVALID_ARGUMENT that names
// the offending request fields (see planner/base/status_util.h) also carries a
// google.rpc.Status with a google.rpc.BadRequest field violation per field
// in its error details, so that clients can point at the fields without
// parsing the message:
//
//   absl::Status status = partplan::InvalidFieldError(
//       "graph.nodes[3].args[0]", "refers to unknown node 'foo'");
//   reactor->Finish(partplan::ToGrpcStatus(status));
//
//   // Client side:
//   google::rpc::Status details;
//   grpc::ExtractErrorDetails(status, &details);
//   google::rpc::BadRequest bad_request;
//   details.details(0).UnpackTo(&bad_request);
//   // bad_request.field_violations(0).field() == "graph.nodes[3].args[0]"
#ifndef PARTPLAN_SERVER_STATUS_CONVERSION_H_
#define PARTPLAN_SERVER_STATUS_CONVERSION_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace partplan {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace partplan

#endif  // PARTPLAN_SERVER_STATUS_CONVERSION_H_

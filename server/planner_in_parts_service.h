// PlannerInPartsService: partplan.v1.PartitionPlannerInParts, PartitionPlanner's
// RPCs with the request and the response as streams of MessagePart, for
// clients that cannot hand gRPC a large message without holding it twice
// (grpcio copies a request's bytes whole before sending them).
//
// A call reads its parts on gRPC's threads: the first names the RPC, the
// parts' data is appended in order, and the call ends at once with
// RESOURCE_EXHAUSTED when the data goes past `max_request_bytes` (what one
// message may hold), so a client cannot make the server hold more than a
// unary call would. Once the client closes its side, the request goes to
// PlannerService::Queue as a PlannerCall like any other: the same pool,
// plan cache, token, metrics and log line (with receive_ms, the time the
// parts took). The response's bytes go back in parts of at most kPartBytes,
// slices of the response's own.
//
//   partplan::PlannerInPartsService in_parts(service, options.max_receive_message_bytes);
//   builder.RegisterService(&in_parts);  // must outlive the server
#ifndef PARTPLAN_SERVER_PLANNER_IN_PARTS_SERVICE_H_
#define PARTPLAN_SERVER_PLANNER_IN_PARTS_SERVICE_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/service_type.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "server/planner_service.h"

namespace partplan {

inline constexpr absl::string_view kPlannerInPartsServiceName =
    "partplan.v1.PartitionPlannerInParts";

class PlannerInPartsService final : public grpc::Service {
 public:
  // The most data a response part carries.
  static constexpr size_t kPartBytes = 1 << 20;

  // `planner` must outlive the service.
  PlannerInPartsService(PlannerService& planner, int64_t max_request_bytes);

 private:
  PlannerService& planner_;
  const int64_t max_request_bytes_;
  const std::string method_path_;  // gRPC keeps a pointer to it
};

}  // namespace partplan

#endif  // PARTPLAN_SERVER_PLANNER_IN_PARTS_SERVICE_H_

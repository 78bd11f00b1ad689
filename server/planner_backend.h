// PlannerBackend: what the gRPC service calls to answer a call, for any row
// of the RPC table (planner/api/planner_rpcs.h).
//
// The service owns threading, deadlines, metrics and reading the request's
// bytes; the backend only turns a read request into the response's bytes,
// stopping when the token fires. Production uses NewLibraryPlannerBackend(),
// which runs the row's entry point with the server's input limits; tests
// inject fakes that block, sleep or answer canned bytes:
//
//   std::unique_ptr<partplan::PlannerBackend> backend =
//       partplan::NewLibraryPlannerBackend(limits);
//   absl::Cord response;
//   absl::Status status = backend->Answer(PlannerRpcOf(PlannerRpc::kValidate), request, token,
//                                         &arena, &response);
//
// Implementations must be safe to call concurrently from many threads.
#ifndef PARTPLAN_SERVER_PLANNER_BACKEND_H_
#define PARTPLAN_SERVER_PLANNER_BACKEND_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "google/protobuf/arena.h"
#include "planner/api/planner_request.h"
#include "planner/api/planner_rpcs.h"
#include "planner/base/cancellation.h"
#include "planner/base/limits.h"

namespace partplan {

class PlannerBackend {
 public:
  virtual ~PlannerBackend() = default;

  // Answers `request`, a request of `rpc`, with the response's serialised
  // bytes. A response built as a message may live on `arena`, which the
  // service frees once gRPC is done with the call.
  virtual absl::Status Answer(const PlannerRpcMethod& rpc, const PlannerRequest& request,
                              const CancellationToken& token, google::protobuf::Arena* arena,
                              absl::Cord* response_bytes) = 0;
};

// The row's entry point, called with `limits`.
std::unique_ptr<PlannerBackend> NewLibraryPlannerBackend(const InputLimits& limits);

}  // namespace partplan

#endif  // PARTPLAN_SERVER_PLANNER_BACKEND_H_

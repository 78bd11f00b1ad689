// PlannerRequest: a request of one of kPlannerRpcs read from its serialised
// bytes, as the server receives them, ready for the row's entry point.
//
// Every field but the graph is parsed onto the caller's arena; the graph is
// left as bytes where they lie, for ImportGraph to read in place
// (GraphSource::Serialized), so that no protobuf tree of a large graph is
// built. A request that does not split that way (not a well-formed message,
// or a graph sent in several pieces, which protobuf merges) is parsed whole.
//
//   PARTPLAN_ASSIGN_OR_RETURN(PlannerRequest request,
//                             ReadPlannerRequest(rpc, received_bytes, &arena));
//   status = rpc.answer(request.message(), request.graph(), limits, token, &arena, &out);
//   log("nodes", request.CountNodes(), "devices", request.device_count());
//
// A request that does not parse is INVALID_ARGUMENT naming the field where
// its bytes go wrong (wire/parse_failure.h) and the message it should be.
#ifndef PARTPLAN_PLANNER_API_PLANNER_REQUEST_H_
#define PARTPLAN_PLANNER_API_PLANNER_REQUEST_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/message.h"
#include "planner/api/planner_rpcs.h"
#include "planner/graph/graph_import.h"
#include "planner/graph/serialized_request.h"

namespace partplan {

class PlannerRequest {
 public:
  // The request's fields (all but the graph when the graph is serialised).
  const google::protobuf::Message& message() const { return *message_; }
  // The graph, as bytes or as the parsed message's. ImportGraph writes the
  // number of nodes it finds into node_count() through it.
  const GraphSource& graph() const { return graph_; }

  // The number of nodes of the graph: as ImportGraph found them, or counted
  // from the bytes (or the parsed message) when no import got that far; -1
  // when the graph's bytes do not scan.
  int64_t CountNodes() const;
  // The number of devices of the request's inventory; 0 for a request
  // without one.
  int device_count() const;

 private:
  friend absl::StatusOr<PlannerRequest> ReadPlannerRequest(const PlannerRpcMethod& rpc,
                                                           const ChunkedBytes* bytes,
                                                           google::protobuf::Arena* arena);
  PlannerRequest(google::protobuf::Message* message, GraphSource graph);

  google::protobuf::Message* message_;  // on the caller's arena
  GraphSource graph_;
  std::unique_ptr<int64_t> imported_nodes_;  // where ImportGraph counts; stable across moves
};

// Reads a request of `rpc` from `bytes` (null: the call carried no message),
// its fields onto `arena`. `bytes` and `arena` must outlive the result.
absl::StatusOr<PlannerRequest> ReadPlannerRequest(const PlannerRpcMethod& rpc,
                                                  const ChunkedBytes* bytes,
                                                  google::protobuf::Arena* arena);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_API_PLANNER_REQUEST_H_

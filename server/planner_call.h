// PlannerCall: what the server keeps of one planner call from the moment its
// request is whole to its answer, whichever way the request came (one
// message of PartitionPlanner, or parts of PartitionPlannerInParts): the
// planner's cancellation token, the arena of the parsed request and its
// response, and the call's outcome in the metrics and one log line.
//
// A transport derives from it and sends the answer in Send(); the planner
// thread calls Complete() once, as the last thing it does with the call.
//
//   class UnaryCall final : public grpc::ServerUnaryReactor, public PlannerCall {
//     void Send(const grpc::Status& status) override { Finish(status); }
//     void OnCancel() override { Cancel(); }
//     ...
//   };
#ifndef PARTPLAN_SERVER_PLANNER_CALL_H_
#define PARTPLAN_SERVER_PLANNER_CALL_H_

#include <google/protobuf/arena.h>
#include <grpcpp/grpcpp.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "planner/api/planner_rpcs.h"
#include "planner/base/cancellation.h"
#include "server/metrics.h"

namespace partplan {

class PlannerCall {
 public:
  // `request_bytes`: the size of the whole request. A call planning for
  // `max_call_duration` from now stops with DEADLINE_EXCEEDED, whatever the
  // client's deadline.
  PlannerCall(const PlannerRpcMethod& rpc, const grpc::CallbackServerContext& context,
              size_t request_bytes, const ServerMetrics& metrics, absl::Duration max_call_duration);
  virtual ~PlannerCall() = default;

  PlannerCall(const PlannerCall&) = delete;
  PlannerCall& operator=(const PlannerCall&) = delete;

  const PlannerRpcMethod& rpc() const { return rpc_; }
  const CancellationToken& token() const { return token_; }

  // Fires the token: the client went away, the deadline passed, or the
  // draining server gave up on the call. Thread-safe.
  void Cancel() { token_.Cancel(); }

  // The size of the request's graph, once it is known (parsed, or from the
  // plan cache), for the metrics and the log line.
  void SetRequestSize(int nodes, int devices);
  int nodes() const { return nodes_; }
  int devices() const { return devices_; }

  // For a request that came in parts: how long they took to arrive, logged
  // as receive_ms beside the call's duration.
  void SetReceiveDuration(absl::Duration receive) { receive_ = receive; }

  // The arena of the call's parsed request and its response, made on first
  // use. It lives as long as the call: freeing a 10^6-node request takes a
  // tenth of a second, which the client need not wait for.
  google::protobuf::Arena& arena();

  // Records the outcome in the metrics and the log, then Send()s it; the
  // call may be deleted as soon as Send() is called.
  void Complete(const absl::Status& status);

 protected:
  // Sends the call's status (and, when OK, the response the planner thread
  // left with the transport) and finishes the call.
  virtual void Send(const grpc::Status& status) = 0;

 private:
  void Log(const absl::Status& status, absl::Duration duration) const;

  const PlannerRpcMethod& rpc_;
  const ServerMetrics& metrics_;
  const absl::Time start_;
  const absl::Time server_limit_;     // start_ + max_call_duration
  const absl::Time client_deadline_;  // InfiniteFuture without one
  CancellationToken token_;
  const size_t request_bytes_;
  int nodes_ = -1;  // until the request is read
  int devices_ = -1;
  std::optional<absl::Duration> receive_;
  const std::string request_id_;
  std::optional<google::protobuf::Arena> arena_;
};

// The call's deadline, InfiniteFuture when the client set none.
absl::Time DeadlineOf(const grpc::CallbackServerContext& context);

// The x-request-id metadata, empty when absent.
std::string RequestIdOf(const grpc::CallbackServerContext& context);

}  // namespace partplan

#endif  // PARTPLAN_SERVER_PLANNER_CALL_H_

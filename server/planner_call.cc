#include "server/planner_call.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/call_arena.h"
#include "server/logging.h"
#include "server/status_conversion.h"

namespace partplan {

absl::Time DeadlineOf(const grpc::CallbackServerContext& context) {
  const std::chrono::system_clock::time_point deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

std::string RequestIdOf(const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("x-request-id");
  if (it == metadata.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

PlannerCall::PlannerCall(const PlannerRpcMethod& rpc, const grpc::CallbackServerContext& context,
                         size_t request_bytes, const ServerMetrics& metrics,
                         absl::Duration max_call_duration)
    : rpc_(rpc),
      metrics_(metrics),
      start_(absl::Now()),
      server_limit_(start_ + max_call_duration),
      client_deadline_(DeadlineOf(context)),
      token_(std::min(client_deadline_, server_limit_)),
      request_bytes_(request_bytes),
      request_id_(RequestIdOf(context)) {
  metrics_.rpc(rpc_.rpc).started->Increment();
}

void PlannerCall::SetRequestSize(int nodes, int devices) {
  nodes_ = nodes;
  devices_ = devices;
  // -1: a graph whose bytes do not scan, counted by nobody.
  if (nodes_ >= 0) metrics_.graph_nodes().Observe(nodes_);
}

google::protobuf::Arena& PlannerCall::arena() {
  if (!arena_.has_value()) arena_.emplace(CallArenaOptions());
  return *arena_;
}

void PlannerCall::Complete(const absl::Status& status_in) {
  absl::Status status = status_in;
  if (status.code() == absl::StatusCode::kDeadlineExceeded && server_limit_ < client_deadline_ &&
      absl::Now() >= server_limit_) {
    // The server's limit, not the client's deadline: say which.
    status = absl::DeadlineExceededError(
        absl::StrCat("planning stopped after ", absl::FormatDuration(server_limit_ - start_),
                     ", the longest the server lets a call take (--max_call_seconds)"));
  }
  const grpc::Status grpc_status = ToGrpcStatus(status);
  const absl::Duration duration = absl::Now() - start_;
  metrics_.handled(rpc_.rpc, grpc_status.error_code()).Increment();
  metrics_.rpc(rpc_.rpc).handling_seconds->Observe(absl::ToDoubleSeconds(duration));
  Log(status, duration);
  Send(grpc_status);
}

void PlannerCall::Log(const absl::Status& status, absl::Duration duration) const {
  std::vector<LogField> fields = {{"method", rpc_.name}};
  // Calls refused or failed before their request was read have no size.
  if (nodes_ >= 0) {
    fields.emplace_back("nodes", nodes_);
    fields.emplace_back("devices", devices_);
  }
  fields.emplace_back("request_bytes", static_cast<int64_t>(request_bytes_));
  fields.emplace_back("code", absl::StatusCodeToString(status.code()));
  fields.emplace_back("duration_ms", absl::ToDoubleMilliseconds(duration));
  if (receive_.has_value())
    fields.emplace_back("receive_ms", absl::ToDoubleMilliseconds(*receive_));
  if (!request_id_.empty()) fields.emplace_back("request_id", request_id_);
  if (!status.ok()) fields.emplace_back("error", status.message());
  LogInfo("rpc", fields);
}

}  // namespace partplan

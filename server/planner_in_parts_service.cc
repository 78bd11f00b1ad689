#include "server/planner_in_parts_service.h"

#include <grpcpp/impl/codegen/server_callback_handlers.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "planner/api/planner_rpcs.h"
#include "planner/base/status_util.h"
#include "server/logging.h"
#include "server/message_part_reader.h"
#include "server/planner_call.h"
#include "server/status_conversion.h"

namespace partplan {
namespace {

const PlannerRpcMethod* PlannerRpcNamed(absl::string_view name) {
  for (const PlannerRpcMethod& rpc : kPlannerRpcs) {
    if (rpc.name == name) return &rpc;
  }
  return nullptr;
}

std::string PlannerRpcNames() {
  std::vector<absl::string_view> names;
  for (const PlannerRpcMethod& rpc : kPlannerRpcs) names.push_back(rpc.name);
  return absl::StrJoin(names, ", ");
}

// What precedes `data_bytes` of data in a MessagePart on the wire: field 2's
// tag and the data's length.
grpc::Slice PartHeader(size_t data_bytes) {
  char header[11];
  size_t size = 0;
  header[size++] = 0x12;  // field 2, length-delimited
  uint64_t length = data_bytes;
  do {
    header[size++] = static_cast<char>((length & 0x7f) | (length > 0x7f ? 0x80 : 0));
    length >>= 7;
  } while (length != 0);
  return grpc::Slice(header, size);
}

// One call: reads the parts, queues the request, writes the response's.
// Deletes itself when gRPC is done with it.
class InPartsCall final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  InPartsCall(PlannerService& planner, grpc::CallbackServerContext* context,
              int64_t max_request_bytes)
      : planner_(planner),
        context_(*context),
        max_request_bytes_(max_request_bytes),
        start_(absl::Now()) {
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side, or went away
      Dispatch();
      return;
    }
    if (absl::Status status = Append(); !status.ok()) {
      Fail(status);
      return;
    }
    StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the response could not be sent"));
      return;
    }
    WriteNext();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mutex_);
    cancelled_ = true;
    if (call_ != nullptr) call_->Cancel();
  }

  void OnDone() override { delete this; }

 private:
  // The PlannerCall of the whole request: its answer goes back in parts.
  class Call final : public PlannerCall {
   public:
    Call(const PlannerRpcMethod& rpc, const grpc::CallbackServerContext& context,
         size_t request_bytes, const PlannerService& planner, InPartsCall* transport)
        : PlannerCall(rpc, context, request_bytes, planner.metrics(), planner.max_call_duration()),
          transport_(transport) {}

   private:
    void Send(const grpc::Status& status) override { transport_->Respond(status); }
    InPartsCall* const transport_;
  };

  // Reads the part just received into the request.
  absl::Status Append() {
    MessagePartReader part;
    std::string error;
    if (!part.Read(&incoming_, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("part ", parts_, " is no partplan.v1.MessagePart: ", error));
    }
    if (rpc_ == nullptr) {
      rpc_ = PlannerRpcNamed(part.method());
      if (rpc_ == nullptr) {
        return InvalidFieldError(
            "method", absl::StrCat("the first part names no RPC of ", kPlannerServiceName, ": \"",
                                   absl::CEscape(part.method()), "\"; one of ", PlannerRpcNames()));
      }
    } else if (!part.method().empty()) {
      return InvalidFieldError(
          "method", absl::StrCat("part ", parts_, " names an RPC; only the first part does"));
    }
    if (part.data_bytes() > static_cast<uint64_t>(max_request_bytes_ - request_bytes_)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the request's parts hold more than ", max_request_bytes_,
          " bytes, the most the server takes in one request (--max_receive_message_bytes)"));
    }
    request_bytes_ += static_cast<int64_t>(part.data_bytes());
    std::vector<grpc::Slice> data;
    part.MoveDataTo(&data);
    request_.Append(std::move(data));
    ++parts_;
    return absl::OkStatus();
  }

  // The request is whole: plan it as its RPC would.
  void Dispatch() {
    if (rpc_ == nullptr && !context_.IsCancelled()) {
      Fail(InvalidFieldError("method", "no parts: the first part names the RPC"));
      return;
    }
    {
      absl::MutexLock lock(&mutex_);
      if (cancelled_ || context_.IsCancelled()) {
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
        return;
      }
      call_ = std::make_unique<Call>(*rpc_, context_, static_cast<size_t>(request_bytes_), planner_,
                                     this);
      call_->SetReceiveDuration(absl::Now() - start_);
    }
    request_buffer_ = request_.Take();
    planner_.Queue(call_.get(), &request_buffer_, &response_);
  }

  // From the planner thread, the call's outcome: sends the response's parts.
  void Respond(const grpc::Status& status) {
    if (!status.ok()) {
      Finish(status);
      return;
    }
    std::vector<grpc::Slice> slices;
    if (response_.Valid() && response_.Dump(&slices).ok()) {
      for (grpc::Slice& slice : slices) {
        if (slice.size() > 0) response_slices_.push_back(std::move(slice));
      }
    }
    response_.Clear();
    WriteNext();
  }

  // Writes the next part of the response, or finishes after the last.
  void WriteNext() {
    if (next_slice_ == response_slices_.size()) {
      Finish(grpc::Status::OK);
      return;
    }
    std::vector<grpc::Slice> part(1);  // [0]: the header, once the size is known
    size_t bytes = 0;
    while (next_slice_ < response_slices_.size() && bytes < PlannerInPartsService::kPartBytes) {
      const grpc::Slice& slice = response_slices_[next_slice_];
      const size_t take =
          std::min(slice.size() - offset_, PlannerInPartsService::kPartBytes - bytes);
      part.push_back(slice.sub(offset_, offset_ + take));
      bytes += take;
      offset_ += take;
      if (offset_ == slice.size()) {
        ++next_slice_;
        offset_ = 0;
      }
    }
    part[0] = PartHeader(bytes);
    outgoing_ = grpc::ByteBuffer(part.data(), part.size());
    StartWrite(&outgoing_);
  }

  // Ends a call refused before its request was whole, with a log line.
  void Fail(const absl::Status& status) {
    std::vector<LogField> fields = {
        {"method", rpc_ == nullptr ? std::string(kPlannerInPartsServiceName) + "/Call"
                                   : std::string(rpc_->name)},
        {"request_bytes", request_bytes_},
        {"code", absl::StatusCodeToString(status.code())},
        {"receive_ms", absl::ToDoubleMilliseconds(absl::Now() - start_)}};
    if (const std::string id = RequestIdOf(context_); !id.empty()) {
      fields.emplace_back("request_id", id);
    }
    fields.emplace_back("error", status.message());
    LogInfo("rpc", fields);
    Finish(ToGrpcStatus(status));
  }

  PlannerService& planner_;
  const grpc::CallbackServerContext& context_;
  const int64_t max_request_bytes_;
  const absl::Time start_;

  // Reading.
  grpc::ByteBuffer incoming_;
  const PlannerRpcMethod* rpc_ = nullptr;  // named by the first part
  int64_t parts_ = 0;
  int64_t request_bytes_ = 0;
  JoinedParts request_;  // the parts' data

  // Planning.
  absl::Mutex mutex_;
  bool cancelled_ ABSL_GUARDED_BY(mutex_) = false;
  std::unique_ptr<Call> call_;  // set once, under mutex_, when the request is whole
  grpc::ByteBuffer request_buffer_;
  grpc::ByteBuffer response_;

  // Writing.
  std::vector<grpc::Slice> response_slices_;
  size_t next_slice_ = 0;
  size_t offset_ = 0;  // into response_slices_[next_slice_]
  grpc::ByteBuffer outgoing_;
};

}  // namespace

PlannerInPartsService::PlannerInPartsService(PlannerService& planner, int64_t max_request_bytes)
    : planner_(planner),
      max_request_bytes_(max_request_bytes),
      method_path_(absl::StrCat("/", kPlannerInPartsServiceName, "/Call")) {
  AddMethod(new grpc::internal::RpcServiceMethod(
      method_path_.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, /*handler=*/nullptr));
  MarkMethodRawCallback(0,
                        new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                            [this](grpc::CallbackServerContext* context) {
                              return new InPartsCall(planner_, context, max_request_bytes_);
                            }));
}

}  // namespace partplan

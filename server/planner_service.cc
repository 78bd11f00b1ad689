#include "server/planner_service.h"

#include <grpc/slice.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "planner/api/planner_request.h"
#include "planner/base/status_util.h"
#include "server/call_arena.h"

namespace partplan {
namespace {

// `bytes` as a ByteBuffer, handed to gRPC without a copy: a slice per piece
// of the Cord, which they share until gRPC has sent the last of them.
grpc::ByteBuffer ByteBufferOf(absl::Cord bytes) {
  using SharedBytes = std::shared_ptr<const absl::Cord>;
  const auto owned = std::make_shared<const absl::Cord>(std::move(bytes));
  std::vector<grpc::Slice> slices;
  for (const absl::string_view piece : owned->Chunks()) {
    slices.emplace_back(
        grpc_slice_new_with_user_data(
            const_cast<char*>(piece.data()), piece.size(),
            [](void* owner) { delete static_cast<SharedBytes*>(owner); }, new SharedBytes(owned)),
        grpc::Slice::STEAL_REF);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// A received request's bytes, read where gRPC put them: a large message
// arrives as thousands of slices, and gathering them into one block would
// hold it twice. Takes the slices from the call's buffer (which then holds
// none) and keeps them for as long as the graph is read from them.
class ReceivedRequest {
 public:
  explicit ReceivedRequest(grpc::ByteBuffer* buffer) {
    if (!buffer->Valid() || !buffer->Dump(&slices_).ok()) return;
    buffer->Clear();
    valid_ = true;
    std::vector<absl::string_view> chunks;
    chunks.reserve(slices_.size());
    for (const grpc::Slice& slice : slices_) {
      chunks.emplace_back(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    bytes_ = ChunkedBytes(chunks);
  }

  // False when the call carried no message.
  bool valid() const { return valid_; }
  const ChunkedBytes& bytes() const { return bytes_; }

 private:
  bool valid_ = false;
  std::vector<grpc::Slice> slices_;
  ChunkedBytes bytes_;
};

}  // namespace

// A call of PartitionPlanner: its request in one message, its answer one
// message. Deletes itself when gRPC is done with the call.
class UnaryPlannerCall final : public grpc::ServerUnaryReactor, public PlannerCall {
 public:
  using PlannerCall::PlannerCall;

  void OnCancel() override { Cancel(); }
  void OnDone() override { delete this; }

 private:
  void Send(const grpc::Status& status) override { Finish(status); }
};

PlannerService::PlannerService(PlannerBackend& backend, BoundedThreadPool& pool,
                               const ServerMetrics& metrics,
                               const TokenAuthenticator* authenticator, PlanCache* plan_cache,
                               absl::Duration max_call_duration)
    : backend_(backend),
      pool_(pool),
      metrics_(metrics),
      authenticator_(authenticator),
      plan_cache_(plan_cache),
      max_call_duration_(max_call_duration) {
  method_paths_.reserve(kPlannerRpcCount);
  for (const PlannerRpcMethod& rpc : kPlannerRpcs) {
    method_paths_.push_back(absl::StrCat("/", kPlannerServiceName, "/", rpc.name));
    AddMethod(new grpc::internal::RpcServiceMethod(method_paths_.back().c_str(),
                                                   grpc::internal::RpcMethod::NORMAL_RPC,
                                                   /*handler=*/nullptr));
    MarkMethodRawCallback(
        static_cast<int>(method_paths_.size() - 1),
        new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
            [this, &rpc](grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                         grpc::ByteBuffer* response) {
              return Handle(rpc, context, request, response);
            }));
  }
}

grpc::ServerUnaryReactor* PlannerService::Handle(const PlannerRpcMethod& rpc,
                                                 grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  auto* call =
      new UnaryPlannerCall(rpc, *context, request->Length(), metrics_, max_call_duration_);
  if (authenticator_ != nullptr) {
    if (const grpc::Status auth = authenticator_->Check(context->client_metadata()); !auth.ok()) {
      call->Complete(absl::UnauthenticatedError(auth.error_message()));
      return call;
    }
  }
  // gRPC keeps `request` and `response` alive until the call is finished.
  // The request's bytes are the call's to release once they are parsed (as
  // gRPC does for calls it parses itself), hence the const_cast: the buffer
  // gRPC hands over is its own, not a const object.
  Queue(call, const_cast<grpc::ByteBuffer*>(request), response);
  return call;
}

void PlannerService::Queue(PlannerCall* call, grpc::ByteBuffer* request,
                           grpc::ByteBuffer* response) {
  // The call's pool slot is released before the call is answered, and the
  // gauges let go of it only after that: a client holding its answer, or
  // seeing queue depth and in-flight at 0, finds the slot free for its next
  // call, however long this thread then takes to log, finish and get back to
  // the queue.
  auto run = [this, call, request, response](BoundedThreadPool::Slot& slot) {
    // A call cancelled or expired while it waited is not worth planning.
    if (absl::Status status = call->token().Check(); !status.ok()) {
      slot.Release();
      metrics_.queue_depth().Decrement();
      call->Complete(status);
      return;
    }
    metrics_.in_flight().Increment();
    metrics_.queue_depth().Decrement();
    const absl::Time start = absl::Now();
    const absl::Status status = Answer(call->rpc(), *call, request, response);
    metrics_.rpc(call->rpc().rpc).planner_seconds->Observe(absl::ToDoubleSeconds(absl::Now() - start));
    slot.Release();
    metrics_.in_flight().Decrement();
    call->Complete(status);
  };

  metrics_.queue_depth().Increment();
  const BoundedThreadPool::ScheduleResult scheduled = pool_.TrySchedule(std::move(run));
  if (scheduled != BoundedThreadPool::ScheduleResult::kScheduled) {
    metrics_.queue_depth().Decrement();
    if (scheduled == BoundedThreadPool::ScheduleResult::kQueueFull) {
      metrics_.rejected(RejectionReason::kQueueFull).Increment();
      call->Complete(
          absl::ResourceExhaustedError("all planner threads are busy and the "
                                       "queue is full; retry with backoff"));
    } else {
      metrics_.rejected(RejectionReason::kShuttingDown).Increment();
      call->Complete(absl::UnavailableError("the server is shutting down"));
    }
  }
}

absl::Status PlannerService::Answer(const PlannerRpcMethod& rpc, PlannerCall& call,
                                    grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  const std::optional<std::string> key =
      plan_cache_ != nullptr && rpc.cacheable ? PlanCache::Key(rpc.name, *request) : std::nullopt;
  if (key.has_value()) {
    PlanCache::Entry cached;
    if (plan_cache_->Lookup(*key, &cached)) {
      metrics_.plan_cache_hits().Increment();
      call.SetRequestSize(cached.nodes, cached.devices);
      response->Swap(&cached.response);
      return absl::OkStatus();
    }
  }

  const ReceivedRequest received(request);
  absl::StatusOr<PlannerRequest> read =
      ReadPlannerRequest(rpc, received.valid() ? &received.bytes() : nullptr, &call.arena());
  if (!read.ok()) return read.status();
  // A miss is counted once the request parses: bytes that are not a
  // request were never going to be found.
  if (key.has_value()) metrics_.plan_cache_misses().Increment();
  absl::Cord bytes;
  const absl::Status planning = backend_.Answer(rpc, *read, call.token(), &call.arena(), &bytes);
  call.SetRequestSize(
      static_cast<int>(std::min<int64_t>(read->CountNodes(), std::numeric_limits<int>::max())),
      read->device_count());
  if (!planning.ok()) return planning;
  grpc::ByteBuffer buffer = ByteBufferOf(std::move(bytes));
  response->Swap(&buffer);
  if (key.has_value()) {
    plan_cache_->Insert(*key, {*response, call.nodes(), call.devices()});
    metrics_.plan_cache_bytes().Set(static_cast<double>(plan_cache_->bytes()));
  }
  return absl::OkStatus();
}

}  // namespace partplan

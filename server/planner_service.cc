#include "server/planner_service.h"

#include <grpc/slice.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "planner/base/status_util.h"
#include "planner/graph/graph_import.h"
#include "planner/graph/serialized_request.h"
#include "planner/wire/parse_failure.h"
#include "server/call_arena.h"
#include "server/logging.h"
#include "server/status_conversion.h"

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

// The call's deadline, InfiniteFuture when the client set none.
absl::Time DeadlineOf(const grpc::CallbackServerContext& context) {
  const std::chrono::system_clock::time_point deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

// The x-request-id metadata, empty when absent.
std::string RequestIdOf(const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("x-request-id");
  if (it == metadata.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// Every request has a graph; most, but not all, a device inventory.
template <typename Request, typename = void>
struct HasDeviceInventory : std::false_type {};
template <typename Request>
struct HasDeviceInventory<Request, std::void_t<decltype(std::declval<const Request&>().devices())>>
    : std::true_type {};

template <typename Request>
int DeviceCount(const Request& request) {
  if constexpr (HasDeviceInventory<Request>::value) {
    return request.devices().devices_size();
  } else {
    return 0;
  }
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

// A PlannerBackend method that answers with the response's bytes.
template <typename Request>
using SerializingMethod = absl::Status (PlannerBackend::*)(const Request&, const GraphSource&,
                                                           const CancellationToken&, absl::Cord*);

// The backend method that answers an RPC of `Request` with its response's
// bytes, for the RPCs whose response the library writes without building it
// as messages (PartitionGraph, Plan, ShardGraph and SplitGraph); nullptr for
// the others.
template <typename Request>
constexpr SerializingMethod<Request> SerializingMethodFor() {
  if constexpr (std::is_same_v<Request, v1::PartitionGraphRequest>) {
    return &PlannerBackend::PartitionGraphSerialized;
  } else if constexpr (std::is_same_v<Request, v1::PlanRequest>) {
    return &PlannerBackend::PlanSerialized;
  } else if constexpr (std::is_same_v<Request, v1::ShardGraphRequest>) {
    return &PlannerBackend::ShardGraphSerialized;
  } else if constexpr (std::is_same_v<Request, v1::SplitGraphRequest>) {
    return &PlannerBackend::SplitGraphSerialized;
  } else {
    return nullptr;
  }
}

}  // namespace

// One call from its handler to Finish: the planner's cancellation token, and
// what the metrics and the log line need. Deletes itself when gRPC is done
// with the call.
class PlannerCall final : public grpc::ServerUnaryReactor {
 public:
  PlannerCall(PlannerRpc rpc, const grpc::CallbackServerContext& context, size_t request_bytes,
              const ServerMetrics& metrics, absl::Duration max_call_duration)
      : rpc_(rpc),
        metrics_(metrics),
        start_(absl::Now()),
        server_limit_(start_ + max_call_duration),
        client_deadline_(DeadlineOf(context)),
        token_(std::min(client_deadline_, server_limit_)),
        request_bytes_(request_bytes),
        request_id_(RequestIdOf(context)) {
    metrics_.rpc(rpc_).started->Increment();
  }

  const CancellationToken& token() const { return token_; }

  // The size of the request's graph, once it is known (parsed, or from the
  // plan cache), for the metrics and the log line.
  void SetRequestSize(int nodes, int devices) {
    nodes_ = nodes;
    devices_ = devices;
    // -1: a graph whose bytes do not scan, counted by nobody.
    if (nodes_ >= 0) metrics_.graph_nodes().Observe(nodes_);
  }
  int nodes() const { return nodes_; }
  int devices() const { return devices_; }

  // The arena of the call's parsed request and its response, made on first
  // use. It lives until gRPC is done with the call: freeing a 10^6-node
  // request takes a tenth of a second, which the client need not wait for.
  google::protobuf::Arena& arena() {
    if (!arena_.has_value()) arena_.emplace(CallArenaOptions());
    return *arena_;
  }

  // Records the outcome in metrics and the log, then finishes the call; the
  // call may be deleted as soon as this returns.
  void Complete(const absl::Status& status_in) {
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
    metrics_.handled(rpc_, grpc_status.error_code()).Increment();
    metrics_.rpc(rpc_).handling_seconds->Observe(absl::ToDoubleSeconds(duration));
    Log(status, duration);
    Finish(grpc_status);
  }

  // The client went away, the deadline passed, or the draining server gave
  // up on the call: stop the planner.
  void OnCancel() override { token_.Cancel(); }
  void OnDone() override { delete this; }

 private:
  void Log(const absl::Status& status, absl::Duration duration) const {
    std::vector<LogField> fields = {{"method", RpcName(rpc_)}};
    // Calls refused or failed before their request was read have no size.
    if (nodes_ >= 0) {
      fields.emplace_back("nodes", nodes_);
      fields.emplace_back("devices", devices_);
    }
    fields.emplace_back("request_bytes", static_cast<int64_t>(request_bytes_));
    fields.emplace_back("code", absl::StatusCodeToString(status.code()));
    fields.emplace_back("duration_ms", absl::ToDoubleMilliseconds(duration));
    if (!request_id_.empty()) fields.emplace_back("request_id", request_id_);
    if (!status.ok()) fields.emplace_back("error", status.message());
    LogInfo("rpc", fields);
  }

  const PlannerRpc rpc_;
  const ServerMetrics& metrics_;
  const absl::Time start_;
  const absl::Time server_limit_;     // start_ + max_call_duration
  const absl::Time client_deadline_;  // InfiniteFuture without one
  CancellationToken token_;
  const size_t request_bytes_;
  int nodes_ = -1;  // until the request is read
  int devices_ = -1;
  const std::string request_id_;
  std::optional<google::protobuf::Arena> arena_;
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
      max_call_duration_(max_call_duration) {}

template <typename Request, typename Response>
grpc::ServerUnaryReactor* PlannerService::Handle(PlannerRpc rpc,
                                                 BackendMethod<Request, Response> plan,
                                                 grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  auto* call = new PlannerCall(rpc, *context, request->Length(), metrics_, max_call_duration_);
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
  //
  // The call's pool slot is released before the call is answered, and the
  // gauges let go of it only after that: a client holding its answer, or
  // seeing queue depth and in-flight at 0, finds the slot free for its next
  // call, however long this thread then takes to log, finish and get back to
  // the queue.
  auto run = [this, rpc, plan, call, request = const_cast<grpc::ByteBuffer*>(request),
              response](BoundedThreadPool::Slot& slot) {
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
    const absl::Status status = Answer(rpc, plan, *call, request, response);
    metrics_.rpc(rpc).planner_seconds->Observe(absl::ToDoubleSeconds(absl::Now() - start));
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
  return call;
}

template <typename Request, typename Response>
absl::Status PlannerService::PlanAndSerialize(BackendMethod<Request, Response> plan,
                                              const Request& request, const GraphSource& graph,
                                              PlannerCall& call, grpc::ByteBuffer* response) {
  if constexpr (constexpr SerializingMethod<Request> serializing = SerializingMethodFor<Request>();
                serializing != nullptr) {
    // Planned and serialised in one step, so that a plan by name is
    // written from the graph's names rather than built as a message per
    // node (planner_backend.h).
    absl::Cord bytes;
    if (absl::Status planning = (backend_.*serializing)(request, graph, call.token(), &bytes);
        !planning.ok()) {
      return planning;
    }
    grpc::ByteBuffer buffer = ByteBufferOf(std::move(bytes));
    response->Swap(&buffer);
    return absl::OkStatus();
  }
  auto* planned = google::protobuf::Arena::CreateMessage<Response>(&call.arena());
  if (absl::Status planning = (backend_.*plan)(request, graph, call.token(), planned);
      !planning.ok()) {
    return planning;
  }
  bool own_buffer = false;
  if (const grpc::Status serialized =
          grpc::SerializationTraits<Response>::Serialize(*planned, response, &own_buffer);
      !serialized.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot serialise the response: ", serialized.error_message()));
  }
  return absl::OkStatus();
}

template <typename Request, typename Response>
absl::Status PlannerService::Answer(PlannerRpc rpc, BackendMethod<Request, Response> plan,
                                    PlannerCall& call, grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) {
  // Validate is cheaper than a cache lookup; every other RPC plans.
  const bool cacheable = plan_cache_ != nullptr && rpc != PlannerRpc::kValidate;
  const std::optional<std::string> key =
      cacheable ? PlanCache::Key(RpcName(rpc), *request) : std::nullopt;
  if (key.has_value()) {
    PlanCache::Entry cached;
    if (plan_cache_->Lookup(*key, &cached)) {
      metrics_.plan_cache_hits().Increment();
      call.SetRequestSize(cached.nodes, cached.devices);
      response->Swap(&cached.response);
      return absl::OkStatus();
    }
  }

  // The request's fields but its graph are parsed; the graph is imported
  // straight from its bytes, which stay here until the plan is made. A
  // request that does not split that way (not a well-formed message, or a
  // graph sent in pieces, which protobuf merges) is parsed whole.
  const ReceivedRequest received(request);
  auto* parsed = google::protobuf::Arena::CreateMessage<Request>(&call.arena());
  const std::optional<ChunkedBytes> graph_bytes =
      received.valid() ? ParseAllButGraph(received.bytes(), parsed) : std::nullopt;
  if (!graph_bytes.has_value()) {
    parsed->Clear();
    ChunkedInputStream whole(received.bytes());
    if (!received.valid() || !parsed->ParseFromZeroCopyStream(&whole)) {
      const absl::Status failure =
          received.valid()
              ? ParseFailure(*Request::descriptor(), received.bytes())
              : InvalidFieldError("", absl::StrCat("the call carried no message; expected a ",
                                                   Request::descriptor()->full_name()));
      return InvalidFieldError(
          InvalidFieldPath(failure).value_or(""),
          absl::StrCat(InvalidFieldDescription(failure), ", the request message of /",
                       kPlannerServiceName, "/", RpcName(rpc)));
    }
  }
  GraphSource graph = graph_bytes.has_value() ? GraphSource::Serialized(*graph_bytes)
                                              : GraphSource(parsed->graph());
  // The planner's import counts the nodes as it finds them; a call that
  // fails before its graph is imported has them counted here.
  int64_t nodes = -1;
  graph.set_node_count_out(&nodes);
  // A miss is counted once the request parses: bytes that are not a
  // request were never going to be found.
  if (key.has_value()) metrics_.plan_cache_misses().Increment();
  const absl::Status planning = PlanAndSerialize(plan, *parsed, graph, call, response);
  if (nodes < 0) {
    nodes =
        graph_bytes.has_value() ? CountSerializedNodes(*graph_bytes) : parsed->graph().nodes_size();
  }
  call.SetRequestSize(static_cast<int>(std::min<int64_t>(nodes, std::numeric_limits<int>::max())),
                      DeviceCount(*parsed));
  if (!planning.ok()) return planning;
  if (key.has_value()) {
    plan_cache_->Insert(*key, {*response, call.nodes(), call.devices()});
    metrics_.plan_cache_bytes().Set(static_cast<double>(plan_cache_->bytes()));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PlannerService::PartitionGraph(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return Handle(PlannerRpc::kPartitionGraph, &PlannerBackend::PartitionGraph, context, request,
                response);
}

grpc::ServerUnaryReactor* PlannerService::SplitGraph(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return Handle(PlannerRpc::kSplitGraph, &PlannerBackend::SplitGraph, context, request, response);
}

grpc::ServerUnaryReactor* PlannerService::ShardGraph(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return Handle(PlannerRpc::kShardGraph, &PlannerBackend::ShardGraph, context, request, response);
}

grpc::ServerUnaryReactor* PlannerService::BuildPipelineGraph(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* request,
                                                             grpc::ByteBuffer* response) {
  return Handle(PlannerRpc::kBuildPipelineGraph, &PlannerBackend::BuildPipelineGraph, context,
                request, response);
}

grpc::ServerUnaryReactor* PlannerService::PlanDataParallel(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return Handle(PlannerRpc::kPlanDataParallel, &PlannerBackend::PlanDataParallel, context, request,
                response);
}

grpc::ServerUnaryReactor* PlannerService::Plan(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) {
  return Handle(PlannerRpc::kPlan, &PlannerBackend::Plan, context, request, response);
}

grpc::ServerUnaryReactor* PlannerService::Validate(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  return Handle(PlannerRpc::kValidate, &PlannerBackend::Validate, context, request, response);
}

}  // namespace partplan

// End-to-end benchmarks through a real server on loopback: the client
// serialises an N-node request, gRPC carries it, the server reads its graph
// from the bytes received, validates, plans and replies, and the client
// parses the plan. Beside them, the floors: protobuf's parse of the same
// request alone (heap and arena), and Validate, which reads and validates
// without planning.
//
// The stages of one call, timed alone, so that the end-to-end figure can be
// split: the client serialises the request (built on an arena, and for
// scale on the heap), the server reads it and plans into an arena response,
// serialises that, and the client parses it (on an arena).
//
// PartitionGraph's cases run with the plan naming nodes (the default,
// `/by_name/`) and with node indices (`/by_index/`, NODE_REFERENCES_INDICES),
// against a server without a plan cache, so that every iteration plans;
// ...Cached against one with the default cache, so that every iteration
// after the first is a hit (the benchmark sends the same request each time).
//
//   bazel run -c opt //tests/bench:end_to_end_bench
#include <grpcpp/grpcpp.h>

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "client/cli/planner_client.h"
#include "google/protobuf/arena.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/api/entry_points.h"
#include "planner/graph/serialized_request.h"
#include "server/call_arena.h"
#include "server/server.h"
#include "tests/bench/synthetic_graphs.h"

namespace partplan {
namespace {

// One server for the whole run, per cache setting, and a channel to it. The
// benchmarks call it as the CLI does (client/cli/planner_client.h): the
// request serialised once into one slice, the response parsed from the
// bytes received, here into an arena message.
class Loopback {
 public:
  // Without a plan cache.
  static Loopback& Get() {
    static Loopback* const loopback = new Loopback(/*plan_cache_bytes=*/0);
    return *loopback;
  }
  // With the server's default plan cache.
  static Loopback& GetCached() {
    static Loopback* const loopback = new Loopback(ServerOptions().plan_cache_bytes);
    return *loopback;
  }

  // Calls `method` of the planner service; `request` and `*response` of its
  // types.
  grpc::Status Call(absl::string_view method, const google::protobuf::Message& request,
                    google::protobuf::Message* response) {
    return cli::CallPlanner(channel_, **cli::FindPlannerMethod(method), request, connection_,
                            response);
  }

 private:
  explicit Loopback(int64_t plan_cache_bytes) {
    ServerOptions options;
    options.plan_cache_bytes = plan_cache_bytes;
    options.host = "127.0.0.1";
    options.port = 0;
    options.metrics_port = -1;
    options.planner_threads = 1;
    options.max_receive_message_bytes = 1 << 30;
    server_ = *PlannerServer::Start(options);
    connection_.target = "127.0.0.1:" + std::to_string(server_->port());
    connection_.deadline = absl::InfiniteDuration();
    connection_.max_message_bytes = 1 << 30;
    channel_ = cli::ConnectToPlanner(connection_);
  }

  std::unique_ptr<PlannerServer> server_;
  cli::ConnectionOptions connection_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Times `call`, after one call outside the timing whose time is kept as the
// counter `first_call_s` (Google Benchmark may run a case's function more
// than once as it settles the iteration count, and reports the last run's
// counters: for a 10^6-node case, run once, that is the process's first
// such call). A running server has answered many calls: the
// memory a call frees is then reused by the next instead of faulted in
// afresh, which dominates a cold large call, so that a single
// run's figure would be the first call's. Every case here is timed this way,
// the floors as the calls, so that their ratios compare like with like.
template <typename Call>
void TimeWarm(benchmark::State& state, Call call) {
  const absl::Time start = absl::Now();
  call();
  state.counters["first_call_s"] = absl::ToDoubleSeconds(absl::Now() - start);
  for (auto _ : state) call();
}

// Counters: the serialised size and what the parsed message occupies in
// memory (protobuf's SpaceUsedLong estimate on the heap; the bytes the arena
// handed out on an arena), the floor of a server's memory for the request.
void BM_ParseRequestHeap(benchmark::State& state) {
  const std::string bytes = ResidualStackRequest(state.range(0), 8).SerializeAsString();
  size_t in_memory = 0;
  {
    v1::PartitionGraphRequest request;
    if (request.ParseFromString(bytes)) in_memory = request.SpaceUsedLong();
  }
  TimeWarm(state, [&bytes] {
    v1::PartitionGraphRequest request;
    benchmark::DoNotOptimize(request.ParseFromString(bytes));
  });
  state.counters["request_bytes"] = static_cast<double>(bytes.size());
  state.counters["parsed_bytes"] = static_cast<double>(in_memory);
}

void BM_ParseRequestArena(benchmark::State& state) {
  const std::string bytes = ResidualStackRequest(state.range(0), 8).SerializeAsString();
  uint64_t in_memory = 0;
  TimeWarm(state, [&] {
    google::protobuf::Arena arena(CallArenaOptions());
    auto* request = google::protobuf::Arena::CreateMessage<v1::PartitionGraphRequest>(&arena);
    benchmark::DoNotOptimize(request->ParseFromString(bytes));
    in_memory = arena.SpaceUsed();
  });
  state.counters["request_bytes"] = static_cast<double>(bytes.size());
  state.counters["parsed_bytes"] = static_cast<double>(in_memory);
}

// The client's serialisation of a request built on the heap, message by
// message, and of the same request built on an arena, as the end-to-end
// cases' client builds it: serialising walks every message, and on an arena
// they lie in the order it walks them.
void BM_SerializeRequest(benchmark::State& state) {
  const v1::PartitionGraphRequest request = ResidualStackRequest(state.range(0), 8);
  TimeWarm(state, [&request] {
    std::string bytes;
    benchmark::DoNotOptimize(request.SerializeToString(&bytes));
  });
}

void BM_SerializeRequestArena(benchmark::State& state) {
  google::protobuf::Arena arena;
  auto* request = google::protobuf::Arena::CreateMessage<v1::PartitionGraphRequest>(&arena);
  *request = ResidualStackRequest(state.range(0), 8);
  TimeWarm(state, [request] {
    std::string bytes;
    benchmark::DoNotOptimize(request->SerializeToString(&bytes));
  });
}

// The benchmarks' PartitionGraph request: a residual stack on 8 devices.
v1::PartitionGraphRequest BenchRequest(const benchmark::State& state,
                                       v1::NodeReferences node_references) {
  v1::PartitionGraphRequest request = ResidualStackRequest(state.range(0), 8);
  request.set_node_references(node_references);
  return request;
}

// Import, validation, size_based and the serialised response, as the server
// runs them: the request's fields but its graph parsed on an arena, the
// graph imported straight from its bytes (planner/graph/serialized_request.h), the
// response written by PartitionGraphSerialized (a plan by name straight from
// the graph's names).
void BM_PlanAndSerialize(benchmark::State& state, v1::NodeReferences node_references) {
  const std::string bytes = BenchRequest(state, node_references).SerializeAsString();
  const CancellationToken token;
  TimeWarm(state, [&] {
    google::protobuf::Arena arena(CallArenaOptions());
    auto* request = google::protobuf::Arena::CreateMessage<v1::PartitionGraphRequest>(&arena);
    const std::optional<ChunkedBytes> graph = ParseAllButGraph(bytes, request);
    absl::Cord response;
    const absl::Status status =
        graph.has_value() ? PartitionGraphSerialized(*request, GraphSource::Serialized(*graph),
                                                     InputLimits(), token, &response)
                          : absl::InvalidArgumentError("the request does not parse");
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
  });
}

// The plan's reply: protobuf's serialisation of the response message, which
// the server does not build for PartitionGraph (for scale), and the
// client's parse of it on an arena.
void BM_SerializeResponse(benchmark::State& state, v1::NodeReferences node_references) {
  const v1::PartitionGraphResponse response =
      *PartitionGraph(BenchRequest(state, node_references), InputLimits(), CancellationToken());
  TimeWarm(state, [&response] {
    std::string bytes;
    benchmark::DoNotOptimize(response.SerializeToString(&bytes));
  });
  state.counters["response_bytes"] = static_cast<double>(response.ByteSizeLong());
}

void BM_ParseResponseArena(benchmark::State& state, v1::NodeReferences node_references) {
  const std::string bytes =
      PartitionGraph(BenchRequest(state, node_references), InputLimits(), CancellationToken())
          ->SerializeAsString();
  TimeWarm(state, [&bytes] {
    google::protobuf::Arena arena(CallArenaOptions());
    auto* response = google::protobuf::Arena::CreateMessage<v1::PartitionGraphResponse>(&arena);
    benchmark::DoNotOptimize(response->ParseFromString(bytes));
  });
}

// The end-to-end cases' client builds its request on an arena (outside the
// timing) and parses the response on one.
void BM_ValidateEndToEnd(benchmark::State& state) {
  google::protobuf::Arena request_arena;
  auto* request = google::protobuf::Arena::CreateMessage<v1::ValidateRequest>(&request_arena);
  *request->mutable_graph() = ResidualStack(state.range(0));
  TimeWarm(state, [&state, request] {
    v1::ValidateResponse response;
    const grpc::Status status = Loopback::Get().Call("Validate", *request, &response);
    if (!status.ok()) state.SkipWithError(status.error_message().c_str());
  });
}

void RunPartitionGraphEndToEnd(benchmark::State& state, Loopback& loopback,
                               v1::NodeReferences node_references) {
  google::protobuf::Arena request_arena;
  auto* request = google::protobuf::Arena::CreateMessage<v1::PartitionGraphRequest>(&request_arena);
  *request = BenchRequest(state, node_references);
  size_t response_bytes = 0;
  TimeWarm(state, [&] {
    google::protobuf::Arena arena(CallArenaOptions());
    auto* response = google::protobuf::Arena::CreateMessage<v1::PartitionGraphResponse>(&arena);
    const grpc::Status status = loopback.Call("PartitionGraph", *request, response);
    if (!status.ok()) state.SkipWithError(status.error_message().c_str());
    response_bytes = response->ByteSizeLong();
  });
  state.counters["request_bytes"] = static_cast<double>(request->ByteSizeLong());
  state.counters["response_bytes"] = static_cast<double>(response_bytes);
}

void BM_PartitionGraphEndToEnd(benchmark::State& state, v1::NodeReferences node_references) {
  RunPartitionGraphEndToEnd(state, Loopback::Get(), node_references);
}

// The same request again and again: every timed call is a plan cache hit
// (the first call, out of the timing, fills the cache).
void BM_PartitionGraphEndToEndCached(benchmark::State& state) {
  RunPartitionGraphEndToEnd(state, Loopback::GetCached(), v1::NODE_REFERENCES_NAMES);
}

BENCHMARK(BM_ParseRequestHeap)->Arg(100)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ParseRequestArena)->Arg(100)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SerializeRequest)->Arg(100)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SerializeRequestArena)
    ->Arg(100)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ValidateEndToEnd)->Arg(100)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
// Each PartitionGraph case with both forms of the plan, as
// `<function>/by_name/<nodes>` and `<function>/by_index/<nodes>`.
bool RegisterByNameAndByIndex(const std::string& name,
                              void (*function)(benchmark::State&, v1::NodeReferences),
                              std::initializer_list<int64_t> node_counts, bool real_time) {
  for (const auto& [form, node_references] :
       {std::pair{"/by_name", v1::NODE_REFERENCES_NAMES},
        std::pair{"/by_index", v1::NODE_REFERENCES_INDICES}}) {
    benchmark::internal::Benchmark* registered =
        benchmark::RegisterBenchmark((name + form).c_str(), function, node_references);
    for (const int64_t nodes : node_counts) registered->Arg(nodes);
    registered->Unit(benchmark::kMillisecond);
    if (real_time) registered->UseRealTime();
  }
  return true;
}
const bool kRegistered =
    RegisterByNameAndByIndex("BM_PlanAndSerialize", &BM_PlanAndSerialize, {100, 100000, 1000000},
                             false) &&
    RegisterByNameAndByIndex("BM_SerializeResponse", &BM_SerializeResponse, {100, 100000, 1000000},
                             false) &&
    RegisterByNameAndByIndex("BM_ParseResponseArena", &BM_ParseResponseArena,
                             {100, 100000, 1000000}, false) &&
    RegisterByNameAndByIndex("BM_PartitionGraphEndToEnd", &BM_PartitionGraphEndToEnd,
                             {100, 16002, 100000, 1000000}, true);
BENCHMARK(BM_PartitionGraphEndToEndCached)->Arg(100)->Arg(100000)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace partplan

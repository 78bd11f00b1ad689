// End-to-end benchmarks through a real server on loopback: the client
// serialises an N-node request, gRPC carries it, the server parses it (on
// an arena), validates, plans and replies, and the client parses the plan.
// Beside them, the floors: parsing the same request alone (heap and arena),
// and Validate, which parses and validates without planning.
//
//   bazel run -c opt //tests/bench:end_to_end_bench
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "benchmark/benchmark.h"
#include "google/protobuf/arena.h"
#include "partplan/v1/planner_service.grpc.pb.h"
#include "server/server.h"
#include "tests/bench/synthetic_graphs.h"

namespace partplan {
namespace {

// One server and stub for the whole run.
class Loopback {
 public:
  static Loopback& Get() {
    static Loopback* const loopback = new Loopback();
    return *loopback;
  }
  v1::PartitionPlanner::Stub& stub() { return *stub_; }

 private:
  Loopback() {
    ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.metrics_port = -1;
    options.planner_threads = 1;
    options.max_receive_message_bytes = 1 << 30;
    server_ = *PlannerServer::Start(options);
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(1 << 30);
    arguments.SetMaxSendMessageSize(1 << 30);
    stub_ = v1::PartitionPlanner::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials(),
        arguments));
  }

  std::unique_ptr<PlannerServer> server_;
  std::unique_ptr<v1::PartitionPlanner::Stub> stub_;
};

void BM_ParseRequestHeap(benchmark::State& state) {
  const std::string bytes = ResidualStackRequest(state.range(0), 8).SerializeAsString();
  for (auto _ : state) {
    v1::PartitionGraphRequest request;
    benchmark::DoNotOptimize(request.ParseFromString(bytes));
  }
  state.counters["request_bytes"] = static_cast<double>(bytes.size());
}

void BM_ParseRequestArena(benchmark::State& state) {
  const std::string bytes = ResidualStackRequest(state.range(0), 8).SerializeAsString();
  for (auto _ : state) {
    google::protobuf::Arena arena;
    auto* request = google::protobuf::Arena::CreateMessage<v1::PartitionGraphRequest>(&arena);
    benchmark::DoNotOptimize(request->ParseFromString(bytes));
  }
}

void BM_ValidateEndToEnd(benchmark::State& state) {
  v1::ValidateRequest request;
  *request.mutable_graph() = ResidualStack(state.range(0));
  for (auto _ : state) {
    grpc::ClientContext context;
    v1::ValidateResponse response;
    const grpc::Status status = Loopback::Get().stub().Validate(&context, request, &response);
    if (!status.ok()) state.SkipWithError(status.error_message().c_str());
  }
}

void BM_PartitionGraphEndToEnd(benchmark::State& state) {
  const v1::PartitionGraphRequest request = ResidualStackRequest(state.range(0), 8);
  for (auto _ : state) {
    grpc::ClientContext context;
    google::protobuf::Arena arena;  // the client parses the plan on an arena too
    auto* response = google::protobuf::Arena::CreateMessage<v1::PartitionGraphResponse>(&arena);
    const grpc::Status status =
        Loopback::Get().stub().PartitionGraph(&context, request, response);
    if (!status.ok()) state.SkipWithError(status.error_message().c_str());
  }
}

BENCHMARK(BM_ParseRequestHeap)->Arg(100)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ParseRequestArena)->Arg(100)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ValidateEndToEnd)->Arg(100)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PartitionGraphEndToEnd)->Arg(100)->Arg(16002)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace partplan

BENCHMARK_MAIN();

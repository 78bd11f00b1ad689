// The PartitionPlanner service end to end over loopback, with a fake
// planner backend: answers, error details, a full pool, deadlines and
// client cancellation.
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/error_details.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "server/logging.h"
#include "server/server.h"
#include "tests/planner/plan_summary.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

TEST(PlannerServiceTest, ValidateReturnsTheBackendsResponse) {
  auto backend = std::make_unique<FakePlannerBackend>();
  backend->canned<v1::ValidateResponse>().set_node_count(3);
  backend->canned<v1::ValidateResponse>().set_edge_count(2);
  std::unique_ptr<PlannerServer> server = StartTestServer(std::move(backend));
  ASSERT_NE(server, nullptr);

  grpc::ClientContext context;
  context.AddMetadata("x-request-id", "test-request-1");
  v1::ValidateResponse response;
  const grpc::Status status =
      NewPlannerStub(*server)->Validate(&context, v1::ValidateRequest(), &response);

  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.node_count(), 3);
  EXPECT_EQ(response.edge_count(), 2);
}

TEST(PlannerServiceTest, LogsOneLinePerCallWithItsRequestId) {
  std::ostringstream log;
  const std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  ConfigureLogging(LogFormat::kText);
  v1::ValidateRequest request;
  request.mutable_graph()->add_nodes()->set_name("x");
  request.mutable_devices()->add_devices()->set_name("gpu0");
  {
    std::unique_ptr<PlannerServer> server = StartTestServer(std::make_unique<FakePlannerBackend>());
    ASSERT_NE(server, nullptr);
    grpc::ClientContext context;
    context.AddMetadata("x-request-id", "req-42");
    v1::ValidateResponse response;
    ASSERT_TRUE(NewPlannerStub(*server)->Validate(&context, request, &response).ok());
  }
  spdlog::set_default_logger(previous);

  std::vector<std::string> rpc_lines;
  for (const absl::string_view line : absl::StrSplit(log.str(), '\n')) {
    if (absl::StrContains(line, " rpc ")) rpc_lines.emplace_back(line);
  }
  ASSERT_EQ(rpc_lines.size(), 1u) << log.str();
  EXPECT_TRUE(absl::StrContains(rpc_lines[0],
                                absl::StrCat("rpc method=Validate nodes=1 devices=1 request_bytes=",
                                             request.ByteSizeLong(), " code=OK duration_ms=")))
      << rpc_lines[0];
  EXPECT_TRUE(absl::StrContains(rpc_lines[0], " request_id=req-42")) << rpc_lines[0];
}

TEST(PlannerServiceTest, PartitionGraphReturnsTheBackendsPlan) {
  auto backend = std::make_unique<FakePlannerBackend>();
  v1::PartitionPlan& plan = *backend->canned<v1::PartitionGraphResponse>().mutable_plan();
  plan.mutable_summary()->set_planner("partitioner/size_based");
  plan.add_partitions()->set_id(0);
  std::unique_ptr<PlannerServer> server = StartTestServer(std::move(backend));
  ASSERT_NE(server, nullptr);

  grpc::ClientContext context;
  v1::PartitionGraphResponse response;
  const grpc::Status status =
      NewPlannerStub(*server)->PartitionGraph(&context, v1::PartitionGraphRequest(), &response);

  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.plan().summary().planner(), "partitioner/size_based");
  EXPECT_EQ(response.plan().partitions_size(), 1);
}

// The planner a client sees in the response to `call`, where the backend
// answers bytes of a response that says "the bytes".
template <typename Request, typename Response>
std::string PlannerTheClientSees(grpc::Status (v1::PartitionPlanner::Stub::*call)(
    grpc::ClientContext*, const Request&, Response*)) {
  auto backend = std::make_unique<FakePlannerBackend>();
  Response bytes;
  SummaryOf(bytes)->set_planner("the bytes");
  backend->set_response_bytes(bytes.SerializeAsString());
  std::unique_ptr<PlannerServer> server = StartTestServer(std::move(backend));
  if (server == nullptr) return "no server";
  grpc::ClientContext context;
  Response response;
  const grpc::Status status =
      (NewPlannerStub(*server).get()->*call)(&context, Request(), &response);
  if (!status.ok()) return status.error_message();
  return SummaryOf(response)->planner();
}

// Every RPC is answered with the bytes the backend writes, as they are.
TEST(PlannerServiceTest, PlansAreSentAsTheBackendWritesThem) {
  EXPECT_EQ(PlannerTheClientSees(&v1::PartitionPlanner::Stub::PartitionGraph), "the bytes");
  EXPECT_EQ(PlannerTheClientSees(&v1::PartitionPlanner::Stub::Plan), "the bytes");
  EXPECT_EQ(PlannerTheClientSees(&v1::PartitionPlanner::Stub::ShardGraph), "the bytes");

  // SplitGraph's response has no summary: its output values say which.
  auto backend = std::make_unique<FakePlannerBackend>();
  v1::SplitGraphResponse bytes;
  bytes.add_output_values("the bytes");
  backend->set_response_bytes(bytes.SerializeAsString());
  std::unique_ptr<PlannerServer> server = StartTestServer(std::move(backend));
  ASSERT_NE(server, nullptr);
  grpc::ClientContext context;
  v1::SplitGraphResponse response;
  ASSERT_TRUE(
      NewPlannerStub(*server)->SplitGraph(&context, v1::SplitGraphRequest(), &response).ok());
  ASSERT_EQ(response.output_values_size(), 1);
  EXPECT_EQ(response.output_values(0), "the bytes");
}

TEST(PlannerServiceTest, InvalidArgumentCarriesBadRequestFieldViolation) {
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>([](const CancellationToken&) {
        return InvalidFieldError("graph.nodes[12].args[0]", "refers to unknown node 'foo'");
      }));
  ASSERT_NE(server, nullptr);

  grpc::ClientContext context;
  v1::PlanResponse response;
  const grpc::Status status = NewPlannerStub(*server)->Plan(&context, v1::PlanRequest(), &response);

  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "graph.nodes[12].args[0]: refers to unknown node 'foo'");
  google::rpc::Status details;
  ASSERT_TRUE(grpc::ExtractErrorDetails(status, &details).ok());
  EXPECT_EQ(details.code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_EQ(details.details_size(), 1);
  google::rpc::BadRequest bad_request;
  ASSERT_TRUE(details.details(0).UnpackTo(&bad_request));
  ASSERT_EQ(bad_request.field_violations_size(), 1);
  EXPECT_EQ(bad_request.field_violations(0).field(), "graph.nodes[12].args[0]");
  EXPECT_EQ(bad_request.field_violations(0).description(), "refers to unknown node 'foo'");
}

TEST(PlannerServiceTest, FullPoolAndQueueAnswerResourceExhaustedAtOnce) {
  absl::Notification release;
  EventCounter started;
  ServerOptions options = TestServerOptions();
  options.planner_threads = 1;
  options.queue_depth = 1;
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(BlockUntil(release, started)), options);
  ASSERT_NE(server, nullptr);
  auto stub = NewPlannerStub(*server);

  // The only planner thread is busy ...
  std::unique_ptr<PendingValidate> running = StartValidate(*stub);
  ASSERT_TRUE(started.WaitFor(1));
  // ... so of two more calls one takes the only queue slot and the other is
  // refused, whichever arrives second.
  EventCounter finished;
  std::unique_ptr<PendingValidate> first = StartValidate(*stub, &finished);
  std::unique_ptr<PendingValidate> second = StartValidate(*stub, &finished);
  ASSERT_TRUE(finished.WaitFor(1));
  PendingValidate& refused = first->done.HasBeenNotified() ? *first : *second;
  PendingValidate& queued = first->done.HasBeenNotified() ? *second : *first;
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Refused without running: the planner has seen only the first call.
  EXPECT_EQ(started.count(), 1);
  EXPECT_FALSE(queued.done.HasBeenNotified());

  release.Notify();
  ASSERT_TRUE(WaitForCall(*running));
  ASSERT_TRUE(WaitForCall(queued));
  EXPECT_TRUE(running->status.ok()) << running->status.error_message();
  EXPECT_TRUE(queued.status.ok()) << queued.status.error_message();
  EXPECT_EQ(started.count(), 2);
}

TEST(PlannerServiceTest, DeadlineStopsThePlanner) {
  TokenProbe probe;
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(WaitForToken(probe)));
  ASSERT_NE(server, nullptr);

  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(200)));
  v1::ValidateResponse response;
  const grpc::Status status =
      NewPlannerStub(*server)->Validate(&context, v1::ValidateRequest(), &response);

  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_TRUE(probe.stopped.WaitForNotificationWithTimeout(kTestTimeout));
  // The token has the call's deadline, and OnCancel fires it too; either
  // way the planner stopped because of the expired call.
  EXPECT_TRUE(absl::IsDeadlineExceeded(probe.stop_status) || absl::IsCancelled(probe.stop_status))
      << probe.stop_status;
}

TEST(PlannerServiceTest, ClientCancellationStopsThePlanner) {
  TokenProbe probe;
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(WaitForToken(probe)));
  ASSERT_NE(server, nullptr);
  auto stub = NewPlannerStub(*server);

  std::unique_ptr<PendingValidate> call = StartValidate(*stub);
  ASSERT_TRUE(probe.started.WaitFor(1));
  call->context.TryCancel();

  ASSERT_TRUE(WaitForCall(*call));
  EXPECT_EQ(call->status.error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(probe.stopped.WaitForNotificationWithTimeout(kTestTimeout));
  // The call's deadline is far off, so only OnCancel can have fired it.
  EXPECT_TRUE(absl::IsCancelled(probe.stop_status)) << probe.stop_status;
}

TEST(PlannerServiceTest, OversizedRequestIsRefused) {
  ServerOptions options = TestServerOptions();
  options.max_receive_message_bytes = 1024;
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(), options);
  ASSERT_NE(server, nullptr);

  v1::ValidateRequest request;
  request.mutable_graph()->set_name(std::string(2048, 'x'));
  grpc::ClientContext context;
  v1::ValidateResponse response;
  const grpc::Status status = NewPlannerStub(*server)->Validate(&context, request, &response);

  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

}  // namespace
}  // namespace partplan

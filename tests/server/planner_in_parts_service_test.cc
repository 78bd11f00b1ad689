// PartitionPlannerInParts.Call: a request sent in parts is answered as its
// RPC answers it in one message, the response comes back in parts of at most
// 1 MiB, and parts that are malformed, name no RPC or hold more than one
// message may are refused before anything is planned.
#include "server/planner_in_parts_service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/error_details.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.grpc.pb.h"
#include "planner/base/status_util.h"
#include "server/server.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

PartsReply CallInParts(const PlannerServer& server, const std::string& method,
                       const std::string& request, size_t part_bytes,
                       const std::string& later_method = "") {
  return partplan::CallInParts(ConnectTo(server), method, request, part_bytes, later_method);
}

// A request with `nodes` nodes in a chain (placeholder, calls, output).
v1::ValidateRequest ChainValidateRequest(int nodes) {
  v1::ValidateRequest request;
  for (int i = 0; i < nodes; ++i) {
    v1::Node* node = request.mutable_graph()->add_nodes();
    node->set_name("n" + std::to_string(i));
    node->set_op(i == 0 ? v1::PLACEHOLDER : i + 1 == nodes ? v1::OUTPUT : v1::CALL_FUNCTION);
    node->set_target(i == 0 ? "x" : i + 1 == nodes ? "output" : "torch.relu");
    if (i > 0) node->add_args()->set_node("n" + std::to_string(i - 1));
  }
  return request;
}

std::string FieldOfViolation(const grpc::Status& status) {
  google::rpc::Status details;
  if (!grpc::ExtractErrorDetails(status, &details).ok() || details.details_size() != 1) return "";
  google::rpc::BadRequest bad_request;
  if (!details.details(0).UnpackTo(&bad_request) || bad_request.field_violations_size() != 1) {
    return "";
  }
  return bad_request.field_violations(0).field();
}

TEST(PlannerInPartsServiceTest, AnswersAsTheUnaryRpcWhateverTheParts) {
  std::unique_ptr<PlannerServer> server = StartTestServer(nullptr);  // the planner library
  ASSERT_NE(server, nullptr);
  const v1::ValidateRequest request = ChainValidateRequest(2000);
  const std::string bytes = request.SerializeAsString();
  grpc::ClientContext context;
  v1::ValidateResponse unary;
  ASSERT_TRUE(NewPlannerStub(*server)->Validate(&context, request, &unary).ok());
  ASSERT_EQ(unary.node_count(), 2000);
  for (const size_t part_bytes : {size_t{1}, size_t{7}, size_t{4096}, bytes.size()}) {
    SCOPED_TRACE(part_bytes);
    const PartsReply answer = CallInParts(*server, "Validate", bytes, part_bytes);
    ASSERT_TRUE(answer.status.ok()) << answer.status.error_message();
    EXPECT_EQ(answer.Joined(), unary.SerializeAsString());
  }
}

TEST(PlannerInPartsServiceTest, ResponseComesInPartsOfAtMostOneMebibyte) {
  auto backend = std::make_unique<FakePlannerBackend>();
  std::string response(5 * PlannerInPartsService::kPartBytes / 2, '\0');
  for (size_t i = 0; i < response.size(); ++i) response[i] = static_cast<char>(i * 7919 % 251);
  backend->set_response_bytes(response);
  std::unique_ptr<PlannerServer> server = StartTestServer(std::move(backend));
  ASSERT_NE(server, nullptr);
  const PartsReply answer = CallInParts(*server, "PartitionGraph", "", 1);
  ASSERT_TRUE(answer.status.ok()) << answer.status.error_message();
  ASSERT_EQ(answer.parts.size(), 3u);
  for (const std::string& part : answer.parts) {
    EXPECT_GT(part.size(), 0u);
    EXPECT_LE(part.size(), PlannerInPartsService::kPartBytes);
  }
  EXPECT_EQ(answer.Joined(), response);
}

TEST(PlannerInPartsServiceTest, EmptyResponseIsNoParts) {
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>());  // empty responses
  ASSERT_NE(server, nullptr);
  const PartsReply answer = CallInParts(*server, "Plan", "", 1);
  ASSERT_TRUE(answer.status.ok()) << answer.status.error_message();
  EXPECT_TRUE(answer.parts.empty());
}

TEST(PlannerInPartsServiceTest, PlannerErrorsComeBackAsTheyWouldInOneMessage) {
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>([](const CancellationToken&) {
        return InvalidFieldError("graph.nodes[12].args[0]", "refers to unknown node 'foo'");
      }));
  ASSERT_NE(server, nullptr);
  const PartsReply answer = CallInParts(*server, "PartitionGraph", "", 1);
  EXPECT_EQ(answer.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(FieldOfViolation(answer.status), "graph.nodes[12].args[0]");
  EXPECT_TRUE(answer.parts.empty());
}

TEST(PlannerInPartsServiceTest, MalformedPartsAreRefusedNamingTheField) {
  EventCounter planned;
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>([&planned](const CancellationToken&) {
        planned.Increment();
        return absl::OkStatus();
      }));
  ASSERT_NE(server, nullptr);

  const PartsReply unknown = CallInParts(*server, "Partition", "abc", 1);
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(FieldOfViolation(unknown.status), "method");
  EXPECT_NE(unknown.status.error_message().find("\"Partition\"; one of PartitionGraph"),
            std::string::npos)
      << unknown.status.error_message();

  const PartsReply renamed = CallInParts(*server, "Validate", "abc", 1, "Plan");
  EXPECT_EQ(renamed.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(FieldOfViolation(renamed.status), "method");

  // No part at all.
  auto stub = v1::PartitionPlannerInParts::NewStub(ConnectTo(*server));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kTestTimeout));
  auto stream = stub->Call(&context);
  stream->WritesDone();
  v1::MessagePart part;
  EXPECT_FALSE(stream->Read(&part));
  const grpc::Status none = stream->Finish();
  EXPECT_EQ(none.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(FieldOfViolation(none), "method");

  EXPECT_EQ(planned.count(), 0);
}

TEST(PlannerInPartsServiceTest, PartsTogetherAreLimitedAsOneMessageIs) {
  EventCounter planned;
  ServerOptions options = TestServerOptions();
  options.max_receive_message_bytes = 100'000;
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>([&planned](const CancellationToken&) {
                        planned.Increment();
                        return absl::OkStatus();
                      }),
                      options);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(CallInParts(*server, "Plan", std::string(100'000, 'x'), 30'000).status.ok());
  const PartsReply over = CallInParts(*server, "Plan", std::string(100'001, 'x'), 30'000);
  EXPECT_EQ(over.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << over.status.error_message();
  EXPECT_NE(over.status.error_message().find("--max_receive_message_bytes"), std::string::npos);
  EXPECT_EQ(planned.count(), 1);
}

TEST(PlannerInPartsServiceTest, ClientCancellingStopsThePlanner) {
  TokenProbe probe;
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(WaitForToken(probe)));
  ASSERT_NE(server, nullptr);
  auto stub = v1::PartitionPlannerInParts::NewStub(ConnectTo(*server));
  grpc::ClientContext context;
  auto stream = stub->Call(&context);
  v1::MessagePart part;
  part.set_method("Plan");
  ASSERT_TRUE(stream->Write(part));
  ASSERT_TRUE(stream->WritesDone());
  ASSERT_TRUE(probe.started.WaitFor(1));  // planning
  context.TryCancel();
  ASSERT_TRUE(probe.stopped.WaitForNotificationWithTimeout(kTestTimeout));
  EXPECT_TRUE(absl::IsCancelled(probe.stop_status)) << probe.stop_status;
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace partplan

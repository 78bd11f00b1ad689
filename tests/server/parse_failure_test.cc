// Bad requests as the service answers them: bytes that do not parse get
// INVALID_ARGUMENT naming the field, several faults a violation each, a
// compressed request UNIMPLEMENTED; and the server goes on serving. The
// planner service parses its requests itself, as gRPC's health service does.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/error_details.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

grpc::Status CallRaw(const PlannerServer& server, const std::string& method,
                     const std::string& bytes) {
  grpc::GenericStub stub(ConnectTo(server));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kTestTimeout));
  grpc::Slice slice(bytes);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  return status;
}

TEST(ParseFailureTest, UnparsableRequestIsInvalidArgument) {
  std::unique_ptr<PlannerServer> server = StartTestServer(/*backend=*/nullptr);
  ASSERT_NE(server, nullptr);
  // Field 1 (graph) announces 65535 bytes and 3 follow.
  const grpc::Status status =
      CallRaw(*server, "/partplan.v1.PartitionPlanner/Validate", std::string("\x0a\xff\xff\x03xyz", 7));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(),
                                "partplan.v1.ValidateRequest, the request message of "
                                "/partplan.v1.PartitionPlanner/Validate"))
      << status.error_message();
  // Like every bad input, it names the field in a google.rpc.BadRequest.
  google::rpc::Status details;
  ASSERT_TRUE(grpc::ExtractErrorDetails(status, &details).ok());
  ASSERT_EQ(details.details_size(), 1);
  google::rpc::BadRequest bad_request;
  ASSERT_TRUE(details.details(0).UnpackTo(&bad_request));
  ASSERT_EQ(bad_request.field_violations_size(), 1);
  EXPECT_EQ(bad_request.field_violations(0).field(), "graph");
  EXPECT_TRUE(absl::StrContains(bad_request.field_violations(0).description(),
                                "announces 65535 bytes"))
      << bad_request.field_violations(0).description();
  const grpc::Status health =
      CallRaw(*server, "/grpc.health.v1.Health/Check", std::string("\x0a\xff\xff\x03xyz", 7));
  EXPECT_EQ(health.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << health.error_message();

  // A method the server lacks is still UNIMPLEMENTED, and good requests
  // are still served.
  EXPECT_EQ(CallRaw(*server, "/partplan.v1.PartitionPlanner/Nope", "").error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  const grpc::Status empty = CallRaw(*server, "/partplan.v1.PartitionPlanner/Validate", "");
  EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT);  // an empty graph
  EXPECT_TRUE(absl::StartsWith(empty.error_message(), "graph.nodes")) << empty.error_message();
}

// A request with several independent faults gets a field violation for
// each through the real service: an unknown argument, a repeated node name
// and a device of negative memory.
TEST(ParseFailureTest, EveryIndependentFaultIsAFieldViolation) {
  std::unique_ptr<PlannerServer> server = StartTestServer(/*backend=*/nullptr);
  ASSERT_NE(server, nullptr);
  std::unique_ptr<v1::PartitionPlanner::Stub> stub = NewPlannerStub(*server);
  v1::ValidateRequest request;
  v1::Graph& graph = *request.mutable_graph();
  const char* names[] = {"x", "a", "a", "output"};
  const v1::Op ops[] = {v1::PLACEHOLDER, v1::CALL_FUNCTION, v1::CALL_FUNCTION, v1::OUTPUT};
  const char* reads[] = {nullptr, "nowhere", "x", "a"};
  for (int i = 0; i < 4; ++i) {
    v1::Node* node = graph.add_nodes();
    node->set_name(names[i]);
    node->set_op(ops[i]);
    node->set_target(names[i]);
    if (reads[i] != nullptr) node->add_args()->set_node(reads[i]);
  }
  v1::Device* device = request.mutable_devices()->add_devices();
  device->set_name("d0");
  device->set_available_memory_bytes(-1);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kTestTimeout));
  v1::ValidateResponse response;
  const grpc::Status status = stub->Validate(&context, request, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  google::rpc::Status details;
  ASSERT_TRUE(grpc::ExtractErrorDetails(status, &details).ok());
  google::rpc::BadRequest bad_request;
  ASSERT_TRUE(details.details(0).UnpackTo(&bad_request));
  std::vector<std::string> fields;
  for (const auto& violation : bad_request.field_violations()) fields.push_back(violation.field());
  EXPECT_EQ(fields, (std::vector<std::string>{"graph.nodes[1].args[0]", "graph.nodes[2].name",
                                              "devices.devices[0].available_memory_bytes"}))
      << status.error_message();
}

// gRPC 1.51 would inflate a compressed message whole before applying the
// receive limit; the server refuses gzip and deflate when the call's headers
// arrive instead, and goes on serving.
TEST(ParseFailureTest, CompressedRequestsAreRefused) {
  ServerOptions options = TestServerOptions();
  options.max_receive_message_bytes = 1 << 20;
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(), options);
  ASSERT_NE(server, nullptr);
  std::unique_ptr<v1::PartitionPlanner::Stub> stub = NewPlannerStub(*server);
  v1::ValidateRequest request;
  // 4 MiB that gzip makes a few kilobytes.
  request.mutable_graph()->add_nodes()->set_name(std::string(4 << 20, 'a'));
  for (const grpc_compression_algorithm algorithm : {GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE}) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kTestTimeout));
    context.set_compression_algorithm(algorithm);
    v1::ValidateResponse response;
    const grpc::Status status = stub->Validate(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), "is disabled")) << status.error_message();
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kTestTimeout));
  v1::ValidateRequest small;
  small.mutable_graph()->add_nodes()->set_name("x");
  v1::ValidateResponse response;
  const grpc::Status status = stub->Validate(&context, small, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

}  // namespace
}  // namespace partplan

// Requests that do not parse get INVALID_ARGUMENT saying so, and the server
// goes on serving. The planner service parses its requests itself, as gRPC's
// health service does.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
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

}  // namespace
}  // namespace partplan

#include "server/status_conversion.h"

#include <grpcpp/support/error_details.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

TEST(StatusConversionTest, OkIsOk) { EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok()); }

TEST(StatusConversionTest, KeepsCodeAndMessageWithoutDetails) {
  const grpc::Status status = ToGrpcStatus(absl::FailedPreconditionError("no plan fits"));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(), "no plan fits");
  EXPECT_TRUE(status.error_details().empty());
}

TEST(StatusConversionTest, EveryCodeMapsToTheSameNumber) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status status(static_cast<absl::StatusCode>(code), "x");
    EXPECT_EQ(static_cast<int>(ToGrpcStatus(status).error_code()), code);
  }
}

TEST(StatusConversionTest, InvalidArgumentWithoutFieldHasNoDetails) {
  const grpc::Status status = ToGrpcStatus(absl::InvalidArgumentError("bad"));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(status.error_details().empty());
}

TEST(StatusConversionTest, InvalidFieldBecomesBadRequestFieldViolation) {
  const grpc::Status status =
      ToGrpcStatus(InvalidFieldError("devices.devices[1].name", "duplicate device name"));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "devices.devices[1].name: duplicate device name");

  google::rpc::Status details;
  ASSERT_TRUE(grpc::ExtractErrorDetails(status, &details).ok());
  EXPECT_EQ(details.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(details.message(), status.error_message());
  ASSERT_EQ(details.details_size(), 1);
  google::rpc::BadRequest bad_request;
  ASSERT_TRUE(details.details(0).UnpackTo(&bad_request));
  ASSERT_EQ(bad_request.field_violations_size(), 1);
  EXPECT_EQ(bad_request.field_violations(0).field(), "devices.devices[1].name");
  EXPECT_EQ(bad_request.field_violations(0).description(), "duplicate device name");
}

TEST(StatusConversionTest, EveryViolationBecomesAFieldViolation) {
  const grpc::Status status = ToGrpcStatus(InvalidFieldErrors(
      {{"graph.nodes[1].args[0]", "refers to unknown node 'q'"},
       {"graph.nodes[2].name", "duplicate node name 'a'"},
       {"devices.devices[0].available_memory_bytes", "must have positive memory"}}));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "graph.nodes[1].args[0]: refers to unknown node 'q' (and 2 more: "
            "graph.nodes[2].name: duplicate node name 'a'; "
            "devices.devices[0].available_memory_bytes: must have positive memory)");
  google::rpc::Status details;
  ASSERT_TRUE(grpc::ExtractErrorDetails(status, &details).ok());
  google::rpc::BadRequest bad_request;
  ASSERT_TRUE(details.details(0).UnpackTo(&bad_request));
  ASSERT_EQ(bad_request.field_violations_size(), 3);
  EXPECT_EQ(bad_request.field_violations(0).description(), "refers to unknown node 'q'");
  EXPECT_EQ(bad_request.field_violations(2).field(), "devices.devices[0].available_memory_bytes");
}

// However many and however long the violations, the trailers stay within
// what a client accepts by default (8 KiB).
TEST(StatusConversionTest, ManyLongViolationsStayWithinTheTrailerLimit) {
  std::vector<FieldViolation> violations;
  for (int i = 0; i < kMaxFieldViolations; ++i) {
    violations.push_back({"graph.nodes[" + std::to_string(i) + "].name",
                          "duplicate node name '" + std::string(5000, 'n') + "'"});
  }
  const grpc::Status status = ToGrpcStatus(InvalidFieldErrors(violations));
  EXPECT_LT(status.error_message().size() * 3 + status.error_details().size() * 4 / 3, 8000u);
  google::rpc::Status details;
  ASSERT_TRUE(grpc::ExtractErrorDetails(status, &details).ok());
  google::rpc::BadRequest bad_request;
  ASSERT_TRUE(details.details(0).UnpackTo(&bad_request));
  EXPECT_GE(bad_request.field_violations_size(), 3);
}

// Names from the request appear in messages; a 64 KiB one made trailers no
// client accepts (it saw RESOURCE_EXHAUSTED instead of INVALID_ARGUMENT).
TEST(StatusConversionTest, LongMessagesAreCutOnACharacterBoundary) {
  std::string name;
  for (int i = 0; i < 30000; ++i) name += "\xc3\xa9";  // U+00E9, two bytes
  const grpc::Status status = ToGrpcStatus(
      InvalidFieldError("graph.nodes[3].name", "duplicate node name '" + name + "'"));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(status.error_message().size(), 1100u);
  EXPECT_EQ(status.error_message().rfind("graph.nodes[3].name: duplicate node name '\xc3\xa9", 0),
            0u);
  EXPECT_NE(status.error_message().find(" more bytes)"), std::string::npos);
  // No character is cut in two: what precedes the marker is whole U+00E9s.
  const std::string kept = status.error_message().substr(0, status.error_message().find("..."));
  EXPECT_EQ((kept.size() - std::string("graph.nodes[3].name: duplicate node name '").size()) % 2,
            0u);

  google::rpc::Status details;
  ASSERT_TRUE(grpc::ExtractErrorDetails(status, &details).ok());
  EXPECT_EQ(details.message(), status.error_message());
  google::rpc::BadRequest bad_request;
  ASSERT_TRUE(details.details(0).UnpackTo(&bad_request));
  EXPECT_EQ(bad_request.field_violations(0).field(), "graph.nodes[3].name");
  EXPECT_LE(bad_request.field_violations(0).description().size(), 1100u);
}

}  // namespace
}  // namespace partplan

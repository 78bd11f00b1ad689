// ParseFailure names the field where bytes stop being a message.
#include "planner/wire/parse_failure.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

using ::testing::HasSubstr;

// The field path ParseFailure gives for `bytes` as a ValidateRequest, after
// checking that protobuf does refuse them.
std::string FailurePath(const std::string& bytes, std::string* message = nullptr) {
  v1::ValidateRequest request;
  EXPECT_FALSE(request.ParseFromString(bytes)) << "protobuf parses these bytes";
  const ChunkedBytes chunked(bytes);
  const absl::Status status = ParseFailure(*v1::ValidateRequest::descriptor(), chunked);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  if (message != nullptr) *message = std::string(status.message());
  return InvalidFieldPath(status).value_or("<no field>");
}

// A request of three nodes, serialised.
std::string ThreeNodes() {
  v1::ValidateRequest request;
  for (const char* name : {"x", "a", "output"}) request.mutable_graph()->add_nodes()->set_name(name);
  return request.SerializeAsString();
}

TEST(ParseFailureTest, NamesTheStringThatIsNotUtf8) {
  std::string bytes = ThreeNodes();
  // The second node's name, "a", becomes the byte 0xff.
  const size_t at = bytes.find('a');
  ASSERT_NE(at, std::string::npos);
  bytes[at] = '\xff';
  std::string message;
  EXPECT_EQ(FailurePath(bytes, &message), "graph.nodes[1].name");
  EXPECT_THAT(message, HasSubstr("UTF-8"));
  EXPECT_THAT(message, HasSubstr("partplan.v1.ValidateRequest"));
}

TEST(ParseFailureTest, NamesTheMessageCutShort) {
  const std::string bytes = ThreeNodes();
  std::string message;
  // Cut inside the last node: the graph, the outermost field to announce
  // more bytes than follow.
  EXPECT_EQ(FailurePath(bytes.substr(0, bytes.size() - 2), &message), "graph");
  // A node announcing more bytes than its graph holds.
  v1::ValidateRequest request;
  request.mutable_graph()->add_nodes()->set_name("x");
  v1::Node* node = request.mutable_graph()->add_nodes();
  node->set_name("abc");
  std::string inner = request.SerializeAsString();
  // graph (2 bytes of tag and length) + nodes[0] (5 bytes), then nodes[1]'s
  // tag and length: claim 20 bytes where 5 follow.
  ASSERT_EQ(inner[7], '\x12');
  inner[8] = 20;
  EXPECT_EQ(FailurePath(inner), "graph.nodes[1]");
  // Field 1 (graph) announces 65535 bytes and 3 follow.
  EXPECT_EQ(FailurePath(std::string("\x0a\xff\xff\x03xyz", 7), &message), "graph");
  EXPECT_THAT(message, HasSubstr("announces 65535 bytes"));
}

TEST(ParseFailureTest, NamesABadTagAtTheTop) {
  // A varint tag that never ends.
  EXPECT_EQ(FailurePath(ThreeNodes() + std::string(12, '\xff')), "");
  // Field number 0.
  EXPECT_EQ(FailurePath(ThreeNodes() + std::string("\x00\x01", 2)), "");
}

TEST(ParseFailureTest, NamesUnknownFieldsByNumber) {
  // Unknown field 9 as a length-delimited value cut short.
  EXPECT_EQ(FailurePath(ThreeNodes() + std::string("\x4a\x05xy", 4)), "<unknown field 9>");
}

}  // namespace
}  // namespace partplan

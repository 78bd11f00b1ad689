// SerializeToByteBuffer, the request path of CallPlanner and the load
// generator: the bytes protobuf would write, in one slice. (CallPlanner's
// calls are tested end to end in cli_test.cc.)
#include "client/cli/planner_client.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace cli {
namespace {

using ::testing::HasSubstr;

std::string Contents(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// Over 1 MiB, which gRPC's own serialisation would write in 1 MiB slices.
TEST(SerializeToByteBufferTest, WritesWhatProtobufWritesInOneSlice) {
  constexpr int kNodes = 40000;
  v1::PartitionGraphRequest request;
  for (int i = 0; i < kNodes; ++i) {
    v1::Node* node = request.mutable_graph()->add_nodes();
    node->set_name("node_" + std::to_string(i));
    node->set_op(v1::CALL_FUNCTION);
    node->set_target("torch.relu");
    if (i > 0) node->add_args()->set_node("node_" + std::to_string(i - 1));
  }
  request.mutable_devices()->add_devices()->set_name("gpu0");
  request.set_node_references(v1::NODE_REFERENCES_INDICES);

  grpc::ByteBuffer buffer;
  ASSERT_TRUE(SerializeToByteBuffer(request, &buffer).ok());

  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  EXPECT_EQ(slices.size(), 1u);
  const std::string bytes = Contents(buffer);
  EXPECT_GT(bytes.size(), size_t{1} << 20);
  EXPECT_EQ(bytes, request.SerializeAsString());
  v1::PartitionGraphRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.graph().nodes_size(), kNodes);
  EXPECT_EQ(parsed.graph().nodes(kNodes - 1).args(0).node(), "node_" + std::to_string(kNodes - 2));
}

TEST(SerializeToByteBufferTest, AnEmptyMessageIsNoBytes) {
  grpc::ByteBuffer buffer;
  ASSERT_TRUE(SerializeToByteBuffer(v1::ValidateRequest(), &buffer).ok());
  EXPECT_EQ(buffer.Length(), 0u);
}

TEST(SerializeToByteBufferTest, ReplacesWhatTheBufferHeld) {
  v1::ValidateRequest request;
  request.mutable_graph()->add_nodes()->set_name("x");
  grpc::ByteBuffer buffer;
  ASSERT_TRUE(SerializeToByteBuffer(request, &buffer).ok());
  ASSERT_TRUE(SerializeToByteBuffer(request, &buffer).ok());
  EXPECT_EQ(Contents(buffer), request.SerializeAsString());
}

// A file in the test's temporary directory holding `contents`.
std::string WriteTemp(const std::string& name, const std::string& contents) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  return path;
}

// A binary request is sent exactly as read: not parsed, not re-serialised.
TEST(ReadRequestBytesTest, SendsABinaryFileAsRead) {
  v1::ValidateRequest request;
  request.mutable_graph()->add_nodes()->set_name("x");
  request.mutable_devices()->add_devices()->set_available_memory_bytes(1 << 20);
  // `devices` (field 2) before the whole request, then an unknown field 127:
  // bytes a parse and re-serialisation would reorder and merge.
  const std::string devices = request.devices().SerializeAsString();
  const std::string wire = std::string("\x12") + static_cast<char>(devices.size()) + devices +
                           request.SerializeAsString() + std::string("\xf8\x07\x01");
  std::istringstream unused;
  const absl::StatusOr<grpc::ByteBuffer> read =
      ReadRequestBytes(WriteTemp("request.pb", wire), unused, *v1::ValidateRequest::descriptor());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(Contents(*read), wire);
}

TEST(ReadRequestBytesTest, ParsesAndSerialisesJson) {
  std::istringstream in(R"({"graph": {"nodes": [{"name": "x"}]}})");
  const absl::StatusOr<grpc::ByteBuffer> read =
      ReadRequestBytes("-", in, *v1::ValidateRequest::descriptor());
  ASSERT_TRUE(read.ok()) << read.status();
  v1::ValidateRequest expected;
  expected.mutable_graph()->add_nodes()->set_name("x");
  EXPECT_EQ(Contents(*read), expected.SerializeAsString());

  std::istringstream typo(R"({"graf": {}})");
  const absl::StatusOr<grpc::ByteBuffer> bad =
      ReadRequestBytes("-", typo, *v1::ValidateRequest::descriptor());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("not a valid JSON partplan.v1.ValidateRequest"));
}

// What is not protobuf at its top level is refused without a call: a
// length past the end, a bad tag; and unreadable files say why.
TEST(ReadRequestBytesTest, RefusesBytesThatAreNotProtobuf) {
  std::istringstream unused;
  for (const std::string& wire : {std::string("\x0a\x10short"), std::string("\x00\x01", 2),
                                  std::string("\x0a")}) {
    const absl::StatusOr<grpc::ByteBuffer> read = ReadRequestBytes(
        WriteTemp("bad.pb", wire), unused, *v1::ValidateRequest::descriptor());
    ASSERT_FALSE(read.ok()) << absl::CEscape(wire);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(read.status().message(), HasSubstr("not a valid binary partplan.v1.ValidateRequest"));
  }
  EXPECT_EQ(ReadRequestBytes(WriteTemp("empty.pb", ""), unused,
                             *v1::ValidateRequest::descriptor())
                .status()
                .code(),
            absl::StatusCode::kOk);
  EXPECT_EQ(ReadRequestBytes("/nonexistent/request.pb", unused,
                             *v1::ValidateRequest::descriptor())
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadRequestBytes(::testing::TempDir(), unused, *v1::ValidateRequest::descriptor())
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cli
}  // namespace partplan

// SerializeToByteBuffer, the request path of CallPlanner and the load
// generator: the bytes protobuf would write, in one slice. (CallPlanner's
// calls are tested end to end in cli_test.cc.)
#include "client/cli/planner_client.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace cli {
namespace {

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

}  // namespace
}  // namespace cli
}  // namespace partplan

#include "planner/graph/serialized_request.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace {

v1::PartitionGraphRequest Request() {
  v1::PartitionGraphRequest request;
  request.mutable_graph()->set_name("g");
  request.mutable_graph()->add_nodes()->set_name("x");
  request.mutable_graph()->add_nodes()->set_name("output");
  request.mutable_devices()->add_devices()->set_name("dev0");
  request.mutable_config()->set_mode(v1::PartitionerConfig::SIZE_BASED);
  return request;
}

TEST(ParseAllButGraphTest, ParsesTheOtherFieldsAndReturnsTheGraphsBytes) {
  const v1::PartitionGraphRequest request = Request();
  const std::string bytes = request.SerializeAsString();
  v1::PartitionGraphRequest rest;
  const std::optional<ChunkedBytes> graph = ParseAllButGraph(bytes, &rest);
  ASSERT_TRUE(graph.has_value());
  EXPECT_FALSE(rest.has_graph());
  EXPECT_EQ(rest.devices().SerializeAsString(), request.devices().SerializeAsString());
  EXPECT_EQ(rest.config().mode(), v1::PartitionerConfig::SIZE_BASED);
  EXPECT_EQ(graph->Flatten(), request.graph().SerializeAsString());
  EXPECT_EQ(CountSerializedNodes(*graph), 2);
}

TEST(ParseAllButGraphTest, AnAbsentGraphIsEmpty) {
  v1::PartitionGraphRequest request = Request();
  request.clear_graph();
  v1::PartitionGraphRequest rest;
  const std::string bytes = request.SerializeAsString();
  const std::optional<ChunkedBytes> graph = ParseAllButGraph(bytes, &rest);
  ASSERT_TRUE(graph.has_value());
  EXPECT_TRUE(graph->empty());
  EXPECT_EQ(CountSerializedNodes(*graph), 0);
}

TEST(ParseAllButGraphTest, AGraphInTwoPiecesIsLeftToTheWholeParse) {
  // Protobuf merges the pieces; the caller parses such a request whole.
  v1::PartitionGraphRequest first = Request();
  v1::PartitionGraphRequest second;
  second.mutable_graph()->add_nodes()->set_name("y");
  const std::string bytes = first.SerializeAsString() + second.SerializeAsString();
  v1::PartitionGraphRequest rest;
  EXPECT_FALSE(ParseAllButGraph(bytes, &rest).has_value());
  v1::PartitionGraphRequest whole;
  ASSERT_TRUE(whole.ParseFromString(bytes));
  EXPECT_EQ(whole.graph().nodes_size(), 3);
}

TEST(ParseAllButGraphTest, MalformedBytesDoNotSplit) {
  const std::string bytes = Request().SerializeAsString();
  v1::PartitionGraphRequest rest;
  // Truncated inside the graph's payload, a bad tag, a length past the end.
  EXPECT_FALSE(ParseAllButGraph(absl::string_view(bytes).substr(0, 5), &rest).has_value());
  EXPECT_FALSE(ParseAllButGraph(absl::string_view("\x00\x01", 2), &rest).has_value());
  EXPECT_FALSE(ParseAllButGraph(absl::string_view("\x0a\xff\xff\x03", 4), &rest).has_value());
  EXPECT_EQ(CountSerializedNodes(absl::string_view("\x12\x05", 2)), -1);
}

TEST(SplitFieldTest, KeepsEveryOtherFieldIncludingUnknownOnes) {
  v1::PartitionGraphRequest request = Request();
  // An unknown varint field 99 and a wrongly typed field 1 (a varint):
  // both stay with the rest, as protobuf would keep them.
  std::string bytes = request.SerializeAsString();
  const std::string unknown("\x98\x06\x07", 3);  // field 99, varint 7
  const std::string wrong_type("\x08\x01", 2);   // field 1, varint 1
  bytes += unknown + wrong_type;
  std::string rest;
  int graphs = 0;
  ASSERT_TRUE(SplitField(
      bytes, 1, [&](size_t, size_t) { return ++graphs, true; }, &rest));
  EXPECT_EQ(graphs, 1);
  v1::PartitionGraphRequest expected = request;
  expected.clear_graph();
  EXPECT_EQ(rest, expected.SerializeAsString() + unknown + wrong_type);
}

// `bytes` cut into pieces of `piece` bytes (the last shorter).
std::vector<absl::string_view> Pieces(absl::string_view bytes, size_t piece) {
  std::vector<absl::string_view> pieces;
  for (size_t at = 0; at < bytes.size(); at += piece) pieces.push_back(bytes.substr(at, piece));
  return pieces;
}

TEST(ChunkedBytesTest, ReadsRangesAcrossPieces) {
  const std::string text = "abcdefghijklmnopqrstuvwxyz";
  const ChunkedBytes bytes(Pieces(text, 5));
  ASSERT_EQ(bytes.size(), text.size());
  EXPECT_EQ(bytes.chunks().size(), 6u);
  EXPECT_EQ(bytes.Flatten(), text);
  for (size_t offset = 0; offset <= text.size(); ++offset) {
    for (size_t size = 0; offset + size <= text.size(); ++size) {
      EXPECT_EQ(bytes.Sub(offset, size).Flatten(), text.substr(offset, size));
      std::string appended = "<";
      bytes.AppendTo(offset, size, &appended);
      EXPECT_EQ(appended, "<" + text.substr(offset, size));
      size_t chunk = 0;
      const std::optional<absl::string_view> view = bytes.Contiguous(offset, size, &chunk);
      // Within one piece of five exactly when start and end share it.
      const bool within = size == 0 || offset / 5 == (offset + size - 1) / 5;
      ASSERT_EQ(view.has_value(), within) << offset << "+" << size;
      if (within) {
        EXPECT_EQ(*view, text.substr(offset, size));
      }
    }
  }
}

TEST(ChunkedBytesTest, ProtobufParsesAndSplitsThemInAnyPieces) {
  v1::PartitionGraphRequest request = Request();
  for (int i = 0; i < 50; ++i) {
    request.mutable_graph()->add_nodes()->set_name("node_" + std::to_string(i));
  }
  const std::string bytes = request.SerializeAsString();
  for (size_t piece : {1, 2, 3, 7, 64, 1000}) {
    const ChunkedBytes chunked(Pieces(bytes, piece));
    v1::PartitionGraphRequest parsed;
    ChunkedInputStream stream(chunked);
    ASSERT_TRUE(parsed.ParseFromZeroCopyStream(&stream)) << piece;
    EXPECT_EQ(parsed.SerializeAsString(), bytes);

    v1::PartitionGraphRequest rest;
    const std::optional<ChunkedBytes> graph = ParseAllButGraph(chunked, &rest);
    ASSERT_TRUE(graph.has_value()) << piece;
    EXPECT_EQ(graph->Flatten(), request.graph().SerializeAsString());
    EXPECT_EQ(rest.devices().SerializeAsString(), request.devices().SerializeAsString());
    EXPECT_EQ(CountSerializedNodes(*graph), 52);
  }
}

}  // namespace
}  // namespace partplan

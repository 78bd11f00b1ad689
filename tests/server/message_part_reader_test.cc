// MessagePartReader against protobuf's own parsing of MessagePart: the same
// method and data however gRPC slices the message, fields read as protobuf
// reads them, and malformed bytes refused. JoinedParts: the parts' data in
// order, in few slices however small the parts.
#include "server/message_part_reader.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace {

// `bytes` as a ByteBuffer cut into slices at `cuts` (offsets, ascending).
grpc::ByteBuffer Sliced(const std::string& bytes, const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t start = 0;
  for (size_t cut : cuts) {
    slices.emplace_back(bytes.data() + start, cut - start);
    start = cut;
  }
  slices.emplace_back(bytes.data() + start, bytes.size() - start);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

struct Read {
  bool ok = false;
  std::string error;
  std::string method;
  std::string data;
};

Read ReadPart(const std::string& bytes, const std::vector<size_t>& cuts = {}) {
  grpc::ByteBuffer buffer = Sliced(bytes, cuts);
  MessagePartReader reader;
  Read read;
  read.ok = reader.Read(&buffer, &read.error);
  if (!read.ok) return read;
  read.method = reader.method();
  std::vector<grpc::Slice> data;
  reader.MoveDataTo(&data);
  for (const grpc::Slice& slice : data) {
    read.data.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  EXPECT_EQ(reader.data_bytes(), read.data.size());
  return read;
}

std::string Varint(uint64_t value) {
  std::string bytes;
  do {
    bytes.push_back(static_cast<char>((value & 0x7f) | (value > 0x7f ? 0x80 : 0)));
    value >>= 7;
  } while (value != 0);
  return bytes;
}

std::string LengthDelimited(int number, const std::string& value) {
  return Varint(static_cast<uint64_t>(number) << 3 | 2) + Varint(value.size()) + value;
}

TEST(MessagePartReaderTest, ReadsWhatProtobufWritesHoweverItIsSliced) {
  v1::MessagePart part;
  part.set_method("PartitionGraph");
  part.set_data(std::string(300, 'x') + std::string("\0\1\2", 3));
  const std::string bytes = part.SerializeAsString();
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    SCOPED_TRACE(cut);
    const Read read = ReadPart(bytes, {cut});
    ASSERT_TRUE(read.ok) << read.error;
    EXPECT_EQ(read.method, part.method());
    EXPECT_EQ(read.data, part.data());
  }
  std::vector<size_t> every_byte;
  for (size_t i = 1; i < bytes.size(); ++i) every_byte.push_back(i);
  const Read read = ReadPart(bytes, every_byte);
  ASSERT_TRUE(read.ok) << read.error;
  EXPECT_EQ(read.data, part.data());
}

// Unknown fields of every wire type, fields given twice and empty messages,
// at random: the reader agrees with protobuf.
TEST(MessagePartReaderTest, AgreesWithProtobufOnUnknownAndRepeatedFields) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes;
    const int fields = static_cast<int>(random() % 6);
    for (int i = 0; i < fields; ++i) {
      const int number = 1 + static_cast<int>(random() % 5);
      const std::string value(random() % 40, static_cast<char>('a' + random() % 26));
      switch (random() % 4) {
        case 0:
          bytes += LengthDelimited(number, value);
          break;
        case 1:  // a varint (field 1 and 2 so are unknown fields to protobuf)
          bytes += Varint(static_cast<uint64_t>(number) << 3) + Varint(random());
          break;
        case 2:
          bytes += Varint(static_cast<uint64_t>(number) << 3 | 1) + std::string(8, '\7');
          break;
        default:
          bytes += Varint(static_cast<uint64_t>(number) << 3 | 5) + std::string(4, '\7');
      }
    }
    v1::MessagePart expected;
    ASSERT_TRUE(expected.ParseFromString(bytes));
    const Read read = ReadPart(bytes, {bytes.size() / 3, bytes.size() / 2});
    ASSERT_TRUE(read.ok) << read.error;
    EXPECT_EQ(read.method, expected.method());
    EXPECT_EQ(read.data, expected.data());
  }
}

TEST(MessagePartReaderTest, RefusesMalformedBytes) {
  const std::string part = LengthDelimited(2, "abc");
  for (const std::string& bytes : {
           std::string("\x12", 1),  // tag, no length
           std::string("\x12\x05"
                       "abc",
                       5),              // length past the end
           std::string("\x12\xff", 2),  // length cut short
           std::string("\x00\x01", 2),  // tag 0
           std::string("\x0b", 1),      // a group's start
           std::string("\x0e", 1),      // wire type 6
           std::string("\x11"
                       "1234567",
                       8),  // fixed64 cut short
           std::string("\x15"
                       "123",
                       4),  // fixed32 cut short
           std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12),  // varint of 11
           part + std::string("\x80", 1),                                        // a tag cut short
       }) {
    SCOPED_TRACE(testing::PrintToString(bytes));
    const Read read = ReadPart(bytes);
    EXPECT_FALSE(read.ok);
    EXPECT_FALSE(read.error.empty());
    v1::MessagePart protobuf;
    EXPECT_FALSE(protobuf.ParseFromString(bytes)) << "protobuf takes it";
  }
}

std::string Bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// A request of 100,000 one-byte parts is held in a few slices, not one per
// part; large slices are kept as they are; the order is the parts'.
TEST(JoinedPartsTest, CopiesSmallSlicesTogetherAndKeepsLargeOnes) {
  JoinedParts joined;
  std::string expected;
  for (int i = 0; i < 100'000; ++i) {
    const std::string byte(1, static_cast<char>('a' + i % 26));
    joined.Append({grpc::Slice(byte)});
    expected += byte;
  }
  EXPECT_LE(joined.slice_count(), 100'000 / (16 * JoinedParts::kCopyBelowBytes) + 2);
  const std::string large(JoinedParts::kCopyBelowBytes, 'L');
  joined.Append({grpc::Slice("xy", 2), grpc::Slice(large), grpc::Slice("z", 1)});
  expected += "xy" + large + "z";
  const size_t before = joined.slice_count();
  const grpc::ByteBuffer whole = joined.Take();
  EXPECT_EQ(Bytes(whole), expected);
  EXPECT_LE(before, 100'000 / (16 * JoinedParts::kCopyBelowBytes) + 4);
  EXPECT_EQ(joined.slice_count(), 0u);
  EXPECT_EQ(Bytes(JoinedParts().Take()), "");
}

}  // namespace
}  // namespace partplan

#include "planner/graph/node_fields.h"

#include <cstring>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/fuzz/byte_edits.h"

namespace partplan {
namespace {

std::string Describe(const ValueView& value) {
  return absl::StrCat("{", value.kind, " '", value.node, "' ", value.count, "}");
}

uint64_t Bits(double x) {
  uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof(x));
  return bits;
}

// Every field, as text (doubles by their bits), so that two NodeFields
// compare equal exactly when they are.
std::string Describe(const NodeFields& fields) {
  std::string text = absl::StrCat("name='", fields.name, "' op=", fields.op, " target='",
                                  fields.target, "' module_type='", fields.module_type, "' args=[");
  for (const ValueView& value : fields.args) absl::StrAppend(&text, Describe(value), " ");
  absl::StrAppend(&text, "] kwargs=[");
  for (const NodeFields::Keyword& keyword : fields.keywords) {
    absl::StrAppend(&text, "'", keyword.name, "':");
    for (const ValueView& value : fields.values_of(keyword)) {
      absl::StrAppend(&text, Describe(value), " ");
    }
  }
  absl::StrAppend(&text, "] outputs=[");
  for (const NodeFields::Output& output : fields.outputs) {
    absl::StrAppend(&text, "'", output.dtype, "':");
    for (int64_t dim : fields.shape_of(output)) absl::StrAppend(&text, dim, ",");
    absl::StrAppend(&text, " ");
  }
  absl::StrAppend(&text, "] size=", fields.has_size_bytes, "/", fields.total_bytes, "/",
                  fields.output_bytes, " params=", fields.parameter_count, "/",
                  fields.parameter_bytes, " latency=", fields.has_latency, "/",
                  Bits(fields.memory_latency_seconds), "/", Bits(fields.compute_latency_seconds),
                  " flops=", Bits(fields.flops));
  return text;
}

class RandomNodes {
 public:
  explicit RandomNodes(uint32_t seed) : random_(seed) {}

  v1::Node Next() {
    v1::Node node;
    if (Chance(0.95)) node.set_name(Text());
    if (Chance(0.9)) node.set_op(static_cast<v1::Op>(Int(-2, 9)));
    if (Chance(0.5)) node.set_target(Text());
    for (int i = Int(0, 5); i > 0; --i) RandomValue(node.add_args());
    for (int i = Int(0, 3); i > 0; --i) {
      v1::KeywordArgument* kwarg = node.add_kwargs();
      if (Chance(0.9)) kwarg->set_name(Text());
      for (int j = Int(0, 3); j > 0; --j) RandomValue(kwarg->add_value());
    }
    for (int i = Int(0, 2); i > 0; --i) {
      v1::TensorMeta* meta = node.add_outputs();
      for (int j = Int(0, 4); j > 0; --j) meta->add_shape(Int(-3, 1 << 20));
      if (Chance(0.8)) meta->set_dtype(Chance(0.5) ? "torch.float32" : Text());
    }
    if (Chance(0.5)) {
      node.mutable_size_bytes()->set_total_bytes(Int(-5, 1 << 30));
      node.mutable_size_bytes()->set_output_bytes(Int(-5, 1 << 30));
    }
    if (Chance(0.3)) node.set_parameter_count(Int(-5, 1 << 30));
    if (Chance(0.3)) node.set_parameter_bytes(Int(-5, 1 << 30));
    if (Chance(0.3)) node.set_module_type(Text());
    if (Chance(0.3)) {
      node.mutable_latency()->set_memory_latency_seconds(Real());
      node.mutable_latency()->set_compute_latency_seconds(Real());
    }
    if (Chance(0.3)) node.set_flops(Real());
    return node;
  }

  std::mt19937& engine() { return random_; }

 private:
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(random_) < p; }
  int64_t Int(int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(random_);
  }
  double Real() {
    return Chance(0.1) ? -1.5 : std::uniform_real_distribution<double>(0, 10)(random_);
  }
  // Names of 0 to 40 characters, some multi-byte (valid UTF-8).
  std::string Text() {
    std::string text;
    for (int i = Int(0, 40); i > 0; --i) {
      if (Chance(0.1)) {
        text += "\xc3\xa9";  // é
      } else {
        text += static_cast<char>('a' + Int(0, 25));
      }
    }
    return text;
  }
  void RandomValue(v1::Value* value) {
    switch (Int(0, 8)) {
      case 0:
        value->set_node(Text());
        break;
      case 1:
        value->set_int_(Int(-100, 100));
        break;
      case 2:
        value->set_float_(Real());
        break;
      case 3:
        value->set_bool_(Chance(0.5));
        break;
      case 4:
        value->set_string(Text());
        break;
      case 5:
        value->set_none(true);
        break;
      case 6:
        value->set_list(static_cast<uint32_t>(Int(0, 3)));
        break;
      case 7:
        value->set_tuple(static_cast<uint32_t>(Int(0, 3)));
        break;
      default:
        break;  // no kind
    }
  }

  std::mt19937 random_;
};

TEST(DecodeNodeTest, ReadsWhatProtobufWritesAsItsParseSeesIt) {
  RandomNodes nodes(20261122);
  NodeFields decoded;
  NodeFields viewed;
  for (int i = 0; i < 5000; ++i) {
    const v1::Node node = nodes.Next();
    const std::string bytes = node.SerializeAsString();
    ASSERT_TRUE(DecodeNode(bytes, &decoded)) << node.DebugString();
    v1::Node parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes));
    ViewNode(parsed, &viewed);
    ASSERT_EQ(Describe(decoded), Describe(viewed)) << node.DebugString();
    // The node's own fields: the same, without arguments and outputs.
    ASSERT_TRUE(DecodeNode(bytes, &decoded, NodeParts::kOwnFieldsOnly)) << node.DebugString();
    ViewNode(parsed, &viewed, NodeParts::kOwnFieldsOnly);
    ASSERT_EQ(Describe(decoded), Describe(viewed)) << node.DebugString();
    ASSERT_TRUE(decoded.args.empty() && decoded.keywords.empty() && decoded.outputs.empty());
  }
}

// Corrupted bytes: whatever DecodeNode accepts, protobuf parses to the same
// fields; what it declines is the parse's to judge.
TEST(DecodeNodeTest, AcceptsOnlyWhatParsesTheSame) {
  RandomNodes nodes(7);
  std::mt19937& random = nodes.engine();
  NodeFields decoded;
  NodeFields viewed;
  int accepted = 0;
  int declined = 0;
  int own_accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = nodes.Next().SerializeAsString();
    if (bytes.empty()) continue;
    fuzz::EditBytes(&bytes, 1 + static_cast<int>(random() % 3), random);
    v1::Node parsed;
    const bool parses = parsed.ParseFromString(bytes);
    // The own fields of bytes protobuf parses, when read, are the parse's.
    if (parses && DecodeNode(bytes, &decoded, NodeParts::kOwnFieldsOnly)) {
      ++own_accepted;
      ViewNode(parsed, &viewed, NodeParts::kOwnFieldsOnly);
      ASSERT_EQ(Describe(decoded), Describe(viewed));
    }
    if (!DecodeNode(bytes, &decoded)) {
      ++declined;
      continue;
    }
    ++accepted;
    ASSERT_TRUE(parses) << "DecodeNode accepted bytes protobuf rejects";
    ViewNode(parsed, &viewed);
    ASSERT_EQ(Describe(decoded), Describe(viewed));
  }
  // Both branches ran often enough to mean something.
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(declined, 2000);
  EXPECT_GE(own_accepted, accepted);
}

TEST(DecodeNodeTest, LeavesUncommonEncodingsToProtobuf) {
  NodeFields fields;
  v1::Node node;
  node.set_name("n");
  node.mutable_size_bytes()->set_total_bytes(3);
  const std::string bytes = node.SerializeAsString();
  EXPECT_TRUE(DecodeNode(bytes, &fields));
  // size_bytes twice: protobuf merges the two messages.
  EXPECT_FALSE(DecodeNode(bytes + bytes, &fields));
  // An unknown field (99, a varint).
  EXPECT_FALSE(DecodeNode(bytes + std::string("\x98\x06\x01", 3), &fields));
  // name (1) as a varint: protobuf keeps it as an unknown field.
  EXPECT_FALSE(DecodeNode(bytes + std::string("\x08\x01", 2), &fields));
  // Not UTF-8.
  v1::Node bad;
  bad.set_name("ab");
  std::string bad_bytes = bad.SerializeAsString();
  bad_bytes[bad_bytes.size() - 1] = '\xff';
  EXPECT_FALSE(DecodeNode(bad_bytes, &fields));
  EXPECT_FALSE(bad.ParseFromString(bad_bytes));
}

TEST(DecodeNodeTest, ReadsShapesPackedOrNot) {
  // shape (TensorMeta field 1) unpacked: three varints, then packed: 2 dims.
  const std::string meta = std::string("\x08\x02\x08\x03\x08\x04\x0a\x02\x05\x06", 10);
  const std::string node = std::string("\x0a\x01n\x32", 4) + static_cast<char>(meta.size()) + meta;
  NodeFields fields;
  ASSERT_TRUE(DecodeNode(node, &fields));
  ASSERT_EQ(fields.outputs.size(), 1u);
  EXPECT_EQ(std::vector<int64_t>(fields.shape_of(fields.outputs[0]).begin(),
                                 fields.shape_of(fields.outputs[0]).end()),
            (std::vector<int64_t>{2, 3, 4, 5, 6}));
  v1::Node parsed;
  ASSERT_TRUE(parsed.ParseFromString(node));
  EXPECT_EQ(parsed.outputs(0).shape_size(), 5);
}

}  // namespace
}  // namespace partplan

#include "planner/graph/node_fields.h"

#include <cstring>

#include "google/protobuf/stubs/common.h"

namespace partplan {
namespace {

// The wire types of the encoding (protobuf's encoding guide).
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Reads protobuf's wire format from a block of bytes; every read is bounds
// checked and returns false past the end or on a malformed varint.
class WireReader {
 public:
  explicit WireReader(absl::string_view bytes)
      : next_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool done() const { return next_ == end_; }

  // A varint of at most `max_bytes` bytes (ten for a 64-bit value); bits
  // beyond 64 are dropped, as protobuf drops them.
  bool ReadVarint(uint64_t* value, int max_bytes = 10) {
    uint64_t result = 0;
    for (int i = 0; i < max_bytes; ++i) {
      if (next_ == end_) return false;
      const uint8_t byte = static_cast<uint8_t>(*next_++);
      result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if ((byte & 0x80) == 0) {
        *value = result;
        return true;
      }
    }
    return false;
  }

  // Every field of these messages is numbered below 16, so its tag is one
  // byte; a longer tag (a field unknown here, or an overlong encoding) is
  // left to protobuf's parse.
  bool ReadTag(uint32_t* field, uint32_t* wire_type) {
    if (next_ == end_) return false;
    const uint8_t tag = static_cast<uint8_t>(*next_);
    if ((tag & 0x80) != 0 || (tag >> 3) == 0) return false;
    ++next_;
    *field = tag >> 3;
    *wire_type = tag & 7;
    return true;
  }

  bool ReadFixed64(uint64_t* value) {
    if (end_ - next_ < 8) return false;
    std::memcpy(value, next_, 8);  // little-endian, as x86 and ARM Linux are
    next_ += 8;
    return true;
  }

  bool ReadDouble(double* value) {
    uint64_t bits = 0;
    if (!ReadFixed64(&bits)) return false;
    std::memcpy(value, &bits, sizeof(*value));
    return true;
  }

  bool ReadLengthDelimited(absl::string_view* payload) {
    // A length is at most five bytes for protobuf, which reads it as 32 bits.
    uint64_t size = 0;
    if (!ReadVarint(&size, 5) || size > static_cast<uint64_t>(end_ - next_)) return false;
    *payload = absl::string_view(next_, static_cast<size_t>(size));
    next_ += size;
    return true;
  }

  // A proto3 string: length-delimited and valid UTF-8, as protobuf's parser
  // checks.
  bool ReadString(absl::string_view* text) {
    return ReadLengthDelimited(text) && google::protobuf::internal::IsStructurallyValidUTF8(
                                            text->data(), static_cast<int>(text->size()));
  }

 private:
  const char* next_;
  const char* end_;
};

bool DecodeValue(absl::string_view bytes, ValueView* value) {
  *value = ValueView();
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire_type = 0;
    if (!in.ReadTag(&field, &wire_type)) return false;
    // The fields are one oneof: the last one given is the one set.
    uint64_t number = 0;
    double real = 0;
    absl::string_view text;
    switch (field) {
      case v1::Value::kNodeFieldNumber:
        if (wire_type != kLengthDelimited || !in.ReadString(&text)) return false;
        *value = ValueView{v1::Value::kNode, text, 0};
        break;
      case v1::Value::kStringFieldNumber:
      case v1::Value::kReprFieldNumber:
        if (wire_type != kLengthDelimited || !in.ReadString(&text)) return false;
        *value = ValueView{static_cast<v1::Value::KindCase>(field), {}, 0};
        break;
      case v1::Value::kFloatFieldNumber:
        if (wire_type != kFixed64 || !in.ReadDouble(&real)) return false;
        *value = ValueView{v1::Value::kFloat, {}, 0};
        break;
      case v1::Value::kIntFieldNumber:
      case v1::Value::kBoolFieldNumber:
      case v1::Value::kNoneFieldNumber:
        if (wire_type != kVarint || !in.ReadVarint(&number)) return false;
        *value = ValueView{static_cast<v1::Value::KindCase>(field), {}, 0};
        break;
      case v1::Value::kListFieldNumber:
      case v1::Value::kTupleFieldNumber:
        // uint32: protobuf keeps the varint's low 32 bits.
        if (wire_type != kVarint || !in.ReadVarint(&number)) return false;
        *value =
            ValueView{static_cast<v1::Value::KindCase>(field), {}, static_cast<uint32_t>(number)};
        break;
      default:
        return false;
    }
  }
  return true;
}

bool DecodeKeyword(absl::string_view bytes, NodeFields* fields) {
  NodeFields::Keyword keyword;
  keyword.begin = static_cast<int32_t>(fields->keyword_values.size());
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire_type = 0;
    absl::string_view payload;
    if (!in.ReadTag(&field, &wire_type) || wire_type != kLengthDelimited) return false;
    switch (field) {
      case v1::KeywordArgument::kNameFieldNumber:
        if (!in.ReadString(&keyword.name)) return false;
        break;
      case v1::KeywordArgument::kValueFieldNumber:
        if (!in.ReadLengthDelimited(&payload) ||
            !DecodeValue(payload, &fields->keyword_values.emplace_back())) {
          return false;
        }
        break;
      default:
        return false;
    }
  }
  keyword.end = static_cast<int32_t>(fields->keyword_values.size());
  fields->keywords.push_back(keyword);
  return true;
}

bool DecodeOutput(absl::string_view bytes, NodeFields* fields) {
  NodeFields::Output output;
  output.begin = static_cast<int32_t>(fields->shapes.size());
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire_type = 0;
    if (!in.ReadTag(&field, &wire_type)) return false;
    if (field == v1::TensorMeta::kShapeFieldNumber && wire_type == kVarint) {
      uint64_t dim = 0;
      if (!in.ReadVarint(&dim)) return false;
      fields->shapes.push_back(static_cast<int64_t>(dim));
    } else if (field == v1::TensorMeta::kShapeFieldNumber && wire_type == kLengthDelimited) {
      absl::string_view packed;
      if (!in.ReadLengthDelimited(&packed)) return false;
      WireReader dims(packed);
      while (!dims.done()) {
        uint64_t dim = 0;
        if (!dims.ReadVarint(&dim)) return false;
        fields->shapes.push_back(static_cast<int64_t>(dim));
      }
    } else if (field == v1::TensorMeta::kDtypeFieldNumber && wire_type == kLengthDelimited) {
      if (!in.ReadString(&output.dtype)) return false;
    } else {
      return false;
    }
  }
  output.end = static_cast<int32_t>(fields->shapes.size());
  fields->outputs.push_back(output);
  return true;
}

// A message of two fields numbered 1 and 2, both of `wire_type`: SizeBytes
// (varints) or NodeLatency (doubles).
template <typename Read>
bool DecodePair(absl::string_view bytes, uint32_t wire_type, Read read) {
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, type = 0;
    if (!in.ReadTag(&field, &type) || type != wire_type || (field != 1 && field != 2) ||
        !read(in, field)) {
      return false;
    }
  }
  return true;
}

// A v1::ResavedStorage: the node's name, the storage's index, its bytes.
bool DecodeResaved(absl::string_view bytes, NodeFields::Resaved* resaved) {
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire_type = 0;
    uint64_t number = 0;
    if (!in.ReadTag(&field, &wire_type)) return false;
    switch (field) {
      case v1::ResavedStorage::kNodeFieldNumber:
        if (wire_type != kLengthDelimited || !in.ReadString(&resaved->node)) return false;
        break;
      case v1::ResavedStorage::kStorageFieldNumber:
        if (wire_type != kVarint || !in.ReadVarint(&number)) return false;
        resaved->storage = static_cast<int32_t>(number);
        break;
      case v1::ResavedStorage::kBytesFieldNumber:
        if (wire_type != kVarint || !in.ReadVarint(&number)) return false;
        resaved->bytes = static_cast<int64_t>(number);
        break;
      default:
        return false;
    }
  }
  return true;
}

// A v1::NodeTraining: four doubles, saved_activation_bytes (a varint), the
// resaved storages.
bool DecodeTraining(absl::string_view bytes, NodeTrainingFields* training,
                    std::vector<NodeFields::Resaved>* resaved) {
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire_type = 0;
    if (!in.ReadTag(&field, &wire_type)) return false;
    uint64_t number = 0;
    switch (field) {
      case v1::NodeTraining::kBackwardInputSecondsFieldNumber:
        if (wire_type != kFixed64 || !in.ReadDouble(&training->backward_input_seconds)) {
          return false;
        }
        break;
      case v1::NodeTraining::kBackwardWeightSecondsFieldNumber:
        if (wire_type != kFixed64 || !in.ReadDouble(&training->backward_weight_seconds)) {
          return false;
        }
        break;
      case v1::NodeTraining::kBackwardInputFlopsFieldNumber:
        if (wire_type != kFixed64 || !in.ReadDouble(&training->backward_input_flops)) return false;
        break;
      case v1::NodeTraining::kBackwardWeightFlopsFieldNumber:
        if (wire_type != kFixed64 || !in.ReadDouble(&training->backward_weight_flops)) {
          return false;
        }
        break;
      case v1::NodeTraining::kSavedActivationBytesFieldNumber:
        if (wire_type != kVarint || !in.ReadVarint(&number)) return false;
        training->saved_activation_bytes = static_cast<int64_t>(number);
        break;
      case v1::NodeTraining::kResavedFieldNumber: {
        absl::string_view payload;
        if (wire_type != kLengthDelimited || !in.ReadLengthDelimited(&payload)) return false;
        resaved->emplace_back();
        if (!DecodeResaved(payload, &resaved->back())) return false;
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

}  // namespace

void NodeFields::Clear() {
  name = {};
  op = 0;
  target = {};
  module_type = {};
  args.clear();
  keywords.clear();
  keyword_values.clear();
  outputs.clear();
  shapes.clear();
  has_size_bytes = false;
  total_bytes = output_bytes = 0;
  parameter_count = parameter_bytes = 0;
  has_latency = false;
  memory_latency_seconds = compute_latency_seconds = 0;
  flops = 0;
  has_training = false;
  training = NodeTrainingFields();
  resaved.clear();
}

bool DecodeNode(absl::string_view bytes, NodeFields* fields, NodeParts parts) {
  fields->Clear();
  const bool own_fields_only = parts == NodeParts::kOwnFieldsOnly;
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire_type = 0;
    if (!in.ReadTag(&field, &wire_type)) return false;
    const uint32_t expected = [field] {
      switch (field) {
        case v1::Node::kOpFieldNumber:
        case v1::Node::kParameterCountFieldNumber:
        case v1::Node::kParameterBytesFieldNumber:
          return kVarint;
        case v1::Node::kFlopsFieldNumber:
          return kFixed64;
        default:
          return kLengthDelimited;  // and unknown fields fail below
      }
    }();
    if (wire_type != expected) return false;
    uint64_t number = 0;
    absl::string_view payload;
    switch (field) {
      case v1::Node::kNameFieldNumber:
        if (!in.ReadString(&fields->name)) return false;
        break;
      case v1::Node::kTargetFieldNumber:
        if (!in.ReadString(&fields->target)) return false;
        break;
      case v1::Node::kModuleTypeFieldNumber:
        if (!in.ReadString(&fields->module_type)) return false;
        break;
      case v1::Node::kOpFieldNumber:
        if (!in.ReadVarint(&number)) return false;
        fields->op = static_cast<int32_t>(number);
        break;
      case v1::Node::kArgsFieldNumber:
        if (!in.ReadLengthDelimited(&payload)) return false;
        if (!own_fields_only && !DecodeValue(payload, &fields->args.emplace_back())) return false;
        break;
      case v1::Node::kKwargsFieldNumber:
        if (!in.ReadLengthDelimited(&payload)) return false;
        if (!own_fields_only && !DecodeKeyword(payload, fields)) return false;
        break;
      case v1::Node::kOutputsFieldNumber:
        if (!in.ReadLengthDelimited(&payload)) return false;
        if (!own_fields_only && !DecodeOutput(payload, fields)) return false;
        break;
      case v1::Node::kSizeBytesFieldNumber:
        // Given twice, protobuf merges the two: left to the parse.
        if (fields->has_size_bytes || !in.ReadLengthDelimited(&payload)) return false;
        fields->has_size_bytes = true;
        if (!DecodePair(payload, kVarint, [fields](WireReader& pair, uint32_t which) {
              uint64_t bytes = 0;
              if (!pair.ReadVarint(&bytes)) return false;
              (which == 1 ? fields->total_bytes : fields->output_bytes) =
                  static_cast<int64_t>(bytes);
              return true;
            })) {
          return false;
        }
        break;
      case v1::Node::kParameterCountFieldNumber:
        if (!in.ReadVarint(&number)) return false;
        fields->parameter_count = static_cast<int64_t>(number);
        break;
      case v1::Node::kParameterBytesFieldNumber:
        if (!in.ReadVarint(&number)) return false;
        fields->parameter_bytes = static_cast<int64_t>(number);
        break;
      case v1::Node::kLatencyFieldNumber:
        if (fields->has_latency || !in.ReadLengthDelimited(&payload)) return false;
        fields->has_latency = true;
        if (!DecodePair(payload, kFixed64, [fields](WireReader& pair, uint32_t which) {
              return pair.ReadDouble(which == 1 ? &fields->memory_latency_seconds
                                                : &fields->compute_latency_seconds);
            })) {
          return false;
        }
        break;
      case v1::Node::kFlopsFieldNumber:
        if (!in.ReadDouble(&fields->flops)) return false;
        break;
      case v1::Node::kTrainingFieldNumber:
        // Given twice, protobuf merges the two: left to the parse.
        if (fields->has_training || !in.ReadLengthDelimited(&payload)) return false;
        fields->has_training = true;
        if (!DecodeTraining(payload, &fields->training, &fields->resaved)) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

namespace {

ValueView ViewValue(const v1::Value& value) {
  ValueView view;
  view.kind = value.kind_case();
  if (view.kind == v1::Value::kNode) view.node = value.node();
  if (view.kind == v1::Value::kList) view.count = value.list();
  if (view.kind == v1::Value::kTuple) view.count = value.tuple();
  return view;
}

}  // namespace

void ViewNode(const v1::Node& node, NodeFields* fields, NodeParts parts) {
  fields->Clear();
  fields->name = node.name();
  fields->op = node.op();
  fields->target = node.target();
  fields->module_type = node.module_type();
  fields->has_size_bytes = node.has_size_bytes();
  fields->total_bytes = node.size_bytes().total_bytes();
  fields->output_bytes = node.size_bytes().output_bytes();
  fields->parameter_count = node.parameter_count();
  fields->parameter_bytes = node.parameter_bytes();
  fields->has_latency = node.has_latency();
  fields->memory_latency_seconds = node.latency().memory_latency_seconds();
  fields->compute_latency_seconds = node.latency().compute_latency_seconds();
  fields->flops = node.flops();
  fields->has_training = node.has_training();
  if (fields->has_training) {
    const v1::NodeTraining& training = node.training();
    fields->training.backward_input_seconds = training.backward_input_seconds();
    fields->training.backward_weight_seconds = training.backward_weight_seconds();
    fields->training.backward_input_flops = training.backward_input_flops();
    fields->training.backward_weight_flops = training.backward_weight_flops();
    fields->training.saved_activation_bytes = training.saved_activation_bytes();
    for (const v1::ResavedStorage& resaved : training.resaved()) {
      fields->resaved.push_back({resaved.node(), resaved.storage(), resaved.bytes()});
    }
  }
  if (parts == NodeParts::kOwnFieldsOnly) return;
  for (const v1::Value& value : node.args()) fields->args.push_back(ViewValue(value));
  for (const v1::KeywordArgument& kwarg : node.kwargs()) {
    NodeFields::Keyword keyword;
    keyword.name = kwarg.name();
    keyword.begin = static_cast<int32_t>(fields->keyword_values.size());
    for (const v1::Value& value : kwarg.value()) fields->keyword_values.push_back(ViewValue(value));
    keyword.end = static_cast<int32_t>(fields->keyword_values.size());
    fields->keywords.push_back(keyword);
  }
  for (const v1::TensorMeta& meta : node.outputs()) {
    NodeFields::Output output;
    output.dtype = meta.dtype();
    output.begin = static_cast<int32_t>(fields->shapes.size());
    fields->shapes.insert(fields->shapes.end(), meta.shape().begin(), meta.shape().end());
    output.end = static_cast<int32_t>(fields->shapes.size());
    fields->outputs.push_back(output);
  }
}

}  // namespace partplan

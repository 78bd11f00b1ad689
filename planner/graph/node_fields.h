// NodeFields: what graph import reads of one v1::Node, as views, decoded
// straight from the node's serialised bytes or taken from a parsed message.
//
//   NodeFields fields;  // reused: its arrays keep their capacity
//   if (!DecodeNode(bytes, &fields)) {
//     // Not an encoding DecodeNode reads (or not a Node at all): parse the
//     // bytes with protobuf and take the fields of the message.
//     if (!message.ParseFromArray(bytes.data(), bytes.size())) return error;
//     ViewNode(message, &fields);
//   }
//   Use(fields.name, fields.args, ...);
//
// Decoding allocates nothing once the arrays have grown, where protobuf's
// parse into a reused message still allocates for every argument that names
// a node (a oneof string) and for size_bytes. DecodeNode reads the encoding
// protobuf's serialisers write: every field with its declared wire type,
// each message field at most once, shapes packed or not, strings valid
// UTF-8. Anything else (unknown fields, a field with another wire type, a
// message field given twice, which protobuf merges) makes it return false,
// so that a caller falling back to protobuf sees exactly what a parse sees:
// for bytes DecodeNode accepts, the fields equal ViewNode of their parse.
#ifndef PARTPLAN_PLANNER_GRAPH_NODE_FIELDS_H_
#define PARTPLAN_PLANNER_GRAPH_NODE_FIELDS_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "partplan/v1/graph.pb.h"

namespace partplan {

// One v1::Value: its kind, and the node it names or the element count of a
// list or tuple.
struct ValueView {
  v1::Value::KindCase kind = v1::Value::KIND_NOT_SET;
  absl::string_view node;  // kind kNode
  uint32_t count = 0;      // kind kList or kTuple
};

// A node's v1::NodeTraining: its costs in a training step, per micro-batch.
struct NodeTrainingFields {
  double backward_input_seconds = 0;
  double backward_weight_seconds = 0;
  double backward_input_flops = 0;
  double backward_weight_flops = 0;
  int64_t saved_activation_bytes = 0;
};

struct NodeFields {
  struct Keyword {
    absl::string_view name;
    int32_t begin = 0;  // its values: keyword_values[begin, end)
    int32_t end = 0;
  };
  struct Output {
    absl::string_view dtype;
    int32_t begin = 0;  // its shape: shapes[begin, end)
    int32_t end = 0;
  };

  absl::string_view name;
  int32_t op = 0;  // v1::Op's number (proto3 enums are open)
  absl::string_view target;
  absl::string_view module_type;
  std::vector<ValueView> args;
  std::vector<Keyword> keywords;
  std::vector<ValueView> keyword_values;
  std::vector<Output> outputs;
  std::vector<int64_t> shapes;
  bool has_size_bytes = false;
  int64_t total_bytes = 0;
  int64_t output_bytes = 0;
  int64_t parameter_count = 0;
  int64_t parameter_bytes = 0;
  bool has_latency = false;
  double memory_latency_seconds = 0;
  double compute_latency_seconds = 0;
  double flops = 0;
  bool has_training = false;
  NodeTrainingFields training;
  // NodeTraining.resaved, as read (names unresolved).
  struct Resaved {
    absl::string_view node;
    int32_t storage = 0;
    int64_t bytes = 0;
  };
  std::vector<Resaved> resaved;

  absl::Span<const ValueView> values_of(const Keyword& keyword) const {
    return absl::MakeConstSpan(keyword_values).subspan(keyword.begin, keyword.end - keyword.begin);
  }
  absl::Span<const int64_t> shape_of(const Output& output) const {
    return absl::MakeConstSpan(shapes).subspan(output.begin, output.end - output.begin);
  }

  // Empties every field, keeping the arrays' capacity.
  void Clear();
};

// Which of a node's fields to read: all of them, or only its own (name, op,
// target, module_type, size_bytes, parameter counts, latency, flops,
// training),
// leaving args, keywords and outputs empty. Readers that want a target or a
// count take the node's own fields, several times cheaper to decode: the
// arguments are most of a node's bytes, and each names a node whose UTF-8
// would be checked.
enum class NodeParts { kAll, kOwnFieldsOnly };

// Decodes a serialised v1::Node into `*fields` (views into `bytes`). False
// when the bytes are not in the encoding it reads (see above); `*fields` is
// then unspecified. With kOwnFieldsOnly the argument and output messages are
// skipped unread, so bytes it accepts give the own fields of their parse
// only where protobuf parses them (as it has, for a graph imported from
// them).
bool DecodeNode(absl::string_view bytes, NodeFields* fields, NodeParts parts = NodeParts::kAll);

// The fields of a parsed node (views into `node`).
void ViewNode(const v1::Node& node, NodeFields* fields, NodeParts parts = NodeParts::kAll);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_GRAPH_NODE_FIELDS_H_

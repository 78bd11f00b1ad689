#include "planner/graph/graph_import.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/arena.h"
#include "planner/base/status_util.h"
#include "planner/graph/node_fields.h"
#include "planner/graph/serialized_request.h"

namespace partplan {
namespace {

bool AddOverflows(int64_t a, int64_t b, int64_t* sum) {
  return __builtin_add_overflow(a, b, sum);
}
bool MulOverflows(int64_t a, int64_t b, int64_t* product) {
  return __builtin_mul_overflow(a, b, product);
}

bool IsFiniteNonNegative(double x) { return std::isfinite(x) && x >= 0; }

// The path of a node's field, formatted only when an error needs it: valid
// graphs allocate no strings for paths.
struct NodePath {
  absl::string_view graph_field;
  NodeId node;
  std::string Str(absl::string_view suffix = "") const {
    return absl::StrCat(graph_field, ".nodes[", node, "]", suffix);
  }
};

// The path of a node's flat argument values: its args, or one kwarg's value.
struct ValuesPath {
  NodePath node;
  int kwarg;  // -1 for args
  std::string Str() const {
    return kwarg < 0 ? node.Str(".args") : node.Str(absl::StrCat(".kwargs[", kwarg, "].value"));
  }
  std::string Element(int i) const { return absl::StrCat(Str(), "[", i, "]"); }
};

}  // namespace

int64_t DtypeElementBytes(absl::string_view dtype) {
  absl::ConsumePrefix(&dtype, "torch.");
  static constexpr struct {
    const char* name;
    int64_t bytes;
  } kDtypes[] = {
      {"float32", 4},   {"float", 4},      {"float64", 8},     {"double", 8},
      {"float16", 2},   {"half", 2},       {"bfloat16", 2},    {"int64", 8},
      {"long", 8},      {"int32", 4},      {"int", 4},         {"int16", 2},
      {"short", 2},     {"int8", 1},       {"uint8", 1},       {"bool", 1},
      {"complex64", 8}, {"cfloat", 8},     {"complex128", 16}, {"cdouble", 16},
      {"complex32", 4}, {"chalf", 4},      {"quint8", 1},      {"qint8", 1},
      {"qint32", 4},    {"quint4x2", 1},   {"quint2x4", 1},    {"float8_e4m3fn", 1},
      {"float8_e5m2", 1},
  };
  for (const auto& entry : kDtypes) {
    if (dtype == entry.name) return entry.bytes;
  }
  return 0;
}

namespace {

// Writes the shortest varint of `size` to `out` (room for five bytes);
// returns its length.
size_t WriteLengthPrefix(uint32_t size, char* out) {
  size_t length = 0;
  while (size >= 0x80) {
    out[length++] = static_cast<char>((size & 0x7f) | 0x80);
    size >>= 7;
  }
  out[length++] = static_cast<char>(size);
  return length;
}

// The size of a serialised node's name when the node starts with it, as
// serialisers write it (field 1 first), else 0: a cheap sum of the names'
// sizes, to reserve room for them.
size_t LeadingNameSize(absl::string_view node) {
  constexpr char kNameTag = (v1::Node::kNameFieldNumber << 3) | 2;  // length-delimited
  if (node.size() < 2 || node[0] != kNameTag) return 0;
  uint64_t size = 0;
  for (size_t i = 1, shift = 0; i < node.size() && shift < 35; ++i, shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(node[i]);
    size |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return std::min<uint64_t>(size, node.size());
  }
  return 0;
}

}  // namespace

// Prefetches every cache line of a message object (its fields, not what they
// point to): a Node's fields span two lines.
template <typename Message>
void PrefetchMessage(const Message& message) {
  const char* begin = reinterpret_cast<const char*>(&message);
  for (size_t offset = 0; offset < sizeof(Message); offset += 64) {
    __builtin_prefetch(begin + offset);
  }
}

// Builds a CompactGraph; a friend of it. One pass over the nodes validates
// them and records their inputs; a second pass inverts inputs into users.
class GraphBuilder {
 public:
  GraphBuilder(const GraphSource& source, const InputLimits& limits, const CancellationToken& token,
               absl::string_view field)
      : source_(source), limits_(limits), token_(token), field_(field) {}

  absl::StatusOr<CompactGraph> Build() {
    PARTPLAN_ASSIGN_OR_RETURN(const int64_t n, LocateNodes());
    if (int64_t* count_out = source_.node_count_out(); count_out != nullptr) *count_out = n;
    PARTPLAN_RETURN_IF_ERROR(CheckModules());
    if (n == 0) return InvalidFieldError(NodesField(), "the graph has no nodes");
    if (n > limits_.max_nodes) {
      return InvalidFieldError(
          NodesField(), absl::StrCat("the graph has ", n, " nodes, above the limit of ",
                                     limits_.max_nodes, " (--max_nodes)"));
    }
    result_.op_.reserve(n);
    result_.total_bytes_.reserve(n);
    result_.output_bytes_.reserve(n);
    result_.input_offsets_.reserve(n + 1);
    result_.input_offsets_.push_back(0);
    // Most graphs read one to two nodes per node: room for 1.5 spares most
    // of the copies of growing a large array.
    result_.input_ids_.reserve(n + n / 2);
    result_.name_chars_.reserve(name_bytes_estimate_);
    result_.name_starts_.reserve(n + 1);
    result_.name_starts_.push_back(0);
    result_.name_index_.Reserve(n);
    first_use_stamp_.assign(n, -1);
    num_nodes_ = n;

    // Each name is hashed NameIndex::kLookahead nodes before it is inserted,
    // with its slot prefetched: on large graphs nearly every insert would be
    // a cache miss otherwise. So nodes are loaded (LoadNode) that far ahead
    // of the one being added.
    HashAhead hashes(result_.name_index_, n, [this](int64_t v) { return LoadNode(v); });
    std::vector<FieldViolation> violations;
    for (NodeId v = 0; v < n; ++v) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(v));
      if (v == unparsed_node_) {
        return InvalidFieldError(
            NodePath{field_, v}.Str(),
            "the node's bytes do not parse as partplan.v1.Node (truncated or corrupt, or a "
            "string that is not UTF-8)");
      }
      if (v == names_overflow_node_) {
        return InvalidFieldError(NodePath{field_, v}.Str(".name"),
                                 "the graph's node names add up to 4 GiB or more");
      }
      const absl::Status added = AddNode(v, hashes.Next(v));
      if (added.ok()) continue;
      // A fault of this node alone (a reference, a size, an op) leaves the
      // nodes after it checkable; one of the whole graph (a limit, a sum, a
      // name others may refer to) does not.
      const absl::optional<std::string> field = InvalidFieldPath(added);
      if (!field.has_value() || !absl::StartsWith(*field, NodePath{field_, v}.Str())) {
        if (violations.empty() || !field.has_value()) return added;
        return WithMoreViolations(InvalidFieldErrors(violations), added);
      }
      violations.push_back({*field, InvalidFieldDescription(added)});
      if (fault_ends_pass_ || violations.size() >= static_cast<size_t>(kMaxFieldViolations)) {
        return InvalidFieldErrors(violations);
      }
      SkipFailedNode(v);
    }
    if (output_node_ < 0 && violations.size() < static_cast<size_t>(kMaxFieldViolations)) {
      violations.push_back({NodesField(), "the graph has no OUTPUT node"});
    }
    if (!violations.empty()) return InvalidFieldErrors(violations);
    BuildUsers();
    return std::move(result_);
  }

 private:
  std::string NodesField() const { return absl::StrCat(field_, ".nodes"); }

  // The module hierarchy is optional, but what it lists must hold for every
  // planner that reads it (FAIRSCALE's parameter charges, SPARSE_NN's
  // embedding test): counts that are not negative, each name once.
  absl::Status CheckModules() const {
    const google::protobuf::RepeatedPtrField<v1::Module>& modules = result_.header_->modules();
    if (modules.empty()) return absl::OkStatus();
    const int num_modules = modules.size();
    std::vector<absl::string_view> names(num_modules);
    for (int i = 0; i < num_modules; ++i) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(i));
      names[i] = modules.Get(i).qualified_name();
    }
    NameIndex index(num_modules);
    HashAhead hashes(index, num_modules, [&names](int64_t i) { return names[i]; });
    for (int i = 0; i < num_modules; ++i) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(i));
      const v1::Module& module = modules.Get(i);
      const std::string at = absl::StrCat(field_, ".modules[", i, "]");
      if (module.parameter_count() < 0) {
        return InvalidFieldError(at + ".parameter_count", "must not be negative");
      }
      if (module.parameter_bytes() < 0) {
        return InvalidFieldError(at + ".parameter_bytes", "must not be negative");
      }
      if (const int32_t earlier = index.Insert(names, i, hashes.Next(i)); earlier >= 0) {
        return InvalidFieldError(at + ".qualified_name",
                                 absl::StrCat("module '", names[i],
                                              "' is listed twice (first as modules[", earlier, "])"));
      }
    }
    return absl::OkStatus();
  }

  // Finds the nodes: in a parsed graph, its node list; in a serialised one,
  // each node's bytes, by a scan of the graph's fields that reads no node
  // past its first field (for the size of its name, LeadingNameSize). The
  // fields other than nodes (name, modules) are parsed as the graph's
  // header. Returns the number of nodes (of which at most --max_nodes are
  // located).
  absl::StatusOr<int64_t> LocateNodes() {
    if (const v1::Graph* parsed = source_.parsed(); parsed != nullptr) {
      result_.parsed_ = parsed;
      result_.header_ = parsed;
      return parsed->nodes_size();
    }
    const ChunkedBytes& bytes = source_.serialized();
    const auto unparsable = [&] {
      return InvalidFieldError(field_,
                               "the graph's bytes do not parse as partplan.v1.Graph "
                               "(truncated or corrupt, or a string that is not UTF-8)");
    };
    std::string header;
    int64_t count = 0;
    size_t chunk = 0;
    absl::Status polled;  // the token's, when it stops the scan
    const bool split = SplitField(
        bytes, v1::Graph::kNodesFieldNumber,
        [&](size_t offset, size_t size) {
          polled = token_.CheckEvery(count);
          if (!polled.ok()) return false;
          // Beyond the limit, only counted, for the error.
          if (count++ >= limits_.max_nodes) return true;
          // The node is kept as its length prefix (the shortest varint of
          // its size, as serialisers write it) followed by its bytes: in
          // place when that is what precedes it within one piece, else a
          // copy (a node across two pieces: a few per piece of tens of
          // kilobytes).
          char prefix[5];
          const size_t prefix_size = WriteLengthPrefix(static_cast<uint32_t>(size), prefix);
          if (offset >= prefix_size) {
            const std::optional<absl::string_view> in_place =
                bytes.Contiguous(offset - prefix_size, prefix_size + size, &chunk);
            if (in_place.has_value() && std::memcmp(in_place->data(), prefix, prefix_size) == 0) {
              name_bytes_estimate_ += LeadingNameSize(in_place->substr(prefix_size));
              result_.node_starts_.push_back(in_place->data());
              return true;
            }
          }
          std::shared_ptr<char[]> copy(new char[prefix_size + size]);
          std::memcpy(copy.get(), prefix, prefix_size);
          bytes.CopyTo(offset, size, copy.get() + prefix_size);
          result_.node_starts_.push_back(copy.get());
          result_.copies_.push_back(std::move(copy));
          return true;
        },
        &header);
    PARTPLAN_RETURN_IF_ERROR(polled);
    if (!split) return unparsable();
    // On an arena of its own, so that its modules (a million in a large
    // model) are laid out in the order they are read, rather than wherever
    // the heap has room: planners read them in that order.
    auto arena = std::make_shared<google::protobuf::Arena>();
    v1::Graph* owned_header = google::protobuf::Arena::CreateMessage<v1::Graph>(arena.get());
    // Parsed in pieces, polling the token: a million modules take a while.
    const ChunkedBytes header_bytes{absl::string_view(header)};
    ChunkedInputStream header_stream(header_bytes, token_);
    if (!owned_header->ParseFromZeroCopyStream(&header_stream)) {
      PARTPLAN_RETURN_IF_ERROR(header_stream.status());
      return unparsable();
    }
    result_.header_ = owned_header;
    result_.owned_header_ = std::shared_ptr<const v1::Graph>(std::move(arena), owned_header);
    return count;
  }

  // Loads node v into a slot of `loaded_` (called once per node, in order,
  // NameIndex::kLookahead nodes ahead of AddNode): decodes its bytes, or
  // views its parsed message. Keeps a copy of its name; returns the copy.
  absl::string_view LoadNode(int64_t v) {
    LoadedNode& node = loaded_[v % kLoadedSlots];
    if (const v1::Graph* parsed = result_.parsed_; parsed != nullptr) {
      // A parsed request is read once, so every node is a cache miss at
      // first touch: the message is prefetched a lookahead before its name's
      // characters, and those a lookahead before they are hashed.
      constexpr int kAhead = NameIndex::kLookahead;
      if (v + 2 * kAhead < num_nodes_) {
        PrefetchMessage(parsed->nodes(static_cast<int>(v + 2 * kAhead)));
      }
      if (v + kAhead < num_nodes_) {
        __builtin_prefetch(parsed->nodes(static_cast<int>(v + kAhead)).name().data());
      }
      ViewNode(parsed->nodes(static_cast<int>(v)), &node.fields);
    } else {
      // Decoded in place; an encoding DecodeNode leaves to protobuf (see
      // node_fields.h) is parsed into the slot's message.
      const absl::string_view bytes = result_.NodeBytes(static_cast<NodeId>(v));
      if (!DecodeNode(bytes, &node.fields)) {
        if (node.message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
          ViewNode(node.message, &node.fields);
        } else {
          node.fields.Clear();
          if (unparsed_node_ < 0) unparsed_node_ = static_cast<NodeId>(v);
        }
      }
    }
    return KeepName(v, node.fields.name);
  }

  // Appends a copy of node v's name to the graph's names (CompactGraph's
  // name_chars_ says why). Returns the copy, which stays valid until the
  // next name is kept.
  absl::string_view KeepName(int64_t v, absl::string_view name) {
    std::vector<char>& chars = result_.name_chars_;
    if (name.size() > std::numeric_limits<uint32_t>::max() - chars.size()) {
      // Recorded, and reported when the node is reached.
      if (names_overflow_node_ < 0) names_overflow_node_ = static_cast<NodeId>(v);
      name = absl::string_view();
    }
    const size_t start = chars.size();
    chars.insert(chars.end(), name.begin(), name.end());
    result_.name_starts_.push_back(static_cast<uint32_t>(chars.size()));
    return absl::string_view(chars.data() + start, name.size());
  }

  // Gives node v, which AddNode refused, the entries AddNode would have
  // made (no inputs, no sizes, no op) so that the nodes after it are checked
  // as if it were sound: its name stays known, so references to it are not
  // reported again.
  void SkipFailedNode(NodeId v) {
    const size_t next = static_cast<size_t>(v) + 1;
    if (result_.input_offsets_.size() == next) {
      result_.input_ids_.resize(result_.input_offsets_[v]);
      result_.input_offsets_.push_back(result_.input_offsets_[v]);
    }
    result_.total_bytes_.resize(next, 0);
    result_.output_bytes_.resize(next, 0);
    result_.op_.resize(next, v1::OP_UNSPECIFIED);
  }

  // `name_hash` is NameIndex::Hash of the node's name.
  absl::Status AddNode(NodeId v, uint64_t name_hash) {
    const NodeFields& node = loaded_[v % kLoadedSlots].fields;
    const NodePath at{field_, v};
    // A node without its own name leaves every later reference to it in
    // doubt, so the check of the graph ends there.
    if (node.name.empty()) {
      fault_ends_pass_ = true;
      return InvalidFieldError(at.Str(".name"), "the node has no name");
    }
    const NodeId first = result_.name_index_.Insert(result_.names(), v, name_hash);
    if (first >= 0) {
      fault_ends_pass_ = true;
      return InvalidFieldError(
          at.Str(".name"),
          absl::StrCat("duplicate node name '", node.name, "' (first used by nodes[", first, "])"));
    }
    if (!v1::Op_IsValid(node.op) || node.op == v1::OP_UNSPECIFIED) {
      return InvalidFieldError(
          at.Str(".op"),
          absl::StrCat("node '", node.name, "' has no valid op (got ", node.op, ")"));
    }
    const v1::Op op = static_cast<v1::Op>(node.op);
    if (output_node_ >= 0) {
      return InvalidFieldError(
          at.Str(), absl::StrCat("node '", node.name, "' follows the OUTPUT node '",
                                 result_.name(output_node_), "'; OUTPUT must be the last node"));
    }
    if (op == v1::OUTPUT) output_node_ = v;
    if (op == v1::CALL_MODULE || op == v1::CALL_FUNCTION || op == v1::CALL_METHOD) {
      ++result_.num_op_nodes_;
    }
    PARTPLAN_RETURN_IF_ERROR(AddInputs(v, node, at));
    // Partitions copy graph inputs in whole; an input computed from other
    // nodes would make that copy wrong.
    if ((op == v1::PLACEHOLDER || op == v1::GET_ATTR) &&
        result_.input_offsets_[v + 1] > result_.input_offsets_[v]) {
      return InvalidFieldError(at.Str(".args"), absl::StrCat(v1::Op_Name(op), " node '", node.name,
                                                             "' must not refer to other nodes"));
    }
    PARTPLAN_RETURN_IF_ERROR(AddSizes(v, node, op, at));
    result_.op_.push_back(op);
    return absl::OkStatus();
  }

  // Records the distinct nodes `node` references, validating the flat
  // encoding of args and of each kwarg.
  absl::Status AddInputs(NodeId v, const NodeFields& node, const NodePath& at) {
    const int64_t values = static_cast<int64_t>(node.args.size() + node.keyword_values.size());
    if (values > limits_.max_values_per_node) {
      return InvalidFieldError(
          at.Str(), absl::StrCat("node '", node.name, "' has ", values,
                                 " argument values, above the limit of ",
                                 limits_.max_values_per_node, " (--max_values_per_node)"));
    }
    total_values_ += values;
    if (total_values_ > limits_.max_values) {
      return InvalidFieldError(
          NodesField(), absl::StrCat("the graph has more than ", limits_.max_values,
                                     " argument values (--max_values)"));
    }
    // The top-level args are any number of complete values.
    PARTPLAN_RETURN_IF_ERROR(AddValues(v, node.args, ValuesPath{at, -1},
                                       /*exactly_one=*/false));
    // Duplicate keywords: a scan over the few a node usually has, a set
    // beyond that, so that a node with many keywords stays linear.
    constexpr int kFewKeywords = 16;
    absl::flat_hash_set<absl::string_view> keywords;
    const int keyword_count = static_cast<int>(node.keywords.size());
    for (int k = 0; k < keyword_count; ++k) {
      const NodeFields::Keyword& kwarg = node.keywords[k];
      if (kwarg.name.empty()) {
        return InvalidFieldError(at.Str(absl::StrCat(".kwargs[", k, "].name")),
                                 "keyword argument has no name");
      }
      bool duplicate = false;
      if (keyword_count <= kFewKeywords) {
        for (int j = 0; j < k && !duplicate; ++j) duplicate = node.keywords[j].name == kwarg.name;
      } else {
        PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(k));
        duplicate = !keywords.insert(kwarg.name).second;
      }
      if (duplicate) {
        return InvalidFieldError(at.Str(absl::StrCat(".kwargs[", k, "].name")),
                                 absl::StrCat("duplicate keyword argument '", kwarg.name, "'"));
      }
      PARTPLAN_RETURN_IF_ERROR(AddValues(v, node.values_of(kwarg), ValuesPath{at, k},
                                         /*exactly_one=*/true));
    }
    if (result_.input_ids_.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      return InvalidFieldError(NodesField(), "the graph has more than 2^31 - 1 edges");
    }
    result_.input_offsets_.push_back(static_cast<int32_t>(result_.input_ids_.size()));
    return absl::OkStatus();
  }

  // Walks a flat pre-order encoding without recursion: `pending` counts the
  // elements still owed to open lists and tuples.
  absl::Status AddValues(NodeId v, absl::Span<const ValueView> values, const ValuesPath& at,
                         bool exactly_one) {
    int64_t pending = 0;      // elements owed to open containers
    int64_t top_level = 0;    // complete top-level values seen
    for (int i = 0; i < static_cast<int>(values.size()); ++i) {
      const ValueView& value = values[i];
      if (pending > 0) {
        --pending;
      } else {
        ++top_level;
        if (exactly_one && top_level > 1) {
          return InvalidFieldError(at.Element(i),
                                   "a keyword argument holds exactly one value; this is a second");
        }
      }
      switch (value.kind) {
        case v1::Value::kNode:
          PARTPLAN_RETURN_IF_ERROR(AddReference(v, value.node, at, i));
          break;
        case v1::Value::kList:
        case v1::Value::kTuple:
          pending += value.count;
          break;
        case v1::Value::KIND_NOT_SET:
          return InvalidFieldError(at.Element(i), "the value has no kind set");
        default:
          break;
      }
    }
    if (pending > 0) {
      return InvalidFieldError(at.Str(), absl::StrCat("a list or tuple is missing ", pending,
                                                      " of its elements"));
    }
    if (exactly_one && top_level == 0) {
      return InvalidFieldError(at.Str(), "the keyword argument has no value");
    }
    return absl::OkStatus();
  }

  absl::Status AddReference(NodeId v, absl::string_view name, const ValuesPath& at, int i) {
    const NodeId u = result_.Find(name);
    if (u < 0) return UnresolvedReference(v, name, at.Element(i));
    if (u == v) {
      return InvalidFieldError(at.Element(i), absl::StrCat("node '", name, "' refers to itself"));
    }
    // Later nodes are not in the map yet, so `u` precedes `v`; an earlier
    // OUTPUT cannot be referenced since nothing may follow it.
    if (first_use_stamp_[u] != v) {  // distinct inputs, first-use order
      first_use_stamp_[u] = v;
      result_.input_ids_.push_back(u);
    }
    return absl::OkStatus();
  }

  // Tells a forward reference from a dangling one; runs only on the error
  // path, so its scan costs nothing on valid graphs.
  absl::Status UnresolvedReference(NodeId v, absl::string_view name, const std::string& at) {
    NodeReader later(result_);
    for (NodeId w = v + 1; w < num_nodes_; ++w) {
      if (later.Read(w).name() == name) {
        return InvalidFieldError(
            at, absl::StrCat("refers to node '", name, "' defined later (nodes[", w,
                             "]); nodes must be in topological order"));
      }
    }
    return InvalidFieldError(at, absl::StrCat("refers to unknown node '", name, "'"));
  }

  absl::Status AddSizes(NodeId v, const NodeFields& node, v1::Op op, const NodePath& at) {
    if (node.parameter_count < 0) {
      return InvalidFieldError(at.Str(".parameter_count"), "must not be negative");
    }
    if (node.parameter_bytes < 0) {
      return InvalidFieldError(at.Str(".parameter_bytes"), "must not be negative");
    }
    if (!IsFiniteNonNegative(node.flops)) {
      return InvalidFieldError(at.Str(".flops"), "must be finite and not negative");
    }
    if (node.has_latency) {
      if (!IsFiniteNonNegative(node.memory_latency_seconds)) {
        return InvalidFieldError(at.Str(".latency.memory_latency_seconds"),
                                 "must be finite and not negative");
      }
      if (!IsFiniteNonNegative(node.compute_latency_seconds)) {
        return InvalidFieldError(at.Str(".latency.compute_latency_seconds"),
                                 "must be finite and not negative");
      }
    }
    for (int k = 0; k < static_cast<int>(node.outputs.size()); ++k) {
      const absl::Span<const int64_t> shape = node.shape_of(node.outputs[k]);
      for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
        if (shape[d] < 0) {
          return InvalidFieldError(at.Str(absl::StrCat(".outputs[", k, "].shape[", d, "]")),
                                   "dimension must not be negative");
        }
      }
    }
    int64_t total = 0;
    int64_t output = 0;
    if (op == v1::OUTPUT) {
      // torch.fx gives the output node no size.
    } else if (node.has_size_bytes) {
      total = node.total_bytes;
      output = node.output_bytes;
      if (total < 0) {
        return InvalidFieldError(at.Str(".size_bytes.total_bytes"), "must not be negative");
      }
      if (output < 0) {
        return InvalidFieldError(at.Str(".size_bytes.output_bytes"), "must not be negative");
      }
      if (output > total) {
        return InvalidFieldError(at.Str(".size_bytes"),
                                 absl::StrCat("output_bytes ", output, " exceed total_bytes ", total));
      }
    } else {
      PARTPLAN_RETURN_IF_ERROR(DeriveSizes(node, op, at, &total, &output));
    }
    // The sums below run over the whole graph: once one overflows, so would
    // the rest, and the check of the graph ends there.
    if (op != v1::OUTPUT &&
        AddOverflows(result_.graph_total_bytes_, total, &result_.graph_total_bytes_)) {
      fault_ends_pass_ = true;
      return InvalidFieldError(at.Str(".size_bytes"),
                               "the graph's total size overflows 64 bits");
    }
    // Planners add up more than the graph's total: a partition's memory
    // counts every input it reads from outside once per node reading it
    // (torch.fx's used_mem_bytes), and a device adds up its partitions. All
    // those sums are at most every node's total plus, per edge, the input's
    // total (graph inputs, which partitions copy in) or output size; keeping
    // that within 64 bits keeps every sum the planners make from
    // overflowing. (The OUTPUT node is in no partition.)
    if (AddOverflows(counted_bytes_, total, &counted_bytes_)) {
      fault_ends_pass_ = true;
      return InvalidFieldError(at.Str(".size_bytes"), kCountedBytesOverflow);
    }
    const int64_t end =
        op == v1::OUTPUT ? result_.input_offsets_[v] : result_.input_offsets_[v + 1];
    for (int64_t e = result_.input_offsets_[v]; e < end; ++e) {
      const NodeId u = result_.input_ids_[e];
      const int64_t counted = result_.is_input_node(u) ? result_.total_bytes_[u]
                                                       : result_.output_bytes_[u];
      if (AddOverflows(counted_bytes_, counted, &counted_bytes_)) {
        fault_ends_pass_ = true;
        return InvalidFieldError(at.Str(),
                                 absl::StrCat("node '", node.name, "' reads '", result_.name(u),
                                              "': ", kCountedBytesOverflow));
      }
    }
    result_.total_bytes_.push_back(total);
    result_.output_bytes_.push_back(output);
    KeepSparse(v,
               node.has_latency
                   ? std::max(node.compute_latency_seconds, node.memory_latency_seconds)
                   : -1.0,
               -1.0, &result_.latency_seconds_);
    KeepSparse(v, node.flops, 0.0, &result_.flops_);
    return AddTraining(v, node, at);
  }

  // Node v's NodeTraining, checked and kept (CompactGraph::training_ stays
  // empty until a node gives one).
  absl::Status AddTraining(NodeId v, const NodeFields& node, const NodePath& at) {
    PARTPLAN_RETURN_IF_ERROR(AddResaved(v, node, at));
    std::vector<CompactGraph::KeptTraining>& kept = result_.training_;
    if (!node.has_training) {
      if (!kept.empty()) kept.emplace_back();
      return absl::OkStatus();
    }
    const NodeTrainingFields& training = node.training;
    const struct {
      const char* field;
      double value;
    } seconds_and_flops[] = {
        {".training.backward_input_seconds", training.backward_input_seconds},
        {".training.backward_weight_seconds", training.backward_weight_seconds},
        {".training.backward_input_flops", training.backward_input_flops},
        {".training.backward_weight_flops", training.backward_weight_flops},
    };
    for (const auto& [field, value] : seconds_and_flops) {
      if (!IsFiniteNonNegative(value)) {
        return InvalidFieldError(at.Str(field), "must be finite and not negative");
      }
    }
    if (training.saved_activation_bytes < 0) {
      return InvalidFieldError(at.Str(".training.saved_activation_bytes"),
                               "must not be negative");
    }
    if (kept.empty()) kept.resize(v);
    kept.push_back({true, training});
    return absl::OkStatus();
  }

  // Node v's NodeTraining.resaved, each naming an earlier node (kept, like
  // the training costs, only once some node gives one).
  absl::Status AddResaved(NodeId v, const NodeFields& node, const NodePath& at) {
    std::vector<int64_t>& begin = result_.resaved_begin_;
    if (!node.resaved.empty() && begin.empty()) begin.assign(v + 1, 0);
    for (size_t j = 0; j < node.resaved.size(); ++j) {
      const NodeFields::Resaved& resaved = node.resaved[j];
      const std::string field = absl::StrCat(".training.resaved[", j, "]");
      const NodeId first = result_.Find(resaved.node);
      if (first < 0 || first == v) {
        return InvalidFieldError(
            at.Str(field + ".node"),
            absl::StrCat("must name an earlier node, got '", resaved.node, "'"));
      }
      if (resaved.storage < 0 || resaved.bytes < 0) {
        return InvalidFieldError(at.Str(field), "storage and bytes must not be negative");
      }
      result_.resaved_.push_back({first, resaved.storage, resaved.bytes});
    }
    if (!begin.empty()) begin.push_back(static_cast<int64_t>(result_.resaved_.size()));
    return absl::OkStatus();
  }

  // Appends node v's `value` to `values`, which stays empty until a node's
  // value is not `absent` (and is then filled with `absent` up to v).
  static void KeepSparse(NodeId v, double value, double absent, std::vector<double>* values) {
    if (values->empty()) {
      if (value == absent) return;
      values->assign(v, absent);
    }
    values->push_back(value);
  }

  // torch.fx's get_size_of_node: output elements x element size, plus for
  // call_module the parameters counted at the output's element size. Tuple
  // outputs (which torch.fx cannot size) add up their elements.
  absl::Status DeriveSizes(const NodeFields& node, v1::Op op, const NodePath& at, int64_t* total,
                           int64_t* output) {
    int64_t first_element_bytes = 0;
    for (int k = 0; k < static_cast<int>(node.outputs.size()); ++k) {
      const NodeFields::Output& meta = node.outputs[k];
      const int64_t element_bytes = DtypeElementBytes(meta.dtype);
      if (element_bytes == 0) {
        return InvalidFieldError(
            at.Str(absl::StrCat(".outputs[", k, "].dtype")),
            absl::StrCat("unknown dtype '", meta.dtype,
                         "'; give size_bytes or a torch dtype such as torch.float32"));
      }
      if (k == 0) first_element_bytes = element_bytes;
      int64_t bytes = element_bytes;
      for (int64_t dim : node.shape_of(meta)) {
        if (MulOverflows(bytes, dim, &bytes)) {
          return InvalidFieldError(at.Str(absl::StrCat(".outputs[", k, "].shape")),
                                   "the tensor's size overflows 64 bits");
        }
      }
      if (AddOverflows(*output, bytes, output)) {
        return InvalidFieldError(at.Str(".outputs"), "the output size overflows 64 bits");
      }
    }
    int64_t parameter_bytes = 0;
    if (op == v1::CALL_MODULE &&
        (MulOverflows(node.parameter_count, first_element_bytes, &parameter_bytes) ||
         AddOverflows(*output, parameter_bytes, total))) {
      return InvalidFieldError(at.Str(".parameter_count"),
                               "the node's size overflows 64 bits");
    }
    if (op != v1::CALL_MODULE) *total = *output;
    return absl::OkStatus();
  }

  // Inverts the input lists: users of u in increasing id (graph) order.
  // A counting sort of the edges by input: offsets[u] counts u's users, is
  // summed to the end of u's range, then walks back to its start as the
  // users are placed from the last node down (so each range is in graph
  // order, with no second array of positions).
  void BuildUsers() {
    const int32_t n = result_.num_nodes();
    std::vector<int32_t>& offsets = result_.user_offsets_;
    offsets.assign(n + 1, 0);
    for (NodeId u : result_.input_ids_) ++offsets[u];
    for (int32_t v = 1; v < n; ++v) offsets[v] += offsets[v - 1];
    offsets[n] = static_cast<int32_t>(result_.input_ids_.size());
    result_.user_ids_.resize(result_.input_ids_.size());
    for (NodeId v = n - 1; v >= 0; --v) {
      for (NodeId u : result_.inputs(v)) result_.user_ids_[--offsets[u]] = v;
    }
  }

  // The nodes loaded ahead: node v in slot v % the slot count, loaded
  // NameIndex::kLookahead nodes before it is added. `message` holds a node
  // DecodeNode left to protobuf.
  struct LoadedNode {
    NodeFields fields;
    v1::Node message;
  };
  static constexpr int kLoadedSlots = NameIndex::kLookahead + 1;

  const GraphSource& source_;
  const InputLimits& limits_;
  const CancellationToken& token_;
  const std::string field_;
  CompactGraph result_;
  int64_t num_nodes_ = 0;
  LoadedNode loaded_[kLoadedSlots];
  size_t name_bytes_estimate_ = 0;       // the names' size, where LocateNodes sees it
  NodeId names_overflow_node_ = -1;      // the first node whose name took the names past 4 GiB
  NodeId unparsed_node_ = -1;            // the first node whose bytes did not parse
  std::vector<NodeId> first_use_stamp_;  // last node that referenced u
  // Set with a fault after which the nodes that follow cannot be checked
  // as if the faulty one were sound.
  bool fault_ends_pass_ = false;
  NodeId output_node_ = -1;
  int64_t total_values_ = 0;
  // Every node's total size plus, per edge, what a partition counts for it.
  int64_t counted_bytes_ = 0;
  static constexpr char kCountedBytesOverflow[] =
      "the sizes overflow 64 bits as partitions count them (each node's total_bytes, plus "
      "each input's size once per node reading it)";
};

absl::StatusOr<CompactGraph> ImportGraph(const GraphSource& graph, const InputLimits& limits,
                                         const CancellationToken& token, absl::string_view field) {
  return GraphBuilder(graph, limits, token, field).Build();
}

void CompactGraph::AppendNames(absl::Span<const NodeId> ids,
                               google::protobuf::RepeatedPtrField<std::string>* out) const {
  // Two stages: a name's start kAhead names ahead, its characters half as
  // far.
  constexpr size_t kAhead = NameIndex::kLookahead;
  out->Reserve(out->size() + static_cast<int>(ids.size()));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i + kAhead < ids.size()) __builtin_prefetch(&name_starts_[ids[i + kAhead]]);
    if (i + kAhead / 2 < ids.size()) __builtin_prefetch(name(ids[i + kAhead / 2]).data());
    const absl::string_view node_name = name(ids[i]);
    out->Add()->assign(node_name.data(), node_name.size());
  }
}

absl::string_view CompactGraph::NodeBytes(NodeId v) const {
  // A varint the import wrote or checked (WriteLengthPrefix).
  const char* p = node_starts_[v];
  uint32_t size = 0;
  for (int shift = 0;; shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(*p++);
    size |= static_cast<uint32_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) break;
  }
  return absl::string_view(p, size);
}

const v1::Node& NodeReader::Read(NodeId v) {
  if (graph_.parsed_ != nullptr) return graph_.parsed_->nodes(v);
  if (v != read_) {
    const absl::string_view bytes = graph_.NodeBytes(v);
    // The import read these same bytes, so this does not fail.
    if (!node_.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      node_.Clear();
    }
    read_ = v;
  }
  return node_;
}

const NodeFields& NodeReader::OwnFields(NodeId v) {
  constexpr NodeParts kOwn = NodeParts::kOwnFieldsOnly;
  if (graph_.parsed_ != nullptr) {
    ViewNode(graph_.parsed_->nodes(v), &fields_, kOwn);
  } else if (!DecodeNode(graph_.NodeBytes(v), &fields_, kOwn)) {
    // An encoding DecodeNode leaves to protobuf (a size_bytes given twice,
    // say).
    ViewNode(Read(v), &fields_, kOwn);
  }
  return fields_;
}

}  // namespace partplan

#include "planner/data_parallel/node_args.h"

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

// The number of Values the complete value starting at `start` spans.
int ValueSpan(const google::protobuf::RepeatedPtrField<v1::Value>& values, int start) {
  int64_t pending = 1;
  int i = start;
  while (pending > 0 && i < values.size()) {
    const v1::Value& value = values.Get(i++);
    --pending;
    if (value.kind_case() == v1::Value::kList) pending += value.list();
    if (value.kind_case() == v1::Value::kTuple) pending += value.tuple();
  }
  return i - start;
}

bool IsContainer(const v1::Value& value) {
  return value.kind_case() == v1::Value::kList || value.kind_case() == v1::Value::kTuple;
}

uint32_t ContainerSize(const v1::Value& value) {
  return value.kind_case() == v1::Value::kList ? value.list() : value.tuple();
}

}  // namespace

NodeArgs::NodeArgs(const CompactGraph& graph, NodeId v)
    : graph_(graph), node_(graph.parsed()->nodes(v)), v_(v) {
  // The importer validated the encoding, so every span is complete.
  for (int i = 0; i < node_.args_size(); i += ValueSpan(node_.args(), i)) {
    positional_starts_.push_back(i);
  }
}

NodeArgs::Arg NodeArgs::Get(int position, absl::string_view keyword) const {
  if (position >= 0 && position < num_positional()) {
    return Arg{&node_.args(), positional_starts_[position], -1, position};
  }
  for (int k = 0; k < node_.kwargs_size(); ++k) {
    if (node_.kwargs(k).name() == keyword) return Arg{&node_.kwargs(k).value(), 0, k, -1};
  }
  return Arg{};
}

std::string NodeArgs::Field(const Arg& arg) const {
  const std::string node_field = absl::StrCat("graph.nodes[", v_, "]");
  if (!arg.present()) return absl::StrCat(node_field, ".args");
  if (arg.keyword >= 0) return absl::StrCat(node_field, ".kwargs[", arg.keyword, "]");
  return absl::StrCat(node_field, ".args[", arg.start, "]");
}

std::string NodeArgs::Describe() const {
  return absl::StrCat("node '", node_.name(), "' (", node_.target(), ")");
}

absl::Status NodeArgs::Error(const Arg& arg, absl::string_view description) const {
  return InvalidFieldError(Field(arg), absl::StrCat(Describe(), ": ", description));
}

NodeId NodeArgs::NodeAt(const Arg& arg) const {
  if (!arg.present() || arg.head().kind_case() != v1::Value::kNode) return -1;
  return graph_.Find(arg.head().node());
}

absl::StatusOr<absl::InlinedVector<NodeId, 4>> NodeArgs::Nodes(const Arg& arg,
                                                               absl::string_view what) const {
  absl::InlinedVector<NodeId, 4> nodes;
  if (!arg.present()) return Error(arg, absl::StrCat("missing argument ", what));
  if (!IsContainer(arg.head())) {
    const NodeId u = NodeAt(arg);
    if (u < 0) return Error(arg, absl::StrCat(what, " must be a tensor or a list of tensors"));
    nodes.push_back(u);
    return nodes;
  }
  const uint32_t count = ContainerSize(arg.head());
  int i = arg.start + 1;
  for (uint32_t k = 0; k < count; ++k) {
    const v1::Value& element = arg.values->Get(i);
    if (element.kind_case() == v1::Value::kNode) {
      nodes.push_back(graph_.Find(element.node()));
    } else if (element.kind_case() != v1::Value::kNone) {
      return Error(arg, absl::StrCat(what, " must be a list of tensors"));
    }
    i += ValueSpan(*arg.values, i);
  }
  return nodes;
}

absl::StatusOr<int64_t> NodeArgs::Int(const Arg& arg, absl::string_view what) const {
  if (!arg.present()) return Error(arg, absl::StrCat("missing argument ", what));
  if (arg.head().kind_case() != v1::Value::kInt) {
    return Error(arg, absl::StrCat(what, " must be an int"));
  }
  return arg.head().int_();
}

absl::StatusOr<int64_t> NodeArgs::IntOr(const Arg& arg, int64_t fallback,
                                        absl::string_view what) const {
  if (IsNone(arg)) return fallback;
  return Int(arg, what);
}

absl::StatusOr<bool> NodeArgs::BoolOr(const Arg& arg, bool fallback, absl::string_view what) const {
  if (IsNone(arg)) return fallback;
  if (arg.head().kind_case() != v1::Value::kBool) {
    return Error(arg, absl::StrCat(what, " must be a bool"));
  }
  return arg.head().bool_();
}

absl::StatusOr<Dims> NodeArgs::Ints(const Arg& arg, absl::string_view what) const {
  if (!arg.present()) return Error(arg, absl::StrCat("missing argument ", what));
  Dims ints;
  if (arg.head().kind_case() == v1::Value::kInt) {
    ints.push_back(arg.head().int_());
    return ints;
  }
  if (!IsContainer(arg.head())) {
    return Error(arg, absl::StrCat(what, " must be a list of ints"));
  }
  const uint32_t count = ContainerSize(arg.head());
  for (uint32_t k = 0; k < count; ++k) {
    const v1::Value& element = arg.values->Get(arg.start + 1 + static_cast<int>(k));
    if (element.kind_case() != v1::Value::kInt) {
      return Error(arg, absl::StrCat(what, " must be a list of ints"));
    }
    ints.push_back(element.int_());
  }
  return ints;
}

}  // namespace partplan

// NodeArgs: typed access to one node's arguments (graph.proto's flat Value
// encoding), for planners that read an aten op's dims, sizes and flags.
//
// An aten schema argument is found by position, or by keyword when the
// caller passed it as one (make_fx records kwargs as given):
//
//   NodeArgs args(graph, v);
//   NodeArgs::Arg size = args.Get(1, "size");
//   PARTPLAN_ASSIGN_OR_RETURN(Dims sizes, args.Ints(size, "size"));
//   PARTPLAN_ASSIGN_OR_RETURN(bool keepdim, args.BoolOr(args.Get(2, "keepdim"), false));
//
// Every error is INVALID_ARGUMENT naming the argument's field, e.g.
// `graph.nodes[7].args[1]: node 'view' (aten.view.default): size must be a
// list of ints`. Indexing the top-level arguments costs O(argument values)
// once; each lookup after that is O(1) (kwargs: O(kwargs)).
#ifndef PARTPLAN_PLANNER_DATA_PARALLEL_NODE_ARGS_H_
#define PARTPLAN_PLANNER_DATA_PARALLEL_NODE_ARGS_H_

#include <cstdint>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "partplan/v1/graph.pb.h"
#include "planner/graph/graph.h"

namespace partplan {

// Sizes or dims of a tensor; most have at most six.
using Dims = absl::InlinedVector<int64_t, 6>;

class NodeArgs {
 public:
  // One complete argument value, or none when the argument is absent.
  struct Arg {
    const google::protobuf::RepeatedPtrField<v1::Value>* values = nullptr;
    int start = 0;      // index of the value's first element in `values`
    int keyword = -1;   // kwargs index, or -1 for a positional argument
    int position = -1;  // positional index (for error fields)

    bool present() const { return values != nullptr; }
    const v1::Value& head() const { return values->Get(start); }
  };

  NodeArgs(const CompactGraph& graph, NodeId v);

  NodeId node() const { return v_; }
  int num_positional() const { return static_cast<int>(positional_starts_.size()); }

  // The argument at `position`, else the keyword argument `keyword`.
  Arg Get(int position, absl::string_view keyword) const;

  // The field path of an argument (of the node's args when absent).
  std::string Field(const Arg& arg) const;
  // `node 'name' (target)`, for error messages.
  std::string Describe() const;
  // INVALID_ARGUMENT on Field(arg), the description prefixed with Describe().
  absl::Status Error(const Arg& arg, absl::string_view description) const;

  // Whether the argument is absent or Python's None.
  static bool IsNone(const Arg& arg) {
    return !arg.present() || arg.head().kind_case() == v1::Value::kNone;
  }
  // The node a tensor argument refers to, or -1 (absent, None or a constant).
  NodeId NodeAt(const Arg& arg) const;
  // The nodes of a list or tuple argument of tensors (None elements skipped),
  // or of a single tensor argument.
  absl::StatusOr<absl::InlinedVector<NodeId, 4>> Nodes(const Arg& arg,
                                                       absl::string_view what) const;

  absl::StatusOr<int64_t> Int(const Arg& arg, absl::string_view what) const;
  absl::StatusOr<int64_t> IntOr(const Arg& arg, int64_t fallback, absl::string_view what) const;
  absl::StatusOr<bool> BoolOr(const Arg& arg, bool fallback, absl::string_view what) const;
  // A list or tuple of ints; a single int counts as a list of one (aten
  // accepts `dim=1` for `int[1] dim`).
  absl::StatusOr<Dims> Ints(const Arg& arg, absl::string_view what) const;

 private:
  const CompactGraph& graph_;
  const v1::Node& node_;
  NodeId v_;
  absl::InlinedVector<int, 8> positional_starts_;
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_DATA_PARALLEL_NODE_ARGS_H_

// CompactGraph: the planner's in-memory form of a v1::Graph.
//
// The importer (graph_import.h) resolves every node reference once into
// integer ids and adjacency arrays, so that planners never touch strings or
// protobuf in their loops:
//
//   PARTPLAN_ASSIGN_OR_RETURN(CompactGraph graph,
//                             ImportGraph(request.graph(), limits, token));
//   for (NodeId v = 0; v < graph.num_nodes(); ++v) {
//     for (NodeId u : graph.inputs(v)) { ... }   // distinct, first-use order
//   }
//
// Node ids are positions in the request's node list, which is a topological
// order: every input of node v has an id below v.
#ifndef PARTPLAN_PLANNER_GRAPH_H_
#define PARTPLAN_PLANNER_GRAPH_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "partplan/v1/graph.pb.h"
#include "planner/name_index.h"

namespace partplan {

using NodeId = int32_t;

class CompactGraph {
 public:
  // The graph keeps a pointer to `source` for names and targets: `source`
  // must outlive it.
  explicit CompactGraph(const v1::Graph* source) : source_(source) {}

  int32_t num_nodes() const { return static_cast<int32_t>(op_.size()); }
  const v1::Graph& source() const { return *source_; }
  const std::string& name(NodeId v) const { return source_->nodes(v).name(); }
  // Appends the names of `ids` to `out`, as plans list nodes. On large graphs
  // the nodes' messages are long out of cache by then, so their reads are
  // prefetched ahead.
  void AppendNames(absl::Span<const NodeId> ids,
                   google::protobuf::RepeatedPtrField<std::string>* out) const;
  v1::Op op(NodeId v) const { return op_[v]; }
  // call_module, call_function or call_method: the nodes partitions are made of.
  bool is_op_node(NodeId v) const {
    return op_[v] == v1::CALL_MODULE || op_[v] == v1::CALL_FUNCTION ||
           op_[v] == v1::CALL_METHOD;
  }
  // placeholder or get_attr: copied into every partition that reads them.
  bool is_input_node(NodeId v) const {
    return op_[v] == v1::PLACEHOLDER || op_[v] == v1::GET_ATTR;
  }

  // torch.fx's size_bytes.total_size / output_size.
  int64_t total_bytes(NodeId v) const { return total_bytes_[v]; }
  int64_t output_bytes(NodeId v) const { return output_bytes_[v]; }

  // The distinct nodes v reads, args before kwargs, in order of first use
  // (torch.fx's `map_arg(..., input_nodes.setdefault)`).
  absl::Span<const NodeId> inputs(NodeId v) const {
    return Slice(input_offsets_, input_ids_, v);
  }
  // The distinct nodes reading v, in graph order (torch.fx's `Node.users`).
  absl::Span<const NodeId> users(NodeId v) const {
    return Slice(user_offsets_, user_ids_, v);
  }
  int64_t num_edges() const { return static_cast<int64_t>(input_ids_.size()); }

  // The node called `name`, or -1.
  NodeId Find(absl::string_view name) const { return name_index_.Find(names(), name); }
  // The same, given NameIndex::Hash(name): with HashAhead, a loop looking up
  // many names in order prefetches their slots.
  NodeId Find(absl::string_view name, uint64_t hash) const {
    return name_index_.Find(names(), name, hash);
  }
  const NameIndex& name_index() const { return name_index_; }

  // The OUTPUT node (always the last node).
  NodeId output_node() const { return num_nodes() - 1; }
  // Number of call_* nodes.
  int32_t num_op_nodes() const { return num_op_nodes_; }
  // Sum of total_bytes over all nodes but the output (torch.fx's
  // `total_size_of_graph`).
  int64_t graph_total_bytes() const { return graph_total_bytes_; }

 private:
  friend class GraphBuilder;

  // The nodes' names by id, as NameIndex reads them.
  struct NodeNames {
    const v1::Graph* graph;
    const std::string& operator[](NodeId v) const { return graph->nodes(v).name(); }
  };
  NodeNames names() const { return NodeNames{source_}; }

  static absl::Span<const NodeId> Slice(const std::vector<int64_t>& offsets,
                                        const std::vector<NodeId>& ids, NodeId v) {
    return absl::MakeConstSpan(ids.data() + offsets[v],
                               static_cast<size_t>(offsets[v + 1] - offsets[v]));
  }

  const v1::Graph* source_;
  std::vector<v1::Op> op_;
  std::vector<int64_t> total_bytes_;
  std::vector<int64_t> output_bytes_;
  std::vector<int64_t> input_offsets_;  // num_nodes + 1 entries
  std::vector<NodeId> input_ids_;
  std::vector<int64_t> user_offsets_;   // num_nodes + 1 entries
  std::vector<NodeId> user_ids_;
  NameIndex name_index_;
  int32_t num_op_nodes_ = 0;
  int64_t graph_total_bytes_ = 0;
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_GRAPH_H_

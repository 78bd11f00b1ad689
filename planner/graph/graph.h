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
//
// A graph is imported from a parsed v1::Graph or straight from a serialised
// one (GraphSource in graph_import.h); it keeps the nodes' names itself and
// reads other node fields through NodeReader, from either.
#ifndef PARTPLAN_PLANNER_GRAPH_GRAPH_H_
#define PARTPLAN_PLANNER_GRAPH_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "partplan/v1/graph.pb.h"
#include "planner/graph/name_index.h"
#include "planner/graph/node_fields.h"

namespace partplan {

using NodeId = int32_t;

class CompactGraph {
 public:
  int32_t num_nodes() const { return static_cast<int32_t>(op_.size()); }
  // The node's name (a view into the graph's copy of the names).
  absl::string_view name(NodeId v) const {
    return absl::string_view(name_chars_.data() + name_starts_[v],
                             name_starts_[v + 1] - name_starts_[v]);
  }
  // Appends the names of `ids` to `out`, as plans list nodes. On large graphs
  // the names are out of cache by then, so their reads are prefetched ahead.
  void AppendNames(absl::Span<const NodeId> ids,
                   google::protobuf::RepeatedPtrField<std::string>* out) const;
  // The parsed graph this one was imported from, or null when it was
  // imported from serialised bytes. Planners read nodes through NodeReader,
  // which works for both; the data-parallel analysis, which reads each
  // node's message many times over, needs this one.
  const v1::Graph* parsed() const { return parsed_; }
  // The graph's module hierarchy (v1::Graph.modules).
  const google::protobuf::RepeatedPtrField<v1::Module>& modules() const {
    return header_->modules();
  }
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

  // The node's latency (v1::NodeLatency), as max(compute, memory) seconds,
  // or -1 when it gives none; and its FLOPs. Latency planners read them for
  // every node, so the graph keeps them, but only once some node gives one:
  // most graphs give neither and pay nothing.
  double latency_seconds(NodeId v) const {
    return latency_seconds_.empty() ? -1.0 : latency_seconds_[v];
  }
  bool has_latencies() const { return !latency_seconds_.empty(); }  // any node's
  double flops(NodeId v) const { return flops_.empty() ? 0.0 : flops_[v]; }
  bool has_flops() const { return !flops_.empty(); }  // any node's above 0

  // The node's v1::NodeTraining (validated: finite, not negative), or null
  // when it gives none. Kept, like latencies, only once some node gives one.
  const NodeTrainingFields* training(NodeId v) const {
    return training_.empty() || !training_[v].present ? nullptr : &training_[v].fields;
  }
  bool has_training() const { return !training_.empty(); }  // any node's

  // NodeTraining.resaved, its names resolved to earlier nodes.
  struct Resaved {
    NodeId first_saver;
    int32_t storage;
    int64_t bytes;
  };
  absl::Span<const Resaved> resaved(NodeId v) const {
    if (static_cast<size_t>(v) + 1 >= resaved_begin_.size()) return {};
    return absl::MakeConstSpan(resaved_).subspan(resaved_begin_[v],
                                                  resaved_begin_[v + 1] - resaved_begin_[v]);
  }

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
  friend class NodeReader;

  // Only ImportGraph makes graphs.
  CompactGraph() = default;

  // The nodes' names by id, as NameIndex reads them.
  class Names {
   public:
    explicit Names(const CompactGraph& graph) : graph_(graph) {}
    absl::string_view operator[](NodeId v) const { return graph_.name(v); }

   private:
    const CompactGraph& graph_;
  };
  Names names() const { return Names(*this); }

  static absl::Span<const NodeId> Slice(const std::vector<int32_t>& offsets,
                                        const std::vector<NodeId>& ids, NodeId v) {
    return absl::MakeConstSpan(ids.data() + offsets[v],
                               static_cast<size_t>(offsets[v + 1] - offsets[v]));
  }

  // Where each node's whole message is, for NodeReader: the parsed graph the
  // graph was imported from, or each node's bytes in the serialised graph
  // it was imported from (either must outlive the graph), or, for a node
  // whose bytes straddle two of its pieces, a copy of them (in `copies_`).
  // A node's bytes are kept as where its length prefix starts (one pointer
  // a node, half a view); NodeBytes reads them.
  const v1::Graph* parsed_ = nullptr;
  std::vector<const char*> node_starts_;
  absl::string_view NodeBytes(NodeId v) const;
  // Copies of nodes' bytes across two pieces.
  std::vector<std::shared_ptr<const char[]>> copies_;
  // The graph's name and modules: parsed_ itself, or the fields of the
  // serialised graph other than its nodes, parsed into `owned_header_`.
  const v1::Graph* header_ = nullptr;
  std::shared_ptr<const v1::Graph> owned_header_;

  // Every node's name, one after the other in graph order: node v's is
  // [name_starts_[v], name_starts_[v + 1]). Plans by name read every name
  // again long after the import; from the request's bytes that would be a
  // cache line of them per name (on a large graph, another pass over all of
  // the request), from here it is a few bytes per name, in order. And the
  // starts take 4 bytes a node where views would take 16.
  std::vector<char> name_chars_;
  std::vector<uint32_t> name_starts_;  // loaded nodes + 1 entries
  std::vector<v1::Op> op_;
  std::vector<int64_t> total_bytes_;
  std::vector<int64_t> output_bytes_;
  std::vector<double> latency_seconds_;  // empty, or one per node
  std::vector<double> flops_;            // empty, or one per node
  struct KeptTraining {
    bool present = false;
    NodeTrainingFields fields;
  };
  std::vector<KeptTraining> training_;  // empty, or one per node
  std::vector<Resaved> resaved_;
  std::vector<int64_t> resaved_begin_;  // empty, or nodes + 1 offsets into resaved_
  // Edge offsets are 32 bits (the import refuses more edges): half the
  // memory of 64-bit offsets, and the import's arrays are a large part of a
  // call's peak.
  std::vector<int32_t> input_offsets_;  // num_nodes + 1 entries
  std::vector<NodeId> input_ids_;
  std::vector<int32_t> user_offsets_;  // num_nodes + 1 entries
  std::vector<NodeId> user_ids_;
  NameIndex name_index_;
  int32_t num_op_nodes_ = 0;
  int64_t graph_total_bytes_ = 0;
};

// The nodes one node's arguments name, resolved in the order they name them
// (args, then kwargs), mostly without the name index: the node's distinct
// inputs (CompactGraph::inputs) are in first-use order, so when a caller
// passes every node-valued argument in order, each is the next input or one
// named before it. The next input is taken when its name matches; any other
// name (one named before, or one after arguments the caller skipped) is
// looked up, so the answer is right either way. On a large graph, whose
// index is out of cache, a lookup is a cache miss; the match compares a
// name just read.
//
//   ArgumentNodes arguments(graph, v);
//   for (const v1::Value& value : reader.Read(v).args()) {
//     if (value.kind_case() == v1::Value::kNode) Use(arguments.Next(value.node()));
//   }
class ArgumentNodes {
 public:
  ArgumentNodes(const CompactGraph& graph, NodeId v) : graph_(graph), inputs_(graph.inputs(v)) {}

  // The node the next node-valued argument names; `name` is its name.
  NodeId Next(absl::string_view name) {
    if (next_ < inputs_.size() && graph_.name(inputs_[next_]) == name) return inputs_[next_++];
    return graph_.Find(name);
  }

 private:
  const CompactGraph& graph_;
  const absl::Span<const NodeId> inputs_;
  size_t next_ = 0;
};

// The whole v1::Node message of a graph's nodes, for the fields CompactGraph
// does not keep (targets, latencies, argument values, shapes):
//
//   NodeReader reader(graph);
//   for (NodeId v : ...) Use(reader.Read(v).target());
//
//   for (NodeId v : ...) charge[v] = reader.OwnFields(v).parameter_count;
//
// On a graph imported from serialised bytes, Read parses the node again (the
// import parsed the same bytes, so it cannot fail), into a message the reader
// reuses: what it returns is valid until the next Read or OwnFields (which
// reads through it for bytes it does not decode). Parsing costs about
// as much as a cache miss on a parsed tree's node, so planners read nodes
// this way only where they need more than CompactGraph has.
//
// OwnFields decodes the node's own fields (NodeParts::kOwnFieldsOnly in
// node_fields.h: all but its arguments and outputs) into views, without
// building a message. That is several times cheaper than Read, whose parse
// allocates for every argument naming a node; loops over many nodes that
// want a target or a count use it. What it returns is valid until the next
// Read or OwnFields.
class NodeReader {
 public:
  explicit NodeReader(const CompactGraph& graph) : graph_(graph) {}
  NodeReader(const NodeReader&) = delete;
  NodeReader& operator=(const NodeReader&) = delete;

  const v1::Node& Read(NodeId v);
  const NodeFields& OwnFields(NodeId v);

 private:
  const CompactGraph& graph_;
  v1::Node node_;
  NodeId read_ = -1;  // the node in node_
  NodeFields fields_;
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_GRAPH_GRAPH_H_

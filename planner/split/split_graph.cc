#include "planner/split/split_graph.h"

#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "google/protobuf/io/coded_stream.h"
#include "planner/base/status_util.h"
#include "planner/graph/name_index.h"
#include "planner/graph/serialized_request.h"
#include "planner/split/module_split.h"
#include "planner/wire/wire_writer.h"

namespace partplan {
namespace {

// The partition of every call_* node, from the request's assignments.
absl::StatusOr<std::vector<int32_t>> PartitionOfNodes(const CompactGraph& graph,
                                                      const v1::SplitGraphRequest& request,
                                                      const CancellationToken& token) {
  std::vector<int32_t> partition_of(graph.num_nodes(), -1);
  std::vector<bool> assigned(graph.num_nodes(), false);
  const auto& assignments = request.assignments();
  HashAhead hashes(graph.name_index(), assignments.size(),
                   [&](int64_t i) -> const std::string& { return assignments[i].node(); });
  for (int i = 0; i < assignments.size(); ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
    const v1::NodePartition& assignment = assignments[i];
    const NodeId v = graph.Find(assignment.node(), hashes.Next(i));
    if (v >= 0 && graph.is_op_node(v) && !assigned[v]) {
      assigned[v] = true;
      partition_of[v] = assignment.partition();
      continue;
    }
    const std::string at = absl::StrCat("assignments[", i, "]");
    if (v < 0) {
      return InvalidFieldError(absl::StrCat(at, ".node"),
                               absl::StrCat("no node is called '", assignment.node(), "'"));
    }
    if (!graph.is_op_node(v)) {
      return InvalidFieldError(
          absl::StrCat(at, ".node"),
          absl::StrCat("node '", assignment.node(), "' is a ", v1::Op_Name(graph.op(v)),
                       "; only call_module, call_function and call_method nodes are "
                       "assigned (graph inputs are threaded into the partitions using them)"));
    }
    return InvalidFieldError(absl::StrCat(at, ".node"),
                             absl::StrCat("node '", assignment.node(), "' is assigned twice"));
  }
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(v));
    if (graph.is_op_node(v) && !assigned[v]) {
      return InvalidFieldError("assignments",
                               absl::StrCat("node '", graph.name(v), "' (graph.nodes[", v,
                                            "]) has no partition"));
    }
  }
  return partition_of;
}

using google::protobuf::io::CodedOutputStream;

// Every field written here is numbered below 16 (one-byte tags), and the
// writer below writes them in number order, as protobuf does.
static_assert(v1::SplitGraphResponse::kSubmodulesFieldNumber <
                      v1::SplitGraphResponse::kBaseGraphFieldNumber &&
                  v1::SplitGraphResponse::kBaseGraphFieldNumber <
                      v1::SplitGraphResponse::kQualnameMapFieldNumber &&
                  v1::SplitGraphResponse::kQualnameMapFieldNumber <
                      v1::SplitGraphResponse::kOutputValuesFieldNumber &&
                  v1::SplitGraphResponse::kOutputValuesFieldNumber < 16,
              "response field order");
static_assert(v1::Submodule::kNameFieldNumber < v1::Submodule::kNodesFieldNumber &&
                  v1::Submodule::kPartitionFieldNumber < v1::Submodule::kNodesFieldNumber &&
                  v1::Submodule::kNodesFieldNumber < v1::Submodule::kInputsFieldNumber &&
                  v1::Submodule::kInputsFieldNumber < v1::Submodule::kOutputsFieldNumber &&
                  v1::Submodule::kOutputsFieldNumber < v1::Submodule::kDependsOnFieldNumber &&
                  v1::Submodule::kOutputsFieldNumber < v1::Submodule::kDependentsFieldNumber &&
                  v1::Submodule::kDependentsFieldNumber < 16,
              "submodule field order");
static_assert(v1::QualifiedName::kSplitNameFieldNumber <
                      v1::QualifiedName::kOriginalNameFieldNumber &&
                  v1::QualifiedName::kOriginalNameFieldNumber < 16,
              "qualified name field order");

constexpr uint8_t kSubmoduleTag =
    Tag(v1::SplitGraphResponse::kSubmodulesFieldNumber, kLengthDelimited);
constexpr uint8_t kQualifiedNameTag =
    Tag(v1::SplitGraphResponse::kQualnameMapFieldNumber, kLengthDelimited);
constexpr uint8_t kNodesTag = Tag(v1::Submodule::kNodesFieldNumber, kLengthDelimited);
constexpr uint8_t kInputsTag = Tag(v1::Submodule::kInputsFieldNumber, kLengthDelimited);
constexpr uint8_t kOutputsTag = Tag(v1::Submodule::kOutputsFieldNumber, kLengthDelimited);
constexpr uint8_t kSplitNameTag = Tag(v1::QualifiedName::kSplitNameFieldNumber, kLengthDelimited);
constexpr uint8_t kOriginalNameTag =
    Tag(v1::QualifiedName::kOriginalNameFieldNumber, kLengthDelimited);

// A singular string field as protobuf writes it: nothing when empty.
size_t StringFieldSize(absl::string_view value) {
  return value.empty() ? 0 : FieldSize(value.size());
}

// A SplitGraphResponse, sized and then written as bytes. What it holds per
// node (each submodule's nodes, inputs and outputs, and the qualname_map's
// entry of each call_module node's target) is written straight from the
// graph's names and the targets; the rest, a few fields per submodule, is
// serialised by protobuf and copied in. At 10^6 nodes, building the response
// as messages made a std::string per node and per entry. Both the sizing
// (Build) and the writing poll a token by the names they pass over.
class SplitResponseWriter {
 public:
  SplitResponseWriter(const CompactGraph& graph, const ModuleSplit& split)
      : graph_(graph), split_(split) {}

  // Sizes the response; the token's status when it fires.
  absl::Status Build(const CancellationToken& token) {
    const ModuleSplit& split = split_;
    int64_t work = 0;
    for (int32_t i : split.construction_order) {
      const SplitPartition& part = split.partitions[i];
      PARTPLAN_RETURN_IF_ERROR(token.CheckWork(1 + PartSize(part), &work));
      AddSubmodule(part);
    }
    v1::SplitGraphResponse base_graph;
    for (int32_t i : split.construction_order) {
      const SplitPartition& part = split.partitions[i];
      PARTPLAN_RETURN_IF_ERROR(token.CheckWork(
          1 + static_cast<int64_t>(part.argument_names.size() + part.result_names.size()), &work));
      v1::BaseGraphCall* call = base_graph.add_base_graph();
      call->set_submodule(part.submodule_name);
      *call->mutable_arguments() = {part.argument_names.begin(), part.argument_names.end()};
      *call->mutable_results() = {part.result_names.begin(), part.result_names.end()};
    }
    base_graph_ = base_graph.SerializeAsString();
    size_ += base_graph_.size();
    PARTPLAN_RETURN_IF_ERROR(AddQualifiedNames(token));
    v1::SplitGraphResponse output_values;
    *output_values.mutable_output_values() = {split.output_values.begin(),
                                              split.output_values.end()};
    output_values_ = output_values.SerializeAsString();
    size_ += output_values_.size();
    return absl::OkStatus();
  }

  size_t size() const { return size_; }

  // Writes what Build sized; the token's status when it fires (`out` is
  // then left short).
  absl::Status Write(WireWriter& out, const CancellationToken& token) const {
    int64_t work = 0;
    for (const SubmoduleBytes& submodule : submodules_) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckWork(1 + PartSize(*submodule.part), &work));
      out.Reserve(FieldHeaderSize(submodule.payload));
      out.FieldHeader(kSubmoduleTag, submodule.payload);
      out.Append(submodule.before_nodes);
      PARTPLAN_RETURN_IF_ERROR(WriteNames(kNodesTag, submodule.part->nodes, token, &work, out));
      PARTPLAN_RETURN_IF_ERROR(WriteNames(kInputsTag, submodule.part->inputs, token, &work, out));
      PARTPLAN_RETURN_IF_ERROR(WriteNames(kOutputsTag, submodule.part->outputs, token, &work, out));
      out.Append(submodule.after_nodes);
    }
    out.Append(base_graph_);
    for (const int32_t i : qualified_) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      const absl::string_view split_name = split_names_[i];
      const absl::string_view target = targets_[i];
      const size_t payload = StringFieldSize(split_name) + StringFieldSize(target);
      out.Reserve(FieldSize(payload));
      out.FieldHeader(kQualifiedNameTag, payload);
      if (!split_name.empty()) out.Field(kSplitNameTag, split_name);
      if (!target.empty()) out.Field(kOriginalNameTag, target);
    }
    out.Append(output_values_);
    return absl::OkStatus();
  }

 private:
  // The names a submodule lists.
  static int64_t PartSize(const SplitPartition& part) {
    return static_cast<int64_t>(part.nodes.size() + part.inputs.size() + part.outputs.size() +
                                part.depends_on.size() + part.dependents.size());
  }

  // A submodule's fields before its node lists (name, partition) and after
  // them (depends_on, dependents), serialised; the lists come from `part`.
  struct SubmoduleBytes {
    std::string before_nodes;
    std::string after_nodes;
    const SplitPartition* part = nullptr;
    size_t payload = 0;
  };

  void AddSubmodule(const SplitPartition& part) {
    SubmoduleBytes& out = submodules_.emplace_back();
    out.part = &part;
    v1::Submodule fields;
    fields.set_name(part.submodule_name);
    fields.set_partition(part.partition);
    out.before_nodes = fields.SerializeAsString();
    fields.Clear();
    for (int32_t j : part.depends_on) fields.add_depends_on(split_.partitions[j].submodule_name);
    for (int32_t j : part.dependents) fields.add_dependents(split_.partitions[j].submodule_name);
    out.after_nodes = fields.SerializeAsString();
    out.payload = out.before_nodes.size() + NamesSize(part.nodes) + NamesSize(part.inputs) +
                  NamesSize(part.outputs) + out.after_nodes.size();
    size_ += FieldSize(out.payload);
  }

  // split_module's qualname_map: per call_module node's target,
  // `submod_X.<target with . as _>` and the target, the first use of each
  // split name only, in graph order. The first uses are found with a
  // NameIndex, which stays fast where a hash set of a million names would
  // miss the cache on every insert.
  absl::Status AddQualifiedNames(const CancellationToken& token) {
    std::vector<const std::string*> submodule_name_of(graph_.num_nodes(), nullptr);
    int64_t work = 0;
    for (const SplitPartition& part : split_.partitions) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckWork(1 + static_cast<int64_t>(part.nodes.size()), &work));
      for (NodeId v : part.nodes) submodule_name_of[v] = &part.submodule_name;
    }
    NodeReader nodes(graph_);
    std::string split_name;
    for (NodeId v = 0; v < graph_.num_nodes(); ++v) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      if (graph_.op(v) != v1::CALL_MODULE) continue;
      const absl::string_view target = nodes.OwnFields(v).target;
      split_name.assign(*submodule_name_of[v]);
      split_name += '.';
      for (const char c : target) split_name += c == '.' ? '_' : c;
      split_names_.Add(split_name);
      targets_.Add(target);
    }
    NameIndex first_use(split_names_.size());
    HashAhead hashes(first_use, split_names_.size(), [this](int64_t i) { return split_names_[i]; });
    for (int32_t i = 0; i < static_cast<int32_t>(split_names_.size()); ++i) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      if (first_use.Insert(split_names_, i, hashes.Next(i)) >= 0) continue;
      qualified_.push_back(i);
      size_ += FieldSize(StringFieldSize(split_names_[i]) + StringFieldSize(targets_[i]));
    }
    return absl::OkStatus();
  }

  size_t NamesSize(absl::Span<const NodeId> ids) const {
    size_t size = 0;
    for (NodeId v : ids) size += FieldSize(graph_.name(v).size());
    return size;
  }

  // A repeated string field of node names. A large graph's names are out of
  // cache by now: each is prefetched a few names before it is copied.
  absl::Status WriteNames(uint8_t tag, absl::Span<const NodeId> ids, const CancellationToken& token,
                          int64_t* work, WireWriter& out) const {
    constexpr size_t kNameAhead = 16;
    for (size_t i = 0; i < ids.size(); ++i) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery((*work)++));
      if (i + kNameAhead < ids.size()) __builtin_prefetch(graph_.name(ids[i + kNameAhead]).data());
      const absl::string_view name = graph_.name(ids[i]);
      out.Reserve(FieldSize(name.size()));
      out.Field(tag, name);
    }
    return absl::OkStatus();
  }

  const CompactGraph& graph_;
  const ModuleSplit& split_;
  std::vector<SubmoduleBytes> submodules_;  // in construction order
  std::string base_graph_;                  // field base_graph, serialised
  StringPool split_names_;                  // per call_module node
  StringPool targets_;                      // per call_module node
  std::vector<int32_t> qualified_;          // the first use of each split name
  std::string output_values_;               // field output_values, serialised
  size_t size_ = 0;
};

}  // namespace

absl::Status SplitGraphSerializedPlan(const CompactGraph& graph,
                                      const v1::SplitGraphRequest& request,
                                      const CancellationToken& token, absl::Cord* response_bytes,
                                      size_t piece_bytes) {
  PARTPLAN_ASSIGN_OR_RETURN(const std::vector<int32_t> partition_of,
                            PartitionOfNodes(graph, request, token));
  PARTPLAN_ASSIGN_OR_RETURN(const ModuleSplit split,
                            SplitModule(graph, partition_of, request.keep_original_order(),
                                        "assignments", token));
  SplitResponseWriter response(graph, split);
  PARTPLAN_RETURN_IF_ERROR(response.Build(token));
  absl::Status written;  // the token's, when it stops the writing
  const absl::Status status =
      WriteResponseBytes(response.size(), piece_bytes, response_bytes,
                         [&](WireWriter& out) { written = response.Write(out, token); });
  PARTPLAN_RETURN_IF_ERROR(written);
  return status;
}

absl::Status SplitGraphPlan(const CompactGraph& graph, const v1::SplitGraphRequest& request,
                            const CancellationToken& token, v1::SplitGraphResponse* response) {
  absl::Cord bytes;
  PARTPLAN_RETURN_IF_ERROR(SplitGraphSerializedPlan(graph, request, token, &bytes));
  std::vector<absl::string_view> pieces(bytes.Chunks().begin(), bytes.Chunks().end());
  const ChunkedBytes chunked(pieces);
  // Parsed in pieces of ChunkedInputStream::kPollBytes, polling the token.
  ChunkedInputStream stream(chunked, token);
  response->Clear();
  if (!response->ParseFromZeroCopyStream(&stream)) {
    PARTPLAN_RETURN_IF_ERROR(stream.status());
    return absl::InternalError("the split's response does not parse");
  }
  return absl::OkStatus();
}

}  // namespace partplan

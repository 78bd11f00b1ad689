#include "planner/wire/split_graph_response.h"

#include <string>
#include <vector>

#include "absl/types/span.h"
#include "google/protobuf/io/coded_stream.h"
#include "planner/base/status_util.h"
#include "planner/wire/wire_writer.h"

namespace partplan {
namespace {

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
// entries) is written straight from the graph's names and the split's
// pools; the rest, a few fields per submodule, is serialised by protobuf and
// copied in. Building the response as messages makes a std::string per node
// and per entry. Both the sizing (Build) and the writing poll a token by the
// names they pass over.
class SplitResponseWriter {
 public:
  SplitResponseWriter(const CompactGraph& graph, const GraphSplit& split)
      : graph_(graph), split_(split.split), qualified_(split.qualified_names) {}

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
    for (const int32_t i : qualified_.entries) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      size_ += FieldSize(StringFieldSize(qualified_.split_names[i]) +
                         StringFieldSize(qualified_.original_names[i]));
    }
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
    for (const int32_t i : qualified_.entries) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      const absl::string_view split_name = qualified_.split_names[i];
      const absl::string_view target = qualified_.original_names[i];
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
  const QualifiedNames& qualified_;
  std::vector<SubmoduleBytes> submodules_;  // in construction order
  std::string base_graph_;                  // field base_graph, serialised
  std::string output_values_;               // field output_values, serialised
  size_t size_ = 0;
};

// A repeated string field of node names, from their ids.
absl::Status AddNames(const CompactGraph& graph, absl::Span<const NodeId> ids,
                      const CancellationToken& token, int64_t* work,
                      google::protobuf::RepeatedPtrField<std::string>* names) {
  names->Reserve(static_cast<int>(ids.size()));
  for (const NodeId v : ids) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery((*work)++));
    const absl::string_view name = graph.name(v);
    names->Add()->assign(name.data(), name.size());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SerializeSplitGraphResponse(const CompactGraph& graph, const GraphSplit& split,
                                         const CancellationToken& token, absl::Cord* bytes,
                                         size_t piece_bytes) {
  SplitResponseWriter response(graph, split);
  PARTPLAN_RETURN_IF_ERROR(response.Build(token));
  absl::Status written;  // the token's, when it stops the writing
  const absl::Status status =
      WriteResponseBytes(response.size(), piece_bytes, bytes,
                         [&](WireWriter& out) { written = response.Write(out, token); });
  PARTPLAN_RETURN_IF_ERROR(written);
  return status;
}

absl::Status SplitGraphResponseFromPlan(const CompactGraph& graph, const GraphSplit& split,
                                        const CancellationToken& token,
                                        v1::SplitGraphResponse* response) {
  response->Clear();
  const ModuleSplit& module_split = split.split;
  int64_t work = 0;
  for (const int32_t i : module_split.construction_order) {
    const SplitPartition& part = module_split.partitions[i];
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    v1::Submodule* submodule = response->add_submodules();
    submodule->set_name(part.submodule_name);
    submodule->set_partition(part.partition);
    PARTPLAN_RETURN_IF_ERROR(AddNames(graph, part.nodes, token, &work, submodule->mutable_nodes()));
    PARTPLAN_RETURN_IF_ERROR(
        AddNames(graph, part.inputs, token, &work, submodule->mutable_inputs()));
    PARTPLAN_RETURN_IF_ERROR(
        AddNames(graph, part.outputs, token, &work, submodule->mutable_outputs()));
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(
        1 + static_cast<int64_t>(part.depends_on.size() + part.dependents.size()), &work));
    for (const int32_t j : part.depends_on) {
      submodule->add_depends_on(module_split.partitions[j].submodule_name);
    }
    for (const int32_t j : part.dependents) {
      submodule->add_dependents(module_split.partitions[j].submodule_name);
    }
  }
  for (const int32_t i : module_split.construction_order) {
    const SplitPartition& part = module_split.partitions[i];
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(
        1 + static_cast<int64_t>(part.argument_names.size() + part.result_names.size()), &work));
    v1::BaseGraphCall* call = response->add_base_graph();
    call->set_submodule(part.submodule_name);
    *call->mutable_arguments() = {part.argument_names.begin(), part.argument_names.end()};
    *call->mutable_results() = {part.result_names.begin(), part.result_names.end()};
  }
  const QualifiedNames& qualified = split.qualified_names;
  response->mutable_qualname_map()->Reserve(static_cast<int>(qualified.entries.size()));
  for (const int32_t i : qualified.entries) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    v1::QualifiedName* entry = response->add_qualname_map();
    const absl::string_view split_name = qualified.split_names[i];
    const absl::string_view original_name = qualified.original_names[i];
    entry->set_split_name(split_name.data(), split_name.size());
    entry->set_original_name(original_name.data(), original_name.size());
  }
  PARTPLAN_RETURN_IF_ERROR(
      token.CheckWork(1 + static_cast<int64_t>(module_split.output_values.size()), &work));
  *response->mutable_output_values() = {module_split.output_values.begin(),
                                        module_split.output_values.end()};
  return absl::OkStatus();
}

}  // namespace partplan

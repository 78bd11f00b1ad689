// The pass of AnalyzeBatchDims over the graph (batch_dim_analyzer.h): nodes
// in order, the elements each adds to the result, notes and guesses, and the
// placeholders, whose roles and shapes seed the batch.
#include "planner/data_parallel/batch_dim_analyzer.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"
#include "planner/graph/graph_import.h"

namespace partplan {

using batch_dim_internal::ShapeString;
using batch_dim_internal::NodeField;

absl::StatusOr<BatchDimAnalysis> BatchDimAnalyzer::Run() {
  const int32_t n = graph_.num_nodes();
  result_.element_offsets_.reserve(n + 1);
  result_.element_offsets_.push_back(0);
  result_.ambiguous_.assign(n, false);
  result_.guess_of_.assign(n, -1);
  result_.keeps_partial_.assign(n, false);
  result_.gathers_batch_.assign(n, false);
  result_.elementwise_.assign(n, false);
  result_.aliases_.assign(n, false);
  result_.selects_element_.assign(n, false);
  result_.elements_by_schema_.assign(n, false);
  PARTPLAN_RETURN_IF_ERROR(FindSeed());
  for (NodeId v = 0; v < n; ++v) {
    PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(v));
    switch (graph_.op(v)) {
      case v1::PLACEHOLDER:
        PARTPLAN_RETURN_IF_ERROR(AnalyzePlaceholder(v));
        break;
      case v1::GET_ATTR:
        // A constant of the traced module (make_fx's _tensor_constant).
        AddGivenElements(v, Layout::kReplicate);
        break;
      case v1::OUTPUT:
        AddElement(ValueLayout{}, {}, 0);
        break;
      default:
        PARTPLAN_RETURN_IF_ERROR(AnalyzeOp(v));
        break;
    }
    CarryGuess(v);
    result_.element_offsets_.push_back(static_cast<int64_t>(result_.elements_.size()));
  }
  result_.batch_size_ = batch_size_;
  return std::move(result_);
}

void BatchDimAnalyzer::AddElement(const ValueLayout& value, absl::Span<const int64_t> shape,
                                  int64_t element_bytes) {
  BatchDimAnalysis::TensorInfo info;
  info.shape_offset = static_cast<int64_t>(result_.shape_pool_.size());
  info.rank = static_cast<int32_t>(shape.size());
  info.element_bytes = element_bytes;
  result_.shape_pool_.insert(result_.shape_pool_.end(), shape.begin(), shape.end());
  result_.tensors_.push_back(info);
  result_.elements_.push_back(value);
}

// Bytes per element of output k: from its dtype, else from size_bytes.
int64_t BatchDimAnalyzer::GivenElementBytes(NodeId v, int k) const {
  const v1::Node& node = proto(v);
  const int64_t bytes = DtypeElementBytes(node.outputs(k).dtype());
  if (bytes > 0 || !node.has_size_bytes() || node.outputs_size() != 1) return bytes;
  int64_t elements = 1;
  for (int64_t size : node.outputs(k).shape()) {
    if (__builtin_mul_overflow(elements, size, &elements)) return 0;
  }
  return elements > 0 ? node.size_bytes().output_bytes() / elements : 0;
}

// One element per given output, all of `layout` (a non-tensor without).
void BatchDimAnalyzer::AddGivenElements(NodeId v, Layout kind) {
  const v1::Node& node = proto(v);
  if (node.outputs_size() == 0) {
    AddElement(ValueLayout{}, {}, 0);
    return;
  }
  for (int k = 0; k < node.outputs_size(); ++k) {
    ValueLayout value;
    value.layout = kind;
    AddElement(value, node.outputs(k).shape(), GivenElementBytes(v, k));
  }
}

void BatchDimAnalyzer::Note(NodeId v, std::string text) {
  std::string& note = result_.notes_[v];
  note = note.empty() ? std::move(text) : absl::StrCat(note, "; ", text);
}

// A guess (an ambiguous node) is carried to everything computed from it,
// so that no placement resting on it reads as known.
void BatchDimAnalyzer::CarryGuess(NodeId v) {
  if (result_.ambiguous_[v]) {
    result_.guess_of_[v] = v;
    return;
  }
  for (NodeId u : graph_.inputs(v)) {
    if (result_.guess_of_[u] >= 0) {
      result_.guess_of_[v] = result_.guess_of_[u];
      return;
    }
  }
}

bool BatchDimAnalyzer::FitsBatchDim(NodeId v) const {
  const v1::Node& node = proto(v);
  return node.outputs_size() > 0 && node.outputs(0).shape_size() > options_.input_batch_dim;
}

// The first explicit ACTIVATION, else the first unspecified placeholder
// that has the batch dim, gives the batch size.
absl::Status BatchDimAnalyzer::FindSeed() {
  NodeId seed = -1;
  for (NodeId v = 0; v < graph_.num_nodes() && seed < 0; ++v) {
    if (graph_.op(v) == v1::PLACEHOLDER && options_.roles[v] == InputRole::kActivation) seed = v;
  }
  for (NodeId v = 0; v < graph_.num_nodes() && seed < 0; ++v) {
    if (graph_.op(v) == v1::PLACEHOLDER && options_.roles[v] == InputRole::kUnspecified &&
        FitsBatchDim(v)) {
      seed = v;
    }
  }
  if (seed < 0) {
    return InvalidFieldError(
        "roles", absl::StrCat("the graph has no activation input to take the batch from (a "
                              "placeholder with role ACTIVATION, or none, and a dim ",
                              options_.input_batch_dim, ")"));
  }
  PARTPLAN_RETURN_IF_ERROR(CheckActivation(seed));
  seed_ = seed;
  batch_size_ = proto(seed).outputs(0).shape(options_.input_batch_dim);
  return absl::OkStatus();
}

absl::Status BatchDimAnalyzer::CheckActivation(NodeId v) const {
  const v1::Node& node = proto(v);
  if (node.outputs_size() == 0) {
    return InvalidFieldError(absl::StrCat(NodeField(v), ".outputs"),
                             absl::StrCat("activation input '", node.name(),
                                          "' has no shape; its batch dim cannot be found"));
  }
  if (!FitsBatchDim(v)) {
    return InvalidFieldError("input_batch_dim",
                             absl::StrCat("batch dim ", options_.input_batch_dim,
                                          " is out of range for activation input '", node.name(),
                                          "' of shape ", ShapeString(node.outputs(0).shape())));
  }
  return absl::OkStatus();
}

absl::Status BatchDimAnalyzer::AnalyzePlaceholder(NodeId v) {
  const v1::Node& node = proto(v);
  const int32_t dim = options_.input_batch_dim;
  switch (options_.roles[v]) {
    case InputRole::kParameter:
    case InputRole::kOptimizerState:
      if (node.outputs_size() == 0) {
        return InvalidFieldError(
            absl::StrCat(NodeField(v), ".outputs"),
            absl::StrCat(InputRoleName(options_.roles[v]), " '", node.name(),
                         "' has no shape; the plan needs its size"));
      }
      AddGivenElements(v, Layout::kModelState);
      return absl::OkStatus();
    case InputRole::kActivation: {
      PARTPLAN_RETURN_IF_ERROR(CheckActivation(v));
      const int64_t size = node.outputs(0).shape(dim);
      if (size != batch_size_) {
        return InvalidFieldError(
            absl::StrCat(NodeField(v), ".outputs[0].shape[", dim, "]"),
            absl::StrCat("activation input '", node.name(), "' has batch size ", size,
                         ", but the first activation input '", proto(seed_).name(), "' has ",
                         batch_size_));
      }
      break;
    }
    default:
      if (node.outputs_size() == 0) {
        AddElement(ValueLayout{}, {}, 0);
        return absl::OkStatus();
      }
      if (!FitsBatchDim(v) || node.outputs(0).shape(dim) != batch_size_) {
        Note(v, absl::StrCat("taken as a replicated input: its shape ",
                             ShapeString(node.outputs(0).shape()), " has no batch dim ", dim,
                             " of the batch size ", batch_size_,
                             " (give it a role to say otherwise)"));
        AddGivenElements(v, Layout::kReplicate);
        return absl::OkStatus();
      }
      break;
  }
  ValueLayout value;
  value.layout = Layout::kShard;
  value.dim = dim;
  value.batch_size = batch_size_;
  AddElement(value, node.outputs(0).shape(), GivenElementBytes(v, 0));
  return absl::OkStatus();
}

// Flags v ambiguous: its layout is the size rule's guess, not a rule's.
void BatchDimAnalyzer::Guess(NodeId v, absl::string_view why) {
  result_.ambiguous_[v] = true;
  Note(v, absl::StrCat("ambiguous: ", why));
}

}  // namespace partplan

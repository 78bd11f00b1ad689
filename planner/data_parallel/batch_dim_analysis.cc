#include "planner/data_parallel/batch_dim_analysis.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/base/status_util.h"
#include "planner/data_parallel/dim_maps.h"
#include "planner/data_parallel/node_args.h"
#include "planner/graph/graph_import.h"

namespace partplan {

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "sum";
}

absl::Status BatchDimOptions::CheckAndSetup(const CompactGraph& graph) {
  if (input_batch_dim < 0) {
    return InvalidFieldError("input_batch_dim",
                             absl::StrCat("must not be negative, got ", input_batch_dim));
  }
  if (roles.size() > static_cast<size_t>(graph.num_nodes())) {
    return InvalidFieldError(
        "roles", absl::StrCat(roles.size(), " roles for a graph of ", graph.num_nodes(), " nodes"));
  }
  roles.resize(graph.num_nodes(), v1::ROLE_UNSPECIFIED);
  return absl::OkStatus();
}

absl::Span<const int64_t> BatchDimAnalysis::shape(NodeId v, int k) const {
  const TensorInfo& info = tensors_[element_offsets_[v] + k];
  return absl::MakeConstSpan(shape_pool_.data() + info.shape_offset,
                             static_cast<size_t>(info.rank));
}

int64_t BatchDimAnalysis::value_bytes(NodeId v) const {
  // Saturating: shapes given with explicit sizes are not bounded by import.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  for (int k = 0; k < num_elements(v); ++k) {
    int64_t bytes = element_bytes(v, k);
    for (int64_t size : shape(v, k)) {
      if (__builtin_mul_overflow(bytes, size, &bytes)) bytes = kMax;
    }
    if (__builtin_add_overflow(total, bytes, &total)) total = kMax;
  }
  return total;
}

int32_t BatchDimAnalysis::cut_dim(NodeId u, NodeId v) const {
  auto it = cuts_.find(CutKey(u, v));
  return it == cuts_.end() ? -1 : it->second;
}

const std::string& BatchDimAnalysis::note(NodeId v) const {
  auto it = notes_.find(v);
  return it == notes_.end() ? no_note_ : it->second;
}

namespace {

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

bool HasNoElements(absl::Span<const int64_t> shape) {
  return std::find(shape.begin(), shape.end(), 0) != shape.end();
}

std::string NodeField(NodeId v) { return absl::StrCat("graph.nodes[", v, "]"); }

// What an op does with one batch-sharded operand's batch dim.
struct DimFate {
  enum Kind { kMapped, kContracted, kGathered, kNoRule } kind = kNoRule;
  // kMapped: the output dim. kGathered: the output dim holding the whole
  // batch, row for row with the op's batch operands (a flip or sort over
  // it), or -1 when none does (a reduction over it, a select of a sample).
  int32_t dim = -1;
};

DimFate Mapped(int32_t dim) { return DimFate{DimFate::kMapped, dim}; }
DimFate Contracted() { return DimFate{DimFate::kContracted, -1}; }
DimFate Gathered(int32_t whole = -1) { return DimFate{DimFate::kGathered, whole}; }
DimFate NoRule() { return DimFate{}; }

// Broadcasting (right-aligned): where operand dim `dim` of an operand of
// shape `operand` lands in `output`, if it keeps its size there.
DimFate Broadcast(absl::Span<const int64_t> operand, int32_t dim,
                  absl::Span<const int64_t> output) {
  const int64_t at =
      dim + static_cast<int64_t>(output.size()) - static_cast<int64_t>(operand.size());
  if (at < 0 || at >= static_cast<int64_t>(output.size()) || output[at] != operand[dim]) {
    return NoRule();
  }
  return Mapped(static_cast<int32_t>(at));
}

// Whether `operand` broadcasts to `output`: right-aligned, each dim equal
// or 1.
bool BroadcastsTo(absl::Span<const int64_t> operand, absl::Span<const int64_t> output) {
  if (operand.size() > output.size()) return false;
  const size_t offset = output.size() - operand.size();
  for (size_t j = 0; j < operand.size(); ++j) {
    if (operand[j] != 1 && operand[j] != output[offset + j]) return false;
  }
  return true;
}

// Same position (left-aligned): the dim stays if the output keeps it.
DimFate SamePosition(absl::Span<const int64_t> operand, int32_t dim,
                     absl::Span<const int64_t> output) {
  if (dim < static_cast<int32_t>(output.size()) && output[dim] == operand[dim]) {
    return Mapped(dim);
  }
  return Contracted();
}

}  // namespace

// One pass over the graph in order; see the header for the rules.
class BatchDimAnalyzer {
 public:
  BatchDimAnalyzer(const CompactGraph& graph, const BatchDimOptions& options,
                   const CancellationToken& token)
      : graph_(graph), options_(options), token_(token) {}

  absl::StatusOr<BatchDimAnalysis> Run() {
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

 private:
  // Tensor operands of the op being analysed, with their layouts.
  struct Operands {
    bool any_model = false;
    bool any_partial = false;
    bool local_mean = false;
    bool scaled = false;  // some operand is ValueLayout::scaled
    absl::InlinedVector<NodeId, 4> sharded;        // kShard operands, in input order
    absl::InlinedVector<NodeId, 2> local_scalars;  // kLocalScalar operands
    bool has_batch() const { return !sharded.empty() || !local_scalars.empty(); }
  };

  // The graph is imported from a parsed one (PlanDataParallelPlan checks).
  const v1::Node& proto(NodeId v) const { return graph_.parsed()->nodes(v); }
  const ValueLayout& layout(NodeId u) const { return result_.layout(u); }
  absl::Span<const int64_t> shape(NodeId u) const { return result_.shape(u); }
  bool is_tensor(NodeId u) const { return layout(u).layout != Layout::kNotTensor; }

  void AddElement(const ValueLayout& value, absl::Span<const int64_t> shape,
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
  int64_t GivenElementBytes(NodeId v, int k) const {
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
  void AddGivenElements(NodeId v, Layout kind) {
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

  void Note(NodeId v, std::string text) {
    std::string& note = result_.notes_[v];
    note = note.empty() ? std::move(text) : absl::StrCat(note, "; ", text);
  }

  // A guess (an ambiguous node) is carried to everything computed from it,
  // so that no placement resting on it reads as known.
  void CarryGuess(NodeId v) {
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

  // ---- Placeholders --------------------------------------------------

  bool FitsBatchDim(NodeId v) const {
    const v1::Node& node = proto(v);
    return node.outputs_size() > 0 && node.outputs(0).shape_size() > options_.input_batch_dim;
  }

  // The first explicit ACTIVATION, else the first unspecified placeholder
  // that has the batch dim, gives the batch size.
  absl::Status FindSeed() {
    NodeId seed = -1;
    for (NodeId v = 0; v < graph_.num_nodes() && seed < 0; ++v) {
      if (graph_.op(v) == v1::PLACEHOLDER && options_.roles[v] == v1::ACTIVATION) seed = v;
    }
    for (NodeId v = 0; v < graph_.num_nodes() && seed < 0; ++v) {
      if (graph_.op(v) == v1::PLACEHOLDER && options_.roles[v] == v1::ROLE_UNSPECIFIED &&
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

  absl::Status CheckActivation(NodeId v) const {
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

  absl::Status AnalyzePlaceholder(NodeId v) {
    const v1::Node& node = proto(v);
    const int32_t dim = options_.input_batch_dim;
    switch (options_.roles[v]) {
      case v1::PARAMETER:
      case v1::OPTIMIZER_STATE:
        if (node.outputs_size() == 0) {
          return InvalidFieldError(
              absl::StrCat(NodeField(v), ".outputs"),
              absl::StrCat(v1::PlaceholderRole_Name(options_.roles[v]), " '", node.name(),
                           "' has no shape; the plan needs its size"));
        }
        AddGivenElements(v, Layout::kModelState);
        return absl::OkStatus();
      case v1::ACTIVATION: {
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

  // ---- Op nodes --------------------------------------------------------

  Operands ClassifyOperands(NodeId v) const {
    Operands operands;
    for (NodeId u : graph_.inputs(v)) {
      const ValueLayout& value = layout(u);
      operands.local_mean |= value.local_mean;
      operands.scaled |= value.scaled;
      switch (value.layout) {
        case Layout::kModelState:
          operands.any_model = true;
          break;
        case Layout::kPartial:
          operands.any_partial = true;
          break;
        case Layout::kShard:
          operands.sharded.push_back(u);
          break;
        case Layout::kReplicate:
          // A gathered batch: ops on samples take each device's rows of it.
          if (value.dim >= 0) operands.sharded.push_back(u);
          break;
        case Layout::kLocalScalar:
          operands.local_scalars.push_back(u);
          break;
        default:
          break;
      }
    }
    return operands;
  }

  const OpRule& RuleOf(NodeId v) const {
    // call_module targets are module paths: no aten rule applies.
    return graph_.op(v) == v1::CALL_MODULE ? no_rule_ : rules_.Find(proto(v).target());
  }

  absl::Status AnalyzeOp(NodeId v) {
    const OpRule& rule = RuleOf(v);
    const NodeArgs args(graph_, v);
    if (rule.family == OpFamily::kGetItem) return AnalyzeGetItem(v, args);
    const Operands operands = ClassifyOperands(v);
    result_.elementwise_[v] =
        rule.family == OpFamily::kPointwise || rule.family == OpFamily::kFactoryLike;
    if (rule.family == OpFamily::kView) return AnalyzeView(v, rule, args, operands);

    const v1::Node& node = proto(v);
    if (node.outputs_size() == 0) {
      PARTPLAN_RETURN_IF_ERROR(AnalyzeTupleOfGetItems(v, rule, args, operands));
    } else {
      PARTPLAN_RETURN_IF_ERROR(CheckOperandShapes(v, rule, args, node.outputs(0).shape()));
      for (int k = 0; k < node.outputs_size(); ++k) {
        const absl::Span<const int64_t> output = node.outputs(k).shape();
        PARTPLAN_ASSIGN_OR_RETURN(
            const ValueLayout value,
            ElementLayout(v, rule, args, operands, ElementIndex(rule, args, k), output));
        AddElement(value, output, GivenElementBytes(v, k));
      }
    }
    if (rule.per_sample_args != 0) CutPerSampleOperands(v, rule, args);
    if (operands.scaled && rule.linearity == Linearity::kEveryOperand) FlagMixedScale(v);
    FlagBatchSizedConstant(v, rule, args, operands);
    FlagInPlaceChange(v, args);
    return absl::OkStatus();
  }

  // An in-place op (`div_`) gives its self the op's values: readers of the
  // self after it see them, but are planned with the self's own layout.
  // Where the two differ (the gradient a div_ scales), the op is flagged and
  // the self's later readers carry the guess (the self's entry names it
  // too: its values after the op are not what its plan says).
  void FlagInPlaceChange(NodeId v, const NodeArgs& args) {
    const std::string& target = proto(v).target();
    const size_t dot = target.rfind('.');
    if (dot == std::string::npos || dot < 2 || target[dot - 1] != '_' || target[dot - 2] == '_') {
      return;
    }
    const NodeId self = args.NodeAt(args.Get(0, "self"));
    if (self < 0 || layout(self) == layout(v)) return;
    // Users are in graph order: the last one says (O(1), not O(users) for
    // each of a value's many in-place ops).
    const absl::Span<const NodeId> users = graph_.users(self);
    if (users.empty() || users.back() <= v) return;
    Guess(v, absl::StrCat("changes '", proto(self).name(),
                          "' in place into another layout, which its readers after this op "
                          "see; they are planned with its layout before it"));
    if (result_.guess_of_[self] < 0) result_.guess_of_[self] = v;
  }

  // A sum of the backward of a mean loss as each device takes it (N times
  // the whole: ValueLayout::scaled) and a gradient already reduced to the
  // whole batch's (a Partial average all-reduced, then cut to the rows: the
  // backward through a gathered batch) is neither N times nor once the
  // whole: flagged.
  void FlagMixedScale(NodeId v) {
    NodeId scaled = -1;
    NodeId whole = -1;
    for (NodeId u : graph_.inputs(v)) {
      const ValueLayout& value = layout(u);
      if (value.layout == Layout::kNotTensor || value.layout == Layout::kModelState) continue;
      if (value.scaled) {
        if (scaled < 0) scaled = u;
      } else if (value.local_mean && whole < 0) {
        whole = u;
      }
    }
    if (scaled < 0 || whole < 0) return;
    Guess(v, absl::StrCat("adds '", proto(scaled).name(),
                          "', the backward of a mean loss over each device's own samples (scale "
                          "N), to '",
                          proto(whole).name(),
                          "', a gradient already reduced to the whole batch's: the result is "
                          "neither; the scale it is given is a guess"));
  }

  // The per-sample argument at `position` (OpRule::per_sample_args), by
  // position or by one of the names aten gives it.
  NodeId PerSampleArg(const NodeArgs& args, int position) const {
    static constexpr const char* kNames[][3] = {{"self", "input", "grad_output"},
                                                {"target", "self", "dim"},
                                                {"index", "target", "weight"},
                                                {"src", "value", "weight"}};
    NodeId u = args.NodeAt(args.Get(position, kNames[std::min(position, 3)][0]));
    for (int i = 1; u < 0 && position < 4 && i < 3; ++i) {
      u = args.NodeAt(args.Get(-1, kNames[position][i]));
    }
    return u;
  }

  // A replicated value that an op reads per sample, beside a batch-sharded
  // one (a loss's target, gather's index, made inside the step), must be
  // cut to each device's rows: it lines up with the batch operand dim for
  // dim, so its batch dim is the batch operand's. Without a cut each device
  // would compare its rows with the whole batch's targets. A dim of size 1
  // broadcasts (nothing to cut).
  void CutPerSampleOperands(NodeId v, const OpRule& rule, const NodeArgs& args) {
    const Layout out = layout(v).layout;
    if (out != Layout::kShard && out != Layout::kLocalScalar && out != Layout::kPartial) return;
    constexpr int kPositions = 8;
    NodeId batch = -1;
    for (int i = 0; i < kPositions && batch < 0; ++i) {
      if ((rule.per_sample_args >> i & 1) == 0) continue;
      const NodeId u = PerSampleArg(args, i);
      if (u >= 0 && layout(u).layout == Layout::kShard) batch = u;
    }
    if (batch < 0) return;
    const ValueLayout& rows = layout(batch);
    const int32_t b = rows.dim;
    const int64_t size = shape(batch)[b];
    for (int i = 0; i < kPositions; ++i) {
      if ((rule.per_sample_args >> i & 1) == 0) continue;
      const NodeId u = PerSampleArg(args, i);
      // Model state too: a target held in a buffer.
      if (u < 0 || (layout(u).layout != Layout::kReplicate &&
                    layout(u).layout != Layout::kModelState) ||
          layout(u).dim >= 0) {
        continue;
      }
      const absl::Span<const int64_t> operand = shape(u);
      if (static_cast<int32_t>(operand.size()) <= b || operand[b] != size) continue;
      if (rows.batch_outer > 1) {
        // The device's rows interleave with other dims: no block of u's
        // rows is theirs.
        Guess(v, absl::StrCat("reads replicated '", proto(u).name(),
                              "' per sample, but the batch operand's rows interleave on dim ", b,
                              ", so no contiguous block of it is a device's; it is not cut"));
        continue;
      }
      result_.cuts_[CutKey(u, v)] = b;
      Note(v, absl::StrCat("reads replicated '", proto(u).name(),
                           "' per sample, aligned with the batch operand '", proto(batch).name(),
                           "': each device takes its rows of it (dim ", b, ", local_chunk)"));
    }
  }

  // An op node without `outputs` whose getitem users give the shapes of its
  // tuple's elements (make_fx leaves tuples without tensor_meta); its
  // elements are then listed by their index in the op's schema.
  absl::Status AnalyzeTupleOfGetItems(NodeId v, const OpRule& rule, const NodeArgs& args,
                                      const Operands& operands) {
    std::vector<NodeId> element_of;  // getitem user by element index, -1 for none
    for (NodeId u : graph_.users(v)) {
      if (graph_.op(u) != v1::CALL_FUNCTION || RuleOf(u).family != OpFamily::kGetItem) continue;
      const NodeArgs getitem(graph_, u);
      const NodeArgs::Arg index = getitem.Get(1, "index");
      if (getitem.NodeAt(getitem.Get(0, "self")) != v || !index.present() ||
          index.head().kind_case() != v1::Value::kInt || index.head().int_() < 0 ||
          index.head().int_() >= graph_.num_nodes() || proto(u).outputs_size() == 0) {
        continue;
      }
      const size_t k = static_cast<size_t>(index.head().int_());
      if (element_of.size() <= k) element_of.resize(k + 1, -1);
      element_of[k] = u;
    }
    if (element_of.empty()) {
      return InvalidFieldError(
          absl::StrCat(NodeField(v), ".outputs"),
          absl::StrCat(args.Describe(), ": ",
                       rule.family == OpFamily::kUnknown
                           ? "an op without a dimension rule here and without output shapes"
                           : "no output shapes",
                       " (nor getitems of its elements with theirs); a data-parallel plan needs "
                       "the shape of every op's output"));
    }
    result_.elements_by_schema_[v] = true;
    for (size_t k = 0; k < element_of.size(); ++k) {
      const NodeId u = element_of[k];
      if (u < 0) {
        AddElement(ValueLayout{}, {}, 0);
        continue;
      }
      const absl::Span<const int64_t> output = proto(u).outputs(0).shape();
      if (k == 0) PARTPLAN_RETURN_IF_ERROR(CheckOperandShapes(v, rule, args, output));
      PARTPLAN_ASSIGN_OR_RETURN(
          const ValueLayout value,
          ElementLayout(v, rule, args, operands, static_cast<int>(k), output));
      AddElement(value, output, GivenElementBytes(u, 0));
    }
    return absl::OkStatus();
  }

  // The schema index of listed output k: ops with an output_mask list only
  // the elements the mask asks for.
  int ElementIndex(const OpRule& rule, const NodeArgs& args, int k) const {
    if (rule.output_mask_arg < 0) return k;
    const NodeArgs::Arg mask = args.Get(rule.output_mask_arg, "output_mask");
    if (!mask.present() || mask.head().kind_case() != v1::Value::kList) return k;
    int listed = 0;
    for (uint32_t i = 0; i < mask.head().list(); ++i) {
      const v1::Value& bit = mask.values->Get(mask.start + 1 + static_cast<int>(i));
      if (bit.kind_case() != v1::Value::kBool || !bit.bool_()) continue;
      if (listed++ == k) return static_cast<int>(i);
    }
    return k;
  }

  // The listed position of schema element `index`, or -1 when masked off.
  int ListedIndex(const OpRule& rule, const NodeArgs& args, int index, int listed) const {
    if (result_.elements_by_schema_[args.node()]) return index < listed ? index : -1;
    for (int k = 0; k < listed; ++k) {
      if (ElementIndex(rule, args, k) == index) return k;
    }
    return -1;
  }

  absl::Status AnalyzeGetItem(NodeId v, const NodeArgs& args) {
    const NodeId producer = args.NodeAt(args.Get(0, "self"));
    if (producer < 0) return args.Error(args.Get(0, "self"), "the indexed value must be a node");
    PARTPLAN_ASSIGN_OR_RETURN(const int64_t index, args.Int(args.Get(1, "index"), "index"));
    const v1::Node& node = proto(v);
    const OpRule& producer_rule = RuleOf(producer);
    const NodeArgs producer_args(graph_, producer);
    const int listed = ListedIndex(producer_rule, producer_args, static_cast<int>(index),
                                   result_.num_elements(producer));
    // A single-element producer is a tuple of one unless the getitem's own
    // shape says it indexes into a tensor.
    bool producer_is_tuple = result_.num_elements(producer) > 1;
    if (!producer_is_tuple && listed == 0) {
      const absl::Span<const int64_t> element = result_.shape(producer, 0);
      producer_is_tuple = node.outputs_size() == 0 || std::equal(element.begin(), element.end(),
                                                                 node.outputs(0).shape().begin(),
                                                                 node.outputs(0).shape().end());
    }
    if (listed >= 0 && producer_is_tuple) {
      result_.aliases_[v] = true;
      result_.selects_element_[v] = true;
      const ValueLayout value = result_.element_layout(producer, listed);
      if (node.outputs_size() > 0) {
        AddElement(value, node.outputs(0).shape(), GivenElementBytes(v, 0));
      } else {
        const absl::Span<const int64_t> element = result_.shape(producer, listed);
        const Dims copy(element.begin(), element.end());
        AddElement(value, copy, result_.element_bytes(producer, listed));
      }
      return absl::OkStatus();
    }
    if (node.outputs_size() == 0) {  // a masked-off element: None
      result_.selects_element_[v] = true;
      AddElement(ValueLayout{}, {}, 0);
      return absl::OkStatus();
    }
    // Indexing a plain value (a tensor, not a tuple): an op without a rule.
    const Operands operands = ClassifyOperands(v);
    PARTPLAN_ASSIGN_OR_RETURN(const ValueLayout value, ElementLayout(v, no_rule_, args, operands, 0,
                                                                     node.outputs(0).shape()));
    AddElement(value, node.outputs(0).shape(), GivenElementBytes(v, 0));
    return absl::OkStatus();
  }

  absl::Status AnalyzeView(NodeId v, const OpRule& rule, const NodeArgs& args,
                           const Operands& operands) {
    const NodeArgs::Arg self = args.Get(0, "self");
    const NodeId input = args.NodeAt(self);
    if (input < 0 || !is_tensor(input)) return args.Error(self, "self must be a tensor");
    PARTPLAN_ASSIGN_OR_RETURN(const DimMap map, DimMapOfNode(rule.view_op, args, shape(input)));
    const v1::Node& node = proto(v);
    int64_t element_bytes = result_.element_bytes(input);
    if (node.outputs_size() > 0) {
      const auto given = node.outputs(0).shape();
      if (!std::equal(given.begin(), given.end(), map.output_shape.begin(),
                      map.output_shape.end())) {
        return InvalidFieldError(
            absl::StrCat(NodeField(v), ".outputs[0].shape"),
            absl::StrCat(args.Describe(), ": the output shape ", ShapeString(given), " is not the ",
                         ShapeString(map.output_shape), " that a ", ShapeString(shape(input)),
                         " input and the op's arguments give"));
      }
      element_bytes = GivenElementBytes(v, 0);
    }
    result_.aliases_[v] = rule.view_op != ViewOp::kRepeat;
    const ValueLayout& in = layout(input);
    ValueLayout value;
    if (in.layout == Layout::kShard) {
      absl::optional<ValueLayout> followed = FollowBatch(v, map, in, shape(input));
      if (followed.has_value()) {
        value = *followed;
      } else {
        PARTPLAN_ASSIGN_OR_RETURN(value, Generic(v, operands, map.output_shape, /*broadcasts=*/true));
      }
    } else if (in.layout == Layout::kReplicate && in.dim >= 0) {
      // A view of a gathered batch is replicated too; it still holds the
      // whole batch where the view puts it (if it keeps it whole).
      absl::optional<ValueLayout> followed = FollowBatch(v, map, in, shape(input));
      value = in;
      value.dim = -1;
      value.batch_size = 0;
      if (followed.has_value() && followed->batch_outer == 1 && followed->batch_inner == 1 &&
          followed->batch_size == in.batch_size) {
        value.dim = followed->dim;
        value.batch_size = followed->batch_size;
      }
    } else if (in.layout == Layout::kLocalScalar) {
      PARTPLAN_ASSIGN_OR_RETURN(value, Generic(v, operands, map.output_shape, /*broadcasts=*/true));
    } else {
      // Views move data without combining it: Partial, replicated and
      // model-state values stay what they are, unless the view broadcasts a
      // new dim of the batch size (e.g. the backward of a mean over the
      // batch), which a per-device program makes per device.
      absl::InlinedVector<int32_t, 4> new_batch_dims;
      for (size_t d = 0; d < map.dims.size(); ++d) {
        if (map.dims[d].input_dims.empty() && map.output_shape[d] == batch_size_) {
          new_batch_dims.push_back(static_cast<int32_t>(d));
        }
      }
      // Model state too: a class token expanded over the batch
      // (expand(cls, [B, 1, H])) is made per device for its own samples.
      if (!new_batch_dims.empty()) {
        value = NewBatchDim(v, in, new_batch_dims, map.output_shape);
      } else {
        value = in;
        result_.keeps_partial_[v] = in.layout == Layout::kPartial;
      }
    }
    PARTPLAN_ASSIGN_OR_RETURN(value, WithScale(rule, args, operands, value));
    AddElement(value, map.output_shape, element_bytes);
    return absl::OkStatus();
  }

  // Where a view takes the batch of a sharded input, or none when the view
  // drops it. The batch may share its dim with others that a view merged
  // into it (`batch_outer` elements outside it, `batch_inner` inside); a
  // view that splits the dim again puts the batch on the piece holding
  // exactly those samples, which is not always the outermost piece
  // (attention's [S*B, H] -> [S, B, H]).
  absl::optional<ValueLayout> FollowBatch(NodeId v, const DimMap& map, const ValueLayout& in,
                                          absl::Span<const int64_t> input_shape) {
    absl::InlinedVector<int32_t, 4> pieces;  // output dims made from the batch's input dim
    for (size_t d = 0; d < map.dims.size(); ++d) {
      const auto& inputs = map.dims[d].input_dims;
      if (std::find(inputs.begin(), inputs.end(), in.dim) != inputs.end()) {
        pieces.push_back(static_cast<int32_t>(d));
      }
    }
    if (pieces.empty()) return absl::nullopt;
    const DimSource& source = map.dims[pieces.front()];
    const int64_t dim_size = input_shape[in.dim];
    int64_t merged = 0;  // elements sharing the batch's dim
    if (__builtin_mul_overflow(in.batch_outer, in.batch_inner, &merged)) merged = 0;
    const int64_t samples = merged > 0 && dim_size > 0 ? dim_size / merged : 0;
    // Elements outside and inside the batch across the merged group.
    int64_t outer = in.batch_outer * std::max<int64_t>(source.repeat, 1);
    int64_t inner = in.batch_inner;
    bool before = true;
    for (int32_t input_dim : source.input_dims) {
      if (input_dim == in.dim) {
        before = false;
      } else if (__builtin_mul_overflow(before ? outer : inner, input_shape[input_dim],
                                        before ? &outer : &inner)) {
        return absl::nullopt;
      }
    }
    ValueLayout value = in;
    value.dim = pieces.front();
    value.batch_outer = 1;
    value.batch_inner = 1;
    bool straddles = samples > 0;
    bool start_found = false;
    int64_t covered = 1;  // elements of the pieces before this one
    for (int32_t d : pieces) {
      const int64_t size = map.output_shape[d];
      int64_t next = 0;
      if (samples == 0 || __builtin_mul_overflow(covered, size, &next)) break;
      if (covered <= outer && outer % covered == 0 && next % (outer * samples) == 0) {
        // This piece holds the whole batch, with outer / covered elements
        // outside it.
        value.dim = d;
        value.batch_outer = outer / covered;
        value.batch_inner = next / (outer * samples);
        straddles = false;
        break;
      }
      if (next > outer && !start_found) {
        start_found = true;
        value.dim = d;  // where the batch starts, if no piece holds it whole
        value.batch_outer = std::max<int64_t>(outer / covered, 1);
      }
      covered = next;
    }
    value.batch_size = map.output_shape[value.dim];
    NoteViewOfBatch(v, source, pieces, in, value, dim_size, straddles);
    return value;
  }

  void NoteViewOfBatch(NodeId v, const DimSource& source, absl::Span<const int32_t> pieces,
                       const ValueLayout& in, const ValueLayout& out, int64_t dim_size,
                       bool straddles) {
    if (source.input_dims.size() > 1) {
      Note(v, absl::StrCat("merges the batch dim (input dim ", in.dim, ", size ", dim_size,
                           ") with input dims [", absl::StrJoin(source.input_dims, ", "),
                           "] into dim ", pieces.front(), " of size ", out.batch_size,
                           ": the batch size is now ", out.batch_size));
    }
    if (pieces.size() > 1) {
      Note(v, absl::StrCat("splits input dim ", in.dim, " (size ", dim_size, ") over dims [",
                           absl::StrJoin(pieces, ", "), "]; the batch is dim ", out.dim,
                           " of size ", out.batch_size));
    }
    if (straddles) {
      Note(v, absl::StrCat("the split cuts through the batch itself; took dim ", out.dim,
                           ", where it starts"));
    }
    if (source.repeat > 1) {
      Note(v, absl::StrCat("repeats the batch dim ", source.repeat,
                           " times: each device repeats its own rows, which is not a "
                           "contiguous block of the result"));
    }
    if (out.batch_outer > 1 && in.batch_outer == 1 && source.repeat <= 1) {
      Note(v, absl::StrCat("the batch is not the outermost of the dims merged into dim ", out.dim,
                           " (", out.batch_outer,
                           " elements outside it), so each device's rows interleave in the "
                           "result instead of forming a contiguous block"));
    }
  }

  // ---- Shape checks ------------------------------------------------------

  absl::Status ShapeMismatch(NodeId v, const NodeArgs& args, absl::string_view what) const {
    return InvalidFieldError(absl::StrCat(NodeField(v), ".outputs[0].shape"),
                             absl::StrCat(args.Describe(), ": shape mismatch: ", what));
  }

  absl::Status CheckOperandShapes(NodeId v, const OpRule& rule, const NodeArgs& args,
                                  absl::Span<const int64_t> output) const {
    switch (rule.family) {
      case OpFamily::kPointwise:
        for (NodeId u : graph_.inputs(v)) {
          if (!is_tensor(u)) continue;
          const absl::Span<const int64_t> operand = shape(u);
          bool fits = operand.size() <= output.size();
          for (size_t j = 0; fits && j < operand.size(); ++j) {
            const int64_t out = output[output.size() - operand.size() + j];
            fits = operand[j] == out || operand[j] == 1;
          }
          if (!fits) {
            return ShapeMismatch(
                v, args,
                absl::StrCat("operand '", proto(u).name(), "' of shape ", ShapeString(operand),
                             " does not broadcast to the output shape ", ShapeString(output)));
          }
        }
        return absl::OkStatus();
      case OpFamily::kFactoryLike: {
        const NodeId u = args.NodeAt(args.Get(0, "self"));
        if (u >= 0 && is_tensor(u) &&
            !std::equal(output.begin(), output.end(), shape(u).begin(), shape(u).end())) {
          return ShapeMismatch(v, args,
                               absl::StrCat("the output shape ", ShapeString(output),
                                            " is not its operand's ", ShapeString(shape(u))));
        }
        return absl::OkStatus();
      }
      case OpFamily::kMatmul:
        return CheckMatmulShapes(v, rule, args, output);
      default:
        return absl::OkStatus();
    }
  }

  absl::Status CheckMatmulShapes(NodeId v, const OpRule& rule, const NodeArgs& args,
                                 absl::Span<const int64_t> output) const {
    const NodeId lhs = args.NodeAt(args.Get(rule.lhs_arg, "mat1"));
    const NodeId rhs = args.NodeAt(args.Get(rule.rhs_arg, "mat2"));
    if (lhs < 0 || rhs < 0 || !is_tensor(lhs) || !is_tensor(rhs)) {
      return args.Error(args.Get(rule.lhs_arg, "mat1"), "both matrices must be tensors");
    }
    const absl::Span<const int64_t> a = shape(lhs);
    const absl::Span<const int64_t> b = shape(rhs);
    const size_t rank = rule.batched ? 3 : 2;
    const std::string operands = absl::StrCat("'", proto(lhs).name(), "' ", ShapeString(a), " by '",
                                              proto(rhs).name(), "' ", ShapeString(b));
    if (a.size() != rank || b.size() != rank) {
      return ShapeMismatch(v, args, absl::StrCat(operands, ": both must have ", rank, " dims"));
    }
    if (a[rank - 1] != b[rank - 2] || (rule.batched && a[0] != b[0])) {
      return ShapeMismatch(v, args, absl::StrCat(operands, ": the inner sizes differ"));
    }
    Dims expected(a.begin(), a.end() - 1);
    expected.push_back(b[rank - 1]);
    if (!std::equal(output.begin(), output.end(), expected.begin(), expected.end())) {
      return ShapeMismatch(v, args,
                           absl::StrCat(operands, " gives ", ShapeString(expected),
                                        ", not the output shape ", ShapeString(output)));
    }
    return absl::OkStatus();
  }

  // ---- Layout of one output element -------------------------------------

  absl::StatusOr<ValueLayout> ElementLayout(NodeId v, const OpRule& rule, const NodeArgs& args,
                                            const Operands& operands, int element,
                                            absl::Span<const int64_t> output) {
    PARTPLAN_ASSIGN_OR_RETURN(ValueLayout value,
                              UnscaledLayout(v, rule, args, operands, element, output));
    return WithScale(rule, args, operands, value);
  }

  // ValueLayout::scaled: kept from a scaled operand, or begun where the
  // backward of a mean divides by the number of samples, which a device
  // takes as its own share.
  absl::StatusOr<ValueLayout> WithScale(const OpRule& rule, const NodeArgs& args,
                                        const Operands& operands, ValueLayout value) const {
    const bool per_device = value.layout == Layout::kShard || value.layout == Layout::kLocalScalar;
    // A factory's values (new_zeros of a scaled gradient) are its own.
    bool scaled = operands.scaled && rule.family != OpFamily::kFactory;
    if (!scaled && per_device) {
      PARTPLAN_ASSIGN_OR_RETURN(scaled, DividesByOwnSamples(rule, args, value));
    }
    value.scaled = scaled && (per_device || value.layout == Layout::kReplicate);
    return value;
  }

  absl::StatusOr<bool> DividesByOwnSamples(const OpRule& rule, const NodeArgs& args,
                                           const ValueLayout& value) const {
    if (rule.family == OpFamily::kIdentity && rule.reduction_arg >= 0) {
      // A loss's backward under reduction=mean divides by its sample count.
      PARTPLAN_ASSIGN_OR_RETURN(
          const int64_t reduction,
          args.IntOr(args.Get(rule.reduction_arg, "reduction"), 1, "reduction"));
      return reduction == 1;
    }
    if (!rule.divides && !rule.multiplies) return false;
    // Two divisions by a multiple of the batch size (or products with its
    // reciprocal) start it:
    // - `expand(g) / (B x k)`, a mean's backward spreading the gradient of
    //   a per-device mean loss (or of a mean over the batch) over the
    //   device's own samples: the dividend is the broadcast of a value
    //   without the batch, the same rows on every device (a forward value
    //   divided by a multiple of the batch size is not);
    // - `ones_like(loss) / B`, the backward of a loss written `sum / B`:
    //   the seed of a per-device mean loss.
    const NodeId dividend = args.NodeAt(args.Get(0, "self"));
    if (dividend < 0) return false;
    const ValueLayout& from = layout(dividend);
    if (from.layout == Layout::kShard) {
      if (!from.local_mean && !BroadcastWithoutBatch(dividend)) return false;
    } else if (from.layout == Layout::kLocalScalar) {
      if (!from.local_mean || from.reduce != ReduceOp::kAvg ||
          RuleOf(dividend).family != OpFamily::kFactoryLike) {
        return false;
      }
    } else {
      return false;
    }
    const int64_t by = Divisor(rule, args);
    const int64_t samples =
        value.batch_size / std::max<int64_t>(value.batch_outer * value.batch_inner, 1);
    return samples > 0 && by > 0 && by % samples == 0;
  }

  // What a div by a constant divides by, or a mul by a constant c by 1 / c,
  // when that is a positive integer (0 otherwise): `x / 8` and `x * 0.125`
  // alike.
  static int64_t Divisor(const OpRule& rule, const NodeArgs& args) {
    if (!rule.divides && !rule.multiplies) return 0;
    const double c = Constant(args.Get(1, "other"));
    if (!(c > 0)) return 0;
    const double by = rule.divides ? c : 1.0 / c;
    if (!(by >= 1) || by > 1e15) return 0;
    const double rounded = std::round(by);
    return std::abs(by - rounded) <= 1e-9 * rounded ? static_cast<int64_t>(rounded) : 0;
  }

  // A numeric argument's value (NaN when it is not one).
  static double Constant(const NodeArgs::Arg& arg) {
    if (!arg.present()) return std::numeric_limits<double>::quiet_NaN();
    if (arg.head().kind_case() == v1::Value::kInt) return static_cast<double>(arg.head().int_());
    if (arg.head().kind_case() == v1::Value::kFloat) return arg.head().float_();
    return std::numeric_limits<double>::quiet_NaN();
  }

  // A constant of the backward through a gathered batch that looks made
  // from the batch size B: k / (B - d), or its reciprocal, for k in {1, 2}
  // and d in {0, 1} (var's and std's backward bake 2 / (B - 1)). A device's
  // program bakes its own B/N there, which no scale of the plan states:
  // flagged. Only replicated values computed from the loss's backward are
  // looked at (sharded ones are scaled by rule; weights' Partial gradients
  // meet learning rates).
  void FlagBatchSizedConstant(NodeId v, const OpRule& rule, const NodeArgs& args,
                              const Operands& operands) {
    if ((!rule.divides && !rule.multiplies) || !operands.local_mean) return;
    if (layout(v).layout != Layout::kReplicate || batch_size_ < 2) return;
    const double c = Constant(args.Get(1, "other"));
    if (!(c > 0) || c == 1) return;
    for (int k = 1; k <= 2; ++k) {
      for (int d = 0; d <= 1; ++d) {
        const double made = static_cast<double>(k) / static_cast<double>(batch_size_ - d);
        for (double candidate : {made, 1.0 / made}) {
          if (std::abs(c - candidate) <= 1e-6 * candidate) {
            Guess(v, absl::StrCat("multiplies the backward through a gathered batch by ", c,
                                  ", which is ", k, " / ", batch_size_ - d,
                                  " or its reciprocal, as if made from the batch size ",
                                  batch_size_, ": a device's program bakes its own share of the "
                                  "batch there, so its values are off by a factor the plan "
                                  "cannot state"));
            return;
          }
        }
      }
    }
  }

  // Whether node d is a view that made its batch dim from a value without
  // one (expand of a loss gradient).
  bool BroadcastWithoutBatch(NodeId d) const {
    if (graph_.op(d) != v1::CALL_FUNCTION || RuleOf(d).family != OpFamily::kView) return false;
    const NodeArgs view(graph_, d);
    const NodeId input = view.NodeAt(view.Get(0, "self"));
    return input >= 0 && layout(input).layout != Layout::kShard;
  }

  // Whether a batch-norm op runs in training mode (its `training` argument,
  // `train` in the backward).
  absl::StatusOr<bool> Training(const OpRule& rule, const NodeArgs& args) const {
    if (rule.training_arg < 0) return false;
    NodeArgs::Arg arg = args.Get(rule.training_arg, "training");
    if (!arg.present()) arg = args.Get(rule.training_arg, "train");
    return args.BoolOr(arg, false, "training");
  }

  absl::StatusOr<ValueLayout> UnscaledLayout(NodeId v, const OpRule& rule, const NodeArgs& args,
                                             const Operands& operands, int element,
                                             absl::Span<const int64_t> output) {
    ValueLayout value;
    value.local_mean = operands.local_mean;
    if (operands.any_model && !operands.has_batch()) {
      value.layout = Layout::kModelState;
      return value;
    }
    if (HasNoElements(output)) {  // nothing to place (e.g. eval-mode batch-norm statistics)
      value.layout = Layout::kReplicate;
      return value;
    }
    // A factory's operand (new_zeros' self) gives only its dtype and
    // device: the values are new, shaped by the arguments.
    if (!operands.has_batch() || rule.family == OpFamily::kFactory) {
      return WithoutBatch(v, rule, args, operands, output, value);
    }
    if (rule.family == OpFamily::kFactoryLike) {
      // The values are new, the layout is the operand's. A local scalar's
      // ones_like (the seed of a loss's backward) holds the whole value on
      // every device: its devices' values average to it, whether the loss
      // averages or adds up.
      const NodeId u = args.NodeAt(args.Get(0, "self"));
      if (u >= 0) {
        ValueLayout like = layout(u);
        if (like.layout == Layout::kLocalScalar) like.reduce = ReduceOp::kAvg;
        return like;
      }
    }
    if (operands.sharded.empty()) {
      // Only local scalars (a loss and what is computed from it).
      const ValueLayout& scalar = layout(operands.local_scalars.front());
      if (output.empty()) {
        value = scalar;
        value.local_mean = operands.local_mean;
        if ((rule.divides || rule.multiplies) && value.reduce == ReduceOp::kSum) {
          MeanBySize(v, rule, args, &value);
        }
        FlagNonlinearInLocalScalars(v, rule, args, operands);
        return value;
      }
      return Generic(v, operands, output, Broadcasts(rule));
    }
    if (rule.family == OpFamily::kLoss && element > 0) return LocalScalar(operands, ReduceOp::kSum);
    PARTPLAN_ASSIGN_OR_RETURN(const bool training, Training(rule, args));
    if (training && element > 0 && rule.rest == RestElements::kBatchStatistics) {
      // save_mean / save_invstd: the whole batch's once the devices sync
      // them (or gather the batch), the same on every device.
      value.layout = Layout::kReplicate;
      return value;
    }

    // Where each sharded operand's batch dim goes.
    concatenates_batch_ = false;
    absl::InlinedVector<int32_t, 4> mapped;
    NodeId mapped_from = -1;
    bool gathered = false;
    int32_t whole = -2;  // where the gathered batch lies in the output; -2 unset
    for (NodeId u : operands.sharded) {
      PARTPLAN_ASSIGN_OR_RETURN(const DimFate fate, FateOfBatchDim(rule, args, element, u, output));
      switch (fate.kind) {
        case DimFate::kNoRule:
          return Generic(v, operands, output, Broadcasts(rule));
        case DimFate::kMapped:
          if (mapped.empty()) mapped_from = u;
          mapped.push_back(fate.dim);
          break;
        case DimFate::kGathered:
          gathered = true;
          whole = whole == -2 || whole == fate.dim ? fate.dim : -1;
          break;
        case DimFate::kContracted:
          break;
      }
    }
    if (gathered) {
      // One operand's batch is mixed: every batch-sharded operand is
      // gathered, whatever the others' rules say.
      result_.gathers_batch_[v] = true;
      value.layout = Layout::kReplicate;
      const bool rows = whole >= 0 && whole < static_cast<int32_t>(output.size()) &&
                        output[whole] == layout(operands.sharded.front()).batch_size;
      if (rows) {
        value.dim = whole;
        value.batch_size = output[whole];
      }
      Note(v, absl::StrCat(
                  "needs the whole batch (the op does not decompose over it, or reorders or "
                  "mixes values along the batch dim): its batch-sharded operands are gathered "
                  "and the result is replicated",
                  rows ? absl::StrCat("; its dim ", whole,
                                      " holds the whole batch, of which ops on samples take "
                                      "each device's rows again (local_chunk)")
                       : ""));
      return value;
    }
    if (!mapped.empty()) {
      for (int32_t dim : mapped) {
        if (dim >= static_cast<int32_t>(output.size())) {
          return ShapeMismatch(
              v, args,
              absl::StrCat("the op's dimension rule puts the batch on dim ", dim,
                           ", which the output shape ", ShapeString(output), " does not have"));
        }
      }
      for (int32_t dim : mapped) {
        if (dim != mapped.front()) {
          result_.ambiguous_[v] = true;
          Note(v, absl::StrCat("its operands' batch dims land on different output dims (",
                               absl::StrJoin(mapped, ", "), "); took dim ", mapped.front()));
          break;
        }
      }
      if (concatenates_batch_) {
        Note(v,
             "concatenates along the batch dim: each device concatenates its own rows, "
             "which interleave in the result instead of forming a contiguous block");
      }
      NoteRuleSettled(v, output, mapped.front());
      if (training && element == 0) SyncStatistics(v, rule, args);
      return Sharded(value, mapped.front(), output, &layout(mapped_from));
    }
    NoteRuleSettled(v, output, -1);
    return Contraction(rule, args, operands, output);
  }

  // Training-mode batch norm keeps its rows sharded as SyncBatchNorm does:
  // per-channel statistics over each device's samples are all-reduced, so
  // every device normalises (or, backward, corrects its gradient) with the
  // whole batch's. Channels are dim 1 of operand 0.
  void SyncStatistics(NodeId v, const OpRule& rule, const NodeArgs& args) {
    const NodeId operand = args.NodeAt(args.Get(0, "input"));
    if (operand < 0 || !is_tensor(operand)) return;
    const absl::Span<const int64_t> in = shape(operand);
    BatchDimAnalysis::StatisticsSync sync;
    sync.operand = operand;
    sync.values = 2 * (in.size() > 1 ? in[1] : 1);
    sync.element_bytes = result_.element_bytes(operand);
    const bool forward = rule.rest == RestElements::kBatchStatistics;
    sync.what = forward
                    ? absl::StrCat("per-channel sums and sums of squares of '", proto(operand).name(),
                                   "' over each device's samples")
                    : absl::StrCat("per-channel sums of '", proto(operand).name(),
                                   "' and of its products with the normalised input over each "
                                   "device's samples");
    Note(v, absl::StrCat("training-mode batch norm needs the whole batch's statistics: planned as "
                         "SyncBatchNorm, whose devices all-reduce the ",
                         sync.what,
                         forward ? "; save_mean and save_invstd are then the batch's, replicated"
                                 : ""));
    result_.syncs_[v] = std::move(sync);
  }

  // A local scalar's whole value is the sum or average of the devices'
  // values, which only ops linear in it keep: ones_like & co, views, sums
  // and differences of local scalars that combine alike, a product with or
  // quotient by values that are not local scalars. Anything else (a local
  // sum divided by another, as the backward of median divides by the count
  // of its ties; sqrt or log of a loss) is not the same combination of the
  // devices' values: flagged, as the size rule's guesses are.
  void FlagNonlinearInLocalScalars(NodeId v, const OpRule& rule, const NodeArgs& args,
                                   const Operands& operands) {
    if (rule.family == OpFamily::kFactoryLike || rule.family == OpFamily::kFactory ||
        rule.family == OpFamily::kView) {
      return;
    }
    const ValueLayout& first = layout(operands.local_scalars.front());
    bool alike = true;
    for (NodeId u : operands.local_scalars) {
      alike &= layout(u).reduce == first.reduce && layout(u).scaled == first.scaled;
    }
    const size_t count = operands.local_scalars.size();
    bool linear = false;
    switch (rule.linearity) {
      case Linearity::kEveryOperand:
        linear = alike;
        break;
      case Linearity::kOneOperand:
        linear = count == 1;
        break;
      case Linearity::kFirstOperand:
        linear = count == 1 && args.NodeAt(args.Get(0, "self")) == operands.local_scalars.front();
        break;
      case Linearity::kNone:
        break;
    }
    if (linear) return;
    std::vector<std::string> names;
    for (NodeId u : operands.local_scalars) names.push_back(absl::StrCat("'", proto(u).name(), "'"));
    Guess(v, absl::StrCat("combines full reductions over the batch (", absl::StrJoin(names, ", "),
                          ") that each device keeps for its own samples by an op that is not "
                          "linear in them: the devices' results do not ",
                          first.reduce == ReduceOp::kAvg ? "average" : "add up",
                          " to the whole batch's (that needs the whole values, all-reduced first)"));
  }

  // Flags v ambiguous: its layout is the size rule's guess, not a rule's.
  void Guess(NodeId v, absl::string_view why) {
    result_.ambiguous_[v] = true;
    Note(v, absl::StrCat("ambiguous: ", why));
  }

  // A value made with new dims of the batch size (`dims`, from the op's
  // arguments): sharded on the first; ambiguous when there are several.
  ValueLayout NewBatchDim(NodeId v, ValueLayout value, absl::Span<const int32_t> dims,
                          absl::Span<const int64_t> output) {
    if (dims.size() > 1) {
      result_.ambiguous_[v] = true;
      Note(v, absl::StrCat("ambiguous: the new dims [", absl::StrJoin(dims, ", "),
                           "] all have the batch size ", batch_size_, "; took dim ", dims.front(),
                           " (the first)"));
    } else {
      Note(v, absl::StrCat("makes a new dim ", dims.front(), " of the batch size ", batch_size_,
                           ": taken as the batch, which each device makes for "
                           "its own samples"));
    }
    return Sharded(value, dims.front(), output);
  }

  // Sharded on `dim`; what else shares that dim with the batch comes from
  // `from`, the value whose batch dim became it, if its size is kept.
  ValueLayout Sharded(ValueLayout value, int32_t dim, absl::Span<const int64_t> output,
                      const ValueLayout* from = nullptr) const {
    value.layout = Layout::kShard;
    value.dim = dim;
    value.batch_size = output[dim];
    const bool kept = from != nullptr && from->batch_size == output[dim];
    value.batch_outer = kept ? from->batch_outer : 1;
    value.batch_inner = kept ? from->batch_inner : 1;
    return value;
  }

  // `sum / B` (or a multiple of B), as a loss written by hand or a
  // decomposed one computes a mean: each device divides by its own share of
  // the batch, so the devices' values average. The divisor's size alone says
  // so, which the note admits.
  void MeanBySize(NodeId v, const OpRule& rule, const NodeArgs& args, ValueLayout* value) {
    const int64_t by = Divisor(rule, args);
    const int64_t samples =
        value->batch_size / std::max<int64_t>(value->batch_outer * value->batch_inner, 1);
    if (samples <= 0 || by <= 0 || by % samples != 0) return;
    value->reduce = ReduceOp::kAvg;
    value->local_mean = true;
    Note(v, absl::StrCat("divides a sum over the batch by ", by,
                         ", a multiple of the batch size ", samples,
                         ": taken as a mean, whose devices' values average (each divides by its "
                         "own share)"));
  }

  // A full reduction to a scalar stays on its device (upstream's rule).
  ValueLayout LocalScalar(const Operands& operands, ReduceOp reduce) const {
    const ValueLayout& from = operands.sharded.empty() ? layout(operands.local_scalars.front())
                                                       : layout(operands.sharded.front());
    ValueLayout value;
    value.layout = Layout::kLocalScalar;
    value.dim = from.dim;
    value.batch_size = from.batch_size;
    value.batch_outer = from.batch_outer;
    value.batch_inner = from.batch_inner;
    value.reduce = reduce;
    value.local_mean = operands.local_mean || reduce == ReduceOp::kAvg;
    return value;
  }

  // The batch dim was contracted: a scalar stays local, anything else is Partial.
  absl::StatusOr<ValueLayout> Contraction(const OpRule& rule, const NodeArgs& args,
                                          const Operands& operands,
                                          absl::Span<const int64_t> output) {
    ReduceOp reduce = ReduceOp::kSum;
    if (rule.family == OpFamily::kReduction) {
      if (rule.reduce == ReduceKind::kAvg) reduce = ReduceOp::kAvg;
      if (rule.reduce == ReduceKind::kMax) reduce = ReduceOp::kMax;
      if (rule.reduce == ReduceKind::kMin) reduce = ReduceOp::kMin;
    } else if (rule.family == OpFamily::kLoss) {
      PARTPLAN_ASSIGN_OR_RETURN(
          const int64_t reduction,
          args.IntOr(args.Get(rule.reduction_arg, "reduction"), 1, "reduction"));
      reduce = reduction == 2 ? ReduceOp::kSum : ReduceOp::kAvg;
    }
    const NodeId v = args.node();
    if (output.empty()) {
      const ValueLayout value = LocalScalar(operands, reduce);
      Note(v, absl::StrCat("full reduction over the batch: each device keeps its own value "
                           "(upstream's rule); the whole value is the ",
                           ReduceOpName(reduce), " of the devices' values"));
      return value;
    }
    ValueLayout value;
    value.layout = Layout::kPartial;
    value.local_mean = operands.local_mean;
    // Terms of a per-device mean average; sums of samples add.
    value.reduce = operands.local_mean && reduce == ReduceOp::kSum ? ReduceOp::kAvg : reduce;
    return value;
  }

  // No operand is batch-sharded: replicated, or Partial through linear ops;
  // but a new tensor with a dim of the batch size (zeros(B, H)) is taken as
  // batch-sharded, as a per-device program would make it.
  ValueLayout WithoutBatch(NodeId v, const OpRule& rule, const NodeArgs& args,
                           const Operands& operands, absl::Span<const int64_t> output,
                           ValueLayout value) {
    if (rule.family == OpFamily::kFactory || graph_.inputs(v).empty()) {
      absl::InlinedVector<int32_t, 4> batch_dims;
      for (size_t d = 0; d < output.size(); ++d) {
        if (output[d] == batch_size_) batch_dims.push_back(static_cast<int32_t>(d));
      }
      if (batch_dims.size() > 1 && rule.family == OpFamily::kFactory) {
        // zeros / full of several dims of the batch size (a causal mask
        // [S, S] with S == B): which is the batch, if any, cannot be told,
        // but the values are the same everywhere, so the whole tensor on
        // every device is right whichever it is; ops on samples cut it.
        Note(v, absl::StrCat("dims [", absl::StrJoin(batch_dims, ", "), "] have the batch size ",
                             batch_size_,
                             ": a new tensor of uniform values, replicated (elementwise ops on "
                             "samples cut their rows of it)"));
        value.layout = Layout::kReplicate;
        return value;
      }
      if (!batch_dims.empty()) {
        value = NewBatchDim(v, value, batch_dims, output);
        if (rule.family != OpFamily::kFactory && !result_.ambiguous_[v]) {
          // Not a factory of uniform values: arange(B) made per device is
          // 0..B/N-1 on every device, not each device's rows of it.
          Guess(v, "an op without a dimension rule made it: its values may depend on their "
                   "position (arange), which on a device is not its rows' of the whole");
        }
        return value;
      }
    }
    value.layout = Layout::kReplicate;
    if (!operands.any_partial || rule.family == OpFamily::kFactoryLike) return value;
    absl::optional<ReduceOp> reduce = LinearPartialReduce(v, rule, args);
    if (reduce.has_value()) {
      value.layout = Layout::kPartial;
      value.reduce = *reduce;
      result_.keeps_partial_[v] = true;
    }
    return value;
  }

  // The reduce op when the op is linear in its Partial operands (which
  // agree on it), else none: they must be reduced first.
  absl::optional<ReduceOp> LinearPartialReduce(NodeId v, const OpRule& rule,
                                               const NodeArgs& args) const {
    int partials = 0;
    int others = 0;
    absl::optional<ReduceOp> reduce;
    for (NodeId u : graph_.inputs(v)) {
      const ValueLayout& value = layout(u);
      if (value.layout == Layout::kPartial) {
        if (reduce.has_value() && *reduce != value.reduce) return absl::nullopt;
        reduce = value.reduce;
        ++partials;
      } else if (value.layout != Layout::kNotTensor) {
        ++others;
      }
    }
    // Only sums and averages pass through linear maps.
    if (!reduce.has_value()) return absl::nullopt;
    if (*reduce != ReduceOp::kSum && *reduce != ReduceOp::kAvg) return absl::nullopt;
    switch (rule.linearity) {
      case Linearity::kEveryOperand:
        if (others == 0) return reduce;
        break;
      case Linearity::kOneOperand:
        if (partials == 1) return reduce;
        break;
      case Linearity::kFirstOperand: {
        const NodeId first = args.NodeAt(args.Get(0, "self"));
        if (partials == 1 && first >= 0 && layout(first).layout == Layout::kPartial) return reduce;
        break;
      }
      case Linearity::kNone:
        break;
    }
    return absl::nullopt;
  }

  // What the rule does with sharded operand u's batch dim.
  absl::StatusOr<DimFate> FateOfBatchDim(const OpRule& rule, const NodeArgs& args, int element,
                                         NodeId u, absl::Span<const int64_t> output) {
    const absl::Span<const int64_t> in = shape(u);
    const int32_t b = layout(u).dim;
    const auto operand_at = [&](int position, absl::string_view name) {
      return args.NodeAt(args.Get(position, name));
    };
    if (rule.mix != MixKind::kNone) {
      PARTPLAN_ASSIGN_OR_RETURN(const bool mixes, MixesBatchDim(rule, args, u, in.size(), b));
      // Reordered or scanned along the batch, the output keeps its rows
      // where the batch was (gather and index pick rows: not kept).
      const bool keeps_rows = (rule.mix == MixKind::kDimArg || rule.mix == MixKind::kDimArgOrAll ||
                               rule.mix == MixKind::kLastTwoDims) &&
                              !rule.mix_self_only && in.size() == output.size() &&
                              output[b] == in[b];
      if (mixes) return Gathered(keeps_rows ? b : -1);
    }
    switch (rule.family) {
      case OpFamily::kPointwise:
      case OpFamily::kFactoryLike:
        return Broadcast(in, b, output);
      case OpFamily::kIdentity: {
        PARTPLAN_ASSIGN_OR_RETURN(const bool training, Training(rule, args));
        // Statistics per channel of a batch on the channel dim are per sample
        // in no useful sense: the op needs the whole batch.
        if (training && b == 1) return Gathered();
        if (element > 0 && (rule.rest == RestElements::kContract ||
                            rule.rest == RestElements::kBatchStatistics)) {
          return Contracted();
        }
        return SamePosition(in, b, output);
      }
      case OpFamily::kRot90:
        return Rot90Fate(args, u, in, b);
      case OpFamily::kContract:
        return Contracted();
      case OpFamily::kLoss: {
        PARTPLAN_ASSIGN_OR_RETURN(
            const int64_t reduction,
            args.IntOr(args.Get(rule.reduction_arg, "reduction"), 1, "reduction"));
        return reduction == 0 ? SamePosition(in, b, output) : Contracted();
      }
      case OpFamily::kMatmul: {
        const int32_t rank = rule.batched ? 3 : 2;
        if (u == operand_at(rule.lhs_arg, "mat1")) {
          if (b == rank - 1) return Contracted();
          return Mapped(b);
        }
        if (u == operand_at(rule.rhs_arg, "mat2")) {
          if (b == rank - 2) return Contracted();
          return Mapped(b);
        }
        return Broadcast(in, b, output);  // the added term
      }
      case OpFamily::kConvolution:
        if (u != operand_at(0, "input")) return NoRule();
        if (b == 1) return Contracted();
        return SamePosition(in, b, output);
      case OpFamily::kEmbedding:
        if (u != operand_at(rule.operand_arg, "indices")) return NoRule();
        return SamePosition(in, b, output);
      case OpFamily::kReduction:
        return ReductionFate(rule, args, u, in, b);
      case OpFamily::kCat: {
        PARTPLAN_ASSIGN_OR_RETURN(const int32_t dim, DimArgument(rule, args, in.size()));
        if (dim == b) concatenates_batch_ = true;
        return dim == b ? Mapped(b) : SamePosition(in, b, output);
      }
      case OpFamily::kSplit:
      case OpFamily::kIndexDim:
        return AlongDimFate(rule, args, u, in, b, output);
      case OpFamily::kIndexDimBackward:
        return IndexDimBackwardFate(rule, args, u, in, b, output);
      default:
        return NoRule();
    }
  }

  // Whether the op reorders or mixes values along operand u's batch dim b
  // (rule.mix). Operands other than self count when they have self's rank
  // (softmax's backward, scatter's index and source).
  absl::StatusOr<bool> MixesBatchDim(const OpRule& rule, const NodeArgs& args, NodeId u,
                                     size_t rank, int32_t b) const {
    const NodeId self = args.NodeAt(args.Get(0, "self"));
    if (rule.mix_self_only || rule.mix == MixKind::kIndexedDims) {
      if (u != self) return false;
    } else if (u != self && (self < 0 || !is_tensor(self) || shape(self).size() != rank)) {
      return false;
    }
    if (rule.mix == MixKind::kLastTwoDims) return static_cast<size_t>(b) + 2 >= rank;
    if (rule.mix == MixKind::kIndexedDims) {
      // index.Tensor(self, indices): a list with a tensor or None per dim.
      const NodeArgs::Arg indices = args.Get(rule.mix_arg, "indices");
      if (!indices.present() || indices.head().kind_case() != v1::Value::kList) return true;
      const int count = static_cast<int>(indices.head().list());
      for (int i = 0; i < count && i <= b; ++i) {
        const v1::Value& index = indices.values->Get(indices.start + 1 + i);
        if (index.kind_case() != v1::Value::kNone && index.kind_case() != v1::Value::kNode) {
          return true;  // not one value per dim: cannot tell, so take it as mixed
        }
        if (i == b) return index.kind_case() == v1::Value::kNode;
      }
      return false;
    }
    NodeArgs::Arg arg = args.Get(rule.mix_arg, "dim");
    if (!arg.present()) arg = args.Get(rule.mix_arg, "dims");
    Dims dims;
    if (NodeArgs::IsNone(arg)) {
      // roll's dims default to none (all: it rolls the flattened tensor).
      if (!rule.mix_has_default) return true;
      dims.push_back(rule.mix_default);
    } else {
      PARTPLAN_ASSIGN_OR_RETURN(dims, args.Ints(arg, "dim"));
    }
    if (dims.empty()) return rule.mix == MixKind::kDimArgOrAll;
    for (int64_t dim : dims) {
      absl::StatusOr<int32_t> d = NormalizeDim(dim, static_cast<int64_t>(rank));
      if (!d.ok()) return args.Error(arg, d.status().message());
      if (*d == b) return true;
    }
    return false;
  }

  // rot90(self, k, dims=[d0, d1]): k=1 is flip(d1) then transpose(d0, d1),
  // k=2 flips both, k=3 is flip(d0) then transpose. The batch moves to the
  // other dim where it is not reversed, and needs the whole batch where it is.
  absl::StatusOr<DimFate> Rot90Fate(const NodeArgs& args, NodeId u, absl::Span<const int64_t> in,
                                    int32_t b) const {
    if (u != args.NodeAt(args.Get(0, "self"))) return NoRule();
    PARTPLAN_ASSIGN_OR_RETURN(const int64_t raw_k, args.IntOr(args.Get(1, "k"), 1, "k"));
    const NodeArgs::Arg dims_arg = args.Get(2, "dims");
    Dims dims = {0, 1};
    if (!NodeArgs::IsNone(dims_arg)) {
      PARTPLAN_ASSIGN_OR_RETURN(dims, args.Ints(dims_arg, "dims"));
    }
    if (dims.size() != 2) return args.Error(dims_arg, "rot90 takes exactly two dims");
    const int64_t rank = static_cast<int64_t>(in.size());
    absl::StatusOr<int32_t> d0 = NormalizeDim(dims[0], rank);
    absl::StatusOr<int32_t> d1 = NormalizeDim(dims[1], rank);
    if (!d0.ok()) return args.Error(dims_arg, d0.status().message());
    if (!d1.ok()) return args.Error(dims_arg, d1.status().message());
    if (*d0 == *d1) return args.Error(dims_arg, "rot90's two dims must differ");
    const int64_t k = ((raw_k % 4) + 4) % 4;
    if ((b != *d0 && b != *d1) || k == 0) return Mapped(b);
    if (k == 1 && b == *d0) return Mapped(*d1);
    if (k == 3 && b == *d1) return Mapped(*d0);
    // Reversed: the whole batch, on the dim it moves to.
    if (k == 2) return Gathered(b);
    return Gathered(b == *d0 ? *d1 : *d0);
  }

  absl::StatusOr<DimFate> ReductionFate(const OpRule& rule, const NodeArgs& args, NodeId u,
                                        absl::Span<const int64_t> in, int32_t b) const {
    if (u != args.NodeAt(args.Get(0, "self"))) return NoRule();
    const int64_t rank = static_cast<int64_t>(in.size());
    absl::InlinedVector<bool, 6> reduced(in.size(), true);
    const NodeArgs::Arg dims_arg = args.Get(rule.dim_arg, "dim");
    if (rule.reduces_last_by_default && NodeArgs::IsNone(dims_arg) && rank > 0) {
      std::fill(reduced.begin(), reduced.end(), false);
      reduced.back() = true;
    } else if (rule.dim_arg >= 0 && !NodeArgs::IsNone(dims_arg)) {
      PARTPLAN_ASSIGN_OR_RETURN(const Dims dims, args.Ints(dims_arg, "dim"));
      if (!dims.empty()) {
        std::fill(reduced.begin(), reduced.end(), false);
        for (int64_t dim : dims) {
          absl::StatusOr<int32_t> d = NormalizeDim(dim, rank);
          if (!d.ok()) return args.Error(dims_arg, d.status().message());
          if (*d < rank) reduced[*d] = true;
        }
      }
    }
    PARTPLAN_ASSIGN_OR_RETURN(const bool keepdim,
                              args.BoolOr(args.Get(rule.keepdim_arg, "keepdim"), false, "keepdim"));
    if (reduced[b]) return rule.reduce == ReduceKind::kOther ? Gathered() : Contracted();
    if (keepdim) return Mapped(b);
    return Mapped(static_cast<int32_t>(b - std::count(reduced.begin(), reduced.begin() + b, true)));
  }

  // split / unbind / select / slice / index_select along `dim`.
  absl::StatusOr<DimFate> AlongDimFate(const OpRule& rule, const NodeArgs& args, NodeId u,
                                       absl::Span<const int64_t> in, int32_t b,
                                       absl::Span<const int64_t> output) const {
    if (u != args.NodeAt(args.Get(0, "self"))) return NoRule();
    PARTPLAN_ASSIGN_OR_RETURN(const int32_t dim, DimArgument(rule, args, in.size()));
    if (b != dim) {
      const int32_t at = rule.drops_dim && b > dim ? b - 1 : b;
      if (at < static_cast<int32_t>(output.size()) && output[at] == in[b]) return Mapped(at);
      return Contracted();
    }
    if (rule.slices) {
      // make_fx writes x[:, i] as a slice of the whole dim 0, then a select.
      PARTPLAN_ASSIGN_OR_RETURN(const int64_t start, args.IntOr(args.Get(2, "start"), 0, "start"));
      PARTPLAN_ASSIGN_OR_RETURN(
          const int64_t end,
          args.IntOr(args.Get(3, "end"), std::numeric_limits<int64_t>::max(), "end"));
      PARTPLAN_ASSIGN_OR_RETURN(const int64_t step, args.IntOr(args.Get(4, "step"), 1, "step"));
      if ((start == 0 || start <= -in[b]) && end >= in[b] && step == 1) {
        return SamePosition(in, b, output);
      }
    }
    return Gathered();
  }

  // select_backward / slice_backward: the gradient's rows go where the
  // forward took them from. A gradient of a slice of the batch lands at an
  // offset in the whole batch (the forward gathered it): it needs it whole.
  absl::StatusOr<DimFate> IndexDimBackwardFate(const OpRule& rule, const NodeArgs& args, NodeId u,
                                               absl::Span<const int64_t> in, int32_t b,
                                               absl::Span<const int64_t> output) const {
    if (u != args.NodeAt(args.Get(0, "grad_output"))) return NoRule();
    PARTPLAN_ASSIGN_OR_RETURN(const int32_t dim, DimArgument(rule, args, output.size()));
    if (rule.drops_dim) return Mapped(b >= dim ? b + 1 : b);
    if (b != dim) return Mapped(b);
    PARTPLAN_ASSIGN_OR_RETURN(const int64_t start, args.IntOr(args.Get(3, "start"), 0, "start"));
    PARTPLAN_ASSIGN_OR_RETURN(const int64_t step, args.IntOr(args.Get(5, "step"), 1, "step"));
    PARTPLAN_ASSIGN_OR_RETURN(
        const int64_t end,
        args.IntOr(args.Get(4, "end"), std::numeric_limits<int64_t>::max(), "end"));
    const int64_t size = output[b];
    if ((start == 0 || start <= -size) && end >= size && step == 1 && in[b] == size) {
      return Mapped(b);
    }
    return Gathered();
  }

  // The op's `dim` argument (default 0), normalised for a tensor of `rank` dims.
  absl::StatusOr<int32_t> DimArgument(const OpRule& rule, const NodeArgs& args, size_t rank) const {
    const NodeArgs::Arg dim_arg = args.Get(rule.dim_arg, "dim");
    PARTPLAN_ASSIGN_OR_RETURN(const int64_t raw, args.IntOr(dim_arg, 0, "dim"));
    absl::StatusOr<int32_t> dim = NormalizeDim(raw, static_cast<int64_t>(rank));
    if (!dim.ok()) return args.Error(dim_arg, dim.status().message());
    return *dim;
  }

  // ---- Ops without a rule: the batch dim by size ------------------------

  void NoteRuleSettled(NodeId v, absl::Span<const int64_t> output, int32_t dim) {
    const int64_t batch = BatchSizeSeen(v);
    absl::InlinedVector<int32_t, 4> same;
    for (size_t d = 0; d < output.size(); ++d) {
      if (output[d] == batch && static_cast<int32_t>(d) != dim) {
        same.push_back(static_cast<int32_t>(d));
      }
    }
    if (same.empty()) return;
    Note(v, absl::StrCat("output dims ", ShapeString(Dims(same.begin(), same.end())),
                         " have the batch size ", batch,
                         " but are not the batch dim: the op's "
                         "dimension rule ",
                         dim >= 0 ? absl::StrCat("puts the batch on dim ", dim)
                                  : std::string("contracts the batch dim")));
  }

  // The batch size of the node's first batch operand.
  int64_t BatchSizeSeen(NodeId v) const {
    for (NodeId u : graph_.inputs(v)) {
      const Layout kind = layout(u).layout;
      if (kind == Layout::kShard || kind == Layout::kLocalScalar) return layout(u).batch_size;
    }
    return batch_size_;
  }

  // Whether the op's output dims line up with its operands' by
  // broadcasting, as a rule: views and pointwise ops. For any other op the
  // dim a batch operand would land on when broadcast is a guess.
  static bool Broadcasts(const OpRule& rule) {
    return rule.family == OpFamily::kView || rule.family == OpFamily::kPointwise ||
           rule.family == OpFamily::kFactoryLike;
  }

  absl::StatusOr<ValueLayout> Generic(NodeId v, const Operands& operands,
                                      absl::Span<const int64_t> output, bool broadcasts) {
    absl::InlinedVector<int64_t, 2> sizes;
    auto add_size = [&sizes](int64_t size) {
      if (std::find(sizes.begin(), sizes.end(), size) == sizes.end()) sizes.push_back(size);
    };
    for (NodeId u : operands.sharded) add_size(layout(u).batch_size);
    for (NodeId u : operands.local_scalars) add_size(layout(u).batch_size);
    auto is_batch_size = [&sizes](int64_t size) {
      return std::find(sizes.begin(), sizes.end(), size) != sizes.end();
    };
    absl::InlinedVector<int32_t, 4> candidates;
    for (size_t d = 0; d < output.size(); ++d) {
      if (is_batch_size(output[d])) candidates.push_back(static_cast<int32_t>(d));
    }
    ValueLayout value;
    value.local_mean = operands.local_mean;
    if (candidates.empty()) {
      if (output.empty()) {
        ValueLayout scalar = LocalScalar(operands, ReduceOp::kSum);
        Note(v,
             "full reduction over the batch: each device keeps its own value (upstream's "
             "rule)");
        if (!broadcasts) {
          Guess(v, "the op has no dimension rule, so that it sums over the batch is a guess "
                   "(a median, a quantile or a sort of the batch does not decompose)");
        }
        return scalar;
      }
      value.layout = Layout::kPartial;
      value.reduce = operands.local_mean ? ReduceOp::kAvg : ReduceOp::kSum;
      if (!broadcasts) {
        Guess(v, absl::StrCat("no output dim has the batch size ", sizes.front(),
                              ": taken as a sum over the batch (Partial), but the op has no "
                              "dimension rule, so that is a guess (an op that selects, sorts "
                              "or ranks along the batch does not decompose)"));
      }
      return value;
    }
    // A non-batch dim of the batch size in an operand could be where a
    // candidate comes from.
    std::string lookalike;
    for (NodeId u : graph_.inputs(v)) {
      if (!is_tensor(u) || !lookalike.empty()) continue;
      const absl::Span<const int64_t> in = shape(u);
      for (size_t j = 0; j < in.size(); ++j) {
        const bool is_batch_dim =
            layout(u).layout == Layout::kShard && layout(u).dim == static_cast<int32_t>(j);
        if (!is_batch_dim && is_batch_size(in[j])) {
          lookalike = absl::StrCat("operand '", proto(u).name(), "' has a non-batch dim ", j,
                                   " of that size");
          break;
        }
      }
    }
    // Evidence from the operands: where a batch dim lands when broadcast,
    // and where a full reduction had its batch dim (its expand restores it).
    int32_t aligned = -1;
    const ValueLayout* aligned_from = nullptr;
    std::string because;
    for (NodeId u : operands.sharded) {
      if (!BroadcastsTo(shape(u), output)) continue;
      const DimFate fate = Broadcast(shape(u), layout(u).dim, output);
      if (fate.kind == DimFate::kMapped) {
        aligned = fate.dim;
        aligned_from = &layout(u);
        because = absl::StrCat("operand '", proto(u).name(),
                               "''s batch dim lands there when "
                               "broadcast");
        break;
      }
    }
    for (size_t i = 0; aligned < 0 && i < operands.local_scalars.size(); ++i) {
      const ValueLayout& scalar = layout(operands.local_scalars[i]);
      if (scalar.dim >= 0 && scalar.dim < static_cast<int32_t>(output.size()) &&
          output[scalar.dim] == scalar.batch_size) {
        aligned = scalar.dim;
        aligned_from = &scalar;
        because = absl::StrCat("it is where '", proto(operands.local_scalars[i]).name(),
                               "' reduced its batch dim");
      }
    }
    const std::string candidates_text =
        absl::StrCat("output dims ", ShapeString(Dims(candidates.begin(), candidates.end())),
                     " have the batch size ", sizes.front());
    int32_t dim = candidates.front();
    if (aligned >= 0 && broadcasts) {
      dim = aligned;
      if (candidates.size() > 1 || !lookalike.empty()) {
        Note(v, absl::StrCat(candidates_text, "; took dim ", dim, ": ", because));
      }
    } else if (aligned >= 0 && (candidates.size() > 1 || !lookalike.empty())) {
      // An op without a dimension rule may move the batch anywhere (rot90
      // of a [B, B] tensor moves it to dim 1): where it would land if the
      // op broadcast is the best guess, not a fact.
      dim = aligned;
      result_.ambiguous_[v] = true;
      Note(v, absl::StrCat("ambiguous: ", candidates_text,
                           lookalike.empty() ? "" : absl::StrCat(", and ", lookalike),
                           "; the op has no dimension rule, so dim ", dim,
                           " is a guess: ", because, " if the op kept dims in place"));
    } else if (aligned >= 0 || (candidates.size() == 1 && lookalike.empty() && !broadcasts)) {
      dim = aligned >= 0 ? aligned : dim;
      if (!broadcasts) {
        // One dim of the batch size, but no rule says the op keeps each
        // sample's values in its own row: tril / triu, a kthvalue or a
        // cummax over it would mix them.
        Guess(v, absl::StrCat("output dim ", dim, " is the only one of the batch size ",
                              sizes.front(),
                              ", but the op has no dimension rule, so that it is the batch "
                              "(with each sample's values in its own row, independent of the "
                              "other samples) is a guess"));
      }
    } else if (candidates.size() > 1 || !lookalike.empty()) {
      result_.ambiguous_[v] = true;
      Note(v, absl::StrCat("ambiguous: ",
                           candidates.size() > 1 ? candidates_text
                                                 : absl::StrCat("output dim ", dim,
                                                                " has the batch "
                                                                "size ",
                                                                sizes.front()),
                           lookalike.empty() ? "" : absl::StrCat(", and ", lookalike),
                           "; no dimension rule or operand tells which is the batch, so dim ", dim,
                           " (the first) was taken"));
    }
    return Sharded(value, dim, output, aligned_from);
  }

  const CompactGraph& graph_;
  const BatchDimOptions& options_;
  const CancellationToken& token_;
  const OpRuleTable rules_;
  const OpRule no_rule_;
  BatchDimAnalysis result_;
  NodeId seed_ = -1;
  int64_t batch_size_ = 0;
  bool concatenates_batch_ = false;  // set by FateOfBatchDim for cat along the batch
};

absl::StatusOr<BatchDimAnalysis> AnalyzeBatchDims(const CompactGraph& graph,
                                                  const BatchDimOptions& options,
                                                  const CancellationToken& token) {
  if (options.roles.size() != static_cast<size_t>(graph.num_nodes())) {
    return absl::InvalidArgumentError("BatchDimOptions::CheckAndSetup was not called");
  }
  if (graph.parsed() == nullptr) {
    return absl::InternalError(
        "AnalyzeBatchDims needs a graph imported from a parsed v1::Graph "
        "(the PlanDataParallel entry point parses a serialised one)");
  }
  return BatchDimAnalyzer(graph, options, token).Run();
}

}  // namespace partplan

// Op nodes of the batch-dim analysis: their operands' layouts, tuples and
// the getitems of their elements, replicated operands read per sample beside
// a batch-sharded one (cut to each device's rows), and the shape checks
// that make a graph the analysis cannot follow INVALID_ARGUMENT.
#include "planner/data_parallel/batch_dim_analyzer.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {

using batch_dim_internal::ShapeString;
using batch_dim_internal::NodeField;

BatchDimAnalyzer::Operands BatchDimAnalyzer::ClassifyOperands(NodeId v) const {
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

const OpRule& BatchDimAnalyzer::RuleOf(NodeId v) const {
  // call_module targets are module paths: no aten rule applies.
  return graph_.op(v) == v1::CALL_MODULE ? no_rule_ : rules_.Find(proto(v).target());
}

absl::Status BatchDimAnalyzer::AnalyzeOp(NodeId v) {
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

// The per-sample argument at `position` (OpRule::per_sample_args), by
// position or by one of the names aten gives it.
NodeId BatchDimAnalyzer::PerSampleArg(const NodeArgs& args, int position) const {
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
void BatchDimAnalyzer::CutPerSampleOperands(NodeId v, const OpRule& rule, const NodeArgs& args) {
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
absl::Status BatchDimAnalyzer::AnalyzeTupleOfGetItems(NodeId v, const OpRule& rule,
                                                      const NodeArgs& args,
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
int BatchDimAnalyzer::ElementIndex(const OpRule& rule, const NodeArgs& args, int k) const {
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
int BatchDimAnalyzer::ListedIndex(const OpRule& rule, const NodeArgs& args, int index,
                                  int listed) const {
  if (result_.elements_by_schema_[args.node()]) return index < listed ? index : -1;
  for (int k = 0; k < listed; ++k) {
    if (ElementIndex(rule, args, k) == index) return k;
  }
  return -1;
}

absl::Status BatchDimAnalyzer::AnalyzeGetItem(NodeId v, const NodeArgs& args) {
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

absl::Status BatchDimAnalyzer::ShapeMismatch(NodeId v, const NodeArgs& args,
                                             absl::string_view what) const {
  return InvalidFieldError(absl::StrCat(NodeField(v), ".outputs[0].shape"),
                           absl::StrCat(args.Describe(), ": shape mismatch: ", what));
}

absl::Status BatchDimAnalyzer::CheckOperandShapes(NodeId v, const OpRule& rule,
                                                  const NodeArgs& args,
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

absl::Status BatchDimAnalyzer::CheckMatmulShapes(NodeId v, const OpRule& rule, const NodeArgs& args,
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

}  // namespace partplan

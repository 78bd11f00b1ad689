// Means over the batch in the batch-dim analysis: values each device
// computes from its own share of the batch (ValueLayout::scaled,
// local_mean), and the ops flagged ambiguous because no placement states
// what their values are (mixed scales, constants baked from the batch
// size, ops not linear in local scalars, in-place changes of layout).
#include "planner/data_parallel/batch_dim_analyzer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/base/status_util.h"

namespace partplan {

// An in-place op (`div_`) gives its self the op's values: readers of the
// self after it see them, but are planned with the self's own layout.
// Where the two differ (the gradient a div_ scales), the op is flagged and
// the self's later readers carry the guess (the self's entry names it
// too: its values after the op are not what its plan says).
void BatchDimAnalyzer::FlagInPlaceChange(NodeId v, const NodeArgs& args) {
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
void BatchDimAnalyzer::FlagMixedScale(NodeId v) {
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

// ValueLayout::scaled: kept from a scaled operand, or begun where the
// backward of a mean divides by the number of samples, which a device
// takes as its own share.
absl::StatusOr<ValueLayout> BatchDimAnalyzer::WithScale(const OpRule& rule, const NodeArgs& args,
                                                        const Operands& operands,
                                                        ValueLayout value) const {
  const bool per_device = value.layout == Layout::kShard || value.layout == Layout::kLocalScalar;
  // A factory's values (new_zeros of a scaled gradient) are its own.
  bool scaled = operands.scaled && rule.family != OpFamily::kFactory;
  if (!scaled && per_device) {
    PARTPLAN_ASSIGN_OR_RETURN(scaled, DividesByOwnSamples(rule, args, value));
  }
  value.scaled = scaled && (per_device || value.layout == Layout::kReplicate);
  return value;
}

absl::StatusOr<bool> BatchDimAnalyzer::DividesByOwnSamples(const OpRule& rule, const NodeArgs& args,
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
int64_t BatchDimAnalyzer::Divisor(const OpRule& rule, const NodeArgs& args) {
  if (!rule.divides && !rule.multiplies) return 0;
  const double c = Constant(args.Get(1, "other"));
  if (!(c > 0)) return 0;
  const double by = rule.divides ? c : 1.0 / c;
  if (!(by >= 1) || by > 1e15) return 0;
  const double rounded = std::round(by);
  return std::abs(by - rounded) <= 1e-9 * rounded ? static_cast<int64_t>(rounded) : 0;
}

// A numeric argument's value (NaN when it is not one).
double BatchDimAnalyzer::Constant(const NodeArgs::Arg& arg) {
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
void BatchDimAnalyzer::FlagBatchSizedConstant(NodeId v, const OpRule& rule, const NodeArgs& args,
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
bool BatchDimAnalyzer::BroadcastWithoutBatch(NodeId d) const {
  if (graph_.op(d) != v1::CALL_FUNCTION || RuleOf(d).family != OpFamily::kView) return false;
  const NodeArgs view(graph_, d);
  const NodeId input = view.NodeAt(view.Get(0, "self"));
  return input >= 0 && layout(input).layout != Layout::kShard;
}

// A local scalar's whole value is the sum or average of the devices'
// values, which only ops linear in it keep: ones_like & co, views, sums
// and differences of local scalars that combine alike, a product with or
// quotient by values that are not local scalars. Anything else (a local
// sum divided by another, as the backward of median divides by the count
// of its ties; sqrt or log of a loss) is not the same combination of the
// devices' values: flagged, as the size rule's guesses are.
void BatchDimAnalyzer::FlagNonlinearInLocalScalars(NodeId v, const OpRule& rule,
                                                   const NodeArgs& args, const Operands& operands) {
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

// `sum / B` (or a multiple of B), as a loss written by hand or a
// decomposed one computes a mean: each device divides by its own share of
// the batch, so the devices' values average. The divisor's size alone says
// so, which the note admits.
void BatchDimAnalyzer::MeanBySize(NodeId v, const OpRule& rule, const NodeArgs& args,
                                  ValueLayout* value) {
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

}  // namespace partplan

// The layout of one output element of an op with operands in the batch-dim
// analysis: a batch dim the op's rule keeps (Shard), contracts (Partial or a
// local scalar) or needs whole (Replicate); training-mode batch norm as
// SyncBatchNorm; and values computed without a batch-sharded operand.
#include "planner/data_parallel/batch_dim_analyzer.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/base/status_util.h"

namespace partplan {

using batch_dim_internal::ShapeString;
using batch_dim_internal::HasNoElements;
using batch_dim_internal::DimFate;

absl::StatusOr<ValueLayout> BatchDimAnalyzer::ElementLayout(NodeId v, const OpRule& rule,
                                                            const NodeArgs& args,
                                                            const Operands& operands, int element,
                                                            absl::Span<const int64_t> output) {
  PARTPLAN_ASSIGN_OR_RETURN(ValueLayout value,
                            UnscaledLayout(v, rule, args, operands, element, output));
  return WithScale(rule, args, operands, value);
}

// Whether a batch-norm op runs in training mode (its `training` argument,
// `train` in the backward).
absl::StatusOr<bool> BatchDimAnalyzer::Training(const OpRule& rule, const NodeArgs& args) const {
  if (rule.training_arg < 0) return false;
  NodeArgs::Arg arg = args.Get(rule.training_arg, "training");
  if (!arg.present()) arg = args.Get(rule.training_arg, "train");
  return args.BoolOr(arg, false, "training");
}

absl::StatusOr<ValueLayout> BatchDimAnalyzer::UnscaledLayout(NodeId v, const OpRule& rule,
                                                             const NodeArgs& args,
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
void BatchDimAnalyzer::SyncStatistics(NodeId v, const OpRule& rule, const NodeArgs& args) {
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

// A value made with new dims of the batch size (`dims`, from the op's
// arguments): sharded on the first; ambiguous when there are several.
ValueLayout BatchDimAnalyzer::NewBatchDim(NodeId v, ValueLayout value,
                                          absl::Span<const int32_t> dims,
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
ValueLayout BatchDimAnalyzer::Sharded(ValueLayout value, int32_t dim,
                                      absl::Span<const int64_t> output,
                                      const ValueLayout* from) const {
  value.layout = Layout::kShard;
  value.dim = dim;
  value.batch_size = output[dim];
  const bool kept = from != nullptr && from->batch_size == output[dim];
  value.batch_outer = kept ? from->batch_outer : 1;
  value.batch_inner = kept ? from->batch_inner : 1;
  return value;
}

// A full reduction to a scalar stays on its device (upstream's rule).
ValueLayout BatchDimAnalyzer::LocalScalar(const Operands& operands, ReduceOp reduce) const {
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
absl::StatusOr<ValueLayout> BatchDimAnalyzer::Contraction(const OpRule& rule, const NodeArgs& args,
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
ValueLayout BatchDimAnalyzer::WithoutBatch(NodeId v, const OpRule& rule, const NodeArgs& args,
                                           const Operands& operands,
                                           absl::Span<const int64_t> output, ValueLayout value) {
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
absl::optional<ReduceOp> BatchDimAnalyzer::LinearPartialReduce(NodeId v, const OpRule& rule,
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

}  // namespace partplan

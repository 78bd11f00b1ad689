// Where an op's dimension rule (op_rules.h) sends a batch-sharded operand's
// batch dim: to an output dim, contracted away, or needed whole (gathered),
// per op family: pointwise, matmul, reductions, rot90, along-dim indexing
// and their backwards, and ops that reorder or mix values along a dim.
#include "planner/data_parallel/batch_dim_analyzer.h"

#include <algorithm>
#include <limits>

#include "planner/base/status_util.h"
#include "planner/data_parallel/dim_maps.h"

namespace partplan {

using batch_dim_internal::DimFate;
using batch_dim_internal::Mapped;
using batch_dim_internal::Contracted;
using batch_dim_internal::Gathered;
using batch_dim_internal::NoRule;
using batch_dim_internal::Broadcast;
using batch_dim_internal::SamePosition;

// What the rule does with sharded operand u's batch dim.
absl::StatusOr<DimFate> BatchDimAnalyzer::FateOfBatchDim(const OpRule& rule, const NodeArgs& args,
                                                         int element, NodeId u,
                                                         absl::Span<const int64_t> output) {
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
absl::StatusOr<bool> BatchDimAnalyzer::MixesBatchDim(const OpRule& rule, const NodeArgs& args,
                                                     NodeId u, size_t rank, int32_t b) const {
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
absl::StatusOr<DimFate> BatchDimAnalyzer::Rot90Fate(const NodeArgs& args, NodeId u,
                                                    absl::Span<const int64_t> in, int32_t b) const {
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

absl::StatusOr<DimFate> BatchDimAnalyzer::ReductionFate(const OpRule& rule, const NodeArgs& args,
                                                        NodeId u, absl::Span<const int64_t> in,
                                                        int32_t b) const {
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
absl::StatusOr<DimFate> BatchDimAnalyzer::AlongDimFate(const OpRule& rule, const NodeArgs& args,
                                                       NodeId u, absl::Span<const int64_t> in,
                                                       int32_t b,
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
absl::StatusOr<DimFate> BatchDimAnalyzer::IndexDimBackwardFate(
    const OpRule& rule, const NodeArgs& args, NodeId u, absl::Span<const int64_t> in, int32_t b,
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
absl::StatusOr<int32_t> BatchDimAnalyzer::DimArgument(const OpRule& rule, const NodeArgs& args,
                                                      size_t rank) const {
  const NodeArgs::Arg dim_arg = args.Get(rule.dim_arg, "dim");
  PARTPLAN_ASSIGN_OR_RETURN(const int64_t raw, args.IntOr(dim_arg, 0, "dim"));
  absl::StatusOr<int32_t> dim = NormalizeDim(raw, static_cast<int64_t>(rank));
  if (!dim.ok()) return args.Error(dim_arg, dim.status().message());
  return *dim;
}

}  // namespace partplan

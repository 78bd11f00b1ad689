// OpRuleTable: what the batch-dimension analysis knows about aten ops
// beyond the view-like ones (dim_maps.h): which output dims each operand's
// dims become, which dims an op contracts, and whether a Partial operand
// passes through it.
//
// Ops without a rule fall back to matching output sizes with the batch
// size (upstream's BatchDimAnalyzer), where a non-batch dim of the same
// size makes the answer ambiguous. A rule settles that: `mm` of [16, B] by
// [B, 8] contracts the batch even when 16 == B.
//
//   OpRuleTable rules;  // build once per analysis
//   const OpRule& rule = rules.Find("aten.sum.dim_IntList");
//   if (rule.family == OpFamily::kReduction) ...
//
// Targets are aten overloads as make_fx names them (`aten.mm.default`); a
// leading `torch.ops.` is accepted. An in-place overload without a rule of
// its own (`aten.relu_.default`) takes its functional form's
// (`aten.relu.default`). Find is one or two hash lookups.
#ifndef PARTPLAN_PLANNER_DATA_PARALLEL_OP_RULES_H_
#define PARTPLAN_PLANNER_DATA_PARALLEL_OP_RULES_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "planner/data_parallel/dim_maps.h"

namespace partplan {

enum class OpFamily : uint8_t {
  kUnknown,      // no rule: sizes decide
  kGetItem,      // operator.getitem(tuple, index): the element
  kView,         // a view-like op with a dimension map (`view_op`)
  kPointwise,    // tensor operands broadcast (right-aligned) to the output
  kFactoryLike,  // ones_like & co: operand 0's shape, values independent of it
  kFactory,      // zeros, new_zeros & co: a new tensor of the shape its arguments give
  kIdentity,     // element 0 keeps its operands' leading dims (left-aligned):
                 // normalisations, dropout, pooling, loss backward ops
  kReduction,    // reduces `dim_arg` dims of operand 0 (all when absent or empty)
  kMatmul,       // mm, bmm, addmm, baddbmm
  kConvolution,  // N from the input's dim 0, its channels contracted, spatial dims kept
  kEmbedding,    // output dims: the indices' dims, then the embedding dim
  kContract,     // output has none of its operands' dims (a weight's gradient)
  kLoss,         // elementwise with reduction=none, else a full reduction
  kCat,          // concatenation along `dim_arg`
  kSplit,        // tuple of pieces along `dim_arg` (unbind drops it)
  kIndexDim,     // select / slice / index_select along `dim_arg`
  kRot90,        // rot90(self, k, dims): two dims exchanged, one of them reversed
  // select_backward / slice_backward(grad, input_sizes, dim, ...): the
  // gradient's dims placed in a zero tensor of the input's shape; select's
  // (`drops_dim`) gains `dim` back.
  kIndexDimBackward,
};

// Dims along which an op reorders or mixes values (flip, sort, cumsum,
// softmax, gather along `dim`, ...): each output element depends on the
// whole of those dims, so a batch dim among them needs the whole batch.
enum class MixKind : uint8_t {
  kNone,
  kDimArg,         // the `mix_arg` argument: an int or a list of ints
  kDimArgOrAll,    // the same, but an empty list means every dim (roll flattens)
  kIndexedDims,    // index.Tensor: the dims with a non-None index in list `mix_arg`
  // The last two dims (tril, triu: which elements survive depends on their
  // row and column index, which on a device is not the whole batch's).
  kLastTwoDims,
};

// What a reduction computes, hence how the devices' results combine when
// it reduces over the batch.
enum class ReduceKind : uint8_t { kSum, kAvg, kMax, kMin, kOther };

// Which Partial operands an op passes through unreduced (it is linear in
// them, the other tensor operands being replicated).
enum class Linearity : uint8_t {
  kNone,
  kEveryOperand,  // every tensor operand Partial (add, sub, unary copies, views, sums)
  kOneOperand,    // exactly one tensor operand Partial (mul, mm, bmm)
  kFirstOperand,  // operand 0 Partial (div's numerator)
};

// What the elements of a tuple output after the first are.
enum class RestElements : uint8_t {
  kLikeFirst,  // computed like element 0
  kPerSample,  // keep their operands' leading dims (layer norm's mean/rstd, dropout's mask)
  kContract,   // the batch contracted: weight gradients, batch statistics
  kLocalSum,   // a full sum over the batch (nll_loss's total_weight)
  // Batch norm's save_mean / save_invstd (and new running statistics):
  // the batch's statistics in training mode, else contracted (empty).
  kBatchStatistics,
};

struct OpRule {
  OpFamily family = OpFamily::kUnknown;
  ViewOp view_op = ViewOp::kView;        // kView
  ReduceKind reduce = ReduceKind::kSum;  // kReduction
  Linearity linearity = Linearity::kNone;
  RestElements rest = RestElements::kLikeFirst;
  int8_t dim_arg = -1;        // kReduction, kCat, kSplit, kIndexDim: the dim(s) argument
  int8_t keepdim_arg = -1;    // kReduction
  // kReduction: when the dims argument is absent, the last dim is reduced
  // (kthvalue, mode), not every dim (sum, median).
  bool reduces_last_by_default = false;
  // kLoss: `reduction` (0 none, 1 mean, 2 sum; default mean). A loss's
  // backward op (kIdentity) has it too: under a mean it divides by the
  // number of samples it sees, which on a device is its own share.
  int8_t reduction_arg = -1;
  int8_t lhs_arg = -1;        // kMatmul: the two matrices and the added term
  int8_t rhs_arg = -1;
  int8_t bias_arg = -1;
  int8_t operand_arg = 0;       // kEmbedding: the indices' argument
  int8_t output_mask_arg = -1;  // elements left out of `outputs` when masked off
  bool batched = false;         // kMatmul: bmm / baddbmm
  bool drops_dim = false;       // kIndexDim (select), kSplit (unbind)
  bool slices = false;          // kIndexDim: slice.Tensor (start, end, step follow dim)
  bool divides = false;         // div: operand 0 divided by argument 1
  bool multiplies = false;      // mul: operand 0 multiplied by argument 1
  MixKind mix = MixKind::kNone;
  int8_t mix_arg = -1;       // the argument holding the mixed dims
  int8_t mix_default = 0;    // kDimArg: the dim when the argument is absent (sort: -1)
  bool mix_has_default = false;
  bool mix_self_only = false;  // only operand 0's dims mix (gather: not the index's)
  // Arguments (a bit per position) that hold a value per sample of the
  // batch operand, aligned with it dim for dim from the left: a loss's input
  // and target, gather's self and index. A replicated one (a target or an
  // index made inside the step) is cut to each device's rows of the batch
  // (BatchDimAnalysis::cut_dim).
  uint8_t per_sample_args = 0;
  // Batch norm: the `training` argument's position. When it is true the op
  // normalises by statistics over the whole batch (its backward sums over
  // it), which each device can only compute for its own samples.
  int8_t training_arg = -1;
};

class OpRuleTable {
 public:
  OpRuleTable();
  // The rule of `target`; kUnknown when there is none.
  const OpRule& Find(absl::string_view target) const;

 private:
  absl::flat_hash_map<std::string, OpRule> rules_;
  OpRule unknown_;
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_DATA_PARALLEL_OP_RULES_H_

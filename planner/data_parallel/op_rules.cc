#include "planner/data_parallel/op_rules.h"

#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace partplan {
namespace {

OpRule Family(OpFamily family, Linearity linearity = Linearity::kNone) {
  OpRule rule;
  rule.family = family;
  rule.linearity = linearity;
  return rule;
}

OpRule Reduction(ReduceKind kind, int8_t dim_arg, int8_t keepdim_arg) {
  OpRule rule = Family(OpFamily::kReduction, kind == ReduceKind::kSum || kind == ReduceKind::kAvg
                                                 ? Linearity::kEveryOperand
                                                 : Linearity::kNone);
  rule.reduce = kind;
  rule.dim_arg = dim_arg;
  rule.keepdim_arg = keepdim_arg;
  return rule;
}

OpRule Identity(RestElements rest, int8_t output_mask_arg = -1) {
  OpRule rule = Family(OpFamily::kIdentity);
  rule.rest = rest;
  rule.output_mask_arg = output_mask_arg;
  return rule;
}

OpRule Matmul(int8_t lhs, int8_t rhs, int8_t bias, bool batched) {
  OpRule rule = Family(OpFamily::kMatmul, bias < 0 ? Linearity::kOneOperand : Linearity::kNone);
  rule.lhs_arg = lhs;
  rule.rhs_arg = rhs;
  rule.bias_arg = bias;
  rule.batched = batched;
  return rule;
}

OpRule Loss(int8_t reduction_arg) {
  OpRule rule = Family(OpFamily::kLoss);
  rule.per_sample_args = 0b11;  // input, target
  rule.reduction_arg = reduction_arg;
  rule.rest = RestElements::kLocalSum;
  return rule;
}

OpRule AlongDim(OpFamily family, int8_t dim_arg, bool drops_dim, bool slices = false) {
  OpRule rule =
      Family(family, family == OpFamily::kCat ? Linearity::kEveryOperand : Linearity::kNone);
  rule.dim_arg = dim_arg;
  rule.drops_dim = drops_dim;
  rule.slices = slices;
  return rule;
}

// An op that reorders or mixes values along the dims in argument `arg`.
OpRule Mixing(OpRule rule, MixKind kind, int8_t arg) {
  rule.mix = kind;
  rule.mix_arg = arg;
  return rule;
}

OpRule MixingWithDefault(OpRule rule, int8_t arg, int8_t default_dim) {
  rule = Mixing(rule, MixKind::kDimArg, arg);
  rule.mix_default = default_dim;
  rule.mix_has_default = true;
  return rule;
}

OpRule LossBackward(int8_t reduction_arg) {
  OpRule rule = Identity(RestElements::kLikeFirst);
  rule.per_sample_args = 0b111;  // grad_output (reduction=none), input, target
  rule.reduction_arg = reduction_arg;
  return rule;
}

OpRule BatchNorm(RestElements rest, int8_t training_arg, int8_t output_mask_arg = -1) {
  OpRule rule = Identity(rest, output_mask_arg);
  rule.training_arg = training_arg;
  return rule;
}

}  // namespace

OpRuleTable::OpRuleTable() {
  auto add = [this](std::initializer_list<const char*> targets, const OpRule& rule) {
    for (const char* target : targets) rules_[absl::StrCat("aten.", target)] = rule;
  };
  for (const char* getitem : {"operator.getitem", "_operator.getitem", "getitem"}) {
    rules_[getitem] = Family(OpFamily::kGetItem);
  }
  // The view-like ops (all linear).
  for (const char* view :
       {"squeeze.default", "squeeze.dim", "squeeze.dims", "unsqueeze.default", "view.default",
        "_unsafe_view.default", "reshape.default", "_reshape_alias.default", "flatten.using_ints",
        "expand.default", "permute.default", "repeat.default", "transpose.int", "t.default"}) {
    const std::string target = absl::StrCat("aten.", view);
    OpRule rule = Family(OpFamily::kView, Linearity::kEveryOperand);
    rule.view_op = *ViewOpOf(target);
    rules_[target] = rule;
  }
  // Elementwise ops. Copies, sums and differences are linear in every
  // operand, products in one, quotients in the numerator.
  add({"clone.default", "detach.default", "alias.default", "lift_fresh_copy.default",
       "_to_copy.default", "neg.default", "add.Tensor", "sub.Tensor", "rsub.Tensor"},
      Family(OpFamily::kPointwise, Linearity::kEveryOperand));
  {
    OpRule multiply = Family(OpFamily::kPointwise, Linearity::kOneOperand);
    multiply.multiplies = true;
    add({"mul.Tensor", "mul.Scalar"}, multiply);
  }
  {
    OpRule divide = Family(OpFamily::kPointwise, Linearity::kFirstOperand);
    divide.divides = true;
    add({"div.Tensor"}, divide);
    divide.linearity = Linearity::kOneOperand;
    add({"div.Scalar"}, divide);
  }
  add({"add.Scalar",
       "sub.Scalar",
       "rsub.Scalar",
       "div.Tensor_mode",
       "abs.default",
       "exp.default",
       "log.default",
       "log1p.default",
       "log2.default",
       "sqrt.default",
       "rsqrt.default",
       "reciprocal.default",
       "square.default",
       "pow.Tensor_Scalar",
       "pow.Tensor_Tensor",
       "pow.Scalar",
       "relu.default",
       "gelu.default",
       "gelu_backward.default",
       "silu.default",
       "silu_backward.default",
       "sigmoid.default",
       "sigmoid_backward.default",
       "tanh.default",
       "tanh_backward.default",
       "threshold.default",
       "threshold_backward.default",
       "hardtanh.default",
       "hardtanh_backward.default",
       "leaky_relu.default",
       "leaky_relu_backward.default",
       "elu.default",
       "elu_backward.default",
       "softplus.default",
       "softplus_backward.default",
       "clamp.default",
       "clamp_min.default",
       "clamp_max.default",
       "where.self",
       "masked_fill.Scalar",
       "masked_fill.Tensor",
       "eq.Tensor",
       "eq.Scalar",
       "ne.Tensor",
       "ne.Scalar",
       "lt.Tensor",
       "lt.Scalar",
       "le.Tensor",
       "le.Scalar",
       "gt.Tensor",
       "gt.Scalar",
       "ge.Tensor",
       "ge.Scalar",
       "logical_not.default",
       "logical_and.default",
       "logical_or.default",
       "bitwise_not.default",
       "sign.default",
       "sgn.default",
       "xlogy.Tensor",
       "xlogy.Scalar_Other",
       "xlogy.Scalar_Self",
       "remainder.Scalar",
       "remainder.Tensor",
       "fmod.Scalar",
       "fmod.Tensor",
       "isnan.default",
       "isinf.default",
       "isfinite.default",
       "nan_to_num.default",
       "hardswish.default",
       "hardswish_backward.default",
       "hardsigmoid.default",
       "hardsigmoid_backward.default",
       "mish.default",
       "sin.default",
       "cos.default",
       "erf.default",
       "maximum.default",
       "minimum.default",
       "addcmul.default",
       "addcdiv.default",
       "lerp.Scalar",
       "lerp.Tensor",
       "round.default",
       "floor.default",
       "ceil.default",
       "trunc.default",
       "native_dropout_backward.default",
       "fill.Scalar",
       "copy.default"},
      Family(OpFamily::kPointwise));
  // Softmax is elementwise in shape but normalises along `dim`.
  add({"_softmax.default", "_log_softmax.default"},
      Mixing(Family(OpFamily::kPointwise), MixKind::kDimArg, 1));
  add({"_softmax_backward_data.default", "_log_softmax_backward_data.default"},
      Mixing(Family(OpFamily::kPointwise), MixKind::kDimArg, 2));
  add({"ones_like.default", "zeros_like.default", "empty_like.default", "full_like.default",
       "rand_like.default", "randn_like.default", "zero.default"},
      Family(OpFamily::kFactoryLike));
  add({"zeros.default", "ones.default", "empty.memory_format", "full.default", "rand.default",
       "randn.default", "new_zeros.default", "new_ones.default", "new_empty.default",
       "new_full.default", "scalar_tensor.default"},
      Family(OpFamily::kFactory));
  // Normalisations, dropout and the backward ops whose first output is
  // shaped like an operand; output_mask drops elements from `outputs`.
  add({"native_dropout.default", "native_layer_norm.default"}, Identity(RestElements::kPerSample));
  // Batch norm in training mode: see `training_arg`; in eval mode it is
  // per sample (running statistics), and its statistics outputs are empty.
  add({"native_batch_norm.default", "_native_batch_norm_legit.default",
       "_native_batch_norm_legit_functional.default"},
      BatchNorm(RestElements::kBatchStatistics, 5));
  add({"_native_batch_norm_legit.no_stats"}, BatchNorm(RestElements::kBatchStatistics, 3));
  add({"_native_batch_norm_legit_no_training.default"}, Identity(RestElements::kContract));
  add({"native_group_norm.default"}, Identity(RestElements::kPerSample));
  add({"native_group_norm_backward.default"}, Identity(RestElements::kContract, 9));
  // Pooling, upsampling and padding keep N (and C) and resize the spatial
  // dims; their backward ops are shaped like their input.
  add({"max_pool2d_with_indices.default",
       "max_pool3d_with_indices.default",
       "avg_pool2d.default",
       "avg_pool3d.default",
       "_adaptive_avg_pool2d.default",
       "_adaptive_avg_pool3d.default",
       "adaptive_max_pool2d.default",
       "adaptive_max_pool3d.default",
       "upsample_nearest2d.default",
       "upsample_nearest2d.vec",
       "upsample_bilinear2d.default",
       "upsample_bilinear2d.vec",
       "constant_pad_nd.default",
       "reflection_pad2d.default",
       "replication_pad2d.default",
       "max_pool2d_with_indices_backward.default",
       "max_pool3d_with_indices_backward.default",
       "avg_pool2d_backward.default",
       "avg_pool3d_backward.default",
       "_adaptive_avg_pool2d_backward.default",
       "_adaptive_avg_pool3d_backward.default",
       "adaptive_max_pool2d_backward.default",
       "adaptive_max_pool3d_backward.default",
       "upsample_nearest2d_backward.default",
       "upsample_nearest2d_backward.vec",
       "upsample_bilinear2d_backward.default",
       "upsample_bilinear2d_backward.vec",
       "reflection_pad2d_backward.default",
       "replication_pad2d_backward.default"},
      Identity(RestElements::kLikeFirst));
  add({"native_layer_norm_backward.default"}, Identity(RestElements::kContract, 7));
  add({"native_batch_norm_backward.default"}, BatchNorm(RestElements::kContract, 7, 9));
  add({"convolution_backward.default"}, Identity(RestElements::kContract, 10));
  // Loss backward ops: the `reduction` argument's position.
  add({"nll_loss_backward.default", "nll_loss2d_backward.default",
       "binary_cross_entropy_backward.default"},
      LossBackward(4));
  add({"mse_loss_backward.default", "l1_loss_backward.default", "smooth_l1_loss_backward.default",
       "huber_loss_backward.default", "soft_margin_loss_backward.default"},
      LossBackward(3));
  // Reductions: (kind, dims argument, keepdim argument).
  add({"sum.default"}, Reduction(ReduceKind::kSum, -1, -1));
  add({"sum.dim_IntList"}, Reduction(ReduceKind::kSum, 1, 2));
  add({"mean.default"}, Reduction(ReduceKind::kAvg, -1, -1));
  add({"mean.dim"}, Reduction(ReduceKind::kAvg, 1, 2));
  add({"amax.default"}, Reduction(ReduceKind::kMax, 1, 2));
  add({"amin.default"}, Reduction(ReduceKind::kMin, 1, 2));
  add({"max.default"}, Reduction(ReduceKind::kMax, -1, -1));
  add({"min.default"}, Reduction(ReduceKind::kMin, -1, -1));
  add({"prod.default", "any.default", "all.default"}, Reduction(ReduceKind::kOther, -1, -1));
  add({"max.dim", "min.dim", "argmax.default", "argmin.default", "prod.dim_int",
       "logsumexp.default", "any.dim", "all.dim"},
      Reduction(ReduceKind::kOther, 1, 2));
  add({"median.default", "nanmedian.default"}, Reduction(ReduceKind::kOther, -1, -1));
  add({"median.dim", "nanmedian.dim"}, Reduction(ReduceKind::kOther, 1, 2));
  {
    // (values, indices) over `dim`, the last one when it is absent.
    OpRule kthvalue = Reduction(ReduceKind::kOther, 2, 3);
    kthvalue.reduces_last_by_default = true;
    add({"kthvalue.default"}, kthvalue);
    OpRule mode = Reduction(ReduceKind::kOther, 1, 2);
    mode.reduces_last_by_default = true;
    add({"mode.default"}, mode);
  }
  add({"var.correction", "std.correction", "var.dim", "std.dim"},
      Reduction(ReduceKind::kOther, 1, 3));
  add({"linalg_vector_norm.default", "norm.ScalarOpt_dim"}, Reduction(ReduceKind::kOther, 2, 3));
  // Matrix products: (lhs, rhs, added term, batched).
  add({"mm.default"}, Matmul(0, 1, -1, false));
  add({"bmm.default"}, Matmul(0, 1, -1, true));
  add({"addmm.default"}, Matmul(1, 2, 0, false));
  add({"baddbmm.default"}, Matmul(1, 2, 0, true));
  add({"convolution.default"}, Family(OpFamily::kConvolution));
  {
    OpRule embedding = Family(OpFamily::kEmbedding);
    embedding.operand_arg = 1;
    add({"embedding.default"}, embedding);
  }
  add({"embedding_dense_backward.default"}, Family(OpFamily::kContract));
  // Losses: the `reduction` argument's position.
  add({"nll_loss_forward.default", "nll_loss2d_forward.default", "binary_cross_entropy.default"},
      Loss(3));
  add({"mse_loss.default", "l1_loss.default", "smooth_l1_loss.default", "huber_loss.default",
       "soft_margin_loss.default"},
      Loss(2));
  add({"binary_cross_entropy_with_logits.default"}, Loss(4));
  // Concatenation, splitting and indexing along a dim.
  add({"cat.default"}, AlongDim(OpFamily::kCat, 1, false));
  // unsafe_split / unsafe_chunk: split's, without its aliasing checks
  // (nn.LSTMCell / GRUCell chunk their gates with them).
  add({"split.Tensor", "split_with_sizes.default", "unsafe_split.Tensor",
       "unsafe_split_with_sizes.default", "unsafe_chunk.default", "chunk.default"},
      AlongDim(OpFamily::kSplit, 2, false));
  add({"unbind.int"}, AlongDim(OpFamily::kSplit, 1, true));
  add({"select.int"}, AlongDim(OpFamily::kIndexDim, 1, true));
  add({"slice.Tensor"}, AlongDim(OpFamily::kIndexDim, 1, false, /*slices=*/true));
  add({"index_select.default"}, AlongDim(OpFamily::kIndexDim, 1, false));
  add({"select_backward.default"}, AlongDim(OpFamily::kIndexDimBackward, 2, true));
  add({"slice_backward.default"},
      AlongDim(OpFamily::kIndexDimBackward, 2, false, /*slices=*/true));
  // Ops that reorder or mix values along some dims and keep the others in
  // place: a batch dim among the mixed ones needs the whole batch (each
  // device would flip, sort or scan only its own rows).
  const OpRule keeps = Identity(RestElements::kLikeFirst);
  add({"flip.default"}, Mixing(keeps, MixKind::kDimArg, 1));
  add({"roll.default"}, Mixing(keeps, MixKind::kDimArgOrAll, 2));
  add({"cumsum.default", "cumprod.default", "cummax.default", "cummin.default",
       "logcumsumexp.default"},
      Mixing(keeps, MixKind::kDimArg, 1));
  add({"sort.default", "sort.stable", "argsort.default", "argsort.stable"},
      MixingWithDefault(keeps, 1, -1));
  add({"topk.default"}, MixingWithDefault(keeps, 2, -1));
  // gather / scatter / index_* along `dim`: the output is shaped like the
  // index (gather) or self; positions along `dim` move.
  {
    OpRule gather = Mixing(keeps, MixKind::kDimArg, 1);
    gather.mix_self_only = true;  // the index's rows pick per sample (an embedding-like lookup)
    gather.per_sample_args = 0b101;  // self, index
    add({"gather.default"}, gather);
  }
  {
    OpRule scatter = Mixing(keeps, MixKind::kDimArg, 1);
    scatter.per_sample_args = 0b1101;  // self, index, src
    add({"scatter.src", "scatter.value", "scatter.reduce", "scatter.value_reduce",
         "scatter_add.default", "scatter_reduce.two"},
        scatter);
  }
  add({"index_add.default", "index_copy.default", "index_fill.int_Scalar",
       "index_fill.int_Tensor"},
      Mixing(keeps, MixKind::kDimArg, 1));
  // tril / triu keep or zero an element by its row and column index.
  add({"tril.default", "triu.default"}, Mixing(keeps, MixKind::kLastTwoDims, -1));
  add({"index.Tensor"}, Mixing(Family(OpFamily::kUnknown), MixKind::kIndexedDims, 1));
  add({"rot90.default"}, Family(OpFamily::kRot90));
}

const OpRule& OpRuleTable::Find(absl::string_view target) const {
  absl::ConsumePrefix(&target, "torch.ops.");
  auto it = rules_.find(target);
  if (it != rules_.end()) return it->second;
  // An in-place op (`aten.relu_.default`, `aten.add_.Tensor`: the name ends
  // in `_`) computes what its functional form does and returns its self:
  // the functional form's rule. make_fx keeps them (nn.ReLU(inplace=True)).
  const size_t dot = target.rfind('.');
  if (dot == absl::string_view::npos || dot < 2 || target[dot - 1] != '_' ||
      target[dot - 2] == '_') {
    return unknown_;
  }
  std::string functional(target.substr(0, dot - 1));
  functional.append(target.substr(dot).data(), target.size() - dot);
  it = rules_.find(functional);
  return it == rules_.end() ? unknown_ : it->second;
}

}  // namespace partplan

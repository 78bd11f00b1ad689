"""Floating-point operation counts of common torch.fx nodes (one forward run).

Counts are FLOPs with a multiply-add counted as 2, from the shapes shape
propagation recorded:

| op | FLOPs |
|---|---|
| linear (nn.Linear, F.linear) | 2 * out_elems * in_features, + out_elems with a bias |
| conv (nn.ConvNd, F.convNd, aten.convolution) | 2 * out_elems * in_channels/groups * kernel elems, + out_elems with a bias |
| transposed conv | 2 * in_elems * out_channels/groups * kernel elems, + out_elems with a bias |
| matmul, mm, bmm, @ | 2 * out_elems * K (the contracted dimension) |
| addmm, baddbmm, addmv | 2 * out_elems * K + 2 * out_elems |
| elementwise arithmetic and activations (add, mul, relu, gelu, ...) | out_elems |
| softmax, log_softmax | 3 * elems |
| batch/layer/group/instance norm | 5 * elems |
| max/avg pooling | out_elems * kernel elems; adaptive: input elems |
| sum, mean, ... (reductions) | input elems |
| nn.MultiheadAttention | its projections, scores, softmax and weighted sum |

Views, copies, indexing, concatenation and embedding lookups count 0, as do
ops not listed (the field is then unset).
"""

import math
import operator
from typing import Any, Dict, Optional, Tuple

import torch
import torch.nn as nn
from torch.fx.node import Node
from torch.fx.passes.shape_prop import TensorMetadata

ELEMENTWISE = {
    "add", "sub", "mul", "truediv", "div", "floordiv", "mod", "pow", "neg", "rsub", "abs", "exp",
    "log", "sqrt", "rsqrt", "sin", "cos", "reciprocal", "clamp", "clamp_min", "clamp_max", "clip",
    "maximum", "minimum", "where", "relu", "relu6", "gelu", "silu", "sigmoid", "tanh", "elu",
    "leaky_relu", "hardswish", "hardsigmoid", "hardtanh", "softplus", "mish", "erf", "threshold",
    "iadd", "isub", "imul", "itruediv", "add_", "sub_", "mul_", "div_", "relu_", "sigmoid_",
    "tanh_", "hardtanh_", "square", "lt", "le", "gt", "ge", "eq", "ne", "logical_not", "sign",
    "masked_fill", "dropout",
}
SOFTMAX = {"softmax", "log_softmax", "_softmax", "_log_softmax"}
NORMS = {
    "layer_norm", "batch_norm", "group_norm", "instance_norm", "native_layer_norm",
    "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "native_group_norm",
}
REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "norm", "logsumexp"}
POOLS = {"max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
         "max_pool2d_with_indices", "max_pool3d_with_indices"}
ADAPTIVE_POOLS = {"adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
                  "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
                  "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "mean_dim"}
CONVS = {"conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d",
         "conv_transpose2d", "conv_transpose3d"}
MATMULS = {"matmul", "mm", "bmm", "__matmul__"}
ADDMMS = {"addmm", "baddbmm", "addmv", "addbmm"}

ACTIVATION_MODULES = (
    nn.ReLU, nn.ReLU6, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Tanh, nn.ELU, nn.LeakyReLU, nn.Hardswish,
    nn.Hardsigmoid, nn.Hardtanh, nn.Softplus, nn.Mish, nn.PReLU, nn.Threshold,
)
NORM_MODULES = (
    nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm,
    nn.modules.instancenorm._InstanceNorm, nn.LocalResponseNorm,
)
CONV_MODULES = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
CONV_TRANSPOSE_MODULES = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
POOL_MODULES = (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)
ADAPTIVE_POOL_MODULES = (
    nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d, nn.AdaptiveMaxPool1d,
    nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d,
)


def _numel(shape) -> int:
    return int(math.prod(shape))


def _meta(arg) -> Optional[TensorMetadata]:
    """The tensor metadata of a node argument holding one tensor."""
    if isinstance(arg, Node):
        meta = arg.meta.get("tensor_meta")
        if isinstance(meta, TensorMetadata):
            return meta
    return None


def _arg(node: Node, index: int, name: str, default=None):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _op_name(node: Node) -> str:
    """A plain operator name: `conv2d`, `add`, `mm`, ... for functions,
    methods and aten OpOverloads (`aten.add.Tensor` -> `add`)."""
    target = node.target
    if node.op == "call_method":
        return str(target)
    overload = getattr(target, "_overloadpacket", None)  # aten OpOverload
    if overload is not None:
        return getattr(overload, "__name__", str(overload)).split(".")[-1]
    if hasattr(target, "_qualified_op_name"):  # OpOverloadPacket
        return str(target._qualified_op_name).split("::")[-1]
    return getattr(target, "__name__", str(target))


def _kernel_elems(kernel, dims: int) -> int:
    if isinstance(kernel, int):
        return kernel**dims
    return _numel(kernel)


def _conv_flops(out_elems: int, in_elems: int, weight_shape, transposed: bool, bias: bool) -> float:
    per_output = _numel(weight_shape[1:])
    macs = (in_elems if transposed else out_elems) * per_output
    return 2.0 * macs + (out_elems if bias else 0)


def mha_flop_parts(module: nn.MultiheadAttention,
                   node: Node) -> Optional[Tuple[float, float, float]]:
    """(projections, attention matmuls, softmax) FLOPs of an
    nn.MultiheadAttention call, or None when its shapes are unknown."""
    query, key = _meta(_arg(node, 0, "query")), _meta(_arg(node, 1, "key"))
    if query is None or key is None:
        return None
    e = module.embed_dim
    tokens_q, tokens_k = _numel(query.shape) // e, _numel(key.shape) // e
    if len(query.shape) == 3:
        batch = query.shape[0] if module.batch_first else query.shape[1]
    else:
        batch = 1
    lq, lk = tokens_q // max(batch, 1), tokens_k // max(batch, 1)
    projections = 2.0 * tokens_q * e * e + 2.0 * 2 * tokens_k * e * e + 2.0 * tokens_q * e * e
    matmuls = 2.0 * 2 * batch * lq * lk * e
    softmax = 3.0 * batch * module.num_heads * lq * lk
    return projections, matmuls, softmax


def _mha_flops(module: nn.MultiheadAttention, node: Node) -> Optional[float]:
    parts = mha_flop_parts(module, node)
    return None if parts is None else parts[0] + (parts[1] + parts[2])


def module_flops(module: nn.Module, node: Node, out_elems: int) -> Optional[float]:
    x = _meta(_arg(node, 0, "input"))
    in_elems = _numel(x.shape) if x is not None else 0
    if isinstance(module, nn.Linear):
        return 2.0 * out_elems * module.in_features + (out_elems if module.bias is not None else 0)
    if isinstance(module, nn.Bilinear):
        return 2.0 * out_elems * module.in1_features * module.in2_features
    if isinstance(module, CONV_MODULES):
        return _conv_flops(out_elems, in_elems, module.weight.shape, False, module.bias is not None)
    if isinstance(module, CONV_TRANSPOSE_MODULES):
        return _conv_flops(out_elems, in_elems, module.weight.shape, True, module.bias is not None)
    if isinstance(module, nn.MultiheadAttention):
        return _mha_flops(module, node)
    if isinstance(module, ACTIVATION_MODULES):
        return float(out_elems)
    if isinstance(module, (nn.Softmax, nn.LogSoftmax)):
        return 3.0 * out_elems
    if isinstance(module, NORM_MODULES):
        return 5.0 * out_elems
    if isinstance(module, POOL_MODULES):
        dims = len(x.shape) - 2 if x is not None else 2
        return float(out_elems * _kernel_elems(module.kernel_size, max(dims, 1)))
    if isinstance(module, ADAPTIVE_POOL_MODULES):
        return float(in_elems)
    return None


def function_flops(node: Node, out_elems: int) -> Optional[float]:
    name = _op_name(node)
    if name in ("linear",):
        weight = _meta(_arg(node, 1, "weight"))
        if weight is None:
            return None
        bias = _arg(node, 2, "bias") is not None
        return 2.0 * out_elems * weight.shape[-1] + (out_elems if bias else 0)
    if name in CONVS:
        x, weight = _meta(_arg(node, 0, "input")), _meta(_arg(node, 1, "weight"))
        if x is None or weight is None:
            return None
        transposed = name.startswith("conv_transpose") or (
            name in ("convolution", "_convolution") and bool(_arg(node, 6, "transposed", False)))
        bias = _arg(node, 2, "bias") is not None
        return _conv_flops(out_elems, _numel(x.shape), weight.shape, transposed, bias)
    if name in MATMULS or (node.target is operator.matmul):
        a = _meta(node.args[0]) if node.args else None
        if a is None or not a.shape:
            return None
        return 2.0 * out_elems * a.shape[-1]
    if name in ADDMMS:
        a = _meta(_arg(node, 1, "mat1" if name == "addmm" else "batch1"))
        if a is None or not a.shape:
            return None
        return 2.0 * out_elems * a.shape[-1] + 2.0 * out_elems
    if name in ELEMENTWISE:
        return float(out_elems)
    if name in SOFTMAX:
        return 3.0 * out_elems
    if name in NORMS:
        x = _meta(_arg(node, 0, "input"))
        return 5.0 * (_numel(x.shape) if x is not None else out_elems)
    if name in REDUCTIONS:
        x = _meta(_arg(node, 0, "input"))
        return float(_numel(x.shape)) if x is not None else None
    if name in POOLS:
        x = _meta(_arg(node, 0, "input"))
        kernel = _arg(node, 1, "kernel_size")
        if kernel is None or isinstance(kernel, Node):
            return None
        dims = len(x.shape) - 2 if x is not None else 2
        return float(out_elems * _kernel_elems(kernel, max(dims, 1)))
    if name in ADAPTIVE_POOLS:
        x = _meta(_arg(node, 0, "input"))
        return float(_numel(x.shape)) if x is not None else None
    return None


def node_flops(gm: torch.fx.GraphModule, node: Node, modules: Dict[str, nn.Module]) -> float:
    """The node's FLOPs, 0 when not known (see the module docstring)."""
    if node.op not in ("call_module", "call_function", "call_method"):
        return 0.0
    meta = node.meta.get("tensor_meta")
    if isinstance(meta, TensorMetadata):
        out_elems = _numel(meta.shape)
    elif isinstance(meta, (tuple, list)) and meta and isinstance(meta[0], TensorMetadata):
        out_elems = _numel(meta[0].shape)
    else:
        return 0.0
    try:
        if node.op == "call_module":
            flops = module_flops(modules[node.target], node, out_elems)
        else:
            flops = function_flops(node, out_elems)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return 0.0
    return float(flops) if flops else 0.0

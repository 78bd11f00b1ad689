"""torch.fx graphs -> partplan.v1.Graph.

    gm = partplan.trace(model, leaf_modules=[MyBlock])   # torch.fx.symbolic_trace
    graph = partplan.export(gm, (x,))                    # a partplan.v1.Graph
    graph = partplan.export(gm, (x,), training=True)     # + Node.training
    aten = partplan.export_aten(model, (x,))             # make_fx, for PlanDataParallel

`export` traces (unless given a GraphModule), runs torch.fx's ShapeProp on
the example inputs and encodes every node:

- name, op, target (`torch.relu`, `operator.add`, `torch.nn.functional.linear`,
  a method name, a module path), and the flat argument encoding of
  graph.proto (`(x, [y, 2])` -> tuple 2, node x, list 2, node y, int 2);
- output shapes and dtypes, one entry per tensor of a tuple output;
- `size_bytes` exactly as torch.fx's `get_size_of_all_nodes` computes it
  (output elements x element size, plus the parameters of a call_module at
  the output's element size). Where torch.fx cannot size a node (a tuple
  output, a non-tensor result) the sizes follow the server's rule: tuple
  elements add up, the parameters count at the first element's size, and a
  node without tensors needs 0 bytes;
- parameter counts and bytes (call_module: the submodule's parameters;
  get_attr: the tensor read), the submodule's class (`module_type`);
- FLOPs of common ops (see flops.py);
- the module hierarchy (`Graph.modules`) of the model;
- with training=True, each node's costs in a training step
  (`Node.training`, see training_costs.py), on every node:
  - `saved_activation_bytes`, measured: the model's forward runs once more,
    with grad enabled, under a torch.fx Interpreter that enters
    torch.autograd.graph.saved_tensors_hooks around each node, and each
    node is charged the storages autograd saves while it runs (a call_module
    node: everything its forward saves). A storage counts whole (a saved
    view keeps all of it alive), once, for the first node that saves it,
    and not at all when it is a parameter's, a buffer's or a get_attr
    tensor's. The nodes' bytes add up to the bytes autograd keeps alive
    between the forward and the backward; a node that saves nothing has 0;
  - `resaved`: the storages the node saves too that an earlier node saved
    first (charged there), one entry per storage: that node's name, the
    storage's index among the storages that node saved first, its bytes
    (e.g. a Linear after a ReLU: the ReLU, 0, the ReLU output's bytes). A
    pipeline stage keeps its own copy of every storage its nodes save, so a
    cut between two savers holds the storage on both stages;
  - `backward_input_flops` and `backward_weight_flops`, estimated from the
    forward FLOPs where those are known (and flops=True): for a
    matmul-like op (linear, conv, matmul, bmm, addmm, ...) each operand's
    gradient costs the forward's FLOPs, going to the weight gradient for a
    trainable weight and to the input gradient for an activation (Linear:
    input F, weight F); for any other op the input gradient is the
    forward's FLOPs, and so is the weight gradient when the op has
    trainable weights (a norm's affine parameters), else 0.
  What autograd saves depends on the module's mode (dropout saves its mask
  only in training mode) and on what requires grad (a Linear saves its
  input only when its weight requires grad): export the model in the mode
  it is trained in, with example inputs that require grad where the
  training step's would. The measuring run costs one more forward with
  grad enabled, plus a Python hook per saved tensor.

Shape propagation runs the model once under torch.no_grad() and restores its
buffers afterwards (BatchNorm running statistics in training mode), so
exporting has no effect on the model. The measuring run of training=True
restores the buffers too, and the random number generators (dropout), and
keeps no autograd graph.

`graph_to_dict` returns the same graph as a proto3 JSON dict without
tracing or running anything: tests/fixtures/partitioner/generate.py's
encoding.
"""

import builtins
import contextlib
import functools
import io
import math
import operator
import weakref
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from google.protobuf import json_format
from torch.fx.node import Node
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

from . import flops as flops_mod
from . import graph_io
from . import training_costs
from .messages import Graph

OP_NAMES = {
    "placeholder": "PLACEHOLDER",
    "get_attr": "GET_ATTR",
    "call_function": "CALL_FUNCTION",
    "call_method": "CALL_METHOD",
    "call_module": "CALL_MODULE",
    "output": "OUTPUT",
}

# trace() remembers the module it traced, so that export() of the GraphModule
# reports the model's own module hierarchy (a GraphModule keeps only the
# submodules it calls, and replaces their containers by plain nn.Modules).
_TRACED_ROOTS: "weakref.WeakKeyDictionary[torch.fx.GraphModule, weakref.ref]" = weakref.WeakKeyDictionary()


# ---------------------------------------------------------------------------
# Tracing.
# ---------------------------------------------------------------------------


class _Tracer(torch.fx.Tracer):
    """torch.fx's Tracer with extra leaf modules, by class or qualified name."""

    def __init__(self, leaf_classes: Tuple[type, ...], leaf_names: frozenset, **kwargs):
        super().__init__(**kwargs)
        self._leaf_classes = leaf_classes
        self._leaf_names = leaf_names

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        if self._leaf_classes and isinstance(m, self._leaf_classes):
            return True
        if module_qualified_name in self._leaf_names:
            return True
        return super().is_leaf_module(m, module_qualified_name)


def _proxy_iter_py311(self):
    """torch.fx.Proxy.__iter__ of torch >= 2.0: finds the calling instruction
    by its offset. torch 1.13's indexes the instruction list with
    f_lasti // 2, which Python 3.11's inline caches break, so that
    `a, b = proxy` fails to trace ("Proxy object cannot be iterated")."""
    import bisect
    import dis
    import inspect

    frame = inspect.currentframe()
    calling_frame = frame.f_back
    instructions = list(dis.get_instructions(calling_frame.f_code))
    index = bisect.bisect_left([i.offset for i in instructions], calling_frame.f_lasti)
    if index < len(instructions) and instructions[index].opname == "UNPACK_SEQUENCE":
        return (self[i] for i in range(instructions[index].argval))
    return self.tracer.iter(self)


@contextlib.contextmanager
def _tracing_fixes():
    """Fixes torch.fx 1.13's tuple unpacking of proxies on Python >= 3.11
    (torchvision's shufflenet, ViT, ...) for the duration of a trace."""
    import sys

    if sys.version_info < (3, 11) or int(torch.__version__.split(".")[0]) >= 2:
        yield
        return
    original = torch.fx.Proxy.__iter__
    torch.fx.Proxy.__iter__ = _proxy_iter_py311
    try:
        yield
    finally:
        torch.fx.Proxy.__iter__ = original


def trace(
    module: nn.Module,
    *,
    leaf_modules: Iterable[Union[type, str]] = (),
    autowrap_functions: Iterable[Callable] = (),
    concrete_args: Optional[Dict[str, Any]] = None,
) -> torch.fx.GraphModule:
    """torch.fx.symbolic_trace, with more leaf modules.

    leaf_modules: module classes (every instance is a leaf) or qualified
      names (`layer1.0`) that are called as one node instead of traced
      through. torch.nn's own modules are always leaves, as in torch.fx.
    autowrap_functions: functions recorded as calls instead of traced.
    concrete_args: forward() arguments fixed to values (torch.fx's).
    """
    if isinstance(module, torch.fx.GraphModule) and not leaf_modules and not concrete_args:
        return module
    classes = tuple(m for m in leaf_modules if isinstance(m, type))
    names = frozenset(m for m in leaf_modules if isinstance(m, str))
    bad = [m for m in leaf_modules if not isinstance(m, (type, str))]
    if bad:
        raise TypeError(f"leaf_modules takes module classes or qualified names, got {bad!r}")
    tracer = _Tracer(classes, names, autowrap_functions=tuple(autowrap_functions))
    with _tracing_fixes():
        graph = tracer.trace(module, concrete_args)
    name = module.__class__.__name__ if isinstance(module, nn.Module) else module.__name__
    gm = torch.fx.GraphModule(tracer.root, graph, name)
    if isinstance(module, nn.Module):
        _TRACED_ROOTS[gm] = weakref.ref(module)
    return gm


# ---------------------------------------------------------------------------
# Shape propagation without side effects.
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def _buffers_restored(module: nn.Module):
    saved = [(b, b.detach().clone()) for b in module.buffers()]
    try:
        yield
    finally:
        with torch.no_grad():
            for b, value in saved:
                if b.shape == value.shape:
                    b.copy_(value)


class ExampleInputsError(ValueError):
    """The model does not run on the example inputs given to export (a shape
    or dtype it cannot take): the node where it stopped and the error."""


def _run_shape_prop(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
    """ShapeProp(gm).propagate(*example_inputs). ShapeProp prints the
    traceback of a node that fails before it raises its own RuntimeError;
    that print is kept back, and the failure is an ExampleInputsError naming
    the node and the model's own error."""
    class _Tracked(ShapeProp):
        node: Optional[Node] = None

        def run_node(self, n: Node) -> Any:
            self.node = n
            return super().run_node(n)

    prop = _Tracked(gm)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            return prop.propagate(*example_inputs)
    except RuntimeError as e:
        cause = e.__context__
        if cause is None or prop.node is None or not str(e).startswith("ShapeProp error"):
            raise
        raise ExampleInputsError(
            f"the model does not run on the example inputs: {type(cause).__name__}: {cause} "
            f"(at node '{prop.node.name}', {prop.node.op} "
            f"{getattr(prop.node.target, '__qualname__', prop.node.target)})") from cause


def propagate_shapes(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
    """torch.fx's ShapeProp over `example_inputs`, under no_grad, with the
    module's buffers restored afterwards. Returns the module's output;
    ExampleInputsError when the model does not run on them."""
    with _buffers_restored(gm), torch.no_grad():
        return _run_shape_prop(gm, example_inputs)


def _rng_devices(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> List[int]:
    tensors = list(gm.parameters()) + list(gm.buffers())
    torch.fx.node.map_aggregate(
        tuple(example_inputs),
        lambda a: tensors.append(a) if isinstance(a, torch.Tensor) else None)
    return sorted({t.device.index or 0 for t in tensors if t.device.type == "cuda"})


def measure_training(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Dict[str, int]:
    """training_costs.measure_saved_activations without side effects: the
    module's buffers and the random number generators are restored after
    the run. Returns {node name: saved activation bytes} and records them in
    node.meta for graph_to_dict(training=True)."""
    with _buffers_restored(gm), torch.random.fork_rng(devices=_rng_devices(gm, example_inputs)):
        return training_costs.measure_saved_activations(gm, example_inputs)


def _as_inputs(example_inputs) -> Tuple[Any, ...]:
    if example_inputs is None:
        return ()
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    return tuple(example_inputs)


# ---------------------------------------------------------------------------
# Encoding (proto3 JSON dicts, as tests/fixtures/partitioner/generate.py
# writes them; the Graph message is parsed from them).
# ---------------------------------------------------------------------------


def qualified_function_name(fn) -> str:
    """`torch.relu`, `operator.add`, `torch.nn.functional.linear`,
    `aten.mm.default` for a call_function target."""
    if isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(fn)
    name = getattr(fn, "__name__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    if module == "_operator":
        module = "operator"
    if module and module.startswith("torch") and ("._" in module or module == "torch.functional"):
        # A private home (torch._C._nn.linear, torch.functional.split): use
        # the public alias.
        for public, mod in (("torch.nn.functional", F), ("torch", torch)):
            if getattr(mod, name, None) is fn:
                module = public
                break
    if module is None:
        for public, mod in (("torch", torch), ("torch.nn.functional", F), ("operator", operator),
                            ("builtins", builtins)):
            if getattr(mod, name, None) is fn:
                module = public
                break
    return f"{module}.{name}" if module else name


def module_type_name(m: nn.Module) -> str:
    """`torch.nn.Linear` for torch.nn's classes, `<module>.<class>` otherwise."""
    cls = type(m)
    if cls.__module__.startswith("torch.nn.") and getattr(nn, cls.__name__, None) is cls:
        return f"torch.nn.{cls.__name__}"
    return f"{cls.__module__}.{cls.__name__}"


def encode_float(x: float):
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _contains_node(arg) -> bool:
    found = []
    torch.fx.node.map_aggregate(arg, lambda a: found.append(a) if isinstance(a, Node) else None)
    return bool(found)


def flat_values(arg, out: List[Dict[str, Any]]) -> None:
    """Appends the flat pre-order encoding of one argument (graph.proto's Value)."""
    if isinstance(arg, Node):
        out.append({"node": arg.name})
    elif isinstance(arg, bool):
        out.append({"bool": arg})
    elif isinstance(arg, int):
        out.append({"int": str(arg)})
    elif isinstance(arg, float):
        out.append({"float": encode_float(arg)})
    elif isinstance(arg, str):
        out.append({"string": arg})
    elif arg is None:
        out.append({"none": True})
    elif isinstance(arg, list):
        out.append({"list": len(arg)})
        for a in arg:
            flat_values(a, out)
    elif type(arg) is tuple:
        out.append({"tuple": len(arg)})
        for a in arg:
            flat_values(a, out)
    elif isinstance(arg, slice) and _contains_node(arg):
        # No Value kind holds a slice; keep the nodes it refers to as a
        # (start, stop, step) tuple so that no dependency is lost.
        flat_values((arg.start, arg.stop, arg.step), out)
    elif isinstance(arg, dict) and _contains_node(arg):
        flat_values(tuple(x for kv in arg.items() for x in kv), out)
    elif isinstance(arg, tuple) and _contains_node(arg):  # a named tuple
        flat_values(tuple(arg), out)
    else:
        out.append({"repr": repr(arg)})


def _flatten_metas(meta) -> List[TensorMetadata]:
    if isinstance(meta, TensorMetadata):
        return [meta]
    out: List[TensorMetadata] = []
    if isinstance(meta, (tuple, list)):
        for m in meta:
            out.extend(_flatten_metas(m))
    elif isinstance(meta, dict):
        for m in meta.values():
            out.extend(_flatten_metas(m))
    return out


def tensor_metas(meta) -> List[Dict[str, Any]]:
    return [{"shape": [str(d) for d in m.shape], "dtype": str(m.dtype)} for m in _flatten_metas(meta)]


def element_size(meta: TensorMetadata) -> int:
    """Bytes per element, as torch.fx's get_size_of_node takes it."""
    return _element_size(meta.dtype, meta.is_quantized)


@functools.lru_cache(maxsize=None)
def _element_size(dtype: torch.dtype, quantized: bool) -> int:
    # A tensor per node would cost more than the rest of its encoding.
    if quantized:
        return torch._empty_affine_quantized([], dtype=dtype).element_size()
    return torch.tensor([], dtype=dtype).element_size()


def node_sizes(gm: torch.fx.GraphModule, node: Node, modules: Dict[str, nn.Module],
               parameter_count: Optional[int] = None) -> Tuple[int, int]:
    """(output bytes, total bytes): torch.fx's get_size_of_node where it
    works, and the server's rule for tuple and non-tensor outputs.
    parameter_count: a call_module node's, when already counted."""
    metas = _flatten_metas(node.meta.get("tensor_meta"))
    if not metas:
        return 0, 0
    output = sum(element_size(m) * m.shape.numel() for m in metas)
    total = output
    if node.op == "call_module":
        if parameter_count is None:
            parameter_count = _parameter_totals(modules[node.target])[0]
        total += parameter_count * element_size(metas[0])
    return output, total


def resolve_attr(root: nn.Module, target: str):
    obj = root
    for atom in target.split("."):
        obj = getattr(obj, atom)
    return obj


def _parameter_totals(module: nn.Module, cache: Optional[Dict[int, Tuple[int, int]]] = None
                      ) -> Tuple[int, int]:
    """(parameters, their bytes) of `module` and its submodules; `cache`, by
    id(module), shares the count between a node and the module list."""
    key = id(module)
    if cache is not None and key in cache:
        return cache[key]
    if module._modules:
        params = list(module.parameters())
    else:
        # A leaf's own parameters (once each), without parameters()'s walk.
        params = list({id(p): p for p in module._parameters.values() if p is not None}.values())
    totals = sum(p.numel() for p in params), sum(p.numel() * p.element_size() for p in params)
    if cache is not None:
        cache[key] = totals
    return totals


def encode_node(
    gm: torch.fx.GraphModule,
    node: Node,
    *,
    modules: Optional[Dict[str, nn.Module]] = None,
    sizes: bool = True,
    flops: bool = True,
    training: bool = False,
    parameter_totals: Optional[Dict[int, Tuple[int, int]]] = None,
) -> Dict[str, Any]:
    """One node as a proto3 JSON dict of partplan.v1.Node. parameter_totals:
    a cache of each module's parameter count and bytes, shared by the nodes
    of one graph. training: fill
    `training` from node.meta["saved_activation_bytes"] and
    node.meta["resaved_storages"] (which
    training_costs.measure_saved_activations records) and, with flops, the
    backward FLOPs."""
    if modules is None:
        modules = dict(gm.named_modules())
    d: Dict[str, Any] = {"name": node.name, "op": OP_NAMES[node.op]}
    if node.op == "call_function":
        d["target"] = qualified_function_name(node.target)
    else:
        d["target"] = str(node.target)
    args: List[Dict[str, Any]] = []
    for a in node.args:
        flat_values(a, args)
    if args:
        d["args"] = args
    if node.kwargs:
        kws = []
        for k, v in node.kwargs.items():
            val: List[Dict[str, Any]] = []
            flat_values(v, val)
            kws.append({"name": k, "value": val})
        d["kwargs"] = kws
    outs = tensor_metas(node.meta.get("tensor_meta"))
    if outs:
        d["outputs"] = outs
    parameters = (_parameter_totals(modules[node.target], parameter_totals)
                  if node.op == "call_module" else None)
    if sizes and node.op != "output":
        output, total = node_sizes(gm, node, modules,
                                   parameter_count=parameters[0] if parameters else None)
        d["sizeBytes"] = {"totalBytes": str(total), "outputBytes": str(output)}
    if node.op == "call_module":
        d["parameterCount"] = str(parameters[0])
        d["parameterBytes"] = str(parameters[1])
        d["moduleType"] = module_type_name(modules[node.target])
    elif node.op == "get_attr":
        attr = resolve_attr(gm, node.target)
        if isinstance(attr, torch.Tensor):
            d["parameterCount"] = str(attr.numel())
            d["parameterBytes"] = str(attr.numel() * attr.element_size())
    count = flops_mod.node_flops(gm, node, modules) if flops else 0.0
    if count:
        d["flops"] = encode_float(count)
    if training:
        if training_costs.META_KEY not in node.meta:
            raise ValueError(
                f"node '{node.name}' has no measured saved activations: run "
                "partplan.training_costs.measure_saved_activations(gm, example_inputs) first, "
                "or export(..., training=True)")
        costs: Dict[str, Any] = {"savedActivationBytes": str(node.meta[training_costs.META_KEY])}
        resaved = node.meta.get(training_costs.RESAVED_META_KEY)
        if resaved:
            costs["resaved"] = [{"node": r.node, "storage": int(r.storage), "bytes": str(r.bytes)}
                                for r in resaved]
        backward_input, backward_weight = training_costs.backward_flops(gm, node, modules, count)
        if backward_input:
            costs["backwardInputFlops"] = encode_float(backward_input)
        if backward_weight:
            costs["backwardWeightFlops"] = encode_float(backward_weight)
        d["training"] = costs
    return d


def encode_modules(root: nn.Module, parameter_totals: Optional[Dict[int, Tuple[int, int]]] = None
                   ) -> List[Dict[str, Any]]:
    """The module hierarchy (named_modules(): parents before children)."""
    out = []
    for qualified_name, module in root.named_modules():
        count, nbytes = _parameter_totals(module, parameter_totals)
        entry: Dict[str, Any] = {"moduleType": module_type_name(module)}
        if qualified_name:
            entry = {"qualifiedName": qualified_name, **entry}
        if count:
            entry["parameterCount"] = str(count)
            entry["parameterBytes"] = str(nbytes)
        out.append(entry)
    return out


def graph_to_dict(
    gm: torch.fx.GraphModule,
    *,
    name: str = "",
    sizes: bool = True,
    flops: bool = True,
    modules: bool = True,
    root: Optional[nn.Module] = None,
    training: bool = False,
) -> Dict[str, Any]:
    """The Graph of a GraphModule whose shapes are already propagated, as a
    proto3 JSON dict. Nothing is traced or run.

    sizes/flops: fill `sizeBytes` / `flops`. modules: fill `modules` with the
    hierarchy of `root` (by default the module gm was traced from by
    partplan.trace, else gm itself). training: fill every node's `training`
    from the saved activations training_costs.measure_saved_activations
    recorded in node.meta (ValueError when they are missing), and the
    backward FLOPs when flops is set."""
    submodules = dict(gm.named_modules())
    totals: Dict[int, Tuple[int, int]] = {}
    d: Dict[str, Any] = {}
    if name:
        d["name"] = name
    d["nodes"] = [encode_node(gm, n, modules=submodules, sizes=sizes, flops=flops,
                              training=training, parameter_totals=totals)
                  for n in gm.graph.nodes]
    if modules:
        if root is None:
            ref = _TRACED_ROOTS.get(gm)
            root = ref() if ref is not None else None
        d["modules"] = encode_modules(root if root is not None else gm, totals)
    return d


def _has_shapes(gm: torch.fx.GraphModule) -> bool:
    return any("tensor_meta" in n.meta for n in gm.graph.nodes)


def export(
    module: nn.Module,
    example_inputs: Union[None, torch.Tensor, Sequence[Any]] = None,
    *,
    leaf_modules: Iterable[Union[type, str]] = (),
    autowrap_functions: Iterable[Callable] = (),
    concrete_args: Optional[Dict[str, Any]] = None,
    name: Optional[str] = None,
    flops: bool = True,
    modules: bool = True,
    root: Optional[nn.Module] = None,
    training: bool = False,
) -> Graph:
    """A partplan.v1.Graph of a model.

    module: an nn.Module (traced with partplan.trace) or a GraphModule (used
      as it is; pass that same GraphModule to apply_plan later).
    example_inputs: the forward() arguments (a tensor or a sequence) that
      shape propagation runs the model on. May be omitted for a GraphModule
      whose nodes already carry ShapeProp's tensor_meta.
    leaf_modules, autowrap_functions, concrete_args: see trace().
    name: Graph.name (default: the model's class name).
    flops: fill Node.flops. modules: fill Graph.modules.
    root: the model whose hierarchy Graph.modules lists (default: the
      model traced).
    training: fill every node's Node.training: the bytes autograd saves
      for the node's backward, measured by running the forward once more
      with grad enabled (see the module docstring and training_costs.py;
      example_inputs are then required), and the backward FLOPs when flops
      is set. Export in the mode the model is trained in (model.train()),
      with inputs that require grad where the training step's do.
      ValueError when nothing requires grad; training_costs.TrainingRunError
      naming the node when the forward fails with grad enabled.
    """
    if isinstance(module, torch.fx.GraphModule) and not leaf_modules and not concrete_args:
        gm = module
    else:
        gm = trace(module, leaf_modules=leaf_modules, autowrap_functions=autowrap_functions,
                   concrete_args=concrete_args)
    inputs = _as_inputs(example_inputs)
    has_placeholders = any(n.op == "placeholder" for n in gm.graph.nodes)
    if inputs or not _has_shapes(gm):
        if not inputs and has_placeholders:
            raise ValueError(
                "export needs example_inputs (the forward() arguments) to propagate shapes")
        propagate_shapes(gm, inputs)
    if training:
        if not inputs and has_placeholders:
            raise ValueError(
                "export(training=True) needs example_inputs (the forward() arguments) to "
                "measure the activations autograd saves")
        measure_training(gm, inputs)
    if root is None and not isinstance(module, torch.fx.GraphModule):
        root = module
    if name is None:
        source = root if root is not None else module
        name = type(source).__name__
    doc = graph_to_dict(gm, name=name, flops=flops, modules=modules, root=root,
                        training=training)
    return graph_io.message_from_dict(doc, Graph())


# ---------------------------------------------------------------------------
# aten-level export (make_fx) for PlanDataParallel.
# ---------------------------------------------------------------------------


class AtenExport(NamedTuple):
    """What export_aten returns.

    graph: the partplan.v1.Graph of the aten graph.
    roles: {placeholder name: "PARAMETER" | "ACTIVATION"} for
      PlanDataParallelRequest.roles (buffers count as parameters).
    graph_module: the make_fx GraphModule; call it with
      (*parameters, *buffers, *inputs).
    parameter_names: {placeholder name: the parameter's or buffer's
      qualified name in the model}.
    """

    graph: Graph
    roles: Dict[str, str]
    graph_module: torch.fx.GraphModule
    parameter_names: Dict[str, str]


def export_aten(
    module: nn.Module,
    example_inputs: Union[torch.Tensor, Sequence[torch.Tensor]],
    *,
    with_backward: bool = False,
    loss_fn: Optional[Callable[[Any], torch.Tensor]] = None,
    name: Optional[str] = None,
    flops: bool = True,
) -> AtenExport:
    """An aten-level graph of `module` traced with make_fx.

    The parameters and buffers become placeholders (in named_parameters()
    then named_buffers() order, before the inputs) so that PlanDataParallel
    can tell them from activations. With with_backward, the graph also
    computes the gradients of loss_fn(output) (default: output.sum()) with
    respect to the parameters, and returns (output, *gradients).
    """
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.utils import stateless

    inputs = _as_inputs(example_inputs)
    param_items = list(module.named_parameters())
    buffer_items = list(module.named_buffers())
    n_params, n_buffers = len(param_items), len(buffer_items)
    names = [n for n, _ in param_items] + [n for n, _ in buffer_items]

    def run(*flat):
        state = dict(zip(names, flat[: n_params + n_buffers]))
        return stateless.functional_call(module, state, tuple(flat[n_params + n_buffers:]))

    if with_backward:
        def step(*flat):
            params = flat[:n_params]
            out = run(*flat)
            loss = loss_fn(out) if loss_fn is not None else out.sum()
            grads = torch.autograd.grad(loss, params, allow_unused=True)
            return (out,) + tuple(g for g in grads if g is not None)

        fn = step
        flat_args = [p.detach().requires_grad_(True) for _, p in param_items]
    else:
        def forward(*flat):
            with torch.no_grad():
                return run(*flat)

        fn = forward
        flat_args = [p.detach() for _, p in param_items]
    flat_args += [b.detach().clone() for _, b in buffer_items] + list(inputs)
    with _buffers_restored(module):
        gm = make_fx(fn)(*flat_args)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    roles: Dict[str, str] = {}
    parameter_names: Dict[str, str] = {}
    for i, node in enumerate(placeholders):
        if i < n_params + n_buffers:
            roles[node.name] = "PARAMETER"
            parameter_names[node.name] = names[i]
        else:
            roles[node.name] = "ACTIVATION"
    # make_fx records tensor_meta only for nodes whose value is a tensor: a
    # tuple-valued node (native_batch_norm, max_pool2d_with_indices, ...)
    # gets none, and graph.proto wants one TensorMeta per element. ShapeProp
    # records every value, tuples included, so run it when any node lacks one.
    if not all("tensor_meta" in n.meta for n in gm.graph.nodes if n.op != "output"):
        with torch.no_grad():
            _run_shape_prop(gm, flat_args)
    doc = graph_to_dict(gm, name=name or f"{type(module).__name__}_aten", flops=flops, modules=False)
    return AtenExport(graph_io.message_from_dict(doc, Graph()), roles, gm, parameter_names)

"""A node's costs in a training step: the bytes autograd saves for its
backward, measured, and its backward FLOPs, estimated from the forward's.

Saved activations (`measure_saved_activations`)
------------------------------------------------
The traced module's forward runs once, with grad enabled, under a
torch.fx Interpreter that enters `torch.autograd.graph.saved_tensors_hooks`
around each node. Every tensor autograd saves while a node runs (for a
call_module, everything its forward saves, functional calls inside it
included) is charged to that node, counted as autograd keeps it alive:

- by storage: a saved view keeps its whole storage alive, so the node is
  charged the storage's nbytes, not the view's elements (a slice of a big
  tensor costs the big tensor);
- once: storages are keyed by (device, data_ptr), and a storage that several
  nodes save (or one node saves twice) is charged to the first node that
  saves it, so the nodes' bytes add up to the bytes alive at the end of the
  forward. Every saved tensor is held until the run ends, so that no storage
  is freed and its address reused by another within the run;
- re-saves recorded: a later node that saves a storage an earlier node saved
  first (a ReLU saves its output, the next Linear the same tensor as its
  input) is charged nothing for it, but gets one `ResavedStorage` entry per
  such storage (`resaved_storages`): the first saver's name, the storage's
  index among the storages that node saved first (0, 1, ... in the order it
  first saved them) and its bytes. A pipeline stage keeps its own copy of
  every storage one of its nodes saves, so a planner that cuts between two
  savers charges both stages. A node saving its own storage again, or a
  storage twice, adds no entry;
- activations only: storages of the module's parameters, buffers and get_attr
  tensors (a Linear's weight, its transposed view, a BatchNorm's running
  statistics) are model state, not per micro-batch, and are not counted. The
  example inputs are counted where an op saves them;
- whatever autograd saves, nothing left out: CPU dropout's mask (the same
  size as its input), a 0-dim float64 scalar of nn.MultiheadAttention's
  scaling (8 bytes), BatchNorm's per-channel mean and inverse std, ...

What is saved depends on what requires grad (a Linear saves its input only
when its weight requires grad, a ReLU its output only when its input does)
and on the module's mode (dropout saves a mask only in training mode, and
BatchNorm saves differently in eval mode): call it on the model as it is
trained, with example inputs that require grad where the training step's
inputs would (e.g. a pipeline stage's input from the previous stage).
The pack hook keeps the tensors aside instead of handing them to autograd,
so the measuring run's graph cannot run a backward, and nothing it built
outlives the call.

Backward FLOPs (`backward_flops`)
---------------------------------
From the node's forward FLOPs F (flops.py), where F is known:

- matmul-like ops (linear, conv, transposed conv, matmul/mm/bmm/@,
  addmm/baddbmm/addmv/addbmm, nn.Bilinear): each gradient of an operand
  costs as much as the forward. An operand that is a trainable weight (a
  call_module's weight that requires grad, or a get_attr of a tensor that
  requires grad) adds F to the weight gradient; an operand computed by the
  graph (an activation) adds F to the input gradient; a constant adds
  nothing. So nn.Linear / F.linear(x, self.weight): input F, weight F; with
  a frozen weight: input F, weight 0; `q @ k.transpose(-2, -1)`: input 2F,
  weight 0;
- nn.MultiheadAttention: its four projections P count as matmuls with
  weights and its two attention matmuls A as matmuls of activations:
  input F + A, weight P (F = P + A + the softmax);
- every other op with known FLOPs (elementwise, activations, softmax, norms,
  pooling, reductions): input F; weight F when it has trainable weights (a
  norm's affine parameters, PReLU), else 0.

Nodes whose forward FLOPs are unknown get no backward FLOPs.
"""

import math
import operator
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.fx
import torch.nn as nn
from torch.fx.node import Node

from . import flops as flops_mod

META_KEY = "saved_activation_bytes"
# node.meta key of the node's re-saved storages: a list of ResavedStorage.
RESAVED_META_KEY = "resaved_storages"


class ResavedStorage(NamedTuple):
    """A storage a node saves that an earlier node saved first (see
    partplan.v1.ResavedStorage)."""

    node: str     # the first saver's name
    storage: int  # index among the storages that node saved first
    bytes: int    # the storage's bytes


class TrainingRunError(RuntimeError):
    """The forward with grad enabled failed at a node (e.g. an in-place op on
    a tensor that requires grad), though the model ran under no_grad."""


# ---------------------------------------------------------------------------
# Saved activations.
# ---------------------------------------------------------------------------


def storage_of(t: torch.Tensor) -> Tuple[Any, int]:
    """(key, nbytes) of the storage a tensor keeps alive: the whole untyped
    storage, keyed by device and data_ptr."""
    try:
        if hasattr(t, "untyped_storage"):  # torch >= 2.0
            storage = t.untyped_storage()
        else:  # torch 1.13: TypedStorage; nbytes() and data_ptr() are its untyped storage's
            storage = t.storage()
        return (t.device.type, t.device.index, storage.data_ptr()), int(storage.nbytes())
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        # No storage (sparse, nested, ...): the tensors it holds, keyed by identity.
        if t.is_sparse:
            nbytes = sum(x.numel() * x.element_size() for x in (t._indices(), t._values()))
        else:
            nbytes = t.numel() * t.element_size()
        return ("id", id(t)), int(nbytes)


def model_state_keys(gm: torch.fx.GraphModule) -> set:
    """Storage keys of the module's parameters, buffers and get_attr tensors."""
    tensors: List[torch.Tensor] = list(gm.parameters()) + list(gm.buffers())
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            obj = gm
            try:
                for atom in node.target.split("."):
                    obj = getattr(obj, atom)
            except AttributeError:
                continue
            if isinstance(obj, torch.Tensor):
                tensors.append(obj)
    return {storage_of(t)[0] for t in tensors}


def _unpack(_handle):
    raise RuntimeError("partplan's measuring run keeps no saved tensors for a backward")


class _SavedTensorsRecorder(torch.fx.Interpreter):
    """Runs the graph node by node, each under saved_tensors_hooks, charging
    every storage autograd saves to the first node that saves it and
    recording, for every later node that saves it too, a ResavedStorage."""

    def __init__(self, gm: torch.fx.GraphModule, excluded: set):
        super().__init__(gm)
        self.excluded = excluded
        self.saved_bytes: Dict[str, int] = {n.name: 0 for n in gm.graph.nodes}
        # storage key -> (first saver, index among its first-saved storages)
        self.first_saver: Dict[Any, Tuple[str, int]] = {}
        self.first_saved_count: Dict[str, int] = {n.name: 0 for n in gm.graph.nodes}
        self.resaved: Dict[str, List[ResavedStorage]] = {n.name: [] for n in gm.graph.nodes}
        self.resaved_keys: set = set()  # (node, storage key) already recorded
        self.kept: List[torch.Tensor] = []
        self.current: Optional[str] = None

    def _pack(self, t: torch.Tensor):
        # Held to the end of the run: a storage freed early could have its
        # address reused by another and be taken for it.
        self.kept.append(t)
        key, nbytes = storage_of(t)
        if key in self.excluded:
            return None
        node = self.current
        first = self.first_saver.get(key)
        if first is None:
            self.first_saver[key] = (node, self.first_saved_count[node])
            self.first_saved_count[node] += 1
            self.saved_bytes[node] += nbytes
        elif first[0] != node and (node, key) not in self.resaved_keys:
            self.resaved_keys.add((node, key))
            self.resaved[node].append(ResavedStorage(first[0], first[1], nbytes))
        return None

    def run_node(self, n: Node) -> Any:
        self.current = n.name
        try:
            with torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack):
                return super().run_node(n)
        except TrainingRunError:
            raise
        except Exception as e:  # noqa: BLE001 - re-raised with the node's name
            raise TrainingRunError(
                f"the model's forward with grad enabled fails: {type(e).__name__}: {e} "
                f"(at node '{n.name}', {n.op} {getattr(n.target, '__qualname__', n.target)})") from e


def _requires_grad_somewhere(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> bool:
    if any(p.requires_grad for p in gm.parameters()):
        return True
    found: List[bool] = []
    torch.fx.node.map_aggregate(
        tuple(inputs),
        lambda a: found.append(True) if isinstance(a, torch.Tensor) and a.requires_grad else None)
    return bool(found)


def measure_saved_activations(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Dict[str, int]:
    """{node name: bytes of the storages autograd saves first at that node}
    for one forward of gm on `inputs`, with grad enabled, in gm's current
    mode (see the module docstring). Every node has an entry (0 when it saves
    nothing), also stored in node.meta["saved_activation_bytes"]; every
    node's re-saved storages (a list of ResavedStorage, in the order the node
    saves them, empty for most nodes) go to node.meta["resaved_storages"].

    The run has the forward's side effects (BatchNorm running statistics,
    the random number generator): exporter.export undoes them. ValueError
    when nothing requires grad (autograd would save nothing);
    TrainingRunError naming the node when the forward fails."""
    if not _requires_grad_somewhere(gm, inputs):
        raise ValueError(
            "measuring saved activations needs parameters or example inputs that require grad "
            "(autograd saves nothing otherwise)")
    recorder = _SavedTensorsRecorder(gm, model_state_keys(gm))
    # An input that is a view (batch[:2]) would count its whole storage
    # where an op saves it; a micro-batch of a real step is its own tensor.
    inputs = torch.fx.node.map_aggregate(
        tuple(inputs),
        lambda a: a.detach().clone().requires_grad_(a.requires_grad)
        if isinstance(a, torch.Tensor) and a._base is not None else a)
    try:
        with torch.enable_grad():
            recorder.run(*inputs)
        saved = dict(recorder.saved_bytes)
        resaved = dict(recorder.resaved)
    finally:
        recorder.kept.clear()
        getattr(recorder, "env", {}).clear()
    for node in gm.graph.nodes:
        node.meta[META_KEY] = saved[node.name]
        node.meta[RESAVED_META_KEY] = resaved[node.name]
    return saved


# ---------------------------------------------------------------------------
# Backward FLOPs.
# ---------------------------------------------------------------------------

_MATMUL_MODULES = flops_mod.CONV_MODULES + flops_mod.CONV_TRANSPOSE_MODULES + (nn.Linear,)


def _trainable(module: nn.Module) -> bool:
    return any(p.requires_grad for p in module.parameters())


def _operand_kind(gm: torch.fx.GraphModule, arg) -> Optional[str]:
    """"weight" (a get_attr of a tensor that requires grad), "activation" (a
    value the graph computes), or None (a constant: no gradient)."""
    if not isinstance(arg, Node):
        return None
    if arg.op == "get_attr":
        obj = gm
        try:
            for atom in arg.target.split("."):
                obj = getattr(obj, atom)
        except AttributeError:
            return None
        return "weight" if isinstance(obj, torch.Tensor) and obj.requires_grad else None
    return "activation"


def _matmul_operands(node: Node) -> Optional[List[Any]]:
    """The operands of a matmul-like call_function / call_method whose
    gradients are matmuls, or None when the op is not matmul-like."""
    name = flops_mod._op_name(node)
    arg = flops_mod._arg
    if name == "linear" or name in flops_mod.CONVS:
        return [arg(node, 0, "input"), arg(node, 1, "weight")]
    if name in flops_mod.MATMULS or node.target is operator.matmul:
        return list(node.args[:2]) + [node.kwargs[k] for k in ("other", "mat2") if k in node.kwargs]
    if name == "addmm":
        return [arg(node, 1, "mat1"), arg(node, 2, "mat2")]
    if name in ("baddbmm", "addbmm"):
        return [arg(node, 1, "batch1"), arg(node, 2, "batch2")]
    if name == "addmv":
        return [arg(node, 1, "mat"), arg(node, 2, "vec")]
    return None


def _mha_parts(module: nn.MultiheadAttention, node: Node) -> Optional[Tuple[float, float]]:
    """(projections, attention matmuls) of flops.py's nn.MultiheadAttention count."""
    parts = flops_mod.mha_flop_parts(module, node)
    return None if parts is None else (parts[0], parts[1])


def _has_trainable_attr(gm: torch.fx.GraphModule, node: Node) -> bool:
    found: List[bool] = []
    torch.fx.node.map_arg((node.args, node.kwargs),
                          lambda a: found.append(_operand_kind(gm, a) == "weight") or a)
    return any(found)


def backward_flops(gm: torch.fx.GraphModule, node: Node, modules: Dict[str, nn.Module],
                   forward: float) -> Tuple[float, float]:
    """(input-gradient FLOPs, weight-gradient FLOPs) of a node whose forward
    takes `forward` FLOPs, by the rule of the module docstring; (0, 0) when
    `forward` is 0 (unknown)."""
    if not forward or node.op not in ("call_module", "call_function", "call_method"):
        return 0.0, 0.0
    if node.op == "call_module":
        module = modules[node.target]
        if isinstance(module, nn.MultiheadAttention):
            parts = _mha_parts(module, node)
            if parts is not None:
                projections, attention = parts
                return forward + attention, (projections if _trainable(module) else 0.0)
        if isinstance(module, nn.Bilinear):
            return 2.0 * forward, (forward if _trainable(module) else 0.0)
        if isinstance(module, _MATMUL_MODULES):
            return forward, (forward if module.weight.requires_grad else 0.0)
        return forward, (forward if _trainable(module) else 0.0)
    operands = _matmul_operands(node)
    if operands is not None:
        kinds = [_operand_kind(gm, a) for a in operands]
        return forward * kinds.count("activation"), forward * kinds.count("weight")
    return forward, (forward if _has_trainable_attr(gm, node) else 0.0)

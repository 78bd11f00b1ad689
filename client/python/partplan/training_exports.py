"""A PlanTraining plan in the forms pipeline runtimes read (issue #26).

    import torch.nn as nn
    from partplan.training_exports import (
        split_spec, deepspeed_parts, megatron_layout, training_stages)

    model = nn.Sequential(embedding, *blocks, head)      # as sent to PlanTraining
    response = client.call("PlanTraining", request)       # or its .plan, or a dict
    split_spec(model, response)       # {"3.ln": SplitPoint.BEGINNING, ...}
    #   torch.distributed.pipelining.pipeline(model, mb_args, split_spec=...)
    deepspeed_parts(model, response)  # [0, 3, 8]: PipelineModule's self.parts
    megatron_layout(model, response)  # "Et*2|t*4L": --pipeline-model-parallel-layout
    training_stages(model, response)  # [["_0", "_1_ln", ...], [...]]: node names

Every function traces `model` as partplan.trace does (pass the
`leaf_modules` the graph was exported with; a GraphModule is traced again)
and reads the plan's stages as the call_* nodes of each stage, in graph
order: by `stage_by_item` (one entry per node but placeholders and the
output), else by each stage's first_node and last_node. Each format has a
reader back to those node lists (stages_from_split_spec,
stages_from_deepspeed_parts, parse_megatron_layout), which equal
pipeline_run.stages_from_plan's for the same assignment.

The formats, from their sources:

- torch.distributed.pipelining (torch >= 2.4), torch/distributed/pipelining/
  _IR.py: `pipeline(module, ..., split_spec={qualname: SplitPoint})` calls
  annotate_split_points, which makes the named module's forward call
  pipe_split() before it (SplitPoint.BEGINNING) or after it
  (SplitPoint.END), at every call; the traced program is then cut at each
  pipe_split (split_module, a pipe_split right after another dropped).
  A stage's first node is named by the module whose forward begins there,
  else by SplitPoint.END on the module whose forward ends just before it;
  either must be called once (or cut nowhere else), and a module is one
  key, so one boundary. A stage that starts elsewhere (an op in a forward
  between two other ops) raises ValueError: only a pipe_split() call
  written into the model's forward cuts there.
- DeepSpeed, deepspeed/runtime/pipe/module.py: PipelineModule's
  _partition_layers sets `self.parts`, P + 1 indices into the list of
  layers; stage s builds layers[parts[s]:parts[s + 1]], parts[0] == 0 and
  parts[-1] == len(layers). PipelineModule has no argument for explicit
  parts: set them in a _partition_layers override.
- Megatron-LM, megatron/core/transformer/pipeline_parallel_layer_layout.py
  (PipelineParallelLayerLayout.parse_str_to_list, validate_layer_layout):
  `--pipeline-model-parallel-layout`. Commas are dropped; `(X)*n` repeats X
  n times, then `c*n` repeats one character; `|` separates stages, which
  are virtual stages in model order (stage i on PP rank i mod PP, VPP rank
  i // PP); each character is a layer: E embedding, t transformer
  (decoder) layer, m MTP layer, L loss (the output layer and loss). The
  layout has exactly one E, first, and one L, last; MTP layers follow
  every t; stages may be empty; the stage count is PP x VPP.

DeepSpeed and Megatron take a sequence of layers: here the model's top-level
children, each called once and in order, every op inside one of them. A
stage boundary inside a layer raises ValueError naming the layer.
"""

import re
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import torch.nn as nn

from .exporter import _Tracer, _tracing_fixes

OP_NODES = ("call_module", "call_function", "call_method")

__all__ = [
    "training_stages", "split_spec", "stages_from_split_spec", "deepspeed_parts",
    "stages_from_deepspeed_parts", "megatron_layout", "parse_megatron_layout",
    "default_megatron_classifier", "BEGINNING", "END",
]

try:  # torch >= 2.4
    from torch.distributed.pipelining import SplitPoint as _SplitPoint

    BEGINNING: Any = _SplitPoint.BEGINNING
    END: Any = _SplitPoint.END
except ImportError:  # torch 1.13: the enum values' names
    _SplitPoint = None
    BEGINNING = "SplitPoint.BEGINNING"
    END = "SplitPoint.END"

LeafModules = Iterable[Union[type, str]]


# ---------------------------------------------------------------------------
# The traced model and the plan's stages.
# ---------------------------------------------------------------------------


class _Call:
    """One call of a module during tracing: nodes [start, stop) of the graph."""

    def __init__(self, name: str, module: nn.Module, depth: int, start: int):
        self.name, self.module, self.depth = name, module, depth
        self.start = self.stop = start


class _RecordingTracer(_Tracer):
    """partplan.trace's tracer (same nodes, same names) that records every
    module call's span of nodes, and can emit a marker node before or after
    named modules' calls, as annotate_split_points' pipe_split() does."""

    def __init__(self, leaf_modules: LeafModules, markers: Optional[Mapping[str, str]] = None):
        leaf_modules = tuple(leaf_modules)
        bad = [m for m in leaf_modules if not isinstance(m, (type, str))]
        if bad:
            raise TypeError(f"leaf_modules takes module classes or qualified names, got {bad!r}")
        super().__init__(tuple(m for m in leaf_modules if isinstance(m, type)),
                         frozenset(m for m in leaf_modules if isinstance(m, str)))
        self.calls: List[_Call] = []
        self.markers = dict(markers or {})
        self._depth = 0

    def call_module(self, m, forward, args, kwargs):
        name = self.path_of_module(m)
        point = self.markers.get(name)
        if point == "BEGINNING":
            self.graph.call_function(_pipe_split, (), {})
        call = _Call(name, m, self._depth + 1, len(self.graph.nodes))
        self.calls.append(call)
        self._depth += 1
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self._depth -= 1
            call.stop = len(self.graph.nodes)
            if point == "END":
                self.graph.call_function(_pipe_split, (), {})


def _pipe_split() -> None:
    """The marker of a split point (pipelining's pipe_split())."""


class _Traced:
    def __init__(self, model: nn.Module, leaf_modules: LeafModules,
                 markers: Optional[Mapping[str, str]] = None):
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
        tracer = _RecordingTracer(leaf_modules, markers)
        with _tracing_fixes():
            graph = tracer.trace(model)
        self.model = model
        self.nodes = list(graph.nodes)
        self.calls = tracer.calls
        self.ops = [i for i, n in enumerate(self.nodes) if n.op in OP_NODES]
        self.op_names = [self.nodes[i].name for i in self.ops]
        # ops_before[i]: how many call_* nodes come before node i.
        self.ops_before, count = [], 0
        for n in self.nodes:
            self.ops_before.append(count)
            count += n.op in OP_NODES
        self.ops_before.append(count)

    def op_position(self, name: str) -> int:
        try:
            return self.op_names.index(name)
        except ValueError:
            raise ValueError(f"node {name!r} is not a call_* node of the traced model") from None

    def describe(self, op_position: int) -> str:
        node = self.nodes[self.ops[op_position]]
        target = node.target if isinstance(node.target, str) else getattr(
            node.target, "__name__", repr(node.target))
        return f"{node.name!r} ({node.op} {target})"


def is_training_plan(plan: Any) -> bool:
    """Whether `plan` is a PlanTrainingResponse, a TrainingPlan, or a
    proto3 JSON dict of either."""
    from google.protobuf import json_format

    from . import messages as pb

    if isinstance(plan, (pb.PlanTrainingResponse, pb.TrainingPlan)):
        return True
    if not isinstance(plan, Mapping) or not plan:
        return False
    for message in (pb.PlanTrainingResponse(), pb.TrainingPlan()):
        try:
            json_format.ParseDict(plan, message)
            return True
        except (json_format.ParseError, TypeError, ValueError):
            pass
    return False


def _training_plan(plan: Any):
    """The TrainingPlan of a PlanTrainingResponse, a TrainingPlan, or a
    proto3 JSON dict of either."""
    from google.protobuf import json_format

    from . import messages as pb
    from partplan.v1 import training_pb2

    if isinstance(plan, pb.PlanTrainingResponse):
        return plan.plan
    if isinstance(plan, training_pb2.TrainingPlan):
        return plan
    if isinstance(plan, Mapping):
        if "plan" in plan:
            return json_format.ParseDict(plan, pb.PlanTrainingResponse()).plan
        return json_format.ParseDict(plan, training_pb2.TrainingPlan())
    raise TypeError("expected a PlanTrainingResponse, a TrainingPlan or a dict of either, "
                    f"got {type(plan).__name__}")


def _plan_cuts(traced: _Traced, plan: Any) -> List[int]:
    """The plan's stages as cut positions into traced.ops: stage s is
    ops[cuts[s]:cuts[s + 1]], cuts[0] == 0, cuts[-1] == len(ops)."""
    plan = _training_plan(plan)
    if not plan.stages and not plan.stage_by_item:
        raise ValueError("the plan has no stages")
    items = [i for i, n in enumerate(traced.nodes) if n.op not in ("placeholder", "output")]
    stage_of: Dict[int, int] = {}
    if plan.stage_by_item:
        if len(plan.stage_by_item) != len(items):
            raise ValueError(f"the plan has {len(plan.stage_by_item)} stage_by_item entries but "
                             f"the traced model has {len(items)} items (nodes but placeholders "
                             "and the output): was the plan made for this model and leaf_modules?")
        stage_of = dict(zip(items, plan.stage_by_item))
    if plan.stages:
        position = {traced.nodes[i].name: k for k, i in enumerate(items)}
        by_range: Dict[int, int] = {}
        for stage in plan.stages:
            for end in (stage.first_node, stage.last_node):
                if end not in position:
                    raise ValueError(f"stage {stage.stage}'s node {end!r} is not in the traced "
                                     "model (was the plan made for this model and leaf_modules?)")
            for k in range(position[stage.first_node], position[stage.last_node] + 1):
                by_range[items[k]] = stage.stage
        if stage_of and stage_of != by_range:
            raise ValueError("the plan's stage_by_item and its stages' first_node/last_node differ")
        stage_of = stage_of or by_range
    op_stages = []
    for i in traced.ops:
        if i not in stage_of:
            raise ValueError(f"node {traced.nodes[i].name!r} is in no stage of the plan")
        op_stages.append(stage_of[i])
    count = max(stage_of.values()) + 1
    if op_stages[0] != 0 or any(b not in (a, a + 1) for a, b in zip(op_stages, op_stages[1:])) \
            or op_stages[-1] != count - 1:
        raise ValueError("the plan's stages are not contiguous runs of call_* nodes numbered "
                         f"0..{count - 1} in graph order (each stage needs a call_* node)")
    return [0] + [p for p in range(1, len(op_stages)) if op_stages[p] != op_stages[p - 1]] \
        + [len(op_stages)]


def _stages(traced: _Traced, cuts: Sequence[int]) -> List[List[str]]:
    return [traced.op_names[a:b] for a, b in zip(cuts, cuts[1:])]


def training_stages(model: nn.Module, plan: Any, *,
                    leaf_modules: LeafModules = ()) -> List[List[str]]:
    """The plan's stages as lists of call_* node names, in graph order."""
    traced = _Traced(model, leaf_modules)
    return _stages(traced, _plan_cuts(traced, plan))


# ---------------------------------------------------------------------------
# torch.distributed.pipelining's split_spec.
# ---------------------------------------------------------------------------


def _point_name(point: Any) -> str:
    name = getattr(point, "name", None) or str(point)
    name = name.rsplit(".", 1)[-1].upper()
    if name not in ("BEGINNING", "END"):
        raise ValueError(f"unknown split point {point!r}: SplitPoint.BEGINNING or SplitPoint.END")
    return name


def _cuts_of(traced: _Traced, name: str, point: str) -> set:
    """Where annotating `name` with `point` cuts: a position in ops per call."""
    return {traced.ops_before[c.start if point == "BEGINNING" else c.stop]
            for c in traced.calls if c.name == name}


def split_spec(model: nn.Module, plan: Any, *, leaf_modules: LeafModules = (),
               outermost: bool = False) -> Dict[str, Any]:
    """{module qualname: SplitPoint} for pipeline(model, ..., split_spec=),
    one entry per stage after the first.

    Each boundary is named by the innermost module (outermost=True: the
    outermost) whose forward begins at the stage's first node, BEGINNING;
    failing that, by one whose forward ends right before it, END. A module
    is used only where all of its calls cut at that one boundary, and for
    one boundary (a dict key): boundaries are matched to modules. Values are
    SplitPoint members when torch.distributed.pipelining imports, else the
    strings "SplitPoint.BEGINNING"/"SplitPoint.END". Raises ValueError for a
    stage no module call begins or ends at."""
    traced = _Traced(model, leaf_modules)
    cuts = _plan_cuts(traced, plan)
    order = (lambda c: c.depth) if outermost else (lambda c: -c.depth)
    candidates: List[List[Tuple[str, str]]] = []
    for cut in cuts[1:-1]:
        options: List[Tuple[str, str]] = []
        for point in ("BEGINNING", "END"):
            edge = [c for c in traced.calls
                    if traced.ops_before[c.start if point == "BEGINNING" else c.stop] == cut]
            for call in sorted(edge, key=order):
                option = (call.name, point)
                if option not in options and _cuts_of(traced, call.name, point) == {cut}:
                    options.append(option)
        candidates.append(options)
    # A module is a key of the spec once: match boundaries to modules
    # (augmenting paths; each boundary tries its preferred options first).
    owner: Dict[str, int] = {}
    choice: Dict[int, Tuple[str, str]] = {}

    def place(k: int, seen: set) -> bool:
        for name, point in candidates[k]:
            if name in seen:
                continue
            seen.add(name)
            if name not in owner or place(owner[name], seen):
                owner[name], choice[k] = k, (name, point)
                return True
        return False

    for k, cut in enumerate(cuts[1:-1]):
        if place(k, set()):
            continue
        stage = k + 1
        if candidates[k]:
            taken = ", ".join(f"{name} {point}" for name, point in candidates[k])
            raise ValueError(
                f"stage {stage} starts at {traced.describe(cut)}, which split_spec cannot "
                f"express: the only module calls that begin or end there ({taken}) are needed "
                "for other stages' cuts, and split_spec names each module once. Call "
                "torch.distributed.pipelining.pipe_split() in the model's forward there, or "
                "move the cut")
        raise ValueError(
            f"stage {stage} starts at {traced.describe(cut)}, which split_spec cannot "
            "express: torch.distributed.pipelining cuts only where an annotated module's "
            "forward begins (SplitPoint.BEGINNING) or ends (SplitPoint.END), at every call "
            "of it (annotate_split_points, torch/distributed/pipelining/_IR.py), and no "
            "module called only there begins at this node or ends at the node before it, "
            f"{traced.describe(cut - 1)}. Call torch.distributed.pipelining.pipe_split() in "
            "the model's forward just before this op, or move the cut")
    spec: Dict[str, Any] = {}
    for k in range(len(candidates)):
        name, point = choice[k]
        spec[name] = BEGINNING if point == "BEGINNING" else END
    return spec


def stages_from_split_spec(model: nn.Module, spec: Mapping[str, Any], *,
                           leaf_modules: LeafModules = ()) -> List[List[str]]:
    """The stages pipeline() makes of `model` with split_spec `spec`, as
    lists of call_* node names: a cut before (BEGINNING) or after (END)
    every call of each named module, as annotate_split_points does. Raises
    ValueError for a module that is not in the model or never called, or a
    cut that leaves a stage empty."""
    markers = {}
    for name, point in spec.items():
        try:
            model.get_submodule(name)
        except AttributeError:
            raise ValueError(f"split_spec names {name!r}, which is not a submodule of the "
                             "model") from None
        markers[name] = _point_name(point)
    traced = _Traced(model, leaf_modules, markers)
    called = {c.name for c in traced.calls}
    missing = [name for name in markers if name not in called]
    if missing:
        raise ValueError(f"split_spec names modules the traced forward never calls: {missing}")
    stages: List[List[str]] = [[]]
    for node in traced.nodes:
        if node.op == "call_function" and node.target is _pipe_split:
            if stages[-1]:
                stages.append([])
            elif len(stages) > 1:  # pipelining drops a pipe_split right after another
                continue
            else:
                raise ValueError("split_spec cuts before the model's first op: the first stage "
                                 "would be empty")
        elif node.op in OP_NODES:
            stages[-1].append(node.name)
    if not stages[-1]:
        raise ValueError("split_spec cuts after the model's last op: the last stage would be empty")
    return stages


# ---------------------------------------------------------------------------
# Sequences of top-level layers: DeepSpeed and Megatron-LM.
# ---------------------------------------------------------------------------


def _layers(traced: _Traced) -> Tuple[List[Tuple[str, nn.Module]], List[int]]:
    """The model's top-level children and, per call_* node, the index of the
    child whose call it is in. Raises ValueError unless the model is a
    sequence of its children: each called once, in order, every op in one."""
    children = list(traced.model.named_children())
    calls = [c for c in traced.calls if c.depth == 1]
    names = [c.name for c in calls]
    if names != [name for name, _ in children]:
        raise ValueError("the model is not a sequence of layers (its top-level children, each "
                         f"called once, in order): children {[n for n, _ in children]}, "
                         f"called {names}")
    layer_of = [-1] * len(traced.ops)
    for index, call in enumerate(calls):
        for p in range(traced.ops_before[call.start], traced.ops_before[call.stop]):
            layer_of[p] = index
    outside = [traced.op_names[p] for p, layer in enumerate(layer_of) if layer < 0]
    if outside:
        raise ValueError("the model is not a sequence of layers: these ops run outside its "
                         f"top-level children: {outside[:6]}")
    return children, layer_of


def _layer_parts(traced: _Traced, cuts: Sequence[int]) -> List[int]:
    children, layer_of = _layers(traced)
    parts = [0]
    for stage, cut in enumerate(cuts[1:-1], start=1):
        layer = layer_of[cut]
        if layer_of[cut - 1] == layer:
            name, module = children[layer]
            raise ValueError(
                f"stage {stage} starts at {traced.describe(cut)}, inside layer {layer} "
                f"({name!r}, {type(module).__name__}): a layer-sequence pipeline (DeepSpeed's "
                "PipelineModule, Megatron-LM's layout) cuts only between top-level layers")
        parts.append(layer)
    parts.append(len(children))
    return parts


def _stages_of_parts(traced: _Traced, parts: Sequence[int]) -> List[List[str]]:
    children, layer_of = _layers(traced)
    parts = [int(p) for p in parts]
    if len(parts) < 2 or parts[0] != 0 or parts[-1] != len(children) \
            or any(b < a for a, b in zip(parts, parts[1:])):
        raise ValueError(f"parts {parts} must rise from 0 to the number of layers, "
                         f"{len(children)}")
    stages = []
    for s, (a, b) in enumerate(zip(parts, parts[1:])):
        nodes = [name for name, layer in zip(traced.op_names, layer_of) if a <= layer < b]
        if not nodes:
            raise ValueError(f"stage {s} (layers {a}..{b - 1}) has no ops")
        stages.append(nodes)
    return stages


def deepspeed_parts(model: nn.Module, plan: Any, *, leaf_modules: LeafModules = ()) -> List[int]:
    """DeepSpeed PipelineModule's `parts` for the plan: stage s holds the
    top-level layers [parts[s], parts[s + 1]); len P + 1, from 0 to the
    number of layers. Raises ValueError for a stage boundary inside a layer.
    (An interleaved plan's P x v stages give P x v + 1 entries: DeepSpeed
    runs one stage per rank.)"""
    traced = _Traced(model, leaf_modules)
    return _layer_parts(traced, _plan_cuts(traced, plan))


def stages_from_deepspeed_parts(model: nn.Module, parts: Sequence[int], *,
                                leaf_modules: LeafModules = ()) -> List[List[str]]:
    """The stages `parts` makes of the model's top-level layers, as lists of
    call_* node names."""
    return _stages_of_parts(_Traced(model, leaf_modules), parts)


_MEGATRON_LAYERS = "EtmL"


def default_megatron_classifier(name: str, module: nn.Module, index: int, count: int) -> str:
    """An nn.Embedding is E, the last layer L, any other t."""
    if isinstance(module, nn.Embedding):
        return "E"
    return "L" if index == count - 1 else "t"


def _classes(children, classify) -> List[str]:
    classify = classify or default_megatron_classifier
    chars = []
    for index, (name, module) in enumerate(children):
        char = classify(name, module, index, len(children))
        if char not in _MEGATRON_LAYERS or len(char) != 1:
            raise ValueError(f"the classifier gave {char!r} for layer {index} ({name!r}); "
                             f"it must give one of {', '.join(_MEGATRON_LAYERS)}")
        chars.append(char)
    flat = "".join(chars)
    problems = []
    if flat.count("E") != 1 or flat[0] != "E":
        problems.append("exactly one E (embedding), the first layer")
    if flat.count("L") != 1 or flat[-1] != "L":
        problems.append("exactly one L (loss), the last layer")
    if "m" in flat and "t" in flat[flat.index("m"):]:
        problems.append("every m (MTP) layer after every t")
    if problems:
        raise ValueError(f"the layers classify as {flat!r}, but Megatron-LM's layout needs "
                         + "; ".join(problems) + " (validate_layer_layout)")
    return chars


def _run_length(chars: str) -> str:
    out = []
    for match in re.finditer(r"(.)\1*", chars):
        run = match.group(0)
        out.append(run if len(run) == 1 else f"{run[0]}*{len(run)}")
    return "".join(out)


def megatron_layout(model: nn.Module, plan: Any,
                    classify: Optional[Callable[[str, nn.Module, int, int], str]] = None, *,
                    leaf_modules: LeafModules = ()) -> str:
    """Megatron-LM's --pipeline-model-parallel-layout for the plan, e.g.
    "E|t*3|t*3L": the top-level layers as characters, `|` between stages.

    classify(name, module, index, count) gives a layer's character, E, t, m
    or L (default_megatron_classifier: an nn.Embedding is E, the last layer
    L, others t). Raises ValueError for a stage boundary inside a layer, or
    layers Megatron's layout rejects (not one E first and one L last)."""
    traced = _Traced(model, leaf_modules)
    parts = _layer_parts(traced, _plan_cuts(traced, plan))
    children, _ = _layers(traced)
    chars = _classes(children, classify)
    return "|".join(_run_length("".join(chars[a:b])) for a, b in zip(parts, parts[1:]))


def _unroll(layout: str) -> str:
    # parse_str_to_list's rewriting: commas dropped, (X)*n, then c*n.
    layout = layout.replace(",", "")
    layout = re.sub(r"\(([^)]+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), layout)
    return re.sub(r"(.)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), layout)


def parse_megatron_layout(layout: str, model: Optional[nn.Module] = None,
                          classify: Optional[Callable[[str, nn.Module, int, int], str]] = None, *,
                          pipeline_model_parallel_size: Optional[int] = None,
                          leaf_modules: LeafModules = ()) -> List[List[str]]:
    """A --pipeline-model-parallel-layout string read back.

    Without a model: each stage's layer characters, as Megatron-LM's
    parse_str_to_list, e.g. "E|(tt|)*2,L" -> [["E"], ["t", "t"], ["t", "t"],
    ["L"]]. With the model: each stage's call_* node names, the layers
    matched in order to its top-level children, whose characters (by
    `classify`) must be the layout's. pipeline_model_parallel_size: checks
    that it divides the stage count, as Megatron does."""
    stages = [list(stage) for stage in _unroll(layout).split("|")]
    bad = sorted({c for stage in stages for c in stage if c not in _MEGATRON_LAYERS})
    if bad:
        raise ValueError(f"layout {layout!r}: unknown layer characters {bad}; "
                         f"known: {', '.join(_MEGATRON_LAYERS)}")
    if pipeline_model_parallel_size and len(stages) % pipeline_model_parallel_size:
        raise ValueError(f"layout {layout!r} has {len(stages)} stages, not a multiple of the "
                         f"pipeline-parallel size {pipeline_model_parallel_size}")
    if model is None:
        return stages
    traced = _Traced(model, leaf_modules)
    children, _ = _layers(traced)
    chars = _classes(children, classify)
    flat = "".join("".join(stage) for stage in stages)
    if flat != "".join(chars):
        raise ValueError(f"layout {layout!r} has layers {flat!r}, but the model's top-level "
                         f"layers classify as {''.join(chars)!r}")
    parts = [0]
    for stage in stages:
        parts.append(parts[-1] + len(stage))
    return _stages_of_parts(traced, parts)

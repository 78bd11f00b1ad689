"""run_pipeline: one real pipeline-parallel training step on CPU processes.

A pipeline plan predicts how much activation memory each stage holds and
how long a step takes. This module runs the plan for real, with no GPU: one
process per stage, torch.distributed's gloo backend on loopback, a GPipe or
1F1B schedule over B micro-batches, and measures per stage the peak bytes
of activations saved for backward, the bytes each micro-batch saves, and the
wall time of the step. It also returns every parameter's gradient, which
equal a single-process step on the whole batch (issue #26).

    import torch, torch.nn as nn
    from partplan.pipeline_run import run_pipeline

    model = nn.Sequential(*[nn.Linear(64, 64) for _ in range(4)]).double()
    x, y = torch.randn(32, 64, dtype=torch.float64), torch.randn(32, 64, dtype=torch.float64)
    stages = [["_0", "_1"], ["_2", "_3"]]    # torch.fx's names of the four Linears
    result = run_pipeline(model, x, nn.MSELoss(), stages, "1f1b", 4, target=y)
    result.stages[0].peak_saved_bytes     # 8192: 2 micro-batches' Linear inputs
    result.stages[1].peak_saved_bytes     # 16392: 1 micro-batch's, and the loss's
    result.grads["0.weight"]              # d(mean loss)/d(weight), whole batch

A plan's partitions become stages with stages_from_plan(model, response).

Stages are lists of torch.fx node names (of `partplan.trace(model)`, the
names partplan's plans use), each a contiguous run of the graph's call_*
nodes, together all of them in order. They are cut with torch.fx's
split_module (partplan.apply's, which keeps side-effect-only partitions).

The step: the batch (every tensor input, and `target`) is split along dim 0
into B equal micro-batches. Stage s receives the values it needs from stage
s-1 (a pickled header with their structure, shapes, dtypes and
requires_grad, then the tensors), runs its submodule and sends on every
value a later stage or the model's output needs. The last stage computes
loss_fn(output, target) / B per micro-batch and its backward, so the
gradients are those of the mean of the micro-batch losses (the full batch's
mean loss for a mean-reduced loss). Gradients of the received activations
go back the same way.

- "gpipe": every forward in micro-batch order, then every backward in
  micro-batch order. Every stage holds all B micro-batches' activations.
- "1f1b": PipeDream-flush, as Megatron-LM and torch's Schedule1F1B: stage s
  runs min(P - s - 1, B) warm-up forwards, then alternates one forward and
  one backward, then the remaining backwards. Stage s holds at most
  min(P - s, B) micro-batches, so stage 0 holds the most although the
  stages are balanced (DeepSpeed issue #4477).

Saved bytes are measured with torch.autograd.graph.saved_tensors_hooks:
every tensor saved for backward while micro-batch m's forward (and loss)
runs is charged to m by the storage it keeps alive (a saved view keeps its
whole storage, so storage bytes count, not view bytes), each storage once,
and m's storages are released when m's backward has finished, which is
when autograd frees its graph. The stage's own parameters and buffers are
not activations and are not counted (a Linear saves its weight).

Model inputs (and targets) are given to every stage that reads them rather
than sent along the pipeline: they need no gradient and every process has
the batch. Layers whose result depends on the batch (training-mode
BatchNorm) and random ops (dropout) give different gradients on
micro-batches, as in any pipeline.
"""

import datetime
import os
import pickle
import socket
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import torch
import torch.distributed as dist
import torch.fx
import torch.multiprocessing as mp
import torch.nn as nn

SCHEDULES = ("gpipe", "1f1b")
OP_NODES = ("call_module", "call_function", "call_method")

__all__ = ["run_pipeline", "split_stages", "stages_from_plan", "schedule_order",
           "PipelineRunResult", "StageResult", "SCHEDULES"]


@dataclass
class StageResult:
    """What one stage's process measured during the step."""

    stage: int
    nodes: List[str]
    # Most bytes of saved-for-backward storages alive at once in the step.
    peak_saved_bytes: int
    # Bytes of the storages each micro-batch's forward saved, in micro-batch
    # order. The last stage's include what the loss saves (for MSELoss its
    # input and the target).
    saved_bytes_per_micro_batch: List[int]
    # Wall time from the barrier that starts the step until this stage's last
    # send has completed.
    step_seconds: float
    # Of which running forward (and loss) and backward, and blocked in
    # receives; the rest is sending and bookkeeping.
    compute_seconds: float
    recv_wait_seconds: float
    # Most micro-batches whose forward had run and whose backward had not.
    max_in_flight: int
    # The schedule as run: "F0", "F1", "B0", ...
    order: List[str] = field(default_factory=list)


@dataclass
class PipelineRunResult:
    """One step's measurements, stage by stage, and its gradients."""

    schedule: str
    micro_batches: int
    stages: List[StageResult]
    # {parameter's qualified name in the model: gradient after the step}, the
    # sum over stages for a parameter more than one stage uses.
    grads: Dict[str, torch.Tensor]
    # The step's loss: the sum of loss_fn(output, target) / B over micro-batches.
    loss: float


def schedule_order(schedule: str, stage: int, num_stages: int,
                   micro_batches: int) -> List[Tuple[str, int]]:
    """The ("F" | "B", micro-batch) steps stage `stage` runs, in order."""
    _check_schedule(schedule, micro_batches)
    if not 0 <= stage < num_stages:
        raise ValueError(f"stage {stage} is not in 0..{num_stages - 1}")
    b = micro_batches
    if schedule == "gpipe":
        return [("F", m) for m in range(b)] + [("B", m) for m in range(b)]
    # Megatron-LM's forward_backward_pipelining_without_interleaving.
    warmup = min(num_stages - stage - 1, b)
    order = [("F", m) for m in range(warmup)]
    for i in range(b - warmup):
        order += [("F", warmup + i), ("B", i)]
    order += [("B", m) for m in range(b - warmup, b)]
    return order


def split_stages(model: nn.Module, stages: Sequence[Sequence[str]], *,
                 leaf_modules: Iterable[Union[type, str]] = ()) -> torch.fx.GraphModule:
    """split_module's GraphModule of `model` with `submod_<s>` for stage s.

    Raises ValueError unless the stages are non-empty lists of the call_*
    node names of the traced graph, each stage a contiguous run of them and
    the stages together all of them, in graph order."""
    from .apply import _split
    from .exporter import trace

    gm = trace(model, leaf_modules=leaf_modules)
    assignment = _stage_assignment(gm, stages)
    return _split(gm, assignment, keep_original_order=False)


def stages_from_plan(model: nn.Module, response: Any, *,
                     leaf_modules: Iterable[Union[type, str]] = ()) -> List[List[str]]:
    """The stages of a plan, for run_pipeline: each partition's call_* nodes
    in graph order, the partitions in the order of their first node.

    response: anything partplan.apply.assignment_of reads (a Plan or
    PartitionGraph response, a ShardGraph response, {node: partition}), or
    a training plan (PlanTrainingResponse, TrainingPlan, or a dict of
    either), read by partplan.training_exports.training_stages.
    Whether the partitions are contiguous is run_pipeline's check."""
    from .apply import assignment_of
    from .exporter import trace
    from .training_exports import is_training_plan, training_stages

    if is_training_plan(response):
        return training_stages(model, response, leaf_modules=leaf_modules)

    gm = trace(model, leaf_modules=leaf_modules)
    assignment = assignment_of(response, [n.name for n in gm.graph.nodes])
    stages: Dict[int, List[str]] = {}
    for node in gm.graph.nodes:
        if node.op in OP_NODES and node.name in assignment:
            stages.setdefault(assignment[node.name], []).append(node.name)
    return list(stages.values())


def run_pipeline(
    model: nn.Module,
    inputs: Any,
    loss_fn: Callable[..., torch.Tensor],
    stages: Sequence[Sequence[str]],
    schedule: str,
    micro_batches: int,
    *,
    target: Any = None,
    leaf_modules: Iterable[Union[type, str]] = (),
    timeout: float = 300.0,
    threads_per_stage: Optional[int] = None,
    start_method: str = "spawn",
) -> PipelineRunResult:
    """Runs one training step of `model` as a pipeline of len(stages)
    processes and returns what every stage measured and the gradients.

    model: an nn.Module (traced with partplan.trace and `leaf_modules`) or
      a GraphModule. It is not changed: gradients come back in the result.
    inputs: the whole batch: a tensor, or a tuple of forward()'s positional
      arguments. Tensors are split along dim 0 into `micro_batches` equal
      chunks; other values are passed to every micro-batch as they are.
    loss_fn: loss_fn(output, target_chunk), or loss_fn(output) without a
      target; returns a scalar. It must be picklable (a module-level
      function or an nn.Module such as nn.MSELoss()), as the stage
      processes are spawned.
    stages: lists of node names (see split_stages).
    schedule: "gpipe" or "1f1b".
    micro_batches: B >= 1, dividing the batch size.
    timeout: seconds for the whole run (and each of gloo's operations);
      the processes are terminated and TimeoutError raised after it.
    threads_per_stage: torch threads in each process (default: the CPUs
      shared among the stages).
    start_method: torch.multiprocessing's; "spawn" is safe with torch
      threads already running in the caller.

    Raises ValueError for stages that do not match the graph, an unknown
    schedule, B < 1 or a batch B does not divide, and RuntimeError with the
    failing process's traceback when a stage fails.
    """
    _check_schedule(schedule, micro_batches)
    try:
        pickle.dumps(loss_fn)
    except Exception as e:  # pickle raises several types for unpicklable objects
        raise ValueError(f"loss_fn must be picklable (a module-level function or an nn.Module), "
                         f"since the stage processes are spawned: {e}") from None
    split = split_stages(model, stages, leaf_modules=leaf_modules)
    num_stages = len(stages)
    args = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    chunks = _micro_batch_args(split, args, micro_batches)
    targets = None if target is None else _chunk(target, micro_batches, "target")
    rows = {a.shape[0] for a in args + (target,) if isinstance(a, torch.Tensor) and a.dim() > 0}
    if len(rows) > 1:
        raise ValueError(f"the inputs' and target's batch sizes (dim 0) differ: {sorted(rows)}")
    names = _parameter_names(model, split)
    payloads = _stage_payloads(split, stages, chunks, targets, loss_fn, names,
                               schedule, micro_batches)
    threads = threads_per_stage or max(1, (os.cpu_count() or 1) // num_stages)

    with tempfile.TemporaryDirectory(prefix="partplan-pipeline-") as run_dir:
        for s, payload in enumerate(payloads):
            torch.save(payload, os.path.join(run_dir, f"stage{s}.pt"))
        del payloads
        # The free port is found by binding and closing, so another process
        # can take it before rank 0's store binds it: start again on a new
        # port then.
        for attempt in range(3):
            for name in os.listdir(run_dir):  # a failed attempt's errors
                if name.startswith("error"):
                    os.remove(os.path.join(run_dir, name))
            try:
                _start(run_dir, num_stages, _free_port(), timeout, threads, start_method)
                break
            except RuntimeError as e:
                if "Address already in use" not in str(e) or attempt == 2:
                    raise
        results = [torch.load(os.path.join(run_dir, f"result{s}.pt")) for s in range(num_stages)]

    grads: Dict[str, torch.Tensor] = {}
    for r in results:
        for name, g in r.pop("grads").items():
            grads[name] = grads[name] + g if name in grads else g
    loss = [r.pop("loss") for r in results][-1]
    return PipelineRunResult(schedule=schedule, micro_batches=micro_batches,
                             stages=[StageResult(**r) for r in results], grads=grads, loss=loss)


# ---------------------------------------------------------------------------
# Checks and the plan of each stage, in the caller's process.

def _check_schedule(schedule: str, micro_batches: int) -> None:
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}: use one of {', '.join(SCHEDULES)}")
    if isinstance(micro_batches, bool) or not isinstance(micro_batches, int) or micro_batches < 1:
        raise ValueError(f"micro_batches must be an integer >= 1, got {micro_batches!r}")


def _stage_assignment(gm: torch.fx.GraphModule, stages: Sequence[Sequence[str]]) -> Dict[str, int]:
    if isinstance(stages, (str, bytes)) or not stages:
        raise ValueError("stages must be a non-empty list of lists of node names")
    ops = [n.name for n in gm.graph.nodes if n.op in OP_NODES]
    position = {name: i for i, name in enumerate(ops)}
    other = {n.name: n.op for n in gm.graph.nodes if n.op not in OP_NODES}
    assignment: Dict[str, int] = {}
    next_position = 0
    for s, stage in enumerate(stages):
        if isinstance(stage, (str, bytes)) or not stage:
            raise ValueError(f"stage {s} must be a non-empty list of node names, got {stage!r}")
        for name in stage:
            if name in other:
                raise ValueError(f"stage {s}: {name!r} is a {other[name]} node; stages list the "
                                 "call_* nodes only")
            if name not in position:
                raise ValueError(f"stage {s}: no node named {name!r} in the traced graph "
                                 f"(its call_* nodes: {_some(ops)})")
            if name in assignment:
                raise ValueError(f"stage {s}: node {name!r} is already in stage {assignment[name]}")
            assignment[name] = s
        # Contiguous in graph order: the stage is exactly the next len(stage)
        # call_* nodes, so every value flows from a stage to a later one.
        expected = ops[next_position:next_position + len(stage)]
        if set(stage) != set(expected):
            stray = sorted(set(stage) - set(expected), key=position.get)
            missing = [n for n in expected if n not in set(stage)]
            raise ValueError(
                f"stage {s} is not the next contiguous run of call_* nodes in graph order: "
                f"expected {_some(expected)}; {_some(stray)} out of place, "
                f"{_some(missing)} missing")
        next_position += len(stage)
    if next_position != len(ops):
        raise ValueError(f"the stages leave out {len(ops) - next_position} call_* node(s) at the "
                         f"end of the graph: {_some(ops[next_position:])}")
    return assignment


def _some(names: Sequence[str], limit: int = 6) -> str:
    names = list(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _chunk(value: Any, micro_batches: int, what: str) -> List[Any]:
    if not isinstance(value, torch.Tensor):
        return [value] * micro_batches
    if value.dim() == 0:
        raise ValueError(f"{what} is a 0-d tensor: it has no batch dimension to split")
    rows = value.shape[0]
    if rows % micro_batches:
        raise ValueError(f"{what} has {rows} rows (dim 0), which {micro_batches} micro-batches "
                         "do not divide")
    # clone: torch.chunk gives views of one storage, and a saved view keeps
    # the whole batch alive, which would charge every micro-batch the whole
    # batch's bytes. (torch.save would also keep them one storage.)
    return [c.detach().clone(memory_format=torch.contiguous_format)
            for c in value.chunk(micro_batches, dim=0)]


def _micro_batch_args(split: torch.fx.GraphModule, args: Tuple[Any, ...],
                      micro_batches: int) -> Dict[str, List[Any]]:
    """{placeholder name: its value in each micro-batch}."""
    placeholders = [n for n in split.graph.nodes if n.op == "placeholder"]
    if len(args) > len(placeholders):
        raise ValueError(f"{len(args)} inputs for a forward() of {len(placeholders)} arguments")
    out = {}
    for i, node in enumerate(placeholders):
        if i < len(args):
            out[node.name] = _chunk(args[i], micro_batches, f"input {i} ({node.target})")
        elif node.args:  # a default value
            out[node.name] = [node.args[0]] * micro_batches
        else:
            raise ValueError(f"no input for forward() argument {node.target!r}")
    return out


def _parameter_names(model: nn.Module, split: torch.fx.GraphModule) -> Dict[int, str]:
    """{id(parameter): its qualified name in `model`} (the split module's
    submodules hold the model's own parameter objects)."""
    names = {id(p): f"<split>.{n}" for n, p in split.named_parameters()}
    names.update({id(p): n for n, p in model.named_parameters()})
    return names


class _Ref:
    """A value of the split's top-level graph, by node name (fx Nodes do
    not pickle)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __getstate__(self):
        return self.name

    def __setstate__(self, state):
        self.name = state


def _map(value: Any, fn: Callable[[Any], Any], leaf: type) -> Any:
    """map over tuples (named ones too), lists and dicts, into plain types
    (torch.fx's immutable collections do not round-trip through pickle)."""
    if isinstance(value, leaf):
        return fn(value)
    if isinstance(value, tuple):
        items = [_map(v, fn, leaf) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_map(v, fn, leaf) for v in value]
    if isinstance(value, dict):
        return {k: _map(v, fn, leaf) for k, v in value.items()}
    return value


def _refs(value: Any) -> Any:
    return _map(value, lambda n: _Ref(n.name), torch.fx.Node)


def _stage_payloads(split, stages, chunks, targets, loss_fn, names, schedule, micro_batches):
    num_stages = len(stages)
    nodes = list(split.graph.nodes)
    producer: Dict[str, int] = {}  # -1: local to every stage (inputs, attributes)
    for node in nodes:
        if node.op in ("placeholder", "get_attr"):
            producer[node.name] = -1
        elif node.op == "call_module":
            producer[node.name] = int(node.target[len("submod_"):])
        elif node.op == "call_function":  # getitem of a submodule's outputs
            producer[node.name] = max(producer[a.name] for a in node.all_input_nodes)

    def consumer(user) -> int:
        return num_stages - 1 if user.op == "output" else producer[user.name]

    last_use = {n.name: max((consumer(u) for u in n.users), default=-1) for n in nodes
                if n.op != "output"}
    output = next(n for n in nodes if n.op == "output")
    payloads = []
    for s in range(num_stages):
        program = [(n.op, n.name, n.target, _refs(n.args), _refs(dict(n.kwargs)))
                   for n in nodes if n.op != "output" and producer[n.name] == s]
        readers = [n for n in nodes if n.op != "output" and producer[n.name] == s]
        if s == num_stages - 1:
            readers.append(output)
        local = {a.name for r in readers for a in r.all_input_nodes if producer[a.name] == -1}
        holder = nn.Module()
        holder.add_module("submod", getattr(split, f"submod_{s}"))
        attrs = {}
        for node in nodes:
            if node.name in local and node.op == "get_attr":
                attrs[node.name] = f"attr_{len(attrs)}"
                value = _attr(split, node.target)
                if isinstance(value, nn.Parameter):
                    holder.register_parameter(attrs[node.name], value)
                elif isinstance(value, torch.Tensor):
                    holder.register_buffer(attrs[node.name], value)
                else:
                    setattr(holder, attrs[node.name], value)

        def boundary(k):  # values crossing from stage k to k + 1
            return [n.name for n in nodes if n.op != "output"
                    and 0 <= producer[n.name] <= k < last_use[n.name]]

        last = s == num_stages - 1
        payloads.append({
            "stage": s, "num_stages": num_stages, "nodes": list(stages[s]),
            "schedule": schedule, "micro_batches": micro_batches,
            "holder": holder, "attrs": attrs,
            "inputs": {name: chunks[name] for name in chunks if name in local},
            "program": program,
            "recv": boundary(s - 1) if s > 0 else [],
            "send": boundary(s) if not last else [],
            "output": _refs(output.args[0]) if last else None,
            "targets": targets if last else None,
            "loss_fn": loss_fn if last else None,
            "param_names": {n: names.get(id(p), f"<stage{s}>.{n}")
                            for n, p in holder.named_parameters()},
        })
    return payloads


def _attr(module: nn.Module, target: str) -> Any:
    for atom in target.split("."):
        module = getattr(module, atom)
    return module


# ---------------------------------------------------------------------------
# The processes.

def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(run_dir: str, num_stages: int, port: int, timeout: float, threads: int,
           start_method: str) -> None:
    context = mp.start_processes(_worker, args=(run_dir, num_stages, port, timeout, threads),
                                 nprocs=num_stages, join=False, start_method=start_method)
    deadline = time.monotonic() + timeout
    try:
        # join raises when a stage fails, and terminates the others.
        while not context.join(timeout=0.2):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the pipeline step did not finish in {timeout:g} s")
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as e:
        # join reports whichever process it noticed first, often a stage
        # that only lost its connection to the one that failed: report the
        # stages' own errors first.
        errors = _stage_errors(run_dir, num_stages) or [str(e)]
        raise RuntimeError("pipeline stage failed:\n" + "\n".join(errors)) from e
    finally:
        for process in context.processes:
            if process.is_alive():
                process.terminate()
        for process in context.processes:
            process.join(5)


def _stage_errors(run_dir: str, num_stages: int) -> List[str]:
    own, lost = [], []
    for s in range(num_stages):
        try:
            with open(os.path.join(run_dir, f"error{s}.txt")) as f:
                kind, text = f.read().split("\n", 1)
        except (OSError, ValueError):
            continue
        (lost if kind == "peer" else own).append(f"-- stage {s}:\n{text}")
    return own + lost


class _PeerError(RuntimeError):
    """A send or receive failed: usually the other stage has failed."""


def _worker(rank: int, run_dir: str, num_stages: int, port: int, timeout: float,
            threads: int) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    # gloo picks its interface from the hostname, which in some containers
    # resolves to an address the other processes cannot reach.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(threads)
    initialized = False
    try:
        payload = torch.load(os.path.join(run_dir, f"stage{rank}.pt"))
        dist.init_process_group("gloo", rank=rank, world_size=num_stages,
                                timeout=datetime.timedelta(seconds=timeout))
        initialized = True
        result = _Stage(payload).run()
        torch.save(result, os.path.join(run_dir, f"result{rank}.pt"))
    except BaseException as e:
        # Written before the process group closes the connections, so the
        # stage that failed first has its error on disk before its peers
        # see their connections drop.
        with open(os.path.join(run_dir, f"error{rank}.txt"), "w") as f:
            f.write(("peer" if isinstance(e, _PeerError) else "own") + "\n" + traceback.format_exc())
        raise
    finally:
        if initialized:
            dist.destroy_process_group()


class _Slot:
    """A tensor in a message header: its place among the message's tensors."""

    def __init__(self, index: int, shape: Tuple[int, ...], dtype: torch.dtype, requires_grad: bool):
        self.index, self.shape, self.dtype, self.requires_grad = index, shape, dtype, requires_grad


_HEADER_LENGTH, _HEADER, _ACTIVATION, _GRADIENT = range(4)
_TAGS_PER_KIND = 1 << 12


def _tag(micro_batch: int, kind: int, index: int = 0) -> int:
    # Unique per message, so that a mismatch of the two sides' orders shows
    # as a hang (then gloo's timeout), never as data in the wrong tensor.
    if index >= _TAGS_PER_KIND:
        raise ValueError(f"more than {_TAGS_PER_KIND} tensors cross one stage boundary")
    return (micro_batch * 4 + kind) * _TAGS_PER_KIND + index


class _SavedBytes:
    """Storages saved for backward, charged to the micro-batch whose forward
    saved them and released after its backward."""

    def __init__(self, excluded: set):
        self.excluded = excluded  # the stage's parameters' and buffers' storages
        self.count: Dict[Any, List[int]] = {}  # storage -> [nbytes, micro-batches holding it]
        self.held: Dict[int, Dict[Any, int]] = {}
        self.current: Optional[int] = None
        self.live = 0
        self.peak = 0

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        key, nbytes = _storage(tensor)
        if key not in self.excluded:
            held = self.held.setdefault(self.current, {})
            if key not in held:
                held[key] = nbytes
                entry = self.count.setdefault(key, [nbytes, 0])
                entry[1] += 1
                if entry[1] == 1:
                    self.live += nbytes
                    self.peak = max(self.peak, self.live)
        return tensor  # saved as it is: only observed

    def release(self, micro_batch: int) -> None:
        for key in self.held.pop(micro_batch, {}):
            entry = self.count[key]
            entry[1] -= 1
            if entry[1] == 0:
                self.live -= entry[0]
                del self.count[key]


def _storage(tensor: torch.Tensor) -> Tuple[Any, int]:
    try:
        # untyped_storage from torch 2.0; storage() (a TypedStorage) before.
        storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()
        return (tensor.device.type, storage.data_ptr()), storage.nbytes()
    except (RuntimeError, NotImplementedError, TypeError):  # no storage (sparse, wrappers)
        return ("tensor", id(tensor)), tensor.numel() * tensor.element_size()


class _Stage:
    def __init__(self, payload: Dict[str, Any]):
        self.__dict__.update(payload)
        self.first = self.stage == 0
        self.last = self.stage == self.num_stages - 1
        self.module = self.holder.submod
        tensors = list(self.holder.parameters()) + list(self.holder.buffers())
        self.saved = _SavedBytes({_storage(t)[0] for t in tensors})
        self.pending: List[Tuple[Any, Any]] = []  # (gloo work, the buffer it sends)
        self.state: Dict[int, Tuple[List[torch.Tensor], Any]] = {}
        self.per_micro_batch = [0] * self.micro_batches
        self.compute = self.recv_wait = 0.0
        self.loss_sum = 0.0

    # -- messages --------------------------------------------------------
    def _send(self, tensor: torch.Tensor, dst: int, tag: int) -> None:
        self.pending = [(w, t) for w, t in self.pending if not w.is_completed()]
        # isend: a blocking gloo send waits for the receiver to post its
        # recv, and 1F1B's stages would wait on each other.
        tensor = tensor.detach().contiguous()
        try:
            self.pending.append((dist.isend(tensor, dst, tag=tag), tensor))
        except RuntimeError as e:
            raise _PeerError(f"stage {self.stage}: sending to stage {dst} failed: {e}") from e

    def _recv(self, tensor: torch.Tensor, src: int, tag: int) -> torch.Tensor:
        start = time.perf_counter()
        try:
            dist.recv(tensor, src, tag=tag)
        except RuntimeError as e:
            raise _PeerError(f"stage {self.stage}: receiving from stage {src} failed: {e}") from e
        self.recv_wait += time.perf_counter() - start
        return tensor

    def _send_values(self, values: List[Any], m: int) -> List[torch.Tensor]:
        """Sends values to the next stage; returns the sent tensors that need
        a gradient, in the order the next stage returns their gradients."""
        tensors: List[torch.Tensor] = []

        def slot(t):
            tensors.append(t)
            return _Slot(len(tensors) - 1, tuple(t.shape), t.dtype, t.requires_grad)

        header = pickle.dumps(_map(values, slot, torch.Tensor))
        dst = self.stage + 1
        self._send(torch.tensor([len(header)], dtype=torch.int64), dst, _tag(m, _HEADER_LENGTH))
        self._send(torch.frombuffer(bytearray(header), dtype=torch.uint8), dst, _tag(m, _HEADER))
        for i, t in enumerate(tensors):
            self._send(t, dst, _tag(m, _ACTIVATION, i))
        return [t for t in tensors if t.requires_grad]

    def _recv_values(self, m: int) -> Tuple[List[Any], List[torch.Tensor]]:
        """The previous stage's values, and the received tensors that need a
        gradient (leaves here: backward leaves their gradients in .grad)."""
        src = self.stage - 1
        length = self._recv(torch.empty(1, dtype=torch.int64), src, _tag(m, _HEADER_LENGTH))
        header = self._recv(torch.empty(int(length[0]), dtype=torch.uint8), src, _tag(m, _HEADER))
        structure = pickle.loads(header.numpy().tobytes())
        slots: List[_Slot] = []
        _map(structure, slots.append, _Slot)
        tensors = []
        for s in sorted(slots, key=lambda s: s.index):
            t = self._recv(torch.empty(s.shape, dtype=s.dtype), src, _tag(m, _ACTIVATION, s.index))
            tensors.append(t.requires_grad_(s.requires_grad))
        values = _map(structure, lambda s: tensors[s.index], _Slot)
        return values, [t for t in tensors if t.requires_grad]

    # -- the schedule ----------------------------------------------------
    def forward(self, m: int) -> None:
        env: Dict[str, Any] = {name: values[m] for name, values in self.inputs.items()}
        for name, attr in self.attrs.items():
            env[name] = getattr(self.holder, attr)
        received: List[torch.Tensor] = []
        if not self.first:
            values, received = self._recv_values(m)
            env.update(zip(self.recv, values))
        start = time.perf_counter()
        self.saved.current = m
        with torch.autograd.graph.saved_tensors_hooks(self.saved.pack, lambda t: t):
            for op, name, target, args, kwargs in self.program:
                args = _map(args, lambda r: env[r.name], _Ref)
                kwargs = _map(kwargs, lambda r: env[r.name], _Ref)
                if op == "call_module":
                    env[name] = self.module(*args, **kwargs)
                else:  # split_module's top level only has getitems besides
                    env[name] = target(*args, **kwargs)
            if self.last:
                output = _map(self.output, lambda r: env[r.name], _Ref)
                targets = self.targets
                loss = self.loss_fn(output) if targets is None else self.loss_fn(output, targets[m])
                if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
                    got = (f"a tensor of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor)
                           else f"a {type(loss).__name__}")
                    raise ValueError(f"loss_fn must return a scalar tensor, got {got}")
                # 1/B: the micro-batch means average to the whole batch's mean.
                loss = loss / self.micro_batches
        self.saved.current = None
        self.compute += time.perf_counter() - start
        self.per_micro_batch[m] = sum(self.saved.held.get(m, {}).values())
        if self.last:
            self.loss_sum += float(loss.detach())
            self.state[m] = (received, loss)
        else:
            outputs = self._send_values([env[name] for name in self.send], m)
            self.state[m] = (received, outputs)

    def backward(self, m: int) -> None:
        received, outputs = self.state.pop(m)
        if self.last:
            grads = None
            outputs = [outputs] if outputs.requires_grad else []
        else:
            grads = [self._recv(torch.empty_like(t), self.stage + 1, _tag(m, _GRADIENT, i))
                     for i, t in enumerate(outputs)]
        start = time.perf_counter()
        if outputs:
            torch.autograd.backward(outputs, grads)
        self.compute += time.perf_counter() - start
        # autograd has freed m's graph (retain_graph=False), so its saved
        # tensors are no longer held.
        self.saved.release(m)
        for i, t in enumerate(received):
            grad = t.grad if t.grad is not None else torch.zeros_like(t)
            self._send(grad, self.stage - 1, _tag(m, _GRADIENT, i))

    def run(self) -> Dict[str, Any]:
        order = schedule_order(self.schedule, self.stage, self.num_stages, self.micro_batches)
        for p in self.holder.parameters():
            p.grad = None
        try:
            dist.barrier()  # time the step, not the processes' start
        except RuntimeError as e:
            raise _PeerError(f"stage {self.stage}: the barrier before the step failed: {e}") from e
        start = time.perf_counter()
        in_flight = max_in_flight = 0
        for kind, m in order:
            if kind == "F":
                self.forward(m)
                in_flight += 1
                max_in_flight = max(max_in_flight, in_flight)
            else:
                self.backward(m)
                in_flight -= 1
        try:
            for work, _ in self.pending:
                work.wait()
        except RuntimeError as e:
            raise _PeerError(f"stage {self.stage}: a send failed: {e}") from e
        step = time.perf_counter() - start
        grads = {self.param_names[n]: p.grad.detach().clone()
                 for n, p in self.holder.named_parameters() if p.grad is not None}
        return {
            "stage": self.stage, "nodes": self.nodes,
            "peak_saved_bytes": self.saved.peak,
            "saved_bytes_per_micro_batch": self.per_micro_batch,
            "step_seconds": step, "compute_seconds": self.compute,
            "recv_wait_seconds": self.recv_wait, "max_in_flight": max_in_flight,
            "order": [f"{k}{m}" for k, m in order],
            "grads": grads, "loss": self.loss_sum if self.last else None,
        }

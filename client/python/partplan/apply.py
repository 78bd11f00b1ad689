"""apply_plan: runnable submodules from a plan, by torch.fx's own split_module.

    gm = partplan.trace(model)
    response = client.plan(partplan.export(gm, (x,)), devices=["8GiB", "8GiB"])
    split = partplan.apply_plan(gm, response)
    split.submod_0, split.submod_1        # one GraphModule per partition
    torch.testing.assert_close(split(x), gm(x))

The plan only says which partition every call_* node is in; split_module
(torch.fx.passes.split_module) builds the submodules and the top-level graph
calling them, exactly as torch.fx's Partitioner does with its own plans. The
names are split_module's: `submod_<partition id>`.
"""

from typing import Any, Dict, Iterable, Mapping, Optional, Union

import torch
import torch.fx
import torch.nn as nn
from torch.fx.node import Node
from torch.fx.passes.split_module import split_module

from . import messages as pb
from .client import indexed_assignment, partition_by_node_index
from .exporter import trace

OP_NODES = ("call_module", "call_function", "call_method")


def assignment_of(response: Any, graph: Any = None) -> Dict[str, int]:
    """{node name: partition id} from any planner response or plan:
    PartitionGraphResponse, PlanResponse, PartitionPlan, ShardGraphResponse
    (shard ids), SplitGraphResponse (its submodules' nodes), a sequence of
    NodePartitions, or a dict. A plan that names nodes by index
    (node_references="indices") needs `graph`: the Graph that was sent, or
    its node names in order (a GraphModule's, when exported from it)."""
    if isinstance(response, Mapping):
        return {str(k): int(v) for k, v in response.items()}
    if isinstance(response, (pb.PartitionGraphResponse, pb.PlanResponse)):
        response = response.plan
    if partition_by_node_index(response) is not None:
        return dict(indexed_assignment(response, graph))
    if isinstance(response, pb.SplitGraphResponse):
        return {node: sub.partition for sub in response.submodules for node in sub.nodes}
    if isinstance(response, (pb.PartitionPlan, pb.ShardGraphResponse)):
        return {a.node: a.partition for a in response.assignments}
    if isinstance(response, Iterable):
        out = {}
        for a in response:
            if isinstance(a, pb.NodePartition):
                out[a.node] = a.partition
            else:
                node, partition = a
                out[node] = int(partition)
        return out
    raise TypeError(f"no node -> partition assignment in a {type(response).__name__}")


class _DeviceCall(nn.Module):
    """Runs a submodule on a device, moving tensor arguments there first."""

    def __init__(self, module: nn.Module, device: torch.device):
        super().__init__()
        self.module = module.to(device)
        self.device = device

    def forward(self, *args):
        moved = torch.fx.node.map_aggregate(
            args, lambda a: a.to(self.device) if isinstance(a, torch.Tensor) else a)
        return self.module(*moved)


def apply_plan(
    graph_module: nn.Module,
    response: Any,
    *,
    keep_original_order: bool = False,
    devices: Optional[Mapping[int, Union[str, torch.device]]] = None,
    leaf_modules: Iterable[Union[type, str]] = (),
) -> torch.fx.GraphModule:
    """The split GraphModule of `graph_module` for a plan's assignment.

    graph_module: the GraphModule that was exported (best), or the model
      itself, which is then traced again (with the same leaf_modules as for
      export) and must give the same node names.
    response: a PartitionGraph/Plan/SplitGraph/ShardGraph response, a
      PartitionPlan, NodePartitions or a {node: partition} dict, or a
      training plan (PlanTrainingResponse, TrainingPlan): one submodule a
      stage.
    keep_original_order: split_module's: submodules in order of first
      appearance instead of a topological order.
    devices: {logical device id: torch device}. With it (and a
      PartitionGraph/Plan response, which places partitions on devices),
      every submodule is moved to the device of its partition (the first
      one when replicated) and its inputs are moved there when it is called.

    Every call_* node of the graph must be assigned, and nothing else.
    Raises ValueError naming the nodes that are not.

    A partition none of whose values is used outside it (a `torch._assert`
    alone, say) becomes a submodule that returns nothing and is still
    called, as the server's SplitGraph splits it.
    """
    if isinstance(graph_module, torch.fx.GraphModule) and not leaf_modules:
        gm = graph_module
    else:
        gm = trace(graph_module, leaf_modules=leaf_modules)
    # The exporter writes one Graph node per GraphModule node, in order, so
    # a plan by node index reads with the module's node names.
    from .training_exports import is_training_plan, training_stages

    if is_training_plan(response):  # its stages, from the nodes' order
        assignment = {name: stage for stage, names in enumerate(training_stages(gm, response))
                      for name in names}
    else:
        assignment = assignment_of(response, [n.name for n in gm.graph.nodes])
    op_nodes = [n for n in gm.graph.nodes if n.op in OP_NODES]
    missing = [n.name for n in op_nodes if n.name not in assignment]
    known = {n.name for n in gm.graph.nodes}
    unknown = [name for name in assignment if name not in known]
    not_ops = [name for name in assignment if name in known and name not in {n.name for n in op_nodes}]
    problems = []
    if missing:
        problems.append(f"{len(missing)} call_* node(s) without a partition: {_some(missing)}")
    if unknown:
        problems.append(f"{len(unknown)} assigned node(s) not in the graph: {_some(unknown)}")
    if not_ops:
        problems.append(f"placeholder/get_attr/output node(s) assigned: {_some(not_ops)}")
    if problems:
        raise ValueError("the plan does not match the graph (was it exported from this "
                         "GraphModule?): " + "; ".join(problems))
    split = _split(gm, assignment, keep_original_order)
    if devices:
        placement = _partition_devices(response)
        for partition, logical_ids in placement.items():
            name = f"submod_{partition}"
            if not logical_ids or logical_ids[0] not in devices or not hasattr(split, name):
                continue
            device = torch.device(devices[logical_ids[0]])
            setattr(split, name, _DeviceCall(getattr(split, name), device))
    return split


def _some(names, limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _outputless_partitions(gm: torch.fx.GraphModule, assignment: Dict[str, int]) -> Dict[int, Node]:
    """{partition: its last node} for every partition none of whose values
    is used outside it: nodes kept for their side effects (`torch._assert`,
    in-place updates of another partition's tensors) or dead code."""
    last: Dict[int, Node] = {}
    has_output = set()
    for node in gm.graph.nodes:
        if node.name not in assignment:
            continue
        part = assignment[node.name]
        last[part] = node
        if any(assignment.get(user.name) != part for user in node.users):
            has_output.add(part)
    return {part: node for part, node in last.items() if part not in has_output}


def _split(gm: torch.fx.GraphModule, assignment: Dict[str, int],
           keep_original_order: bool) -> torch.fx.GraphModule:
    """split_module, keeping the partitions that output nothing.

    torch 1.13's split_module fails with an IndexError on a partition none
    of whose values is used outside it. Plans have them: COST_AWARE leaves
    each `torch._assert` of torchvision's VisionTransformer in a partition of
    its own. Such a partition still has to run (an assert must still fail on
    bad input), so, as later torch versions' split_module does, it becomes a
    submodule that returns nothing and that the top-level graph calls for its
    effects. split_module runs on a copy of the graph whose output also
    returns the last node of each such partition, which gives the partition
    an output; the split's top-level output and those submodules' outputs
    are then put back to what they are without it. The extra output adds no
    dependency between partitions, so the submodules, their order and their
    inputs are split_module's own."""
    outputless = _outputless_partitions(gm, assignment)
    if not outputless:
        return split_module(gm, gm, lambda node: assignment[node.name],
                            keep_original_order=keep_original_order)
    graph = torch.fx.Graph()
    values: Dict[Node, Node] = {}
    output_value, output_node = graph.graph_copy(gm.graph, values, return_output_node=True)
    if output_node is None:
        raise ValueError("the graph has no output node")
    kept = tuple(values[node] for node in outputless.values())
    graph.output((output_value, kept), type_expr=output_node.type)
    names = [n.name for n in graph.nodes]
    assert names[:-1] == [n.name for n in gm.graph.nodes if n.op != "output"], "graph_copy renamed nodes"
    copy = torch.fx.GraphModule(gm, graph, gm.__class__.__name__)
    split = split_module(copy, copy, lambda node: assignment[node.name],
                         keep_original_order=keep_original_order)
    for node in split.graph.nodes:
        if node.op == "output":
            node.args = (node.args[0][0],)
    split.recompile()
    for part in outputless:
        sub = getattr(split, f"submod_{part}")
        for node in sub.graph.nodes:
            if node.op == "output":
                node.args = ((),)
        sub.recompile()
    return split


def _partition_devices(response: Any) -> Dict[int, list]:
    if isinstance(response, (pb.PartitionGraphResponse, pb.PlanResponse)):
        response = response.plan
    if isinstance(response, pb.PartitionPlan):
        return {p.id: list(p.logical_device_ids) for p in response.partitions}
    if isinstance(response, pb.ShardGraphResponse):
        return {s.id: [s.logical_device_id] for s in response.shards}
    raise TypeError("devices= needs a response that places partitions on devices "
                    "(PartitionGraph, Plan or ShardGraph)")

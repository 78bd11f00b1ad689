"""Plans as text tables, laid out like the C++ CLI's `--output=table`."""

from typing import List, Sequence

from google.protobuf import json_format

from . import messages as pb
from ._sizes import format_byte_size


def _render(rows: List[Sequence[str]], indent: str = "  ") -> str:
    widths: List[int] = []
    for row in rows:
        for i, cell in enumerate(row):
            if i >= len(widths):
                widths.append(0)
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) if i + 1 < len(row) else cell for i, cell in enumerate(row)]
        lines.append(indent + "  ".join(cells))
    return "\n".join(lines) + "\n"


def format_duration(seconds: float) -> str:
    """Like absl::FormatDuration: 1.5s, 17ms, 250us, 0."""
    if seconds == 0:
        return "0"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.6g}{unit}"
    raise AssertionError("unreachable")


def _latency(seconds: float) -> str:
    return "-" if seconds == 0 else format_duration(seconds)


def _ids(ids) -> str:
    return ",".join(str(i) for i in ids) if len(ids) else "-"


def _share(used: int, available: int) -> str:
    return "-" if available <= 0 else f"{100.0 * used / available:.0f}%"


def format_plan(plan: pb.PartitionPlan) -> str:
    partitions = [("ID", "NODES", "MEMORY", "DEVICES", "LATENCY")]
    for p in plan.partitions:
        # One of nodes / node_indices is filled, as the request's node_references asked.
        nodes = len(p.nodes) + len(p.node_indices)
        partitions.append((str(p.id), str(nodes), format_byte_size(p.memory_bytes),
                           _ids(p.logical_device_ids), _latency(p.latency_seconds)))
    devices = [("ID", "NAME", "USED", "AVAILABLE", "USE", "PARTITIONS")]
    for u in plan.device_usage:
        devices.append((str(u.logical_id), u.name, format_byte_size(u.used_bytes),
                        format_byte_size(u.available_bytes), _share(u.used_bytes, u.available_bytes),
                        _ids(u.partitions)))
    s = plan.summary
    figures = [
        ("planner", s.planner or "-"),
        ("nodes", f"{s.node_count} ({s.op_node_count} call_*)"),
        ("partitions", str(s.partition_count)),
        ("devices used", f"{s.devices_used} of {len(plan.device_usage)}"),
        ("graph size", format_byte_size(s.graph_total_bytes)),
        ("largest partition", format_byte_size(s.max_partition_bytes)),
        ("cross-partition traffic", format_byte_size(s.cross_partition_bytes)),
        ("critical path latency", _latency(s.critical_path_latency_seconds)),
        ("planner time", format_duration(s.planner_seconds)),
    ]
    text = ("Partitions\n" + _render(partitions) + "\nDevices\n" + _render(devices)
            + "\nSummary\n" + _render(figures))
    if s.bound:
        text += f"\nBound\n  {s.bound}\n"
    if s.notes:
        text += "\nNotes\n" + "".join(f"  - {note}\n" for note in s.notes)
    return text


def format_response(response) -> str:
    """A table for responses holding a PartitionPlan; proto3 JSON otherwise."""
    if isinstance(response, pb.PartitionPlan):
        return format_plan(response)
    plan = getattr(response, "plan", None)
    if isinstance(plan, pb.PartitionPlan):
        return format_plan(plan)
    return json_format.MessageToJson(response, indent=1) + "\n"

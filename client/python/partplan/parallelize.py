"""The Parallelize RPC from Python: a transformer, a cluster, the ranked
tensor x pipeline x data-parallel configurations.

    import partplan
    model = partplan.transformer(layers=40, hidden_size=5120, attention_heads=40,
                                 sequence_length=2048, vocabulary_size=51200)
    hosts = partplan.cluster("A100-SXM4-80GB", hosts=4, devices_per_host=8,
                             intra_host_bytes_per_second=300e9,
                             inter_host_bytes_per_second=25e9, busy=["3:7"])
    with partplan.Client("localhost:50051") as client:
        response = partplan.parallelize(client, model, hosts, global_batch_size=256,
                                        max_configurations=5)
    print(partplan.format_configurations(response))

proto/partplan/v1/parallelize.proto states the cost model; docs/parallelize.md
derives it. Arguments are checked here only as far as naming the Python
argument helps; the server checks everything and answers INVALID_ARGUMENT
naming the request field (`transformer.attention_heads`, ...).
"""

import math
import numbers
from typing import Iterable, Mapping, Optional, Sequence

from . import accelerators
from . import messages as pb
from ._sizes import format_byte_size, parse_byte_size
from .table import _render

# ParallelizeOptions fields that list enum values, and the enum each lists.
_ENUM_LISTS = {
    "schedules": (pb.PipelineScheduleKind, ""),
    "zero_stages": (pb.ZeroStageKind, ""),
    "recompute": (pb.LayerRecompute, "LAYER_RECOMPUTE_"),
}

# Short names accepted besides the enum names (any case, "-" or "_").
_SCHEDULE_ALIASES = {"1F1B": "ONE_F_ONE_B", "INTERLEAVED": "INTERLEAVED_1F1B",
                     "ZB_H1": "ZERO_BUBBLE_H1", "ZBH1": "ZERO_BUBBLE_H1"}
_ZERO_ALIASES = {"NONE": "ZERO_NONE", "ZERO_0": "ZERO_NONE", "ZERO_1": "ZERO_OPTIMIZER",
                 "ZERO_2": "ZERO_GRADIENTS", "ZERO_3": "ZERO_PARAMETERS",
                 "OPTIMIZER": "ZERO_OPTIMIZER", "GRADIENTS": "ZERO_GRADIENTS",
                 "PARAMETERS": "ZERO_PARAMETERS"}

# Call options of Client.call, passed through by parallelize().
_CALL_OPTIONS = ("timeout", "metadata", "retry")


def _positive_int(value, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{field}: expected a positive integer, got {value!r}")
    return int(value)


def _count(value, field: str) -> int:
    """A non-negative integer (0: the proto's default)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{field}: expected a non-negative integer, got {value!r}")
    return int(value)


def _positive_real(value, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{field}: expected a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{field}: expected a finite number above 0, got {value!r}")
    return float(value)


def _rate(value, field: str) -> float:
    """Bytes/s: a number, or a size such as "300GB" or "25GB/s"."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower().endswith("/s"):
            text = text[:-2]
        try:
            value = parse_byte_size(text)
        except ValueError as e:
            raise ValueError(f"{field}: {e}") from None
    return _positive_real(value, field)


def _memory(value, field: str) -> float:
    """Bytes: a number, or a size such as "80GiB"."""
    if isinstance(value, str):
        try:
            value = parse_byte_size(value)
        except ValueError as e:
            raise ValueError(f"{field}: {e}") from None
    return _positive_real(value, field)


def accelerator(preset=None, *, name: Optional[str] = None, memory_bytes=None,
                peak_flops_per_second=None) -> pb.Accelerator:
    """A partplan.v1.Accelerator: memory and peak FLOP/s.

    `preset` is a name of partplan.accelerators ("A100-SXM4-80GB", "H100",
    ... in any case; its memory is the vendor's decimal figure, 80 GB =
    80e9 bytes, and its FLOP/s the peak dense BF16), a
    partplan.accelerators.Accelerator, a partplan.v1.Accelerator, or a dict
    of the message's fields. `name`, `memory_bytes` (bytes or a size such as
    "80GiB") and `peak_flops_per_second` override it, or give them all
    without a preset."""
    if isinstance(preset, Mapping):
        unknown = set(preset) - {"name", "memory_bytes", "peak_flops_per_second"}
        if unknown:
            raise ValueError(f"accelerator: unknown figures {sorted(unknown)}; give name, "
                             "memory_bytes and peak_flops_per_second")
        preset = pb.Accelerator(name=preset.get("name", ""),
                                memory_bytes=_memory(preset.get("memory_bytes"),
                                                     "accelerator.memory_bytes"),
                                peak_flops_per_second=_positive_real(
                                    preset.get("peak_flops_per_second"),
                                    "accelerator.peak_flops_per_second"))
    result = pb.Accelerator()
    if isinstance(preset, pb.Accelerator):
        result.CopyFrom(preset)
    elif preset is not None:
        figures = accelerators.get(preset, "preset")
        # The name asked for, which may be an alias ("A100-SXM4-80GB" of
        # "A100-80GB"): it names the device type in the response.
        result.name = preset if isinstance(preset, str) else figures.name
        result.memory_bytes = float(figures.memory_bytes)
        result.peak_flops_per_second = float(figures.flops_per_second)
    if name is not None:
        result.name = name
    if memory_bytes is not None:
        result.memory_bytes = _memory(memory_bytes, "memory_bytes")
    if peak_flops_per_second is not None:
        result.peak_flops_per_second = _positive_real(peak_flops_per_second,
                                                      "peak_flops_per_second")
    if result.memory_bytes <= 0 or result.peak_flops_per_second <= 0:
        missing = [f for f in ("memory_bytes", "peak_flops_per_second")
                   if getattr(result, f) <= 0]
        raise ValueError(f"{missing[0]}: give a preset= (one of "
                         + ", ".join(accelerators.names()) + ") or the accelerator's "
                         + " and ".join(missing))
    return result


def host_group(preset=None, *, hosts: int = 1, devices_per_host: Optional[int] = None,
               intra_host_bytes_per_second=None, inter_host_bytes_per_second=None,
               name: Optional[str] = None, memory_bytes=None,
               peak_flops_per_second=None) -> pb.HostGroup:
    """A partplan.v1.HostGroup: `hosts` alike hosts of `devices_per_host`
    accelerators each (the accelerator as for `accelerator()`).

    Both link figures are required, in bytes/s one direction (a number, or
    a size such as "300GB/s"): the presets carry no link figure that could
    stand for them. docs/accelerators.md lists each part's vendor
    interconnect summed over both directions and all links, which is a
    bound, not the rate between two devices of a given host (NVSwitch, a
    two-card bridge and PCIe differ); the network share of a device depends
    on the host's NICs. For DGX A100 hosts Narayanan et al. (SC'21) give
    300e9 (NVSwitch) and 25e9 (InfiniBand) per device."""
    if devices_per_host is None:
        raise ValueError("devices_per_host: give the accelerators per host, e.g. 8")
    for field, value in (("intra_host_bytes_per_second", intra_host_bytes_per_second),
                         ("inter_host_bytes_per_second", inter_host_bytes_per_second)):
        if value is None:
            raise ValueError(
                f"{field}: required, in bytes/s one direction per device (e.g. 300e9 for "
                "NVSwitch A100 hosts, 25e9 of InfiniBand per device); accelerator presets carry "
                "no link figures (docs/accelerators.md)")
    group = pb.HostGroup(
        hosts=_positive_int(hosts, "hosts"),
        devices_per_host=_positive_int(devices_per_host, "devices_per_host"),
        intra_host_bytes_per_second=_rate(intra_host_bytes_per_second,
                                          "intra_host_bytes_per_second"),
        inter_host_bytes_per_second=_rate(inter_host_bytes_per_second,
                                          "inter_host_bytes_per_second"))
    group.accelerator.CopyFrom(accelerator(preset, name=name, memory_bytes=memory_bytes,
                                           peak_flops_per_second=peak_flops_per_second))
    return group


def _busy_name(device, field: str) -> str:
    if isinstance(device, str):
        host, sep, index = device.partition(":")
        if sep and host.strip().isdigit() and index.strip().isdigit():
            return f"{int(host)}:{int(index)}"
        raise ValueError(f"{field}: {device!r} is not \"<host>:<device>\", e.g. \"3:7\"")
    if (isinstance(device, Sequence) and len(device) == 2
            and all(isinstance(x, numbers.Integral) and not isinstance(x, bool) and x >= 0
                    for x in device)):
        return f"{int(device[0])}:{int(device[1])}"
    raise ValueError(f"{field}: expected \"<host>:<device>\" or (host, device), got {device!r}")


def cluster(preset=None, *, hosts: int = 1, devices_per_host: Optional[int] = None,
            intra_host_bytes_per_second=None, inter_host_bytes_per_second=None,
            busy: Iterable = (), name: Optional[str] = None, memory_bytes=None,
            peak_flops_per_second=None,
            host_groups: Optional[Sequence[pb.HostGroup]] = None) -> pb.Cluster:
    """A partplan.v1.Cluster.

        cluster("A100-SXM4-80GB", hosts=4, devices_per_host=8,
                intra_host_bytes_per_second=300e9, inter_host_bytes_per_second="25GB/s",
                busy=["3:7"])
        cluster(host_groups=[host_group("H100", hosts=2, ...), host_group("A100", ...)])

    One group of alike hosts from the arguments of `host_group()`, or
    several as `host_groups` (hosts numbered across them, in order). `busy`
    lists devices already in use, "<host>:<device>" or (host, device)
    pairs: the configurations leave them out."""
    result = pb.Cluster()
    if host_groups is not None:
        given = [k for k, v in (("preset", preset), ("devices_per_host", devices_per_host),
                                ("intra_host_bytes_per_second", intra_host_bytes_per_second),
                                ("inter_host_bytes_per_second", inter_host_bytes_per_second),
                                ("name", name), ("memory_bytes", memory_bytes),
                                ("peak_flops_per_second", peak_flops_per_second))
                 if v is not None]
        if given or hosts != 1:
            raise ValueError(f"host_groups: give the groups, or one group's figures "
                             f"({', '.join(given) or 'hosts'}), not both")
        if not host_groups:
            raise ValueError("host_groups: give at least one host group")
        for i, group in enumerate(host_groups):
            if isinstance(group, Mapping):
                group = host_group(**group)
            if not isinstance(group, pb.HostGroup):
                raise ValueError(f"host_groups[{i}]: expected a HostGroup (partplan.host_group()) "
                                 f"or a dict of its arguments, got {type(group).__name__}")
            result.host_groups.add().CopyFrom(group)
    else:
        result.host_groups.add().CopyFrom(host_group(
            preset, hosts=hosts, devices_per_host=devices_per_host,
            intra_host_bytes_per_second=intra_host_bytes_per_second,
            inter_host_bytes_per_second=inter_host_bytes_per_second, name=name,
            memory_bytes=memory_bytes, peak_flops_per_second=peak_flops_per_second))
    if isinstance(busy, str):
        busy = [b for b in busy.split(",") if b.strip()]
    result.busy_devices.extend(_busy_name(d, f"busy[{i}]") for i, d in enumerate(busy))
    return result


def transformer(*, layers: int, hidden_size: int, attention_heads: int, sequence_length: int,
                vocabulary_size: int, ffn_hidden_size: int = 0, experts: int = 0,
                experts_per_token: int = 0) -> pb.TransformerSummary:
    """A partplan.v1.TransformerSummary: a decoder-only transformer as
    Megatron-LM builds it. `ffn_hidden_size` 0 means 4 x hidden_size;
    `experts` 0 or 1 a dense model; `experts_per_token` 0 means 1. The
    server checks the rest (heads dividing the hidden size, ...)."""
    return pb.TransformerSummary(
        layers=_positive_int(layers, "layers"),
        hidden_size=_positive_int(hidden_size, "hidden_size"),
        attention_heads=_positive_int(attention_heads, "attention_heads"),
        sequence_length=_positive_int(sequence_length, "sequence_length"),
        vocabulary_size=_positive_int(vocabulary_size, "vocabulary_size"),
        ffn_hidden_size=_count(ffn_hidden_size, "ffn_hidden_size"),
        experts=_count(experts, "experts"),
        experts_per_token=_count(experts_per_token, "experts_per_token"))


def _enum_number(field: str, value, index: int) -> int:
    enum_type, prefix = _ENUM_LISTS[field]
    where = f"{field}[{index}]"
    if isinstance(value, bool):
        raise ValueError(f"{where}: expected a name or a number, got {value!r}")
    if isinstance(value, numbers.Integral):
        if int(value) not in enum_type.values():
            raise ValueError(f"{where}: {value} is not a {enum_type.DESCRIPTOR.name}")
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a name or a number, got {value!r}")
    key = value.strip().upper().replace("-", "_").replace(" ", "_")
    aliases = _SCHEDULE_ALIASES if field == "schedules" else \
        _ZERO_ALIASES if field == "zero_stages" else {}
    key = aliases.get(key, key)
    for candidate in (key, prefix + key):
        if candidate in enum_type.keys() and not candidate.endswith("UNSPECIFIED"):
            return enum_type.Value(candidate)
    choices = ", ".join(n[len(prefix):].lower() for n in enum_type.keys()
                        if not n.endswith("UNSPECIFIED"))
    raise ValueError(f"{where}: unknown value {value!r}; one of {choices}")


def options(global_batch_size: int, **fields) -> pb.ParallelizeOptions:
    """A partplan.v1.ParallelizeOptions from its fields as keyword
    arguments. `schedules`, `zero_stages` and `recompute` take lists of
    enum names in any case ("zero_bubble_h1", "1f1b", "interleaved"; "zero_1"
    or 1 for ZERO_OPTIMIZER; "selective") or numbers; a single value is a
    list of one."""
    result = pb.ParallelizeOptions(global_batch_size=_positive_int(
        global_batch_size, "global_batch_size"))
    known = {f.name for f in pb.ParallelizeOptions.DESCRIPTOR.fields}
    for key, value in fields.items():
        if key not in known:
            raise TypeError(f"unknown option {key!r}; ParallelizeOptions has "
                            + ", ".join(sorted(known - {"global_batch_size"})))
        if value is None:
            continue
        if key in _ENUM_LISTS:
            if isinstance(value, (str, numbers.Integral)):
                value = [value]
            getattr(result, key).extend(_enum_number(key, v, i) for i, v in enumerate(value))
        else:
            try:
                setattr(result, key, value)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{key}: {e}") from None
    return result


def parallelize_request(model, cluster, *, global_batch_size: int,
                        **option_fields) -> pb.ParallelizeRequest:
    """The ParallelizeRequest parallelize() sends: `model` a
    TransformerSummary (partplan.transformer()) or a dict of its fields,
    `cluster` a Cluster (partplan.cluster()), and the options' fields."""
    if isinstance(model, Mapping):
        model = transformer(**model)
    if not isinstance(model, pb.TransformerSummary):
        raise TypeError("model: expected a TransformerSummary (partplan.transformer(...)), got "
                        f"{type(model).__name__}")
    if not isinstance(cluster, pb.Cluster):
        raise TypeError("cluster: expected a Cluster (partplan.cluster(...)), got "
                        f"{type(cluster).__name__}")
    return pb.ParallelizeRequest(transformer=model, cluster=cluster,
                                 options=options(global_batch_size, **option_fields))


def parallelize(client, model=None, cluster=None, *, global_batch_size: Optional[int] = None,
                request: Optional[pb.ParallelizeRequest] = None,
                **options_and_call_options) -> pb.ParallelizeResponse:
    """Calls Parallelize; returns the ParallelizeResponse, best first.

        parallelize(client, model, cluster, global_batch_size=256, max_configurations=5,
                    zero_stages=["zero_1"], timeout=120)

    `client` is a partplan.Client or a target ("localhost:50051", opened and
    closed here). The keyword arguments are ParallelizeOptions fields (see
    options()) and Client.call's `timeout`, `metadata` and `retry`; or give
    a whole `request`. Raises PartplanError (INVALID_ARGUMENT naming the
    field, e.g. `transformer.attention_heads`) when the server refuses it."""
    call_options = {k: options_and_call_options.pop(k) for k in _CALL_OPTIONS
                    if k in options_and_call_options}
    if request is None:
        if model is None or cluster is None or global_batch_size is None:
            raise TypeError("parallelize() needs model, cluster and global_batch_size (or request=)")
        request = parallelize_request(model, cluster, global_batch_size=global_batch_size,
                                      **options_and_call_options)
    elif model is not None or cluster is not None or options_and_call_options:
        raise TypeError("give request=, or model, cluster and options, not both")
    if isinstance(client, str):
        from .client import Client

        with Client(client) as own:
            return own.call("Parallelize", request, **call_options)
    return client.call("Parallelize", request, **call_options)


def _enum_name(enum_type, value: int) -> str:
    try:
        return enum_type.Name(value)
    except ValueError:
        return str(value)


def _memory_share(memory) -> str:
    peak, available = memory.peak, memory.available
    text = f"{format_byte_size(int(peak))}/{format_byte_size(int(available))}"
    if available > 0:
        text += f" ({100.0 * peak / available:.0f}%)"
    return text


def format_configurations(response: pb.ParallelizeResponse) -> str:
    """The configurations as a text table, best first, then why the first
    wins and what the search tried: laid out like the C++ CLI's
    `partplan parallelize --output=table`, the peak memory shown against the
    fullest device's available memory."""
    rows = [["#", "t", "p", "d", "b", "B", "schedule", "ZeRO", "recompute", "step", "tokens/s",
             "MFU", "peak memory/available", "fullest"]]
    for i, c in enumerate(response.configurations):
        schedule = "-" if c.pipeline_parallel == 1 else _enum_name(pb.PipelineScheduleKind,
                                                                   c.schedule)
        if c.chunks_per_device > 1:
            schedule += f" v={c.chunks_per_device}"
        rows.append([str(i + 1), str(c.tensor_parallel), str(c.pipeline_parallel),
                     str(c.data_parallel), str(c.micro_batch_size), str(c.micro_batches),
                     schedule, _enum_name(pb.ZeroStageKind, c.zero),
                     _enum_name(pb.LayerRecompute, c.recompute),
                     f"{c.step_seconds:.3f} s", f"{c.tokens_per_second:.0f}",
                     f"{100 * c.model_flops_utilization:.1f}%", _memory_share(c.memory),
                     c.fullest_device])
    text = "Configurations (best first):\n" + _render(rows)
    if response.why:
        text += "\n" + response.why + "\n"
    text += (f"{response.candidates} configurations: {response.pruned_by_memory} that cannot fit "
             f"by a memory bound, {response.planned} planned, {response.pruned_by_bound} proven no "
             "better by a bound.\n")
    return text


__all__ = ["accelerator", "host_group", "cluster", "transformer", "options",
           "parallelize_request", "parallelize", "format_configurations"]

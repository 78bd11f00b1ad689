"""The command line: python3 -m partplan {export,plan,validate,call,parallelize,gen-protos}.

    python3 -m partplan export torchvision.models:resnet18 --input-shape 1,3,64,64 --out g.json
    python3 -m partplan export my_model.py:Net --input-shape 2,8:int64 --out g.pb
    python3 -m partplan plan --graph g.json --target localhost:50051 \
        --device-memory 8GiB,8GiB --mode size_based --output table
    python3 -m partplan validate --graph g.json --target localhost:50051
    python3 -m partplan call PartitionGraph --request client/examples/partition_graph.json
    python3 -m partplan parallelize --request client/examples/parallelize.json --output table

Exit status: 0 on success, 2 for bad usage or input, and the gRPC status code
(3 INVALID_ARGUMENT, 9 FAILED_PRECONDITION, 14 UNAVAILABLE, ...) when the
call fails; the message and every field violation go to stderr.
"""

import argparse
import importlib
import importlib.util
import json
import operator
import os
import sys
from typing import List, Optional

from google.protobuf import json_format

from ._sizes import format_byte_size, parse_byte_size

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad usage or input: main() prints the command's usage line and the
    message, as argparse does for its own errors, and exits 2."""


# ---------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------


def load_object(spec: str):
    """`package.module:attr` or `path/to/file.py:attr` -> the attribute
    (dotted attributes allowed: `pkg.mod:Outer.factory`)."""
    if ":" not in spec:
        raise UsageError(f"{spec!r}: want <module path>:<factory or class>, "
                         "e.g. torchvision.models:resnet18 or model.py:Net")
    module_part, attr_part = spec.rsplit(":", 1)
    if module_part.endswith(".py") or os.sep in module_part:
        path = os.path.abspath(module_part)
        if not os.path.exists(path):
            raise UsageError(f"{module_part}: no such file")
        name = "_partplan_user_" + os.path.splitext(os.path.basename(path))[0]
        file_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(file_spec)
        sys.modules[name] = module
        sys.path.insert(0, os.path.dirname(path))
        file_spec.loader.exec_module(module)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_part)
        except ImportError as e:
            raise UsageError(f"cannot import {module_part}: {e}") from None
    obj = module
    for atom in attr_part.split("."):
        try:
            obj = getattr(obj, atom)
        except AttributeError:
            raise UsageError(f"{module_part} has no attribute {attr_part!r}") from None
    return obj


def parse_input_spec(text: str):
    """"1,3,64,64" (float32) or "2,8:int64" -> (shape, dtype)."""
    import torch

    shape_text, _, dtype_text = text.partition(":")
    try:
        shape = [int(d) for d in shape_text.split(",") if d.strip()] if shape_text.strip() else []
    except ValueError:
        raise UsageError(f"--input-shape {text!r}: want comma-separated sizes, e.g. 1,3,64,64") from None
    if any(d < 0 for d in shape):
        raise UsageError(f"--input-shape {text!r}: sizes must not be negative")
    dtype_name = (dtype_text or "float32").strip()
    dtype = getattr(torch, dtype_name.replace("torch.", ""), None)
    if not isinstance(dtype, torch.dtype):
        raise UsageError(f"--input-shape {text!r}: unknown dtype {dtype_name!r}")
    return shape, dtype


def _check_kwargs(factory, spec: str, kwargs: dict) -> None:
    """--kwargs must be arguments the factory takes."""
    import inspect

    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return  # no signature to check against
    try:
        signature.bind(**kwargs)
    except TypeError as e:
        raise UsageError(f"--kwargs for {spec}{signature}: {e}") from None


def _check_input_count(model, count: int) -> None:
    """One --input-shape per positional forward() argument without a default
    (and no more than it takes)."""
    import inspect

    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return  # no signature to check against
    positional = [p for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p.name for p in positional if p.default is p.empty]
    variadic = any(p.kind == p.VAR_POSITIONAL for p in params)
    if count >= len(required) and (variadic or count <= len(positional)):
        return
    names = ", ".join(p.name for p in positional) or "none"
    takes = f"{len(required)}" if len(required) == len(positional) else \
        f"{len(required)} to {len(positional)}"
    raise UsageError(
        f"{type(model).__name__}.forward() takes {takes} argument(s) ({names}) but "
        f"{count} --input-shape given; give one per argument, e.g. --input-shape 1,3,224,224 "
        "(float32) or --input-shape 2,128:int64")


def make_input(shape, dtype, high: int):
    import torch

    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, dtype=dtype)
    if dtype == torch.bool:
        return torch.zeros(shape, dtype=dtype)
    return torch.randint(0, max(high, 1), shape, dtype=dtype)


def _export_graph(exporter, model, inputs, leaves, args):
    """The graph `export` writes: export_aten's with --aten (writing its
    roles to --roles-out), else export's."""
    if args.aten:
        result = exporter.export_aten(model, inputs, with_backward=args.with_backward, name=args.name)
        graph = result.graph
        if args.roles_out:
            with open(args.roles_out, "w") as f:
                json.dump(result.roles, f, indent=1)
                f.write("\n")
    else:
        graph = exporter.export(model, inputs, leaf_modules=leaves, name=args.name,
                                flops=not args.no_flops, modules=not args.no_modules)
    return graph


def cmd_export(args) -> int:
    import torch

    from . import exporter
    from .graph_io import message_to_json, save_message

    obj = load_object(args.model)
    kwargs = args.kwargs or {}
    if isinstance(obj, torch.nn.Module):
        model = obj
    elif callable(obj):
        _check_kwargs(obj, args.model, kwargs)
        model = obj(**kwargs)
    else:
        raise UsageError(f"{args.model} is neither a module nor a factory")
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{args.model} returned a {type(model).__name__}, not a torch.nn.Module")
    if not args.train:
        model.eval()
    specs = [parse_input_spec(s) for s in args.input_shape or []]
    _check_input_count(model, len(specs))
    torch.manual_seed(args.seed)
    inputs = [make_input(*spec, high=args.int_high) for spec in specs]
    leaves = []
    for leaf in args.leaf_module or []:
        leaves.append(load_object(leaf) if ":" in leaf else leaf)
    try:
        graph = _export_graph(exporter, model, inputs, leaves, args)
    except exporter.ExampleInputsError as e:
        shapes = " ".join(args.input_shape or [])
        raise UsageError(f"--input-shape {shapes}: {e}") from None
    if args.out and args.out != "-":
        binary = None if args.format == "auto" else args.format == "binary"
        save_message(graph, args.out, binary=binary)
        total = sum(n.size_bytes.total_bytes for n in graph.nodes)
        print(f"{args.out}: {len(graph.nodes)} nodes, {format_byte_size(total)}", file=sys.stderr)
    elif args.format == "binary":
        sys.stdout.buffer.write(graph.SerializeToString())
    else:
        sys.stdout.write(message_to_json(graph) + "\n")
    return 0


# ---------------------------------------------------------------------------
# plan, validate, call
# ---------------------------------------------------------------------------


def _parse_duration(text: str) -> float:
    """"30s", "500ms", "2m", "1.5" (seconds)."""
    t = text.strip().lower()
    for suffix, scale in (("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if t.endswith(suffix):
            t, mult = t[: -len(suffix)], scale
            break
    else:
        mult = 1.0
    try:
        value = float(t) * mult
    except ValueError:
        raise UsageError(f"invalid duration {text!r}; e.g. 30s, 500ms, 2m") from None
    if value <= 0:
        raise UsageError(f"duration must be positive, got {text!r}")
    return value


def _client(args):
    from .client import Client, NO_RETRY, RetryPolicy

    retry = RetryPolicy(max_attempts=args.attempts) if args.attempts > 1 else NO_RETRY
    if args.token and args.token_file:
        raise UsageError("give --token or --token-file, not both")
    token = args.token  # an empty --token is none, as in the C++ CLI
    if args.token_file:
        try:
            with open(os.path.expanduser(args.token_file)) as f:
                token = f.read().strip()
        except OSError as e:
            raise UsageError(f"--token-file: {e}") from None
        if not token:
            raise UsageError(f"--token-file: {args.token_file!r} is empty")
    return Client(
        args.target,
        timeout=_parse_duration(args.deadline) if args.deadline else None,
        retry=retry,
        tls=args.tls or None,
        root_certificates=args.root_certs,
        private_key=args.client_key,
        certificate_chain=args.client_cert,
        server_name=args.server_name,
        token=token,
        metadata=[("x-request-id", args.request_id)] if args.request_id else (),
    )


def _print_response(response, output: str, request=None) -> None:
    from .table import format_response

    if output == "table":
        sys.stdout.write(format_response(response))
    elif output == "html":
        from .report import report_html

        # The request labels the report's edges with the bytes crossing them.
        sys.stdout.write(report_html(response, request))
    else:
        write_json(response, sys.stdout)


# Messages without a repeated field longer than this (at any depth) are
# converted whole by json_format; others field by field, their long repeated
# fields element by element.
_JSON_WHOLE_ELEMENTS = 256
_JSON_CHUNK = 1 << 20


def write_json(message, out) -> None:
    """Writes json_format.MessageToJson(message, indent=1) and a newline to
    `out`, the same text, as it goes: a large response (a plan naming 10^6
    nodes) is never held as a dict of dicts and a string besides the message,
    which cost 40x its serialised size and seconds of the pure-Python indented
    encoder."""
    pieces: List[str] = []
    size = 0

    def emit(text: str) -> None:
        nonlocal size
        pieces.append(text)
        size += len(text)
        if size >= _JSON_CHUNK:
            out.write("".join(pieces))
            pieces.clear()
            size = 0

    _write_message_json(message, 0, emit)
    emit("\n")
    out.write("".join(pieces))


def _small_json(value, depth: int) -> str:
    """json.dumps(value, indent=1) as it reads nested `depth` levels deep
    (JSON strings hold no raw newline)."""
    return json.dumps(value, indent=1).replace("\n", "\n" + " " * depth)


def _write_message_json(message, depth: int, emit) -> None:
    from google.protobuf.descriptor import FieldDescriptor

    fields = message.ListFields()
    if (not _long_json(fields) or message.DESCRIPTOR.full_name.startswith("google.protobuf.")
            or any(f.is_extension for f, _ in fields)):
        emit(_small_json(json_format.MessageToDict(message), depth))
        return
    inner = " " * (depth + 1)
    emit("{")
    for i, (field, value) in enumerate(fields):
        emit(("\n" if i == 0 else ",\n") + inner + json.dumps(field.json_name) + ": ")
        repeated = field.label == FieldDescriptor.LABEL_REPEATED
        map_field = repeated and field.message_type is not None and field.message_type.GetOptions().map_entry
        element = _element_json(field, depth + 2) if repeated and not map_field else None
        if element is not None or (repeated and field.message_type is not None and not map_field):
            item = "\n" + " " * (depth + 2)
            if element is not None:
                # In slices: one string per slice, not three calls per element.
                sep = "," + item
                for start in range(0, len(value), 4096):
                    emit(("[" if start == 0 else ",") + item
                         + sep.join(map(element, value[start:start + 4096])))
            else:
                for j, v in enumerate(value):
                    emit(("," if j else "[") + item)
                    _write_message_json(v, depth + 2, emit)
            emit("\n" + inner + "]")
        elif field.message_type is not None and not map_field:
            _write_message_json(value, depth + 1, emit)
        else:
            # A map, a singular scalar or repeated floats or bytes:
            # json_format's value, from a message holding only this field.
            one = type(message)()
            if map_field:
                getattr(one, field.name).MergeFrom(value)
            elif repeated:
                getattr(one, field.name).extend(value)
            else:
                setattr(one, field.name, value)
            emit(_small_json(json_format.MessageToDict(one)[field.json_name], depth + 1))
    emit("\n" + " " * depth + "}")


def _long_json(fields) -> bool:
    """Whether a message's fields (its ListFields) hold, at any depth, a
    repeated field of more than _JSON_WHOLE_ELEMENTS elements."""
    from google.protobuf.descriptor import FieldDescriptor

    for field, value in fields:
        if field.label == FieldDescriptor.LABEL_REPEATED:
            if len(value) > _JSON_WHOLE_ELEMENTS:
                return True
            if field.message_type is not None and not field.message_type.GetOptions().map_entry:
                if any(_long_json(v.ListFields()) for v in value):
                    return True
        elif field.message_type is not None and _long_json(value.ListFields()):
            return True
    return False


def _element_json(field, depth: int):
    """A function giving the JSON of one element of repeated `field` as
    json_format writes it, for strings, integers, bools, enums and messages
    of only those; None for other types (other messages are written field by
    field, other scalars by json_format)."""
    from google.protobuf.descriptor import FieldDescriptor

    scalar = _scalar_json(field)
    if scalar is not None:
        return scalar
    if field.message_type is None:
        return None
    message_type = field.message_type
    if message_type.full_name.startswith("google.protobuf.") or message_type.oneofs:
        return None
    if message_type.file.syntax != "proto3":
        return None
    # proto3 fields without presence: set when not 0, "" or false, and
    # listed in field number order, as ListFields gives them.
    encoders = []
    for f in sorted(message_type.fields, key=lambda f: f.number):
        encoder = _scalar_json(f) if f.label != FieldDescriptor.LABEL_REPEATED else None
        if encoder is None:
            return None
        encoders.append((json.dumps(f.json_name) + ": ", encoder))
    if not encoders:
        return lambda v: "{}"
    values = operator.attrgetter(*(f.name for f in sorted(message_type.fields, key=lambda f: f.number)))
    if len(encoders) == 1:
        values = (lambda get: lambda v: (get(v),))(values)
    inner = ",\n" + " " * (depth + 1)
    first = "{\n" + " " * (depth + 1)
    close = "\n" + " " * depth + "}"

    def message_json(v) -> str:
        parts = [key + encoder(x) for (key, encoder), x in zip(encoders, values(v)) if x]
        return first + inner.join(parts) + close if parts else "{}"
    return message_json


def _scalar_json(field):
    """JSON of one value of a scalar field as json_format writes it, for the
    types whose conversion is exact here; None for the others (floats,
    bytes, messages)."""
    from json.encoder import encode_basestring_ascii
    from google.protobuf.descriptor import FieldDescriptor as F

    t = field.type
    if t == F.TYPE_STRING:
        return encode_basestring_ascii
    if t in (F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32, F.TYPE_UINT32, F.TYPE_FIXED32):
        return int.__repr__
    if t in (F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64, F.TYPE_UINT64, F.TYPE_FIXED64):
        return lambda v: '"%d"' % v
    if t == F.TYPE_BOOL:
        return lambda v: "true" if v else "false"
    if t == F.TYPE_ENUM:
        names = {v.number: json.dumps(v.name) for v in field.enum_type.values}
        return lambda v: names.get(v) or repr(v)
    return None


def _devices_from_args(args):
    from .client import device_inventory

    if not args.device_memory:
        raise UsageError("--device-memory is required: the memory of each device, e.g. "
                         "--device-memory 16GiB,16GiB (or --devices 2 --device-memory 16GiB)")
    try:
        return device_inventory(args.device_memory, count=args.devices or None,
                                transfer_rate=args.transfer_rate)
    except ValueError as e:
        raise UsageError(f"--device-memory: {e}") from None


def _load_graph(path: str):
    from .errors import InvalidMessageError
    from .graph_io import load_graph

    try:
        return load_graph(path)
    except InvalidMessageError as e:
        raise UsageError(f"--graph {path}: {e.message}") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"--graph {path}: {e}") from None


def cmd_plan(args) -> int:
    from . import messages as pb
    from .client import node_references_value, partition_mode

    graph = _load_graph(args.graph)
    devices = _devices_from_args(args)
    request = pb.PlanRequest(graph=graph, devices=devices,
                             node_references=node_references_value(args.node_references))
    if args.planner == "shard":
        if not args.shards:
            raise UsageError("--planner shard needs --shards N")
        request.shard.shard_count = args.shards
        if args.shard_mode:
            request.shard.mode = pb.ShardConfig.Mode.Value(args.shard_mode.upper())
    else:
        try:
            request.partitioner.mode = partition_mode(args.mode)
        except ValueError as e:
            raise UsageError(f"--{e}") from None
        request.partitioner.saturate_host = args.saturate_host
    with _client(args) as client:
        response = client.call("Plan", request)
    _print_response(response, args.output, request)
    return 0


def cmd_validate(args) -> int:
    from . import messages as pb

    request = pb.ValidateRequest(graph=_load_graph(args.graph))
    if args.device_memory:
        request.devices.CopyFrom(_devices_from_args(args))
    with _client(args) as client:
        response = client.call("Validate", request)
    _print_response(response, "json")
    return 0


def cmd_call(args) -> int:
    from .client import PARTS_MIN_BYTES, RPCS, request_file
    from .errors import InvalidMessageError
    from .graph_io import load_message

    if args.method not in RPCS:
        raise UsageError(f"unknown RPC {args.method!r}; one of {', '.join(RPCS)}")
    _, request_class, response_class = RPCS[args.method]
    try:
        if not _binary_file(args.request):
            request = send = load_message(args.request, request_class)
            size = request.ByteSize()
        elif args.output == "html":
            # The report reads the request again: held, as bytes.
            with open(args.request, "rb") as f:
                request = send = f.read()
            size = len(request)
        else:
            # Sent as read, a part at a time (the file read again for a
            # retry), so that it is never held whole; the server checks it.
            request, send = None, request_file(args.request)
            size = os.path.getsize(args.request)
    except InvalidMessageError as e:
        raise UsageError(f"--request {args.request}: {e.message}") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"--request {args.request}: {e}") from None
    with _client(args) as client:
        try:
            if args.output == "json":
                # JSON written from the response's bytes, not parsed (see
                # json_writer), unless they hold what it does not convert.
                keeps = _keep_freed_memory()
                # A small request's answer comes too soon for anything to
                # be done while waiting. The conversion, its text written as
                # it is made, uses about half the request's size.
                prepare = (_json_preparation(response_class, size // 2 if keeps else 0)
                           if size >= PARTS_MIN_BYTES else None)
                response = client.call(args.method, send, response_bytes=True,
                                       while_waiting=prepare)
            else:
                response = client.call(args.method, send)
        except OSError as e:  # the file read while sending
            raise UsageError(f"--request {args.request}: {e}") from None
    if args.output == "json":
        if _write_response_bytes(response, response_class):
            return 0
        response = _parse_response(response, response_class)
    _print_response(response, args.output, request)
    return 0


def _binary_file(path: str) -> bool:
    """Whether load_message reads a request file as binary: not .json, and
    not starting with "{" after whitespace. Read up to its first byte that is
    no whitespace."""
    from .graph_io import is_json_path

    if is_json_path(path):
        return False
    with open(path, "rb") as f:
        while True:
            head = f.read(4096)
            if not head:
                return True
            head = head.lstrip()
            if head:
                return head[:1] != b"{"


def _keep_freed_memory() -> bool:
    """Has glibc's malloc keep what is freed for the next allocations (up to
    256 MiB each from the heap, none given back below 1 GiB) instead of
    mapping fresh pages for each large one: in a virtual machine every new
    page costs microseconds, and converting a large response allocates and
    frees hundreds of megabytes of numpy arrays and strings. Nothing where
    there is no mallopt (False)."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(mallopt(m_mmap_threshold, 256 << 20)) and bool(mallopt(m_trim_threshold, 1 << 30))


# Memory touched ahead of a response's JSON, 8 MiB at a time, at most:
_TOUCH_PIECE = 8 << 20
_TOUCH_MAX = 256 << 20


def _json_preparation(response_class, touch_bytes: int):
    """What writing the response's JSON needs first, for Client.call's
    while_waiting (the server then works, the call waits without the GIL,
    and the other core is idle): json_writer and numpy imported and, for a
    response that may be large (it has repeated fields: a plan, not
    Validate's counts), `touch_bytes` of memory touched once and freed.
    Freed memory is kept (_keep_freed_memory), so the response and its
    conversion then get pages already mapped, where each fresh one costs
    microseconds in a virtual machine."""
    def prepare() -> None:
        try:
            from . import json_writer  # noqa: F401
            import numpy  # noqa: F401
        except ImportError:
            return  # json_writer says so when it is used
        if not _may_be_large(response_class.DESCRIPTOR):
            return
        touched = [bytearray(_TOUCH_PIECE)
                   for _ in range(min(touch_bytes, _TOUCH_MAX) // _TOUCH_PIECE)]
        del touched
    return prepare


def _may_be_large(descriptor, seen=None) -> bool:
    """Whether messages of `descriptor` can hold a repeated field."""
    seen = set() if seen is None else seen
    seen.add(descriptor.full_name)
    for field in descriptor.fields:
        if field.label == field.LABEL_REPEATED:
            return True
        if (field.message_type is not None and field.message_type.full_name not in seen
                and _may_be_large(field.message_type, seen)):
            return True
    return False


def _parse_response(data: bytes, response_class):
    import grpc
    from google.protobuf.message import DecodeError

    from .errors import PartplanError

    try:
        return response_class.FromString(data)
    except DecodeError as e:
        raise PartplanError(grpc.StatusCode.INTERNAL,
                            f"the response is no {response_class.DESCRIPTOR.full_name}: {e}") from None


def _write_response_bytes(data: bytes, response_class) -> bool:
    """Writes MessageToJson(indent=1)'s text of the response serialised as
    `data` and a newline to stdout, as json_writer makes it: the 79 MB of a
    plan naming 10^6 nodes are never held whole. False (nothing written) if
    json_writer does not convert it from the start; if it stops part way,
    the rest of the text comes from the parsed response."""
    from .json_writer import Unsupported, message_json

    sink = _StdoutSink()
    try:
        message_json(data, response_class.DESCRIPTOR, out=sink)
    except Unsupported:
        if not sink.written:
            return False  # what it holds is dropped
        sink.flush()
        # What is written is json_format's text up to here, to the character.
        write_json(_parse_response(data, response_class), _After(sys.stdout, sink.written))
        return True
    sink.flush()
    return True


class _StdoutSink:
    """json_writer's pieces, written to stdout as they come: large ones a
    megabyte at a time (as bytes, to the binary stream when there is one),
    small ones together. `written` counts the characters written."""

    def __init__(self):
        self.written = 0
        self._small: List[str] = []
        self._small_size = 0
        self._buffer = getattr(sys.stdout, "buffer", None)
        if self._buffer is not None:
            sys.stdout.flush()

    def append(self, piece: str) -> None:
        if len(piece) < 1 << 16:
            self._small.append(piece)
            self._small_size += len(piece)
            if self._small_size >= _JSON_CHUNK or len(self._small) >= 4096:
                self.flush()
            return
        self.flush()
        if self._buffer is not None:
            # A megabyte at a time: the same memory again for each.
            sys.stdout.flush()
            for start in range(0, len(piece), 1 << 20):
                self._buffer.write(piece[start:start + (1 << 20)].encode("ascii"))
        else:
            sys.stdout.write(piece)
        self.written += len(piece)

    def flush(self) -> None:
        text = "".join(self._small)
        self._small.clear()
        self._small_size = 0
        if text:
            sys.stdout.write(text)
            self.written += len(text)


class _After:
    """A text stream writing to `out` all but the first `skip` characters."""

    def __init__(self, out, skip: int):
        self._out, self._skip = out, skip

    def write(self, text: str) -> None:
        if self._skip:
            dropped = min(self._skip, len(text))
            text, self._skip = text[dropped:], self._skip - dropped
        if text:
            self._out.write(text)


def cmd_parallelize(args) -> int:
    from google.protobuf.message import DecodeError

    from . import messages as pb
    from .errors import InvalidMessageError
    from .graph_io import load_message, parse_dict
    from .parallelize import format_configurations

    try:
        if args.request == "-":
            # As the C++ CLI's --request=-: JSON or binary from stdin.
            data = sys.stdin.buffer.read()
            request = pb.ParallelizeRequest()
            if data.lstrip()[:1] == b"{":
                parse_dict(json.loads(data.decode("utf-8")), request)
            else:
                request.ParseFromString(data)
        else:
            request = load_message(args.request, pb.ParallelizeRequest)
    except InvalidMessageError as e:
        raise UsageError(f"--request {args.request}: {e.message}") from None
    except (OSError, ValueError, DecodeError) as e:
        raise UsageError(f"--request {args.request}: {e}") from None
    with _client(args) as client:
        response = client.call("Parallelize", request)
    if args.output == "table":
        sys.stdout.write(format_configurations(response))
    else:
        write_json(response, sys.stdout)
    return 0


def cmd_gen_protos(args) -> int:
    from . import _codegen

    argv = ["--check"] if args.check else []
    if args.out:
        argv += ["--out", args.out]
    return _codegen.main(argv)


# ---------------------------------------------------------------------------


def _add_connection_flags(p) -> None:
    p.add_argument("--target", default=os.environ.get("PARTPLAN_TARGET", "localhost:50051"),
                   help="server address: host:port or dns:///name:port (default: $PARTPLAN_TARGET "
                        "or localhost:50051)")
    p.add_argument("--deadline", default="60s", help="deadline of the call, retries included (60s)")
    p.add_argument("--attempts", type=int, default=5,
                   help="attempts when the server is UNAVAILABLE (5; 1 disables retries)")
    p.add_argument("--tls", action="store_true", help="use TLS (implied by the certificate flags)")
    p.add_argument("--root-certs", help="PEM file of the CAs to trust")
    p.add_argument("--client-cert", help="PEM file of the client certificate (mutual TLS)")
    p.add_argument("--client-key", help="PEM file of the client key (mutual TLS)")
    p.add_argument("--server-name", help="name to verify in the server certificate")
    p.add_argument("--token", help="bearer token, sent as 'authorization: Bearer <token>' (for servers "
                                   "started with --auth_tokens_file); prefer --token-file, since "
                                   "arguments are visible to other users")
    p.add_argument("--token-file", help="file holding the bearer token (surrounding whitespace ignored)")
    p.add_argument("--request-id", help="sent as x-request-id metadata, to find the call in the server's "
                                        "log (default: a random one per call)")


def _json_object(text: str) -> dict:
    """--kwargs: a JSON object (argparse reports anything else as bad usage)."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"want a JSON object, e.g. '{{\"layers\": 4}}', got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m partplan",
        description="Export torch.fx graphs for partplan and call the partplan service.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("export", help="trace a model and write its partplan.v1.Graph")
    p.add_argument("model", help="<module path>:<factory or class>, e.g. torchvision.models:resnet18, "
                                 "model.py:Net")
    p.add_argument("--input-shape", action="append", metavar="SHAPE[:DTYPE]",
                   help="one per forward() argument, e.g. 1,3,64,64 or 2,8:int64 (float32 by "
                        "default; integer inputs are drawn from [0, --int-high))")
    p.add_argument("--int-high", type=int, default=2, help="integer inputs are below this (2)")
    p.add_argument("--kwargs", type=_json_object,
                   help="JSON object of keyword arguments for the factory")
    p.add_argument("--out", help="output file: .json for proto3 JSON, else binary (default: stdout JSON)")
    p.add_argument("--format", choices=["auto", "json", "binary"], default="auto",
                   help="override the format the --out extension implies")
    p.add_argument("--leaf-module", action="append",
                   help="a module class (module:Class) or qualified name not to trace through")
    p.add_argument("--name", help="Graph.name (default: the model's class name)")
    p.add_argument("--train", action="store_true", help="export in training mode (default: eval)")
    p.add_argument("--seed", type=int, default=0, help="seed of the example inputs (0)")
    p.add_argument("--no-flops", action="store_true", help="leave Node.flops unset")
    p.add_argument("--no-modules", action="store_true", help="leave Graph.modules empty")
    p.add_argument("--aten", action="store_true",
                   help="an aten-level graph (make_fx) for PlanDataParallel instead")
    p.add_argument("--with-backward", action="store_true", help="--aten: trace the backward pass too")
    p.add_argument("--roles-out", help="--aten: write the placeholder roles (JSON) here")
    p.set_defaults(func=cmd_export, command_parser=p)

    p = sub.add_parser("plan", help="plan a graph with the Plan RPC and print the plan")
    p.add_argument("--graph", required=True, help="a Graph (or a request holding one), .json or binary")
    p.add_argument("--device-memory", help="memory of each device, e.g. 8GiB,8GiB")
    p.add_argument("--devices", type=int, default=0, help="device count, with one --device-memory size")
    p.add_argument("--transfer-rate", help="bytes/s between devices, e.g. 12GB (default: free)")
    p.add_argument("--planner", choices=["partitioner", "shard"], default="partitioner")
    p.add_argument("--mode", default="size_based",
                   help="partitioner mode: size_based, sparse_nn, cost_aware, kl_based, aot_based")
    p.add_argument("--saturate-host", action="store_true", help="replicate partitions on idle devices")
    p.add_argument("--shards", type=int, help="--planner shard: the shard count")
    p.add_argument("--shard-mode", choices=["fairscale", "balanced"], help="--planner shard: the algorithm")
    p.add_argument("--node-references", choices=["names", "indices"], default="names",
                   help="how the plan lists nodes: by name, or by index in the graph's nodes "
                        "(about an eighth of the bytes for large graphs)")
    p.add_argument("--output", choices=["json", "table", "html"], default="json",
                   help="json; table: plans as tables; html: the self-contained report page")
    _add_connection_flags(p)
    p.set_defaults(func=cmd_plan, command_parser=p)

    p = sub.add_parser("validate", help="check a graph (and devices) without planning")
    p.add_argument("--graph", required=True)
    p.add_argument("--device-memory")
    p.add_argument("--devices", type=int, default=0)
    p.add_argument("--transfer-rate")
    _add_connection_flags(p)
    p.set_defaults(func=cmd_validate, command_parser=p)

    p = sub.add_parser("call", help="send a request file to any RPC")
    p.add_argument("method", help="PartitionGraph, Plan, Validate, SplitGraph, ShardGraph, "
                                  "BuildPipelineGraph or PlanDataParallel")
    p.add_argument("--request", required=True, help="the request, proto3 JSON (.json) or binary")
    p.add_argument("--output", choices=["json", "table", "html"], default="json",
                   help="json; table: plans as tables; html: the self-contained report page")
    _add_connection_flags(p)
    p.set_defaults(func=cmd_call, command_parser=p)

    p = sub.add_parser("parallelize", help="rank tensor x pipeline x data-parallel training "
                                           "configurations of a transformer on a cluster")
    p.add_argument("--request", required=True,
                   help="a partplan.v1.ParallelizeRequest (the model, the cluster and the "
                        "options), proto3 JSON (.json) or binary; - for stdin; e.g. "
                        "client/examples/parallelize.json")
    p.add_argument("--output", choices=["json", "table"], default="json",
                   help="json; table: one line per configuration, best first, and why the "
                        "first wins")
    _add_connection_flags(p)
    p.set_defaults(func=cmd_parallelize, command_parser=p)

    p = sub.add_parser("gen-protos", help="(re)generate the Python code of the API from proto/ "
                                         "(into the per-user cache, see _codegen.py)")
    p.add_argument("--check", action="store_true",
                   help="only report whether it is current: current, stale (exit 1), or bundled "
                        "(an installed package, which uses the code it was built with)")
    p.add_argument("--out", metavar="DIR", help="generate into DIR instead of the cache")
    p.set_defaults(func=cmd_gen_protos, command_parser=p)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    from .errors import PartplanError

    parser = build_parser()
    try:
        # argparse reports its own usage errors (exit 2) and --help (exit 0)
        # by raising SystemExit after printing.
        args = parser.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    try:
        return args.func(args)
    except UsageError as e:
        # The same form as argparse's own errors: usage line, then the message.
        command_parser = getattr(args, "command_parser", parser)
        command_parser.print_usage(sys.stderr)
        print(f"{command_parser.prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except PartplanError as e:
        print(f"error: {e.code_name}: {e.message}", file=sys.stderr)
        for v in e.field_violations:
            print(f"  field {v.field}: {v.description}", file=sys.stderr)
        value = e.code.value[0] if hasattr(e.code, "value") else 1
        return value or 1
    except BrokenPipeError:
        return 0

"""partplan.Client: a thin wrapper over the generated PartitionPlanner stub.

    with partplan.Client("localhost:50051", timeout=30) as client:
        response = client.plan(graph, devices=["16GiB", "16GiB"], mode="size_based")

What it adds to the stub:
- a deadline for every call (`timeout`, seconds; per call or per client),
  covering all attempts;
- retries on UNAVAILABLE (server down, restarting or unreachable) with
  exponential backoff and jitter, within that deadline. Every planner RPC is
  a pure function of its request, so retrying is always safe;
- `round_robin` load balancing over every address of a `dns:///` target
  (a headless Kubernetes service, say), set through the channel's service
  config;
- TLS: root certificates, and a client certificate and key for mutual TLS;
- 256 MiB message limits both ways (graphs of millions of nodes);
- bearer tokens (`authorization` metadata);
- an `x-request-id` per call (the same for its retries), which the server
  logs;
- errors raised as PartplanError, with the code, the message and the
  google.rpc.BadRequest field violations;
- large requests (PARTS_MIN_BYTES and more serialised) sent in parts through
  PartitionPlannerInParts, and their responses received so: grpcio copies a
  unary request's bytes whole before sending them, so the process would hold
  the request twice. A server without that service is asked unary from then
  on.

Every RPC has a method taking either a complete request message (`request=`)
or its parts as keyword arguments.
"""

import json
import math
import numbers
import os
import random
import re
import threading
import time
import uuid
from typing import (Any, Callable, Dict, Iterable, Iterator, Mapping, NamedTuple, Optional, Sequence,
                    Tuple, Union)

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from . import accelerators
from . import messages as pb
from ._sizes import parse_byte_size
from .errors import PartplanError
from .graph_io import parse_dict

DEFAULT_TARGET = "localhost:50051"
DEFAULT_TIMEOUT_SECONDS = 60.0
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
# Requests of this many serialised bytes or more are sent in parts of
# PART_BYTES through PartitionPlannerInParts: gRPC then holds one part at a
# time, never the whole request besides the caller's. Smaller ones stay unary:
# one message, without the stream's extra round of operations.
PARTS_MIN_BYTES = 1 << 20
PART_BYTES = 1 << 20
PARTS_SERVICE = "partplan.v1.PartitionPlannerInParts"
# Codes of a call the server may never have seen.
_NO_ANSWER = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                        grpc.StatusCode.CANCELLED})

def _snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# RPC name -> (method name, request class, response class), for every RPC of
# the service as the .proto declares it: a new RPC needs no line here.
RPCS: Dict[str, Tuple[str, Any, Any]] = {
    m.name: (_snake_case(m.name), getattr(pb, m.input_type.name), getattr(pb, m.output_type.name))
    for m in pb.planner_service_pb2.DESCRIPTOR.services_by_name["PartitionPlanner"].methods
}


class RetryPolicy(NamedTuple):
    """When and how often a call is retried.

    The n-th retry waits initial_backoff * multiplier**(n-1) seconds, at most
    max_backoff, scaled by a random factor in [1 - jitter, 1 + jitter]. No
    attempt starts after the call's deadline: when the next wait would pass
    it, the last error is raised.
    """

    max_attempts: int = 5
    initial_backoff: float = 0.1
    max_backoff: float = 5.0
    multiplier: float = 2.0
    jitter: float = 0.2
    retryable_codes: frozenset = frozenset({grpc.StatusCode.UNAVAILABLE})

    def backoff(self, retry: int, rng: random.Random) -> float:
        """Seconds to wait before retry number `retry` (1-based)."""
        base = min(self.max_backoff, self.initial_backoff * self.multiplier ** (retry - 1))
        return max(0.0, base * rng.uniform(1.0 - self.jitter, 1.0 + self.jitter))


NO_RETRY = RetryPolicy(max_attempts=1)


def _read_pem(value: Union[None, bytes, str]) -> Optional[bytes]:
    """PEM bytes from bytes, PEM text, or the path of a PEM file."""
    if value is None or isinstance(value, bytes):
        return value
    if "-----BEGIN" in value:
        return value.encode()
    with open(os.path.expanduser(value), "rb") as f:
        return f.read()


def device_inventory(
    memory: Union[None, Sequence[Union[str, int]], str, int] = None,
    *,
    names: Optional[Sequence[str]] = None,
    transfer_rate: Union[None, str, int, float] = None,
    mesh_shape: Optional[Sequence[int]] = None,
    mesh_axis_names: Optional[Sequence[str]] = None,
    count: Optional[int] = None,
    preset: Union[None, str, Sequence[str]] = None,
    kind: Union[None, str, Sequence[str]] = None,
    flops_per_second: Union[None, float, Sequence[float]] = None,
    memory_bandwidth: Union[None, str, float, Sequence[Union[str, float]]] = None,
) -> pb.DeviceInventory:
    """A DeviceInventory from device memory sizes, or from accelerator presets.

        device_inventory(["16GiB", "16GiB"])           # gpu0, gpu1
        device_inventory("8GiB,8GiB,4GiB")             # the CLI's --device-memory
        device_inventory("16GiB", count=8, transfer_rate="12GB")
        device_inventory(preset="H100-SXM", count=8)   # memory, kind, FLOP/s, bandwidth
        device_inventory(preset=["H100-SXM"] * 4 + ["A100-80GB"] * 4)
        device_inventory("70GiB", preset="a100", count=4,    # usable memory, 40% of peak
                         flops_per_second=0.4 * partplan.accelerators.get("a100").flops_per_second)
        device_inventory("24GiB", count=2, kind="my-gpu",
                         flops_per_second=100e12, memory_bandwidth="1TB")

    Devices are named gpu0, gpu1, ... (or `names`), with logical ids 0, 1, ...;
    `transfer_rate` is bytes/s between devices (0 or None: free transfers).

    `preset` names an accelerator of partplan.accelerators ("A100-80GB",
    "H100-SXM", "MI300X", "TPU-v5e", ... or an alias such as "a100", in any
    case): it fills each device's memory, kind, compute_flops_per_second
    (peak dense BF16) and memory_bandwidth_bytes_per_second, and `memory`
    may then be left out. Arguments given explicitly override the preset.
    `kind` is a string, `flops_per_second` FLOP/s (a number), and
    `memory_bandwidth` bytes/s (a number or a size such as "2TB"; a trailing
    "/s" is allowed). Each of `preset`, `kind`, `flops_per_second` and
    `memory_bandwidth` is one value for every device or a list of one per
    device. The number of devices is `count`, else the number of memory
    sizes; without `memory`, the length of a per-device list, else 1.

    Raises ValueError naming the argument for a bad value, an unknown preset
    (listing the known ones), or a list of the wrong length.
    """
    if memory is not None:
        if isinstance(memory, str):
            memory = [m for m in memory.split(",") if m.strip()]
        elif isinstance(memory, int):
            memory = [memory]
        sizes = [parse_byte_size(m) for m in memory]
        if count is not None:
            if len(sizes) == 1:
                sizes = sizes * count
            elif len(sizes) != count:
                raise ValueError(f"count={count} but {len(sizes)} memory sizes; give one, or one per device")
        if any(s <= 0 for s in sizes):
            raise ValueError(f"device memory must be positive, got {list(memory)}")
        n = len(sizes)
    else:
        if preset is None:
            raise ValueError("memory: give the devices' memory sizes, or a preset= (one of "
                             + ", ".join(accelerators.names()) + ")")
        sizes = None
        if count is not None:
            n = count
        else:
            # Without memory sizes, a per-device list says how many devices.
            lists = [v for v in (preset, kind, flops_per_second, memory_bandwidth, names)
                     if isinstance(v, (list, tuple))]
            n = len(lists[0]) if lists else 1
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ValueError(f"count: expected a positive number of devices, got {count!r}")
    if names is not None and len(names) != n:
        raise ValueError(f"{len(names)} names for {n} devices")
    presets = _per_device("preset", preset, n, accelerators.get)
    kinds = _per_device("kind", kind, n, _kind)
    flops = _per_device("flops_per_second", flops_per_second, n, _flops)
    bandwidths = _per_device("memory_bandwidth", memory_bandwidth, n, _bandwidth)
    inventory = pb.DeviceInventory()
    for i in range(n):
        accelerator = presets[i]
        device = inventory.devices.add(
            name=names[i] if names is not None else f"gpu{i}",
            available_memory_bytes=sizes[i] if sizes is not None else accelerator.memory_bytes,
            logical_id=i,
        )
        if kinds[i] is not None:
            device.kind = kinds[i]
        elif accelerator is not None:
            device.kind = accelerator.name
        if flops[i] is not None:
            device.compute_flops_per_second = flops[i]
        elif accelerator is not None:
            device.compute_flops_per_second = accelerator.flops_per_second
        if bandwidths[i] is not None:
            device.memory_bandwidth_bytes_per_second = bandwidths[i]
        elif accelerator is not None:
            device.memory_bandwidth_bytes_per_second = accelerator.memory_bandwidth
    if transfer_rate is not None:
        inventory.transfer_rate_bytes_per_second = float(parse_byte_size(transfer_rate))
    if mesh_shape:
        inventory.mesh_shape.extend(mesh_shape)
    if mesh_axis_names:
        inventory.mesh_axis_names.extend(mesh_axis_names)
    return inventory


def _per_device(field: str, value, n: int, convert) -> list:
    """`value` for each of n devices: None, one value for all, or a list of
    one per device; each converted by convert(value, field name)."""
    if value is None:
        return [None] * n
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{field}: {len(value)} values for {n} devices; give one, or one per device")
        return [convert(v, f"{field}[{i}]") for i, v in enumerate(value)]
    one = convert(value, field)
    return [one] * n


def _kind(value, field: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{field}: expected a string, got {type(value).__name__}")
    return value


def _flops(value, field: str) -> float:
    # The server rejects negative and non-finite figures; saying so here names
    # the argument instead of devices.devices[i].compute_flops_per_second.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{field}: expected FLOP/s as a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{field}: expected finite, non-negative FLOP/s, got {value!r}")
    return float(value)


def _bandwidth(value, field: str) -> float:
    if isinstance(value, str) and value.strip().lower().endswith("/s"):
        value = value.strip()[:-2]
    try:
        return float(parse_byte_size(value))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{field}: {e}") from None


def aot_config(assignment: Mapping[str, int],
               partition_devices: Optional[Mapping[int, Sequence[int]]] = None,
               *, saturate_host: bool = False) -> "pb.PartitionerConfig":
    """An AOT_BASED PartitionerConfig: your own {call_* node: partition} and
    {partition: [logical device ids]} (default: partition i on device i)."""
    config = pb.PartitionerConfig(mode=pb.PartitionerConfig.AOT_BASED, saturate_host=saturate_host)
    for node, partition in assignment.items():
        config.node_partitions.add(node=node, partition=int(partition))
    if partition_devices is None:
        partition_devices = {p: [p] for p in sorted(set(assignment.values()))}
    for partition, ids in partition_devices.items():
        config.partition_devices.add(partition=int(partition), logical_device_ids=list(ids))
    return config


def _as_devices(devices) -> Optional[pb.DeviceInventory]:
    if devices is None or isinstance(devices, pb.DeviceInventory):
        return devices
    if isinstance(devices, Mapping):
        return parse_dict(devices, pb.DeviceInventory, field="devices")
    if isinstance(devices, (str, int)):
        return device_inventory(devices)
    devices = list(devices)
    if devices and all(isinstance(d, pb.Device) for d in devices):
        inventory = pb.DeviceInventory()
        inventory.devices.extend(devices)
        return inventory
    return device_inventory(devices)


def _as_graph(graph) -> Optional[pb.Graph]:
    if graph is None or isinstance(graph, pb.Graph):
        return graph
    if hasattr(graph, "graph") and isinstance(graph.graph, pb.Graph):  # AtenExport
        return graph.graph
    if isinstance(graph, Mapping):
        return parse_dict(graph, pb.Graph, field="graph")
    if isinstance(graph, (str, os.PathLike)):
        from .graph_io import load_graph

        return load_graph(os.fspath(graph))
    raise TypeError(f"expected a partplan.v1.Graph, a dict or a path, got {type(graph).__name__}")


def _enum_value(enum_type, value, field: str, prefix: str = ""):
    """An enum number from its number, or its name in any case."""
    if value is None:
        return None
    if isinstance(value, int):
        return value
    name = prefix + str(value).upper().replace("-", "_")
    try:
        return enum_type.Value(name)
    except ValueError:
        choices = ", ".join(n[len(prefix):].lower() for n in enum_type.keys()
                            if n.startswith(prefix) and not n.endswith("UNSPECIFIED"))
        raise ValueError(f"{field}: unknown value {value!r}; one of {choices}") from None


def partition_mode(mode) -> int:
    """PartitionerConfig.Mode from "size_based", "SPARSE_NN", 1, ..."""
    return _enum_value(pb.PartitionerConfig.Mode, mode, "mode")


def node_references_value(value) -> int:
    """NodeReferences from "names", "indices", "NODE_REFERENCES_INDICES", 1, ..."""
    if isinstance(value, str) and value.upper().startswith("NODE_REFERENCES_"):
        value = value[len("NODE_REFERENCES_"):]
    return _enum_value(pb.NodeReferences, value, "node_references", prefix="NODE_REFERENCES_")


def partition_by_node_index(plan):
    """The partition (or shard) of every node by index of a PartitionPlan or
    ShardGraphResponse that names nodes by index (NODE_REFERENCES_INDICES);
    None for any other plan."""
    if isinstance(plan, pb.PartitionPlan) and not plan.assignments:
        return plan.partition_by_node_index or None
    if isinstance(plan, pb.ShardGraphResponse) and not plan.assignments:
        return plan.shard_by_node_index or None
    return None


def _node_names(graph) -> list:
    """The node names, in order, of a Graph (or what _as_graph reads as one:
    a dict, a path), a torch.fx GraphModule or Graph, or a sequence of names."""
    if isinstance(graph, (pb.Graph, Mapping, str, os.PathLike)):
        return [n.name for n in _as_graph(graph).nodes]
    if hasattr(graph, "graph") and hasattr(graph.graph, "nodes"):
        graph = graph.graph  # a torch.fx GraphModule, or an AtenExport
    if hasattr(graph, "nodes"):
        return [n.name for n in graph.nodes]  # a torch.fx Graph, or the Graph of either
    names = list(graph)
    if not all(isinstance(name, str) for name in names):
        raise TypeError("expected the graph (a Graph, a dict, a path or a GraphModule) or its "
                        "node names in order")
    return names


def indexed_assignment(plan, graph) -> list:
    """(node name, partition) pairs of a plan that names nodes by index
    (see partition_by_node_index), in graph order: `graph` is the Graph that
    was sent (or a dict or path of it), the GraphModule it was exported
    from, or the names of its nodes in order."""
    if graph is None:
        raise ValueError("the plan names nodes by index (NODE_REFERENCES_INDICES); "
                         "give the graph it was made for")
    names = _node_names(graph)
    partitions = partition_by_node_index(plan)
    if len(names) != len(partitions):
        raise ValueError(f"the plan gives a partition for {len(partitions)} nodes by index, "
                         f"but the graph has {len(names)} nodes: is it the graph that was sent?")
    return [(name, p) for name, p in zip(names, partitions) if p >= 0]


def _assignments(assignments, graph=None) -> list:
    """NodePartition messages from a {node: partition} dict, (node, partition)
    pairs, NodePartitions, a plan or response holding `assignments`, or a
    SplitGraphResponse. A plan by node index needs the `graph` it was made
    for."""
    if hasattr(assignments, "plan") and isinstance(getattr(assignments, "plan"), pb.PartitionPlan):
        assignments = assignments.plan
    if partition_by_node_index(assignments) is not None:
        assignments = indexed_assignment(assignments, graph)
    if isinstance(assignments, pb.SplitGraphResponse):
        assignments = [(node, s.partition) for s in assignments.submodules for node in s.nodes]
    if hasattr(assignments, "assignments"):
        assignments = assignments.assignments
    if isinstance(assignments, Mapping):
        assignments = assignments.items()
    out = []
    for a in assignments:
        if isinstance(a, pb.NodePartition):
            out.append(a)
        else:
            node, partition = a
            out.append(pb.NodePartition(node=node, partition=int(partition)))
    return out


class Client:
    """A connection to a partplan server.

    Args:
      target: "host:port", or any gRPC target such as "dns:///planner:50051"
        (every address the name resolves to, balanced round_robin) or
        "unix:///run/partplan.sock".
      timeout: default deadline of a call in seconds, retries included
        (None: no deadline).
      retry: RetryPolicy (NO_RETRY to disable retries).
      load_balancing: "round_robin" or "pick_first"; the default is
        round_robin for dns: targets and gRPC's pick_first otherwise.
      tls: use TLS. Implied by any of the certificate arguments; with none of
        them, the system's root certificates are used.
      root_certificates: PEM bytes, text or file path of the CAs to trust.
      private_key, certificate_chain: the client's key and certificate for
        mutual TLS (PEM bytes, text or path).
      server_name: the name to verify in the server's certificate, when it is
        not the target's host (`grpc.ssl_target_name_override`).
      credentials: grpc.ChannelCredentials to use as they are.
      max_message_bytes: largest message sent or received (256 MiB).
      token: a bearer token, sent as `authorization: Bearer <token>` with
        every call (servers started with --auth_tokens_file need one).
      token_file: a file holding the token (read once, surrounding
        whitespace stripped; an empty file is a ValueError).
      metadata: (key, value) pairs sent with every call.
      options: further channel options, (name, value) pairs.
      compression: a grpc.Compression for requests.
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        timeout: Optional[float] = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy = RetryPolicy(),
        load_balancing: Optional[str] = None,
        tls: Optional[bool] = None,
        root_certificates: Union[None, bytes, str] = None,
        private_key: Union[None, bytes, str] = None,
        certificate_chain: Union[None, bytes, str] = None,
        server_name: Optional[str] = None,
        credentials: Optional[grpc.ChannelCredentials] = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        metadata: Iterable[Tuple[str, str]] = (),
        options: Iterable[Tuple[str, Any]] = (),
        compression: Optional[grpc.Compression] = None,
    ):
        self.target = target
        self.timeout = timeout
        self.retry = retry
        self.metadata = tuple(metadata)
        if token_file is not None:
            if token is not None:
                raise ValueError("give token or token_file, not both")
            with open(os.path.expanduser(token_file)) as f:
                token = f.read().strip()
            if not token:
                raise ValueError(f"token_file: {token_file!r} is empty")
        token = (token or "").strip()  # as the C++ CLI's --token: "" is none
        if token:
            self.metadata += (("authorization", f"Bearer {token}"),)
        if (private_key is None) != (certificate_chain is None):
            raise ValueError("give both private_key and certificate_chain for mutual TLS, or neither")
        if load_balancing is None and target.startswith("dns:"):
            load_balancing = "round_robin"
        if load_balancing not in (None, "round_robin", "pick_first"):
            raise ValueError(f"load_balancing: {load_balancing!r}; one of round_robin, pick_first")
        self.load_balancing = load_balancing
        self.channel_options = self._channel_options(
            max_message_bytes, load_balancing, server_name, retry, options)
        if credentials is None and (tls or root_certificates or private_key or certificate_chain):
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read_pem(root_certificates),
                private_key=_read_pem(private_key),
                certificate_chain=_read_pem(certificate_chain),
            )
        if credentials is not None:
            self.channel = grpc.secure_channel(
                target, credentials, options=self.channel_options, compression=compression)
        else:
            self.channel = grpc.insecure_channel(
                target, options=self.channel_options, compression=compression)
        self.stub = pb.PartitionPlannerStub(self.channel)
        self.max_message_bytes = max_message_bytes
        # Whether to send large requests through PartitionPlannerInParts:
        # cleared when the server turns out not to have it.
        self.parts = True
        self._bytes_rpcs: Dict[Any, Any] = {}
        self._rng = random.Random()
        self._sleep = time.sleep  # tests replace it

    @staticmethod
    def _channel_options(max_message_bytes, load_balancing, server_name, retry, extra):
        options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.primary_user_agent", "partplan-python"),
            # Reconnect as soon as a retry wants to: gRPC's own connection
            # backoff (1 s, growing to 120 s) would fail retries at once
            # with UNAVAILABLE without trying to connect again.
            ("grpc.initial_reconnect_backoff_ms", max(1, int(retry.initial_backoff * 1000))),
            ("grpc.max_reconnect_backoff_ms", max(1, int(retry.max_backoff * 1000))),
        ]
        if load_balancing:
            options.append(
                ("grpc.service_config", json.dumps({"loadBalancingConfig": [{load_balancing: {}}]})))
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        names = {name for name, _ in extra}
        return [o for o in options if o[0] not in names] + list(extra)

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def wait_until_ready(self, timeout: Optional[float] = None) -> None:
        """Blocks until the channel is connected; PartplanError(UNAVAILABLE)
        when it is not within `timeout` seconds."""
        try:
            grpc.channel_ready_future(self.channel).result(
                timeout=self.timeout if timeout is None else timeout)
        except grpc.FutureTimeoutError:
            raise PartplanError(grpc.StatusCode.UNAVAILABLE,
                                f"{self.target}: not connected within the timeout") from None

    # -- the generic call ----------------------------------------------------

    def call(self, method: str, request, *, timeout: Optional[float] = None,
             metadata: Iterable[Tuple[str, str]] = (), retry: Optional[RetryPolicy] = None,
             response_bytes: bool = False, while_waiting: Optional[Callable[[], None]] = None):
        """Calls RPC `method` ("PartitionGraph", ...) with `request`; returns
        the response. Raises PartplanError.

        `request` is one of:
        - its message, or a dict in proto3 JSON form;
        - its serialised bytes (bytes, bytearray or memoryview), sent as they
          are: parsing and serialising again would cost more than the
          server's work on a large graph;
        - a function returning its serialised bytes, called once per attempt:
          the client then keeps no reference to them once they are sent, so
          if the function keeps none either (reading a file, say) the request
          is not held while the server works and the response is read;
        - a function returning an iterable of the serialised bytes' pieces in
          order (bytes-like, of any size), called once per attempt, such as
          request_file(path): the request is then never held whole, only a
          piece and the part being sent.
        A function is called again when the server turns out not to take
        requests in parts, and its errors are raised as they are.

        Requests of PARTS_MIN_BYTES or more (and every iterable of pieces)
        are sent in parts through PartitionPlannerInParts, which answers as
        the RPC does; a server without that service (an older one) is asked
        unary, from then on for this client.

        With `response_bytes`, the response's serialised bytes are returned
        (bytes, or a bytearray when it came in parts) instead of the parsed
        message.

        `while_waiting`, a function, is called once, in this thread, when the
        request has been sent and the server is working: for what would
        otherwise wait for the response (imports, say), since the call itself
        then only waits. If it raises, the call is cancelled and its error
        raised."""
        if method not in RPCS:
            raise ValueError(f"unknown RPC {method!r}; one of {', '.join(RPCS)}")
        _, request_cls, _ = RPCS[method]
        source = data = None
        if isinstance(request, (bytes, bytearray, memoryview)):
            data = request
        elif callable(request) and not isinstance(request, Message):
            source = request
        else:
            if isinstance(request, Mapping):
                request = parse_dict(request, request_cls, method=method)
            if not isinstance(request, request_cls):
                raise TypeError(f"{method} takes a {request_cls.DESCRIPTOR.full_name} (or its "
                                f"serialised bytes), got {type(request).__name__}")
            # What gRPC's serialiser would do; the bytes then go unary or in
            # parts by their size.
            data = request.SerializeToString()
        del request
        policy = self.retry if retry is None else retry
        timeout = self.timeout if timeout is None else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        call_metadata = list(self.metadata) + list(metadata)
        request_id = next((v for k, v in call_metadata if k == "x-request-id"), None)
        if request_id is None:
            request_id = uuid.uuid4().hex
            call_metadata.append(("x-request-id", request_id))
        waiting = [while_waiting] if while_waiting is not None else []
        attempt = 0
        while True:
            attempt += 1
            remaining = None if deadline is None else deadline - time.monotonic()
            try:
                if remaining is not None and remaining <= 0:
                    raise PartplanError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded",
                                        method=method, attempts=attempt - 1, request_id=request_id)
                return self._attempt(method, data, source, remaining, call_metadata, response_bytes,
                                     waiting)
            except grpc.RpcError as e:
                error = PartplanError.from_rpc_error(
                    e, method=method, attempts=attempt, request_id=request_id)
            if error.code not in policy.retryable_codes or attempt >= policy.max_attempts:
                raise error
            wait = policy.backoff(attempt, self._rng)
            if deadline is not None and time.monotonic() + wait >= deadline:
                raise error
            self._sleep(wait)

    def _attempt(self, method: str, data, source, timeout, metadata, raw: bool, waiting: list):
        """One attempt of call(): the request's bytes are `data`, or what
        `source` returns; `waiting` holds the while_waiting function until it
        is called."""
        request = _Request(data, source)
        if self.parts and (request.pieces is not None or request.size >= PARTS_MIN_BYTES):
            try:
                return self._call_in_parts(method, request.take_pieces(), timeout, metadata, raw,
                                           waiting)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                unimplemented = e.details()
            # No PartitionPlannerInParts on this server, or the RPC itself is
            # unimplemented: the RPC asked unary tells which (the same
            # answer, or another).
            request = _Request(data, source)
            try:
                response = self._unary(method, request, timeout, metadata, raw, waiting)
            except grpc.RpcError as e:
                if e.code() not in _NO_ANSWER and (e.code() != grpc.StatusCode.UNIMPLEMENTED
                                                   or e.details() != unimplemented):
                    self.parts = False
                raise
            self.parts = False
            return response
        return self._unary(method, request, timeout, metadata, raw, waiting)

    def _unary(self, method: str, request: "_Request", timeout, metadata, raw: bool, waiting: list):
        if request.source is None:
            rpc, request = self._bytes_rpc(method, raw=raw), request.take_bytes()
        else:
            # gRPC's unary call holds the request's bytes, and its copy of
            # them, until the response is in; sent as a stream of one
            # message (the same on the wire) both go once it is written.
            rpc, request = self._bytes_rpc(method, stream=True, raw=raw), request.take_one()
        if not waiting:
            return rpc(request, timeout=timeout, metadata=metadata)
        call = rpc.future(request, timeout=timeout, metadata=metadata)
        del request
        _wait_with(waiting, call)
        return call.result()

    def _call_in_parts(self, method: str, pieces, timeout, metadata, raw: bool, waiting: list):
        parts = _RequestParts(method, pieces)
        del pieces
        rpc = self._bytes_rpcs.get(PARTS_SERVICE)
        if rpc is None:
            rpc = self.channel.stream_stream(f"/{PARTS_SERVICE}/Call", request_serializer=None,
                                             response_deserializer=None)
            self._bytes_rpcs[PARTS_SERVICE] = rpc
        call = rpc(parts, timeout=timeout, metadata=metadata)
        parts.started(call)
        if waiting:
            call.add_done_callback(lambda _: parts.sent.set())
            parts.sent.wait()
            _wait_with(waiting, call)
        try:
            data = _joined_parts(call, self.max_message_bytes)
        except grpc.RpcError:
            if parts.error is not None:
                raise parts.error from None
            raise
        if raw:
            return data
        response_cls = RPCS[method][2]
        try:
            return response_cls.FromString(data)
        except DecodeError as e:
            raise _LocalRpcError(grpc.StatusCode.INTERNAL,
                                 f"the response is no {response_cls.DESCRIPTOR.full_name}: {e}") from None

    def _bytes_rpc(self, method: str, stream: bool = False, raw: bool = False):
        """The RPC taking its request as serialised bytes (with `stream`, as
        an iterator of one), returning the parsed response (with `raw`, its
        bytes), made once."""
        rpc = self._bytes_rpcs.get((method, stream, raw))
        if rpc is None:
            service = pb.planner_service_pb2.DESCRIPTOR.services_by_name["PartitionPlanner"]
            make = self.channel.stream_unary if stream else self.channel.unary_unary
            rpc = make(f"/{service.full_name}/{method}", request_serializer=None,
                       response_deserializer=None if raw else RPCS[method][2].FromString)
            self._bytes_rpcs[(method, stream, raw)] = rpc
        return rpc

    # -- one method per RPC ------------------------------------------------

    def partition_graph(self, graph=None, devices=None, *, mode=None, saturate_host: bool = False,
                        config: Optional[pb.PartitionerConfig] = None,
                        node_references="names",
                        request: Optional[pb.PartitionGraphRequest] = None,
                        **call_options) -> pb.PartitionGraphResponse:
        """torch.fx's accelerator Partitioner. `mode` is "size_based",
        "sparse_nn", "aot_based", ... (or give a PartitionerConfig);
        `devices` a DeviceInventory or memory sizes (["8GiB", "8GiB"]).
        node_references="indices" asks for a plan naming nodes by their index
        in the graph, about an eighth of the bytes for large graphs
        (`assignment_of(response, graph)` reads it)."""
        if request is None:
            request = pb.PartitionGraphRequest(
                graph=_as_graph(graph), devices=_as_devices(devices),
                config=self._partitioner_config(config, mode, saturate_host),
                node_references=node_references_value(node_references))
        return self.call("PartitionGraph", request, **call_options)

    def plan(self, graph=None, devices=None, *, mode=None, saturate_host: bool = False,
             partitioner: Optional[pb.PartitionerConfig] = None,
             shard: Optional[pb.ShardConfig] = None, shard_count: Optional[int] = None,
             node_references="names",
             request: Optional[pb.PlanRequest] = None, **call_options) -> pb.PlanResponse:
        """One call: run a planner, place the partitions, report. The
        partitioner (`mode`, `saturate_host` or `partitioner`) by default; the
        shard planner with `shard` or `shard_count`. `node_references` as for
        partition_graph."""
        if request is None:
            request = pb.PlanRequest(graph=_as_graph(graph), devices=_as_devices(devices),
                                     node_references=node_references_value(node_references))
            if shard is not None or shard_count is not None:
                if shard is None:
                    shard = pb.ShardConfig(shard_count=shard_count)
                request.shard.CopyFrom(shard)
            else:
                request.partitioner.CopyFrom(
                    self._partitioner_config(partitioner, mode, saturate_host))
        return self.call("Plan", request, **call_options)

    def validate(self, graph=None, devices=None, *, request: Optional[pb.ValidateRequest] = None,
                 **call_options) -> pb.ValidateResponse:
        """Parses and checks a graph (and devices) without planning."""
        if request is None:
            request = pb.ValidateRequest(graph=_as_graph(graph), devices=_as_devices(devices))
        return self.call("Validate", request, **call_options)

    def split_graph(self, graph=None, assignments=None, *, keep_original_order: bool = False,
                    request: Optional[pb.SplitGraphRequest] = None,
                    **call_options) -> pb.SplitGraphResponse:
        """split_module from a node -> partition assignment: a dict, pairs,
        NodePartitions, or a plan or response (by name or by index)."""
        if request is None:
            graph = _as_graph(graph)
            request = pb.SplitGraphRequest(
                graph=graph, assignments=_assignments(assignments or (), graph),
                keep_original_order=keep_original_order)
        return self.call("SplitGraph", request, **call_options)

    def shard_graph(self, graph=None, shard_count: Optional[int] = None, *, mode=None,
                    exact: bool = False, devices=None, config: Optional[pb.ShardConfig] = None,
                    node_references="names", request: Optional[pb.ShardGraphRequest] = None,
                    **call_options) -> pb.ShardGraphResponse:
        """fairscale's auto_shard (mode "fairscale") or balanced stages
        (mode "balanced", with devices). `node_references` as for
        partition_graph."""
        if request is None:
            if config is None:
                config = pb.ShardConfig(shard_count=shard_count or 0, exact=exact)
                mode_value = _enum_value(pb.ShardConfig.Mode, mode, "mode")
                if mode_value is not None:
                    config.mode = mode_value
            request = pb.ShardGraphRequest(graph=_as_graph(graph), config=config,
                                           devices=_as_devices(devices),
                                           node_references=node_references_value(node_references))
        return self.call("ShardGraph", request, **call_options)

    def build_pipeline_graph(self, graph=None, workers=None, *,
                             request: Optional[pb.BuildPipelineGraphRequest] = None,
                             **call_options) -> pb.BuildPipelineGraphResponse:
        """fairscale's pipeline graph; `workers` maps module targets to workers."""
        if request is None:
            items = workers.items() if isinstance(workers, Mapping) else (workers or ())
            request = pb.BuildPipelineGraphRequest(
                graph=_as_graph(graph),
                workers=[w if isinstance(w, pb.ModuleWorker) else pb.ModuleWorker(target=w[0], worker=w[1])
                         for w in items])
        return self.call("BuildPipelineGraph", request, **call_options)

    def plan_data_parallel(self, graph=None, devices=None, *, roles=None, input_batch_dim: int = 0,
                           data_parallel_axis: str = "", style=None,
                           request: Optional[pb.PlanDataParallelRequest] = None,
                           **call_options) -> pb.PlanDataParallelResponse:
        """Data-parallel sharding of an aten graph. `graph` may be what
        partplan.export_aten returns, whose roles are then used; `roles` maps
        placeholder names to "parameter", "optimizer_state" or "activation";
        `style` is "replicate", "fully_shard" or "memory_aware"."""
        if request is None:
            if roles is None and hasattr(graph, "roles"):
                roles = graph.roles
            if isinstance(roles, Mapping):
                roles = roles.items()
            entries = []
            for r in roles or ():
                if isinstance(r, pb.PlaceholderRoleEntry):
                    entries.append(r)
                else:
                    entries.append(pb.PlaceholderRoleEntry(
                        node=r[0], role=_enum_value(pb.PlaceholderRole, r[1], "roles")))
            request = pb.PlanDataParallelRequest(
                graph=_as_graph(graph), roles=entries, input_batch_dim=input_batch_dim,
                devices=_as_devices(devices), data_parallel_axis=data_parallel_axis)
            style_value = _enum_value(pb.DataParallelStyle, style, "style")
            if style_value is not None:
                request.style = style_value
        return self.call("PlanDataParallel", request, **call_options)

    @staticmethod
    def _partitioner_config(config, mode, saturate_host) -> pb.PartitionerConfig:
        if config is not None:
            return config
        config = pb.PartitionerConfig(saturate_host=saturate_host)
        mode_value = partition_mode(mode)
        if mode_value is not None:
            config.mode = mode_value
        return config


def request_file(path, part_bytes: int = PART_BYTES) -> Callable[[], Iterator[bytes]]:
    """A request for Client.call: the serialised request in file `path`,
    read `part_bytes` at a time, afresh for each attempt; never held whole.

        client.call("PartitionGraph", partplan.client.request_file("request.pb"))
    """
    path = os.fspath(path)

    def read() -> Iterator[bytes]:
        with open(path, "rb", buffering=0) as f:
            while True:
                piece = f.read(part_bytes)
                if not piece:
                    return
                yield piece
    return read


class _Request:
    """A request's bytes for one attempt: `data`, or what `source()`
    returns (called here, so that its errors are the caller's). Taking them
    leaves no reference here, so that what the caller does not hold goes
    once gRPC has sent it."""

    def __init__(self, data, source):
        self.source = source
        self.pieces = None
        if source is not None:
            data = source()
            if not isinstance(data, (bytes, bytearray, memoryview)):
                if isinstance(data, (str, Message)) or not isinstance(data, Iterable):
                    raise TypeError(f"the request function returned {type(data).__name__}, not the "
                                    "serialised request's bytes")
                self.pieces, data = data, None
        self._data = [data]
        self.size = None if data is None else memoryview(data).nbytes

    def take_pieces(self):
        if self.pieces is not None:
            pieces, self.pieces = self.pieces, None
            return pieces
        return _popped(self._data)

    def take_bytes(self) -> bytes:
        data = self._data.pop()
        return bytes(data if data is not None else b"".join(self.take_pieces()))

    def take_one(self):
        """An iterator of one request, which holds it no longer once gRPC
        has taken it."""
        held = [self.take_bytes()]

        def one():
            yield held.pop()
        return one()


def _popped(held: list):
    """The items of `held`, each dropped from it as it is taken."""
    while held:
        yield held.pop()


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _message_parts(method: str, pieces) -> Iterator[bytes]:
    """The serialised MessageParts carrying a request whose bytes are
    `pieces` in order: PART_BYTES of data each (the last fewer), the first
    naming `method`. Encoded here, so that the data is copied once, into
    its part."""
    name = method.encode()
    header = b"\x0a" + _varint(len(name)) + name  # MessagePart.method
    pending: list = []
    size = 0
    for piece in pieces:
        try:
            view = memoryview(piece)
        except TypeError:
            raise TypeError(f"a piece of the request is a {type(piece).__name__}, not bytes") from None
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        while len(view):
            take = min(len(view), PART_BYTES - size)
            pending.append(view[:take])
            size += take
            view = view[take:]
            if size == PART_BYTES:
                yield b"".join([header, b"\x12", _varint(size), *pending])  # MessagePart.data
                header, pending, size = b"", [], 0
        del piece, view
    if size or header:
        yield b"".join([header, b"\x12", _varint(size), *pending] if size else [header])


class _RequestParts:
    """The iterator of MessageParts that gRPC reads in a thread of its own.
    The first is made here, so that an error opening the request's source
    is raised before the call starts. A later error of the source cancels
    the call and is kept in `error` for the caller to raise (gRPC would log
    it and end the call UNKNOWN)."""

    def __init__(self, method: str, pieces):
        self._parts = _message_parts(method, pieces)
        self._first = next(self._parts)
        self.error: Optional[BaseException] = None
        self._call = None
        self._started = threading.Event()
        # Set once the last part is taken (or the call is over).
        self.sent = threading.Event()

    def started(self, call) -> None:
        self._call = call
        self._started.set()

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        if self._first is not None:
            part, self._first = self._first, None
            return part
        try:
            return next(self._parts)
        except StopIteration:
            self.sent.set()
            raise
        except Exception as e:  # pylint: disable=broad-except
            self.error = e
            # Cancelled, not ended: the server must not answer a request
            # cut short.
            self._started.wait()
            self._call.cancel()
            raise StopIteration from None


def _wait_with(waiting: list, call) -> None:
    """Calls the while_waiting function in `waiting` (taking it: once per
    call) unless `call` is over; cancels the call if it raises."""
    if call.done():
        return
    function = waiting.pop()
    try:
        function()
    except BaseException:
        call.cancel()
        raise


class _LocalRpcError(grpc.RpcError):
    """An error found by the client in what the server sent, raised where
    gRPC's own are, to become a PartplanError as they do."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self):
        return ()


def _data_start(part: bytes, n: int) -> int:
    """Where the data starts in a serialised MessagePart that is one `data`
    field and nothing else; 0 when it is anything else."""
    if n < 2 or part[0] != 0x12:
        return 0
    size = shift = 0
    for i in range(1, min(n, 11)):
        b = part[i]
        size |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return i + 1 if i + 1 + size == n else 0
    return 0


def _joined_parts(call, limit: int) -> bytearray:
    """The data of the MessageParts `call` returns (their serialised
    bytes), joined. Each part from partplan's server is one `data` field;
    anything else is parsed as protobuf reads a message (the last `data`
    wins). A part's bytes go once copied: the response is held once, and a
    part at a time besides."""
    data = bytearray()
    for part in call:
        n = len(part)
        start = _data_start(part, n)
        if start:
            data += memoryview(part)[start:]
        elif n:
            try:
                data += pb.MessagePart.FromString(part).data
            except DecodeError as e:
                call.cancel()
                raise _LocalRpcError(grpc.StatusCode.INTERNAL,
                                     f"a part of the response is no {pb.MessagePart.DESCRIPTOR.full_name}: "
                                     f"{e}") from None
        del part
        if len(data) > limit:
            call.cancel()
            raise _LocalRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                 f"the response's parts exceed the limit of {limit} bytes "
                                 "(max_message_bytes)")
    return data


def _call_method(rpc: str):
    """Client.<snake_case>(request, **call options) for an RPC without a
    method of its own above: `request` is its message or a dict in proto3
    JSON form."""
    def method(self, request, **call_options):
        return self.call(rpc, request, **call_options)
    method.__name__ = RPCS[rpc][0]
    method.__doc__ = (f"Calls {rpc} with `request` (a {RPCS[rpc][1].DESCRIPTOR.full_name} "
                      "or a dict in proto3 JSON form); returns the response.")
    return method


for _rpc, (_method, _, _) in RPCS.items():
    if not hasattr(Client, _method):
        setattr(Client, _method, _call_method(_rpc))
del _rpc, _method

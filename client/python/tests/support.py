"""Shared test helpers: the real server on loopback, a scriptable fake server,
and small models.

The real server is bazel-bin/server/partplan_server (or $PARTPLAN_SERVER),
started once per test process on 127.0.0.1 with a port picked by the kernel
(--port=0, read back from its JSON "serving" log line) and stopped at exit.
"""

import atexit
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PYTHON_DIR))
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

import grpc  # noqa: E402

import partplan  # noqa: E402
from partplan import messages as pb  # noqa: E402


def server_binary() -> str:
    return os.environ.get("PARTPLAN_SERVER") or os.path.join(REPO, "bazel-bin", "server", "partplan_server")


class ServerProcess:
    """partplan_server on 127.0.0.1 and a free port."""

    def __init__(self, *flags: str, startup_timeout: float = 30.0):
        binary = server_binary()
        if not os.access(binary, os.X_OK):
            raise RuntimeError(
                f"no server binary at {binary}: run `bazel build //server:partplan_server` "
                "(tools/test.sh does) or set PARTPLAN_SERVER")
        self.proc = subprocess.Popen(
            [binary, "--host=127.0.0.1", "--port=0", "--metrics_port=-1", "--log_format=json",
             *flags],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.log = []
        self.port = None
        deadline = time.monotonic() + startup_timeout
        while self.port is None:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("server exited before serving:\n" + "".join(self.log))
            self.log.append(line)
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("msg") == "serving":
                self.port = int(entry["address"].rsplit(":", 1)[1])
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("server did not start:\n" + "".join(self.log))
        # Keep draining its log so that it never blocks on a full pipe.
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        self.target = f"127.0.0.1:{self.port}"

    def _drain(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


_shared = None


def shared_server() -> ServerProcess:
    """One real server for the whole test run."""
    global _shared
    if _shared is None:
        _shared = ServerProcess()
        atexit.register(_shared.stop)
    return _shared


def free_port() -> int:
    """A loopback port nothing listens on (bound and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakePlanner(pb.PartitionPlannerServicer):
    """A scriptable PartitionPlanner in Python: Validate sleeps `delay`
    seconds, fails the first `fail_first` calls with `fail_code`, records
    every call's metadata, and answers with `validate_response`; SplitGraph
    answers with `split_response`."""

    def __init__(self):
        self.delay = 0.0
        self.fail_first = 0
        self.fail_code = grpc.StatusCode.UNAVAILABLE
        self.calls = []
        self.validate_response = pb.ValidateResponse(node_count=1)
        self.split_response = pb.SplitGraphResponse()
        self.name = ""
        self._lock = threading.Lock()

    def Validate(self, request, context):
        with self._lock:
            self.calls.append(dict(context.invocation_metadata()))
            n = len(self.calls)
        if self.delay:
            time.sleep(self.delay)
        if n <= self.fail_first:
            context.abort(self.fail_code, f"failing call {n} on purpose")
        response = pb.ValidateResponse()
        response.CopyFrom(self.validate_response)
        if self.name:
            response.node_count = len(self.name)
        return response

    def SplitGraph(self, request, context):
        return self.split_response


class FakeServer:
    """A grpc Python server running FakePlanner on loopback."""

    def __init__(self, port: int = 0, credentials=None, planner=None, max_message_bytes=256 << 20):
        self.planner = planner or FakePlanner()
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4),
            options=[("grpc.max_receive_message_length", max_message_bytes),
                     ("grpc.max_send_message_length", max_message_bytes),
                     ("grpc.so_reuseport", 0)])
        pb.add_PartitionPlannerServicer_to_server(self.planner, self.server)
        address = f"127.0.0.1:{port}"
        if credentials is None:
            self.port = self.server.add_insecure_port(address)
        else:
            self.port = self.server.add_secure_port(address, credentials)
        if self.port == 0:
            raise RuntimeError(f"cannot listen on {address}")
        self.server.start()
        self.target = f"127.0.0.1:{self.port}"

    def stop(self):
        self.server.stop(grace=None).wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def devices_for(graph, *fractions):
    """A DeviceInventory of devices holding these fractions of the graph's size."""
    total = sum(n.size_bytes.total_bytes for n in graph.nodes)
    return partplan.device_inventory([max(1, int(math.ceil(total * f))) for f in fractions])


# ---------------------------------------------------------------------------
# Models (torch is imported lazily: the client tests do not need it).
# ---------------------------------------------------------------------------


def transformer_model(layers: int = 2, dim: int = 32, heads: int = 4, vocab: int = 50):
    """A Transformer encoder LM: token embedding, learned positions, layers of
    nn.MultiheadAttention (a leaf returning a tuple) and a GELU MLP with
    pre-LayerNorm residuals, and a vocabulary head."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.ln2 = nn.LayerNorm(dim)
            self.fc1 = nn.Linear(dim, 4 * dim)
            self.fc2 = nn.Linear(4 * dim, dim)

        def forward(self, x):
            h = self.ln1(x)
            a = self.attn(h, h, h, need_weights=False)[0]
            x = x + a
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class TransformerLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, dim)
            self.pos = nn.Parameter(torch.randn(1, 16, dim) * 0.02)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab)

        def forward(self, ids):
            x = self.tok(ids) + self.pos[:, : ids.shape[1]]
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return TransformerLM()


def manual_attention_model(batch: int = 2, seq: int = 8, dim: int = 32, heads: int = 4):
    """Attention written out (view, transpose, matmul, softmax), traced through."""
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)
            self.out = nn.Linear(dim, dim)

        def forward(self, x):
            qkv = self.qkv(x).chunk(3, dim=-1)  # a tuple-valued node
            q, k, v = qkv[0], qkv[1], qkv[2]
            shape = (batch, seq, heads, dim // heads)
            q = q.reshape(shape).transpose(1, 2)
            k = k.reshape(shape).transpose(1, 2)
            v = v.reshape(shape).transpose(1, 2)
            w = F.softmax(q @ k.transpose(-2, -1) * (dim // heads) ** -0.5, dim=-1)
            return self.out((w @ v).transpose(1, 2).reshape(batch, seq, dim))

    return Attention()

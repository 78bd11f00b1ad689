"""Client.call in parts (PartitionPlannerInParts): the same responses and
errors as the unary RPC from the real server, the parts' wire format, the
fallback to unary for a server without the service, retries, deadlines, and
the CLI sending a binary request file a part at a time."""

import array
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from concurrent import futures

import support

import grpc
from google.protobuf import json_format

import partplan
from partplan import client as client_module
from partplan import messages as pb
from partplan.client import PART_BYTES, PARTS_MIN_BYTES, RetryPolicy, request_file

import test_cli

MiB = 1 << 20


def padded_graph(graph: pb.Graph, request_cls, size: int, **fields):
    """A request of `request_cls` holding `graph` whose serialised size is
    exactly `size`, made so by the length of the graph's name."""
    request = request_cls(graph=graph, **fields)
    request.graph.name = ""
    base = request.ByteSize()
    for extra in range(16):
        request.graph.name = "g" * max(0, size - base - extra)
        if request.ByteSize() == size:
            return request
    raise AssertionError(f"no padding makes {size} bytes")


def output_graph(*name_lengths: int) -> pb.Graph:
    """Placeholders named by `name_lengths` characters each, all returned by
    the output: SplitGraph answers with their names (output_values), so the
    response's size is set by them."""
    graph = pb.Graph()
    names = [chr(ord("a") + i) * n for i, n in enumerate(name_lengths)]
    for name in names:
        graph.nodes.add(name=name, op=pb.PLACEHOLDER, target="x")
    output = graph.nodes.add(name="output", op=pb.OUTPUT, target="output")
    for name in names:
        output.args.add(node=name)
    return graph


def response_of_size(size: int) -> pb.Graph:
    """output_graph of a SplitGraph response of exactly `size` bytes: one
    output value, of length L, takes 1 + len(varint(L)) + L bytes."""
    for head in (2, 3, 4, 5):
        if size - head < 1 << (7 * (head - 1)):
            return output_graph(size - head)
    raise ValueError(size)


def chain_graph(n: int, name_length: int = 40) -> pb.Graph:
    """x -> n relus -> output, each relu named in `name_length` characters
    and taking 4 KiB."""
    graph = pb.Graph(name="chain")
    previous = "x"
    graph.nodes.add(name="x", op=pb.PLACEHOLDER, target="x",
                    size_bytes=pb.SizeBytes(total_bytes=4096, output_bytes=4096))
    for i in range(n):
        name = f"relu_{i}_".ljust(name_length, "r")
        node = graph.nodes.add(name=name, op=pb.CALL_FUNCTION, target="torch.relu",
                               size_bytes=pb.SizeBytes(total_bytes=4096, output_bytes=4096))
        node.args.add(node=previous)
        previous = name
    graph.nodes.add(name="output", op=pb.OUTPUT, target="output").args.add(node=previous)
    return graph


def server_entry(server, request_id: str, wait: float = 10.0):
    """The server's log line of the call with `request_id`, waited for (the
    server logs once the call is done)."""
    deadline = time.monotonic() + wait
    while True:
        for line in list(server.log):
            if request_id in line:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("request_id") == request_id:
                    return entry
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


class PartsEncodingTest(unittest.TestCase):
    """The MessageParts the client writes and reads, checked against
    protobuf's own parsing."""

    def parts(self, pieces, method="Validate"):
        parts = [pb.MessagePart.FromString(p) for p in client_module._message_parts(method, pieces)]
        self.assertTrue(parts)
        self.assertEqual(parts[0].method, method)
        self.assertTrue(all(p.method == "" for p in parts[1:]))
        self.assertTrue(all(len(p.data) == PART_BYTES for p in parts[:-1]))
        self.assertLessEqual(len(parts[-1].data), PART_BYTES)
        return parts

    def test_request_parts(self):
        data = bytes(range(256)) * (PART_BYTES // 64 + 3)  # 4 MiB and 768 bytes
        for name, pieces, count in (
                ("empty", [], 1),
                ("an empty piece", [b""], 1),
                ("one byte", [b"\x01"], 1),
                ("exactly a part", [data[:PART_BYTES]], 1),
                ("a part and a byte", [data[:PART_BYTES + 1]], 2),
                ("two parts", [data[:2 * PART_BYTES]], 2),
                ("whole", [data], 5),
                ("a memoryview", [memoryview(data)], 5),
                ("a bytearray", [bytearray(data)], 5),
                ("uneven pieces", [data[i:i + 300_001] for i in range(0, len(data), 300_001)], 5),
                ("tiny pieces", [data[i:i + 1000] for i in range(0, 3 * PART_BYTES, 1000)], 4)):
            with self.subTest(name):
                parts = self.parts(pieces)
                self.assertEqual(len(parts), count)
                self.assertEqual(b"".join(p.data for p in parts), b"".join(bytes(p) for p in pieces))
        # Any bytes-like piece, by its bytes.
        ints = array.array("i", range(1000))
        self.assertEqual(self.parts([ints])[0].data, ints.tobytes())
        with self.assertRaisesRegex(TypeError, "a piece of the request is a str"):
            list(client_module._message_parts("Validate", ["text"]))

    def test_response_parts(self):
        # As protobuf reads each part: the last `data` of a part wins,
        # `method` and unknown fields are skipped.
        cases = [
            [pb.MessagePart(data=b"abc").SerializeToString(), b"", b"\x12\x00",
             pb.MessagePart(data=b"d" * 300).SerializeToString()],
            [pb.MessagePart(method="x", data=b"abc").SerializeToString(),
             b"\x12\x01a\x12\x02bc", b"\x12\x02de\x18\x07", b"\x18\x07\x12\x01f"],
            [b"\x12\x82\x00xy"],  # a length in more bytes than it needs
        ]
        for parts in cases:
            with self.subTest(parts=parts[:2]):
                expected = b"".join(pb.MessagePart.FromString(p).data for p in parts)
                self.assertEqual(client_module._joined_parts(iter(parts), 1 << 30), expected)
        for bad in (b"\x12\x05abc", b"\x12", b"\x12\xff"):
            with self.subTest(bad=bad):
                with self.assertRaises(grpc.RpcError) as caught:
                    client_module._joined_parts(_Parts([bad]), 1 << 30)
                self.assertEqual(caught.exception.code(), grpc.StatusCode.INTERNAL)
        with self.assertRaises(grpc.RpcError) as caught:
            client_module._joined_parts(_Parts([b"\x12\x03abc"] * 4), 10)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)

    def test_request_function_results(self):
        client = partplan.Client("127.0.0.1:1", timeout=1)
        self.addCleanup(client.close)
        with self.assertRaisesRegex(TypeError, "returned str, not the serialised request's bytes"):
            client.call("Validate", lambda: "{}")
        with self.assertRaisesRegex(TypeError, "returned int"):
            client.call("Validate", lambda: 7)
        with self.assertRaises(FileNotFoundError):
            client.call("Validate", request_file("/nonexistent/request.pb"))


class _Parts(list):
    """A finished call's responses, as _joined_parts reads them."""

    cancelled = False

    def cancel(self):
        self.cancelled = True


class RealServerPartsTest(unittest.TestCase):
    """Against partplan_server: each request in parts and unary."""

    @classmethod
    def setUpClass(cls):
        cls.server = support.shared_server()
        cls.client = partplan.Client(cls.server.target, timeout=60)
        cls.unary = partplan.Client(cls.server.target, timeout=60)
        cls.unary.parts = False
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.unary.close()
        cls.tmp.cleanup()

    def request_id(self, tag: str) -> str:
        return f"parts-{tag}-{time.monotonic_ns()}"

    def assert_in_parts(self, request_id: str, method: str):
        entry = server_entry(self.server, request_id)
        self.assertIsNotNone(entry, f"no log line for {request_id}")
        self.assertEqual(entry["method"], method)
        self.assertIn("receive_ms", entry)  # only calls in parts have one

    def write(self, name: str, data: bytes) -> str:
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_responses_are_the_unary_ones(self):
        chain = chain_graph(40_000)
        devices = partplan.device_inventory([str(4096 * 20_001)] * 2)
        cases = [
            ("empty response", "SplitGraph", padded_graph(output_graph(), pb.SplitGraphRequest, 3 * MiB // 2), 0),
            ("small response", "SplitGraph", padded_graph(output_graph(5), pb.SplitGraphRequest, 2 * MiB), 7),
            ("a request of one part", "SplitGraph", padded_graph(output_graph(5), pb.SplitGraphRequest, MiB), 7),
            ("a response of one part", "SplitGraph", response_of_size(MiB), MiB),
            ("a part and a byte", "SplitGraph", response_of_size(MiB + 1), MiB + 1),
            ("many parts", "SplitGraph", response_of_size(5 * MiB + 12345), 5 * MiB + 12345),
            ("Validate", "Validate", pb.ValidateRequest(graph=chain, devices=devices), None),
            ("PartitionGraph", "PartitionGraph",
             pb.PartitionGraphRequest(graph=chain, devices=devices), None),
            ("Plan by index", "Plan", pb.PlanRequest(
                graph=chain, devices=devices, node_references=pb.NODE_REFERENCES_INDICES), None),
        ]
        for name, method, request, response_size in cases:
            if isinstance(request, pb.Graph):
                request = pb.SplitGraphRequest(graph=request)
            data = request.SerializeToString()
            self.assertGreaterEqual(len(data), PARTS_MIN_BYTES)
            path = self.write(f"{method}.pb", data)
            # Unary first: a plan is then the plan cache's answer to the call
            # in parts too, to the byte (planner_seconds included).
            expected = self.unary.call(method, data, response_bytes=True)
            if response_size is not None:
                self.assertEqual(len(expected), response_size, name)
            for form, request_form in (("bytes", data), ("memoryview", memoryview(data)),
                                       ("function", lambda: data), ("file", request_file(path)),
                                       ("message", request)):
                with self.subTest(name, form=form):
                    request_id = self.request_id(form)
                    got = self.client.call(method, request_form, response_bytes=True,
                                           metadata=[("x-request-id", request_id)])
                    self.assertEqual(bytes(got), expected)
                    self.assert_in_parts(request_id, method)
            with self.subTest(name, form="parsed"):
                self.assertEqual(self.client.call(method, request_file(path)),
                                 RPCS_RESPONSE[method].FromString(expected))
        self.assertTrue(self.client.parts)

    def test_small_requests_stay_unary(self):
        request = padded_graph(output_graph(5), pb.SplitGraphRequest, PARTS_MIN_BYTES - 1)
        request_id = self.request_id("small")
        response = self.client.call("SplitGraph", request.SerializeToString(),
                                    metadata=[("x-request-id", request_id)])
        self.assertEqual(list(response.output_values), ["a" * 5])
        entry = server_entry(self.server, request_id)
        self.assertIsNotNone(entry)
        self.assertNotIn("receive_ms", entry)

    def assert_same_error(self, method, data):
        with self.assertRaises(partplan.PartplanError) as unary:
            self.unary.call(method, data)
        request_id = self.request_id("error")
        with self.assertRaises(partplan.PartplanError) as parts:
            self.client.call(method, data, metadata=[("x-request-id", request_id)])
        self.assert_in_parts(request_id, method)
        a, b = unary.exception, parts.exception
        self.assertEqual((b.code, b.message, b.field_violations, b.attempts),
                         (a.code, a.message, a.field_violations, a.attempts))
        self.assertEqual([d.SerializeToString() for d in b.details],
                         [d.SerializeToString() for d in a.details])
        return b

    def test_errors_are_the_unary_ones(self):
        # Bytes that are no request.
        error = self.assert_same_error("PartitionGraph", b"\x0a\x10short" + b"\0" * (2 * MiB))
        self.assertEqual(error.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertTrue(error.field_violations)
        # A node referring to one that does not come before it.
        graph = chain_graph(30_000)
        graph.nodes[5].args[0].node = graph.nodes[9].name
        error = self.assert_same_error(
            "PartitionGraph", pb.PartitionGraphRequest(
                graph=graph, devices=partplan.device_inventory(["1GiB"])).SerializeToString())
        self.assertEqual(error.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(error.field_violations[0].field, "graph.nodes[5].args[0]")
        self.assertIn("BadRequest", error.details[0].DESCRIPTOR.full_name)
        # Devices too small: FAILED_PRECONDITION, without details.
        error = self.assert_same_error(
            "PartitionGraph", pb.PartitionGraphRequest(
                graph=chain_graph(30_000), devices=partplan.device_inventory(["1KiB", "1KiB"])
            ).SerializeToString())
        self.assertEqual(error.code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertTrue(self.client.parts)

    def test_retries_read_the_source_again(self):
        # Nothing listens on the port at first; the server starts there a
        # moment later, and the retried call gets through. Each attempt
        # reads the file afresh.
        data = padded_graph(output_graph(3), pb.SplitGraphRequest, 3 * MiB).SerializeToString()
        path = self.write("retried.pb", data)
        opened = []

        def read():
            opened.append(1)
            return request_file(path)()
        port = support.free_port()
        servers = []
        timer = threading.Timer(0.5, lambda: servers.append(support.ServerProcess(f"--port={port}")))
        timer.start()
        try:
            policy = RetryPolicy(max_attempts=1000, initial_backoff=0.05, max_backoff=0.2)
            with partplan.Client(f"127.0.0.1:{port}", timeout=60, retry=policy) as client:
                response = client.call("SplitGraph", read)
                self.assertEqual(list(response.output_values), ["aaa"])
                self.assertTrue(client.parts)
        finally:
            timer.join()
            for s in servers:
                s.stop()
        self.assertGreaterEqual(len(opened), 2)

    def test_deadline(self):
        data = pb.PartitionGraphRequest(graph=chain_graph(30_000), devices=partplan.device_inventory(
            ["1GiB"])).SerializeToString()
        for request in (data, lambda: data):
            with self.subTest(type(request).__name__):
                with self.assertRaises(partplan.PartplanError) as caught:
                    self.client.call("PartitionGraph", request, timeout=0.001)
                self.assertEqual(caught.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
                self.assertLessEqual(caught.exception.attempts, 1)  # never retried

    def test_an_error_reading_the_source_is_the_callers(self):
        data = padded_graph(output_graph(3), pb.SplitGraphRequest, 3 * MiB).SerializeToString()

        def pieces():
            yield data[:MiB]
            yield data[MiB:2 * MiB]
            raise OSError("the disk is gone")
        request_id = self.request_id("cut")
        with self.assertRaisesRegex(OSError, "the disk is gone"):
            self.client.call("SplitGraph", pieces, metadata=[("x-request-id", request_id)])
        # The call was cancelled, not ended: the server answers no request
        # cut short.
        entry = server_entry(self.server, request_id, wait=1.0)
        self.assertTrue(entry is None or entry.get("code") != "OK", entry)

    def test_while_waiting(self):
        # Called once per call, in the calling thread, whether the request
        # goes in parts or unary; an error of its own cancels the call.
        for name, request in (
                ("in parts", padded_graph(output_graph(4), pb.SplitGraphRequest, 2 * MiB)),
                ("unary", pb.SplitGraphRequest(graph=output_graph(4)))):
            with self.subTest(name):
                calls = []
                response = self.client.call(
                    "SplitGraph", request, while_waiting=lambda: calls.append(threading.get_ident()))
                self.assertEqual(list(response.output_values), ["a" * 4])
                self.assertLessEqual(len(calls), 1)  # none when the answer came first
                self.assertTrue(all(c == threading.get_ident() for c in calls))

        def fails():
            raise KeyError("while waiting")
        slow = pb.PartitionGraphRequest(graph=chain_graph(40_000), devices=partplan.device_inventory(
            [str(4096 * 20_001)] * 2))
        for request in (slow, slow.SerializeToString()[:1000]):
            with self.assertRaises((KeyError, partplan.PartplanError)) as caught:
                self.client.call("PartitionGraph", request, while_waiting=fails)
            # The hook's own error, or the call's when it was over first.
            self.assertTrue(isinstance(caught.exception, KeyError)
                            or caught.exception.code == grpc.StatusCode.INVALID_ARGUMENT)

    def test_response_limit(self):
        request = pb.SplitGraphRequest(graph=response_of_size(3 * MiB))
        with partplan.Client(self.server.target, timeout=60, max_message_bytes=2 * MiB) as client:
            with self.assertRaises(partplan.PartplanError) as caught:
                client.call("SplitGraph", request)
        self.assertEqual(caught.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED)

    def test_cli_sends_a_binary_file_in_parts(self):
        chain = chain_graph(40_000)
        request = pb.PartitionGraphRequest(graph=chain, devices=partplan.device_inventory(
            [str(4096 * 20_001)] * 2))
        path = self.write("cli.pb", request.SerializeToString())
        self.assertGreater(os.path.getsize(path), 2 * MiB)
        request_id = self.request_id("cli")
        status, out, err = test_cli.run_cli("call", "PartitionGraph", "--request", path, "--target",
                                            self.server.target, "--request-id", request_id)
        self.assertEqual(status, 0, err)
        self.assert_in_parts(request_id, "PartitionGraph")
        response = json_format.Parse(out, pb.PartitionGraphResponse())
        self.assertEqual(len(response.plan.assignments), len(chain.nodes) - 2)
        self.assertEqual(out, json_format.MessageToJson(response, indent=1) + "\n")
        # The same text as from the unary call's response.
        expected = self.unary.call("PartitionGraph", request, response_bytes=True)
        self.assertEqual(out, json_format.MessageToJson(
            pb.PartitionGraphResponse.FromString(expected), indent=1) + "\n")
        for output, start in (("table", ""), ("html", "<!DOCTYPE html>")):
            with self.subTest(output):
                status, out, err = test_cli.run_cli("call", "PartitionGraph", "--request", path,
                                                    "--target", self.server.target, "--output", output)
                self.assertEqual(status, 0, err)
                self.assertIn(start, out[:200])
        # What the CLI prepares while the server works: memory for responses
        # that may be large, not for counts.
        from partplan import cli

        self.assertTrue(cli._may_be_large(pb.PartitionGraphResponse.DESCRIPTOR))
        self.assertTrue(cli._may_be_large(pb.SplitGraphResponse.DESCRIPTOR))
        self.assertFalse(cli._may_be_large(pb.ValidateResponse.DESCRIPTOR))
        status, out, err = test_cli.run_cli("call", "PartitionGraph", "--request",
                                            os.path.join(self.tmp.name, "missing.pb"),
                                            "--target", self.server.target)
        self.assertEqual(status, 2)
        self.assertIn("missing.pb", err)

    def test_cli_reader_that_stops_early_is_no_error(self):
        # `partplan call ... | head`: the output's pipe closes while the
        # JSON is written; python3 -m partplan ends quietly with 0.
        request = pb.PartitionGraphRequest(graph=chain_graph(40_000), devices=partplan.device_inventory(
            [str(4096 * 20_001)] * 2))
        path = self.write("head.pb", request.SerializeToString())
        read, write = os.pipe()
        os.close(read)  # the reader is gone before anything is written
        with open(write, "wb") as out:
            done = subprocess.run(
                [sys.executable, "-m", "partplan", "call", "PartitionGraph", "--request", path,
                 "--target", self.server.target], stdout=out, stderr=subprocess.PIPE, text=True,
                env=dict(os.environ, PYTHONPATH=support.PYTHON_DIR), timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stderr, "")


RPCS_RESPONSE = {name: response for name, (_, _, response) in client_module.RPCS.items()}


class _Unimplemented(support.FakePlanner):
    """A server that has PartitionPlannerInParts but not Validate: both
    answer UNIMPLEMENTED with `message`."""

    message = "Validate is not implemented yet"

    def __init__(self):
        super().__init__()
        self.parts_calls = 0

    def Validate(self, request, context):
        context.abort(grpc.StatusCode.UNIMPLEMENTED, self.message)

    def Call(self, parts, context):
        self.parts_calls += 1
        for _ in parts:
            pass
        context.abort(grpc.StatusCode.UNIMPLEMENTED, self.message)
        yield b""  # a generator: a stream of responses

    def start(self) -> grpc.Server:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb.add_PartitionPlannerServicer_to_server(self, server)
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "partplan.v1.PartitionPlannerInParts",
            {"Call": grpc.stream_stream_rpc_method_handler(self.Call)})])
        self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        return server


class FallbackTest(unittest.TestCase):
    """A server without PartitionPlannerInParts (FakeServer: PartitionPlanner
    only, in Python) is asked unary."""

    def test_unimplemented_falls_back_to_unary(self):
        data = padded_graph(output_graph(1), pb.ValidateRequest, 2 * MiB).SerializeToString()
        with support.FakeServer() as server:
            server.planner.name = "fallback"
            for form in ("bytes", "function", "file"):
                with self.subTest(form):
                    reads = []

                    def read():
                        reads.append(1)
                        return data
                    with tempfile.NamedTemporaryFile(suffix=".pb") as f:
                        f.write(data)
                        f.flush()
                        request = {"bytes": data, "function": read,
                                   "file": request_file(f.name)}[form]
                        with partplan.Client(server.target, timeout=30) as client:
                            self.assertTrue(client.parts)
                            self.assertEqual(client.call("Validate", request).node_count, 8)
                            self.assertFalse(client.parts)  # from then on, unary
                            self.assertEqual(client.call("Validate", request).node_count, 8)
                    if form == "function":
                        # Read for the call in parts and for the unary one,
                        # then once.
                        self.assertEqual(len(reads), 3)
            self.assertEqual(len(server.planner.calls), 6)

    def test_an_unimplemented_rpc_keeps_parts(self):
        # The server has the service, the RPC answers UNIMPLEMENTED: the
        # unary call says the same, so parts stay on.
        planner = _Unimplemented()
        server = planner.start()
        try:
            data = padded_graph(output_graph(1), pb.ValidateRequest, 2 * MiB).SerializeToString()
            with partplan.Client(f"127.0.0.1:{planner.port}", timeout=30) as client:
                for _ in range(2):
                    with self.assertRaises(partplan.PartplanError) as caught:
                        client.call("Validate", data)
                    self.assertEqual(caught.exception.code, grpc.StatusCode.UNIMPLEMENTED)
                    self.assertEqual(caught.exception.message, planner.message)
                    self.assertTrue(client.parts)
        finally:
            server.stop(grace=None).wait()
        self.assertEqual(planner.parts_calls, 2)


if __name__ == "__main__":
    unittest.main()

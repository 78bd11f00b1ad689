"""partplan.Client: retries, deadlines, load balancing, TLS, message limits,
error details, and every RPC against the real server."""

import json
import os
import pickle
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

import support

import grpc
from google.protobuf import json_format

import partplan
from partplan import messages as pb
from partplan.client import NO_RETRY, RetryPolicy

EXAMPLES = os.path.join(support.REPO, "client", "examples")
FAST_RETRY = RetryPolicy(max_attempts=100, initial_backoff=0.05, max_backoff=0.2)


def example(name, cls):
    with open(os.path.join(EXAMPLES, name)) as f:
        return json_format.Parse(f.read(), cls())


class RetryTest(unittest.TestCase):
    def test_no_server_retries_then_unavailable_within_deadline(self):
        target = f"127.0.0.1:{support.free_port()}"
        with partplan.Client(target, timeout=1.0, retry=FAST_RETRY) as client:
            start = time.monotonic()
            with self.assertRaises(partplan.PartplanError) as caught:
                client.validate(pb.Graph())
            elapsed = time.monotonic() - start
        error = caught.exception
        self.assertEqual(error.code, grpc.StatusCode.UNAVAILABLE)
        self.assertGreaterEqual(error.attempts, 4)  # 50, 100, 200, 200, ... ms apart
        self.assertLess(error.attempts, 100)
        self.assertLess(elapsed, 1.0)  # gives up before the deadline, never after
        self.assertGreater(elapsed, 0.3)
        self.assertEqual(error.method, "Validate")
        self.assertTrue(error.request_id)

    def test_max_attempts(self):
        target = f"127.0.0.1:{support.free_port()}"
        policy = RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.01)
        with partplan.Client(target, timeout=10, retry=policy) as client:
            sleeps = []
            client._sleep = lambda s: (sleeps.append(s), time.sleep(s))
            with self.assertRaises(partplan.PartplanError) as caught:
                client.validate(pb.Graph())
        self.assertEqual(caught.exception.attempts, 3)
        self.assertEqual(len(sleeps), 2)

    def test_backoff_grows_exponentially_with_jitter(self):
        import random

        policy = RetryPolicy(initial_backoff=0.1, multiplier=2.0, max_backoff=1.0, jitter=0.2)
        rng = random.Random(1)
        waits = [policy.backoff(n, rng) for n in range(1, 7)]
        for n, w in enumerate(waits, start=1):
            base = min(1.0, 0.1 * 2 ** (n - 1))
            self.assertGreaterEqual(w, base * 0.8)
            self.assertLessEqual(w, base * 1.2)
        no_jitter = RetryPolicy(jitter=0.0, initial_backoff=0.1, max_backoff=5)
        self.assertEqual([no_jitter.backoff(n, rng) for n in (1, 2, 3)], [0.1, 0.2, 0.4])

    def test_no_retry(self):
        target = f"127.0.0.1:{support.free_port()}"
        with partplan.Client(target, timeout=5, retry=NO_RETRY) as client:
            with self.assertRaises(partplan.PartplanError) as caught:
                client.validate(pb.Graph())
        self.assertEqual(caught.exception.attempts, 1)
        self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)

    def test_server_that_comes_up_late(self):
        # Nothing listens at first; a server starts on the port 0.5 s later
        # and the retried call gets through.
        port = support.free_port()
        servers = []
        timer = threading.Timer(0.5, lambda: servers.append(support.FakeServer(port)))
        timer.start()
        try:
            with partplan.Client(f"127.0.0.1:{port}", timeout=10, retry=FAST_RETRY) as client:
                start = time.monotonic()
                response = client.validate(pb.Graph())
                self.assertLess(time.monotonic() - start, 5)
            self.assertEqual(response.node_count, 1)
        finally:
            timer.join()
            for s in servers:
                s.stop()

    def test_retries_unavailable_answers_only(self):
        with support.FakeServer() as server:
            server.planner.fail_first = 2
            with partplan.Client(server.target, timeout=10, retry=FAST_RETRY) as client:
                self.assertEqual(client.validate(pb.Graph()).node_count, 1)
            self.assertEqual(len(server.planner.calls), 3)
            # All attempts of one call carry the same request id.
            ids = {c["x-request-id"] for c in server.planner.calls}
            self.assertEqual(len(ids), 1)

            server.planner.calls.clear()
            server.planner.fail_first = 5
            server.planner.fail_code = grpc.StatusCode.INVALID_ARGUMENT
            with partplan.Client(server.target, timeout=10, retry=FAST_RETRY) as client:
                with self.assertRaises(partplan.PartplanError) as caught:
                    client.validate(pb.Graph())
            self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual(caught.exception.attempts, 1)
            self.assertEqual(caught.exception.message, "failing call 1 on purpose")

    def test_request_function_called_once_per_attempt(self):
        # A request handed over as a function of its bytes: each attempt
        # asks for them again, since the client keeps none.
        with support.FakeServer() as server:
            server.planner.fail_first = 2
            reads = []

            def read():
                reads.append(1)
                return pb.ValidateRequest(graph=pb.Graph()).SerializeToString()
            with partplan.Client(server.target, timeout=10, retry=FAST_RETRY) as client:
                self.assertEqual(client.call("Validate", read).node_count, 1)
            self.assertEqual(len(reads), 3)
            self.assertEqual(len(server.planner.calls), 3)
            self.assertEqual(len({c["x-request-id"] for c in server.planner.calls}), 1)


class DeadlineTest(unittest.TestCase):
    def test_slow_server_deadline_exceeded(self):
        with support.FakeServer() as server:
            server.planner.delay = 3.0
            with partplan.Client(server.target, timeout=0.3, retry=FAST_RETRY) as client:
                start = time.monotonic()
                with self.assertRaises(partplan.PartplanError) as caught:
                    client.validate(pb.Graph())
                elapsed = time.monotonic() - start
        self.assertEqual(caught.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertEqual(caught.exception.attempts, 1)  # never retried
        self.assertGreaterEqual(elapsed, 0.29)
        self.assertLess(elapsed, 1.5)

    def test_per_call_timeout_overrides_the_default(self):
        with support.FakeServer() as server:
            server.planner.delay = 0.5
            with partplan.Client(server.target, timeout=0.1) as client:
                self.assertEqual(client.validate(pb.Graph(), timeout=5).node_count, 1)
                with self.assertRaises(partplan.PartplanError) as caught:
                    client.validate(pb.Graph())
                self.assertEqual(caught.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)

    def test_deadline_spans_the_retries(self):
        # Each attempt fails after 0.2 s with UNAVAILABLE; a 0.5 s deadline
        # leaves room for two or three attempts and ends the call in time.
        with support.FakeServer() as server:
            server.planner.delay = 0.2
            server.planner.fail_first = 100
            with partplan.Client(server.target, timeout=0.5, retry=FAST_RETRY) as client:
                start = time.monotonic()
                with self.assertRaises(partplan.PartplanError) as caught:
                    client.validate(pb.Graph())
                elapsed = time.monotonic() - start
        self.assertIn(caught.exception.code,
                      (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED))
        self.assertGreaterEqual(caught.exception.attempts, 2)
        self.assertLess(elapsed, 1.5)


class ChannelTest(unittest.TestCase):
    def test_options(self):
        client = partplan.Client("dns:///planner.example:50051")
        options = dict(client.channel_options)
        self.assertEqual(client.load_balancing, "round_robin")
        self.assertIn('"round_robin"', options["grpc.service_config"])
        self.assertEqual(options["grpc.max_receive_message_length"], 256 * 1024 * 1024)
        self.assertEqual(options["grpc.max_send_message_length"], 256 * 1024 * 1024)
        client.close()
        plain = partplan.Client("localhost:1")
        self.assertIsNone(plain.load_balancing)
        self.assertNotIn("grpc.service_config", dict(plain.channel_options))
        plain.close()
        with self.assertRaises(ValueError):
            partplan.Client("localhost:1", load_balancing="random")

    def test_dns_target(self):
        with support.FakeServer() as server:
            with partplan.Client(f"dns:///127.0.0.1:{server.port}", timeout=10) as client:
                self.assertEqual(client.validate(pb.Graph()).node_count, 1)

    def test_round_robin_spreads_calls(self):
        # Two servers behind one target: round_robin uses both, pick_first one.
        with support.FakeServer() as a, support.FakeServer() as b:
            a.planner.name, b.planner.name = "a", "bb"
            target = f"ipv4:127.0.0.1:{a.port},127.0.0.1:{b.port}"
            with partplan.Client(target, timeout=10, load_balancing="round_robin") as client:
                # round_robin picks among the connected servers; the second
                # may connect a moment after the first.
                seen, deadline = [], time.monotonic() + 10
                while len(set(seen)) < 2 and time.monotonic() < deadline:
                    seen.append(client.validate(pb.Graph()).node_count)
                tail = [client.validate(pb.Graph()).node_count for _ in range(6)]
            self.assertEqual(set(seen), {1, 2})
            self.assertEqual(sorted(tail), [1, 1, 1, 2, 2, 2])  # alternating once both are up
            with partplan.Client(target, timeout=10, load_balancing="pick_first") as client:
                seen = [client.validate(pb.Graph()).node_count for _ in range(8)]
            self.assertEqual(len(set(seen)), 1)

    def test_large_messages(self):
        # A 6 MiB response: over gRPC's 4 MiB default, under partplan's 256 MiB.
        with support.FakeServer() as server:
            server.planner.split_response = pb.SplitGraphResponse(
                submodules=[pb.Submodule(name="n" * 1024, nodes=["x" * 1024] * 6) for _ in range(1024)])
            with partplan.Client(server.target, timeout=20) as client:
                response = client.split_graph(pb.Graph(nodes=[pb.Node(name="y" * (5 << 20))]))
                self.assertEqual(len(response.submodules), 1024)
            with partplan.Client(server.target, timeout=20, max_message_bytes=4 << 20) as client:
                with self.assertRaises(partplan.PartplanError) as caught:
                    client.split_graph(pb.Graph())
                self.assertEqual(caught.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED)

    def test_metadata_and_token(self):
        with support.FakeServer() as server:
            with tempfile.NamedTemporaryFile("w", suffix=".token") as f:
                f.write("s3cret\n")
                f.flush()
                with partplan.Client(server.target, token_file=f.name,
                                     metadata=[("x-team", "ml")]) as client:
                    client.validate(pb.Graph(), metadata=[("x-request-id", "req-7")])
            call = server.planner.calls[-1]
            self.assertEqual(call["authorization"], "Bearer s3cret")
            self.assertEqual(call["x-team"], "ml")
            self.assertEqual(call["x-request-id"], "req-7")
            self.assertIn("partplan-python", call["user-agent"])

    def test_token_forms(self):
        # As the C++ CLI's --token/--token_file: surrounding whitespace is
        # dropped, an empty --token is none, an empty file is an error.
        with support.FakeServer() as server:
            with partplan.Client(server.target, token=" t0k \n") as client:
                client.validate(pb.Graph())
            self.assertEqual(server.planner.calls[-1]["authorization"], "Bearer t0k")
            with partplan.Client(server.target, token="") as client:
                client.validate(pb.Graph())
            self.assertNotIn("authorization", server.planner.calls[-1])
        with tempfile.NamedTemporaryFile("w", suffix=".token") as f:
            with self.assertRaisesRegex(ValueError, "is empty"):
                partplan.Client("localhost:1", token_file=f.name)
            with self.assertRaisesRegex(ValueError, "not both"):
                partplan.Client("localhost:1", token="x", token_file=f.name)


class DictParsingTest(unittest.TestCase):
    """Dicts (and JSON files) that do not parse as their message raise
    PartplanError(INVALID_ARGUMENT) naming the field, before anything is sent."""

    GOOD_NODES = [{"name": "x", "op": "PLACEHOLDER", "target": "x"},
                  {"name": "a", "op": "CALL_FUNCTION", "target": "torch.relu", "args": [{"node": "x"}]}]

    def setUp(self):
        # Nothing listens there: a call that got as far as sending would be
        # UNAVAILABLE, not INVALID_ARGUMENT.
        self.client = partplan.Client(f"127.0.0.1:{support.free_port()}", timeout=5, retry=NO_RETRY)

    def tearDown(self):
        self.client.close()

    def graph_with(self, index, **changes):
        nodes = json_format.MessageToDict(pb.Graph(nodes=[json_format.ParseDict(n, pb.Node())
                                                          for n in self.GOOD_NODES]))["nodes"]
        nodes[index].update(changes)
        return {"nodes": nodes}

    def assert_invalid(self, caught, field, description, method=""):
        error = caught.exception
        self.assertIsInstance(error, partplan.PartplanError)
        self.assertIsInstance(error, ValueError)
        self.assertEqual(error.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual([v.field for v in error.field_violations], [field])
        self.assertIn(description, error.field_violations[0].description)
        self.assertEqual(error.message, f"{field}: {error.field_violations[0].description}")
        self.assertEqual(error.method, method)
        self.assertEqual(error.attempts, 0)

    def test_graph_dicts(self):
        self.assertEqual(len(partplan.client._as_graph(self.graph_with(1)).nodes), 2)
        cases = [
            (self.graph_with(1, op="CALL_FUNCTON"), "graph.nodes[1].op",
             "Invalid enum value CALL_FUNCTON for enum type partplan.v1.Op"),
            (self.graph_with(1, args=[{"node": "x"}, {"int": "two"}]), "graph.nodes[1].args[1].int",
             "invalid literal for int()"),
            (self.graph_with(1, args=[{"node": "x", "int": "2"}]), "graph.nodes[1].args[0]",
             "multiple \"kind\" oneof fields"),
            (self.graph_with(0, outputs=[{"shape": ["1", "n"], "dtype": "torch.float32"}]),
             "graph.nodes[0].outputs[0].shape[1]", "invalid literal for int()"),
            (self.graph_with(1, sizeBytes={"totalBytes": "1.5"}), "graph.nodes[1].size_bytes.total_bytes",
             "invalid literal for int()"),
            (self.graph_with(1, paramCount="3"), "graph.nodes[1].paramCount",
             "no such field in partplan.v1.Node"),
            ({"nodes": [self.GOOD_NODES[0], None]}, "graph.nodes[1]", "null"),
            ({"nodes": {"name": "x"}}, "graph.nodes", "repeated field"),
        ]
        for graph, field, description in cases:
            with self.subTest(field=field):
                with self.assertRaises(partplan.PartplanError) as caught:
                    self.client.partition_graph(graph, ["1GiB"])
                self.assert_invalid(caught, field, description)
        with self.assertRaises(partplan.PartplanError) as caught:
            self.client.call("Validate", {"graph": [self.GOOD_NODES]})
        self.assert_invalid(caught, "graph", "want a JSON object (partplan.v1.Graph), got list",
                            method="Validate")

    def test_device_and_request_dicts(self):
        with self.assertRaises(partplan.PartplanError) as caught:
            self.client.plan(self.graph_with(1), {"devices": [{"availableMemoryBytes": "8 GiB"}]})
        self.assert_invalid(caught, "devices.devices[0].available_memory_bytes", '"8 GiB"')
        with self.assertRaises(partplan.PartplanError) as caught:
            self.client.call("PartitionGraph", {"graph": self.graph_with(1), "config": {"mode": "BEST"}})
        self.assert_invalid(caught, "config.mode", "Invalid enum value BEST", method="PartitionGraph")
        error = pickle.loads(pickle.dumps(caught.exception))
        self.assertIsInstance(error, partplan.InvalidMessageError)
        self.assertEqual(error.field_violations, caught.exception.field_violations)

    def test_json_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "request.json")
            with open(path, "w") as f:
                json.dump({"graph": self.graph_with(1, target=7)}, f)
            with self.assertRaises(partplan.PartplanError) as caught:
                partplan.load_graph(path)
            self.assert_invalid(caught, "graph.nodes[1].target", "expected string")
            with self.assertRaises(partplan.PartplanError) as caught:
                self.client.validate(path)
            self.assert_invalid(caught, "graph.nodes[1].target", "expected string")
            with self.assertRaises(partplan.PartplanError) as caught:
                partplan.load_message(path, pb.ValidateRequest)
            self.assert_invalid(caught, "graph.nodes[1].target", "expected string")


@unittest.skipIf(shutil.which("openssl") is None, "needs the openssl command")
class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()

        def run(*args):
            subprocess.run(["openssl", *args], cwd=cls.dir, check=True, capture_output=True)

        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", "/CN=partplan test CA")
        for name, cn in (("server", "partplan.test"), ("client", "a client")):
            run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={cn}")
            with open(os.path.join(cls.dir, f"{name}.ext"), "w") as f:
                f.write("subjectAltName=DNS:partplan.test\n" if name == "server" else
                        "extendedKeyUsage=clientAuth\n")
            run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def test_mutual_tls(self):
        credentials = grpc.ssl_server_credentials(
            [(self.read("server.key"), self.read("server.pem"))],
            root_certificates=self.read("ca.pem"), require_client_auth=True)
        with support.FakeServer(credentials=credentials) as server:
            # Paths, as the CLI passes them; the certificate names partplan.test.
            with partplan.Client(server.target, timeout=10, root_certificates=self.path("ca.pem"),
                                 private_key=self.path("client.key"),
                                 certificate_chain=self.path("client.pem"),
                                 server_name="partplan.test") as client:
                self.assertEqual(client.validate(pb.Graph()).node_count, 1)
            # No client certificate: the handshake fails.
            with partplan.Client(server.target, timeout=3, retry=NO_RETRY,
                                 root_certificates=self.read("ca.pem"),
                                 server_name="partplan.test") as client:
                with self.assertRaises(partplan.PartplanError) as caught:
                    client.validate(pb.Graph())
                self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)

    def test_server_tls_and_plaintext_mismatch(self):
        credentials = grpc.ssl_server_credentials([(self.read("server.key"), self.read("server.pem"))])
        with support.FakeServer(credentials=credentials) as server:
            with partplan.Client(server.target, timeout=10,
                                 root_certificates=self.read("ca.pem").decode(),
                                 server_name="partplan.test") as client:
                self.assertEqual(client.validate(pb.Graph()).node_count, 1)
            with partplan.Client(server.target, timeout=2, retry=NO_RETRY) as client:
                with self.assertRaises(partplan.PartplanError) as caught:
                    client.validate(pb.Graph())
                self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)

    def test_real_server_with_mutual_tls_and_tokens(self):
        # partplan_server's own TLS and bearer-token checks.
        tokens = self.path("tokens")
        with open(tokens, "w") as f:
            f.write("# accepted tokens\nt0k3n\n")
        server = support.ServerProcess(
            f"--tls_cert={self.path('server.pem')}", f"--tls_key={self.path('server.key')}",
            f"--tls_client_ca={self.path('ca.pem')}", f"--auth_tokens_file={tokens}")
        try:
            tls = dict(root_certificates=self.path("ca.pem"), private_key=self.path("client.key"),
                       certificate_chain=self.path("client.pem"), server_name="partplan.test")
            graph = example("graph_mlp.json", pb.Graph)
            with partplan.Client(server.target, timeout=10, token="t0k3n", **tls) as client:
                self.assertEqual(client.validate(graph).node_count, len(graph.nodes))
            with partplan.Client(server.target, timeout=10, token="wrong", **tls) as client:
                with self.assertRaises(partplan.PartplanError) as caught:
                    client.validate(graph)
                self.assertEqual(caught.exception.code, grpc.StatusCode.UNAUTHENTICATED)
            with partplan.Client(server.target, timeout=3, retry=NO_RETRY, token="t0k3n") as client:
                with self.assertRaises(partplan.PartplanError) as caught:  # plaintext to a TLS port
                    client.validate(graph)
                self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)
        finally:
            server.stop()

    def test_key_without_certificate(self):
        with self.assertRaises(ValueError):
            partplan.Client("localhost:1", private_key=self.path("client.key"))


class RealServerTest(unittest.TestCase):
    """Against partplan_server on loopback."""

    @classmethod
    def setUpClass(cls):
        cls.server = support.shared_server()
        cls.client = partplan.Client(cls.server.target, timeout=30)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_serialised_requests_are_sent_as_they_are(self):
        with open(os.path.join(support.REPO, "client", "examples", "partition_graph.json")) as f:
            request = json_format.Parse(f.read(), pb.PartitionGraphRequest())
        by_message = self.client.call("PartitionGraph", request)
        for form in (request.SerializeToString(), bytearray(request.SerializeToString()),
                     memoryview(request.SerializeToString()), request.SerializeToString):
            by_bytes = self.client.call("PartitionGraph", form)
            self.assertIsInstance(by_bytes, pb.PartitionGraphResponse)
            by_bytes.plan.summary.planner_seconds = by_message.plan.summary.planner_seconds
            self.assertEqual(by_bytes, by_message)
        # Bytes that are no request: the server says so, naming where.
        for form in (b"\x0a\x10short", lambda: b"\x0a\x10short"):
            with self.assertRaises(partplan.PartplanError) as caught:
                self.client.call("PartitionGraph", form)
            self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaisesRegex(TypeError, "returned str, not the serialised request's bytes"):
            self.client.call("PartitionGraph", lambda: "{}")

    def test_bad_request_field_violations(self):
        graph = json_format.ParseDict({"nodes": [
            {"name": "x", "op": "PLACEHOLDER", "target": "x",
             "outputs": [{"shape": ["4"], "dtype": "torch.float32"}]},
            {"name": "relu", "op": "CALL_FUNCTION", "target": "torch.relu", "args": [{"node": "fc"}]},
            {"name": "fc", "op": "CALL_MODULE", "target": "fc", "args": [{"node": "x"}]},
            {"name": "output", "op": "OUTPUT", "target": "output", "args": [{"node": "relu"}]},
        ]}, pb.Graph())
        with self.assertRaises(partplan.PartplanError) as caught:
            self.client.partition_graph(graph, ["1MiB"])
        error = caught.exception
        self.assertEqual(error.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(error.attempts, 1)
        self.assertTrue(error.field_violations, error)
        violation = error.field_violations[0]
        self.assertEqual(violation.field, "graph.nodes[1].args[0]")
        self.assertIn("'fc'", violation.description)
        self.assertIn("BadRequest", error.details[0].DESCRIPTOR.full_name)
        self.assertIn("field graph.nodes[1].args[0]: ", str(error))
        # It survives pickling (multiprocessing) with what it says.
        copy = pickle.loads(pickle.dumps(error))
        self.assertEqual((copy.code, copy.message, copy.field_violations),
                         (error.code, error.message, error.field_violations))

    def test_bad_devices(self):
        graph = example("graph_mlp.json", pb.Graph)
        inventory = partplan.device_inventory(["1MiB", "1MiB"])
        inventory.devices[1].logical_id = 0
        with self.assertRaises(partplan.PartplanError) as caught:
            self.client.plan(graph, inventory)
        self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertTrue(any(v.field.startswith("devices.") for v in caught.exception.field_violations),
                        caught.exception)

    def test_not_enough_memory(self):
        graph = example("graph_mlp.json", pb.Graph)
        with self.assertRaises(partplan.PartplanError) as caught:
            self.client.plan(graph, ["1KiB", "1KiB"])
        self.assertEqual(caught.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("memory", caught.exception.message)
        self.assertEqual(caught.exception.field_violations, [])

    def test_every_rpc(self):
        # Each example request (client/examples/<method>.json) through its
        # method: planned, or UNIMPLEMENTED for a planner that has not landed.
        cases = [(method, method + ".json", cls) for method, cls, _ in partplan.client.RPCS.values()]
        self.assertEqual(len(cases), len(partplan.client.RPCS))
        for method, file, cls in cases:
            with self.subTest(method=method):
                request = example(file, cls)
                try:
                    response = getattr(self.client, method)(request=request)
                except partplan.PartplanError as e:
                    self.assertEqual(e.code, grpc.StatusCode.UNIMPLEMENTED, e)
                    continue
                self.assertTrue(response.ByteSize() > 0, method)

    def test_keyword_requests(self):
        graph = example("graph_mlp.json", pb.Graph)
        v = self.client.validate(graph, ["8MiB", "8MiB", "8MiB"])
        self.assertEqual((v.node_count, v.device_count), (len(graph.nodes), 3))
        plan = self.client.partition_graph(graph, "8MiB,8MiB,8MiB", mode="size_based").plan
        self.assertEqual(plan.summary.planner, "partitioner/size_based")
        self.assertEqual(len(plan.partitions), 3)
        same = self.client.plan(graph, partplan.device_inventory("8MiB", count=3)).plan
        self.assertEqual([a.partition for a in same.assignments], [a.partition for a in plan.assignments])
        split = self.client.split_graph(graph, plan)
        self.assertEqual([s.name for s in split.submodules], [d.submodule for d in plan.dag])
        as_dict = self.client.split_graph(graph, {a.node: a.partition for a in plan.assignments})
        self.assertEqual(as_dict, split)
        self.assertEqual(self.client.split_graph(graph, split), split)
        # Dicts in proto3 JSON form work too.
        self.assertEqual(self.client.call("Validate", {"graph": json_format.MessageToDict(graph)}), 
                         self.client.validate(graph))
        with self.assertRaisesRegex(ValueError, "unknown value 'fastest'"):
            self.client.plan(graph, ["8MiB"], mode="fastest")

    def test_plan_by_node_index(self):
        graph = example("graph_mlp.json", pb.Graph)
        by_name = self.client.partition_graph(graph, "8MiB,8MiB,8MiB").plan
        by_index = self.client.partition_graph(graph, "8MiB,8MiB,8MiB",
                                               node_references="indices").plan
        self.assertEqual(len(by_index.assignments), 0)
        self.assertEqual(len(by_index.partition_by_node_index), len(graph.nodes))
        self.assertEqual(partplan.assignment_of(by_index, graph), partplan.assignment_of(by_name))
        self.assertEqual([[graph.nodes[i].name for i in p.node_indices] for p in by_index.partitions],
                         [list(p.nodes) for p in by_name.partitions])
        self.assertEqual(by_index.dag, by_name.dag)
        # SplitGraph takes either form of the plan, given the graph.
        self.assertEqual(self.client.split_graph(graph, by_index),
                         self.client.split_graph(graph, by_name))
        plan = self.client.plan(graph, ["8MiB"] * 3, node_references="NODE_REFERENCES_INDICES").plan
        self.assertEqual(list(plan.partition_by_node_index), list(by_index.partition_by_node_index))
        shards = self.client.shard_graph(graph, 3, mode="balanced", devices=["8MiB"] * 3)
        shards_by_index = self.client.shard_graph(graph, 3, mode="balanced", devices=["8MiB"] * 3,
                                                  node_references="indices")
        self.assertEqual(len(shards_by_index.assignments), 0)
        self.assertEqual(partplan.assignment_of(shards_by_index, graph),
                         partplan.assignment_of(shards))
        self.assertEqual([[graph.nodes[i].name for i in s.node_indices] for s in shards_by_index.shards],
                         [list(s.nodes) for s in shards.shards])
        with self.assertRaisesRegex(ValueError, "names nodes by index"):
            partplan.assignment_of(by_index)
        with self.assertRaisesRegex(ValueError, "the graph has 2 nodes"):
            partplan.assignment_of(by_index, ["x", "y"])
        with self.assertRaisesRegex(ValueError, "node_references: unknown value 'ids'"):
            self.client.partition_graph(graph, ["8MiB"], node_references="ids")


class RequestBuildingTest(unittest.TestCase):
    """The keyword forms of every method build the request they should."""

    def setUp(self):
        self.client = partplan.Client("localhost:1")
        self.sent = []
        self.client.call = lambda method, request, **kw: self.sent.append((method, request))

    def tearDown(self):
        self.client.close()

    def test_keyword_forms(self):
        graph = example("graph_mlp.json", pb.Graph)
        c = self.client
        c.partition_graph(graph, ["1GiB"], mode="sparse_nn", saturate_host=True)
        c.plan(graph, ["1GiB", "2GiB"], shard_count=2)
        c.plan(graph, ["1GiB"], partitioner=partplan.aot_config({"fc1": 0, "fc2": 1}))
        c.shard_graph(graph, 3, mode="balanced", exact=True, devices=["1GiB"] * 3)
        c.build_pipeline_graph(graph, {"enc": "worker0", "dec": "worker1"})
        c.plan_data_parallel(graph, "1GiB,1GiB", roles={"w1": "parameter", "x": "ACTIVATION"},
                             input_batch_dim=1, style="fully_shard")
        c.split_graph(graph, [("fc1", 0), ("fc2", 1)], keep_original_order=True)
        methods = [m for m, _ in self.sent]
        self.assertEqual(methods, ["PartitionGraph", "Plan", "Plan", "ShardGraph", "BuildPipelineGraph",
                                   "PlanDataParallel", "SplitGraph"])
        r = [request for _, request in self.sent]
        self.assertEqual(r[0].config.mode, pb.PartitionerConfig.SPARSE_NN)
        self.assertTrue(r[0].config.saturate_host)
        self.assertEqual(r[1].WhichOneof("planner"), "shard")
        self.assertEqual(r[1].shard.shard_count, 2)
        self.assertEqual(len(r[1].devices.devices), 2)
        self.assertEqual(r[2].partitioner.mode, pb.PartitionerConfig.AOT_BASED)
        self.assertEqual([(p.partition, list(p.logical_device_ids)) for p in r[2].partitioner.partition_devices],
                         [(0, [0]), (1, [1])])
        self.assertEqual((r[3].config.shard_count, r[3].config.mode, r[3].config.exact),
                         (3, pb.ShardConfig.BALANCED, True))
        self.assertEqual([(w.target, w.worker) for w in r[4].workers],
                         [("enc", "worker0"), ("dec", "worker1")])
        self.assertEqual([(e.node, e.role) for e in r[5].roles], [("w1", pb.PARAMETER), ("x", pb.ACTIVATION)])
        self.assertEqual((r[5].input_batch_dim, r[5].style), (1, pb.FULLY_SHARD))
        self.assertEqual([(a.node, a.partition) for a in r[6].assignments], [("fc1", 0), ("fc2", 1)])
        self.assertTrue(r[6].keep_original_order)
        self.assertEqual([request.node_references for request in r[:4]], [pb.NODE_REFERENCES_NAMES] * 4)
        for request in r:
            self.assertEqual(request.graph, graph)

    def test_plans_by_node_index(self):
        graph = example("graph_mlp.json", pb.Graph)
        c = self.client
        c.partition_graph(graph, ["1GiB"], node_references="indices")
        c.plan(graph, ["1GiB"], node_references="INDICES")
        c.shard_graph(graph, 2, node_references=pb.NODE_REFERENCES_INDICES)
        self.assertEqual([request.node_references for _, request in self.sent],
                         [pb.NODE_REFERENCES_INDICES] * 3)
        # A plan by index is read with the graph it was made for, in any of
        # the forms a graph is given in.
        names = [n.name for n in graph.nodes]
        by_index = pb.PartitionPlan(partition_by_node_index=[
            -1 if n.op in (pb.PLACEHOLDER, pb.GET_ATTR, pb.OUTPUT) else i % 2
            for i, n in enumerate(graph.nodes)])
        expected = [(n.name, i % 2) for i, n in enumerate(graph.nodes)
                    if n.op not in (pb.PLACEHOLDER, pb.GET_ATTR, pb.OUTPUT)]
        for form in (graph, names, json_format.MessageToDict(graph)):
            self.assertEqual(partplan.client.indexed_assignment(by_index, form), expected)
        c.split_graph(graph, by_index)
        self.assertEqual([(a.node, a.partition) for a in self.sent[-1][1].assignments], expected)
        shards = pb.ShardGraphResponse(shard_by_node_index=by_index.partition_by_node_index)
        self.assertEqual(partplan.assignment_of(shards, graph), dict(expected))
        with self.assertRaisesRegex(ValueError, "give the graph it was made for"):
            partplan.assignment_of(by_index)
        with self.assertRaisesRegex(TypeError, "node names in order"):
            partplan.client.indexed_assignment(by_index, [1, 2])
        with self.assertRaisesRegex(ValueError, "node_references: unknown value 'ids'; one of names, indices"):
            c.plan(graph, ["1GiB"], node_references="ids")

    def test_aten_export_carries_its_roles(self):
        import torch

        aten = partplan.export_aten(torch.nn.Linear(3, 2), torch.randn(4, 3))
        self.client.plan_data_parallel(aten, ["1GiB", "1GiB"])
        request = self.sent[-1][1]
        self.assertEqual(request.graph, aten.graph)
        self.assertEqual(sorted(pb.PlaceholderRole.Name(e.role) for e in request.roles),
                         ["ACTIVATION", "PARAMETER", "PARAMETER"])


class SizesTest(unittest.TestCase):
    def test_parse(self):
        cases = {"16GiB": 16 << 30, "1.5G": 1_500_000_000, "8gib": 8 << 30, "512": 512, "2KB": 2000,
                 "1.2e10": 12_000_000_000, "3Ki": 3072, "10 MiB": 10 << 20, "7B": 7}
        for text, value in cases.items():
            self.assertEqual(partplan.parse_byte_size(text), value, text)
        for bad in ("", "GiB", "-1", "1.5X", "0x10", "inf"):
            with self.assertRaises(ValueError, msg=bad):
                partplan.parse_byte_size(bad)

    def test_format(self):
        self.assertEqual(partplan.format_byte_size(512), "512 B")
        self.assertEqual(partplan.format_byte_size(1536), "1.5 KiB")
        self.assertEqual(partplan.format_byte_size(16 << 30), "16.0 GiB")

    def test_device_inventory(self):
        inv = partplan.device_inventory("8GiB,4GiB", transfer_rate="12GB")
        self.assertEqual([(d.name, d.logical_id, d.available_memory_bytes) for d in inv.devices],
                         [("gpu0", 0, 8 << 30), ("gpu1", 1, 4 << 30)])
        self.assertEqual(inv.transfer_rate_bytes_per_second, 12e9)
        self.assertEqual(len(partplan.device_inventory("1GiB", count=4).devices), 4)
        with self.assertRaises(ValueError):
            partplan.device_inventory(["1GiB", "0"])


if __name__ == "__main__":
    unittest.main()

"""python3 -m partplan: export, plan, validate, call, gen-protos."""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import support

from google.protobuf import json_format

import partplan
from partplan import cli
from partplan import messages as pb

def json_writer_varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


MODEL_FILE = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self, width=16):
            super().__init__()
            self.emb = nn.Embedding(10, width)
            self.fc = nn.Linear(width, 4)

        def forward(self, ids, scale):
            return self.fc(self.emb(ids).mean(dim=1)) * scale

    def make_net():
        return Net(width=8)
""")


def run_cli(*argv):
    """(exit status, stdout, stderr) of cli.main in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


class CliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = support.shared_server()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model_path = os.path.join(cls.tmp.name, "model.py")
        with open(cls.model_path, "w") as f:
            f.write(MODEL_FILE)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_export_torchvision_json(self):
        out = self.path("r18.json")
        status, _, err = run_cli("export", "torchvision.models:resnet18", "--input-shape", "1,3,64,64",
                                 "--out", out)
        self.assertEqual(status, 0, err)
        self.assertIn("71 nodes", err)
        with open(out) as f:
            doc = json.load(f)
        self.assertEqual(doc["name"], "ResNet")
        self.assertEqual(doc["nodes"][1]["moduleType"], "torch.nn.Conv2d")
        graph = partplan.load_graph(out)
        self.assertEqual(graph.nodes[0].outputs[0].shape, [1, 3, 64, 64])

    def test_export_file_factory_binary_and_plan_table(self):
        out = self.path("net.pb")
        status, _, err = run_cli("export", f"{self.model_path}:make_net", "--input-shape", "2,5:int64",
                                 "--input-shape", "", "--int-high", "10", "--out", out)
        self.assertEqual(status, 0, err)
        with open(out, "rb") as f:
            graph = pb.Graph.FromString(f.read())
        nodes = {n.name: n for n in graph.nodes}
        self.assertEqual(nodes["ids"].outputs[0].dtype, "torch.int64")
        self.assertEqual(list(nodes["scale"].outputs[0].shape), [])  # a 0-d input
        self.assertEqual(nodes["emb"].parameter_count, 80)
        total = sum(n.size_bytes.total_bytes for n in graph.nodes)
        half = total * 85 // 100
        status, table, err = run_cli("plan", "--graph", out, "--target", self.server.target,
                                     "--device-memory", f"{half},{half}", "--output", "table")
        self.assertEqual(status, 0, err)
        self.assertIn("Partitions\n  ID  NODES  MEMORY", table)
        self.assertIn("partitioner/size_based", table)
        self.assertRegex(table, r"devices used +2 of 2")

    def test_export_class_with_kwargs(self):
        status, out, err = run_cli("export", f"{self.model_path}:Net", "--kwargs", '{"width": 4}',
                                   "--input-shape", "3,2:int64", "--input-shape", "1", "--no-modules")
        self.assertEqual(status, 0, err)
        graph = json_format.Parse(out, pb.Graph())
        self.assertEqual({n.name: n for n in graph.nodes}["fc"].parameter_count, 4 * 4 + 4)
        self.assertEqual(len(graph.modules), 0)

    def test_export_aten(self):
        roles = self.path("roles.json")
        status, out, err = run_cli("export", "torch.nn:Linear", "--kwargs", '{"in_features": 3, '
                                   '"out_features": 2}', "--input-shape", "4,3", "--aten",
                                   "--roles-out", roles)
        self.assertEqual(status, 0, err)
        graph = json_format.Parse(out, pb.Graph())
        self.assertIn("aten.addmm.default", [n.target for n in graph.nodes])
        with open(roles) as f:
            self.assertEqual(sorted(json.load(f).values()), ["ACTIVATION", "PARAMETER", "PARAMETER"])

    def test_plan_json_modes(self):
        graph = os.path.join(support.REPO, "client", "examples", "graph_mlp.json")
        status, out, err = run_cli("plan", "--graph", graph, "--target", self.server.target,
                                   "--device-memory", "8MiB", "--devices", "3", "--mode", "SIZE_BASED")
        self.assertEqual(status, 0, err)
        plan = json_format.Parse(out, pb.PlanResponse()).plan
        self.assertEqual(len(plan.partitions), 3)
        status, _, err = run_cli("plan", "--graph", graph, "--target", self.server.target,
                                 "--device-memory", "8MiB", "--mode", "best")
        self.assertEqual(status, 2)
        self.assertIn("--mode: unknown value 'best'", err)

    def test_plan_table_lists_the_notes(self):
        # graph_mlp.json has no latencies: KL_BASED says it had nothing to minimise.
        graph = os.path.join(support.REPO, "client", "examples", "graph_mlp.json")
        args = ["plan", "--graph", graph, "--target", self.server.target, "--device-memory", "8MiB",
                "--devices", "3", "--output", "table"]
        status, table, err = run_cli(*args, "--mode", "KL_BASED")
        self.assertEqual(status, 0, err)
        self.assertIn("\nNotes\n  - KL_BASED minimises the critical path's latency", table)
        status, table, err = run_cli(*args, "--mode", "SIZE_BASED")
        self.assertEqual(status, 0, err)
        self.assertNotIn("Notes", table)

    def test_html_output_is_the_report(self):
        graph = os.path.join(support.REPO, "client", "examples", "graph_mlp.json")
        status, page, err = run_cli("plan", "--graph", graph, "--target", self.server.target,
                                    "--device-memory", "8MiB", "--devices", "3", "--output", "html")
        self.assertEqual(status, 0, err)
        self.assertTrue(page.startswith("<!DOCTYPE html>"))
        self.assertIn('{"rpc":"Plan"', page)
        self.assertIn('"request":{"graph"', page)  # so that edges carry bytes
        with tempfile.TemporaryDirectory() as tmp:
            binary = os.path.join(tmp, "request.pb")
            with open(os.path.join(support.REPO, "client", "examples", "plan_training.json")) as f:
                request = json_format.Parse(f.read(), pb.PlanTrainingRequest())
            with open(binary, "wb") as f:
                f.write(request.SerializeToString())
            status, page, err = run_cli("call", "PlanTraining", "--request", binary, "--target",
                                        self.server.target, "--output", "html")
        self.assertEqual(status, 0, err)
        self.assertIn('{"rpc":"PlanTraining"', page)
        self.assertIn('"request":{"graph"', page)

    def test_plan_by_node_index_table(self):
        graph = os.path.join(support.REPO, "client", "examples", "graph_mlp.json")
        args = ["plan", "--graph", graph, "--target", self.server.target, "--device-memory", "8MiB",
                "--devices", "3"]
        status, out, err = run_cli(*args, "--node-references", "indices")
        self.assertEqual(status, 0, err)
        plan = json_format.Parse(out, pb.PlanResponse()).plan
        self.assertEqual(len(plan.assignments), 0)
        self.assertGreater(len(plan.partition_by_node_index), 0)
        # The table counts each partition's nodes whichever way they are listed.
        tables = [run_cli(*args, "--node-references", form, "--output", "table")
                  for form in ("names", "indices")]
        self.assertEqual([t[0] for t in tables], [0, 0], tables)
        partition_rows = [[line for line in t[1].splitlines() if line.startswith("  0 ")] for t in tables]
        self.assertEqual(partition_rows[0], partition_rows[1])
        self.assertNotRegex(partition_rows[1][0], r"^  0\s+0\s")

    def test_errors_exit_with_the_grpc_code(self):
        bad = self.path("bad.json")
        with open(bad, "w") as f:
            json.dump({"nodes": [{"name": "a", "op": "CALL_FUNCTION", "target": "torch.relu",
                                  "args": [{"node": "b"}]}]}, f)
        status, _, err = run_cli("plan", "--graph", bad, "--target", self.server.target,
                                 "--device-memory", "1GiB")
        self.assertEqual(status, 3)  # INVALID_ARGUMENT
        self.assertIn("error: INVALID_ARGUMENT", err)
        self.assertIn("  field graph.nodes[0].args[0]: ", err)
        status, _, err = run_cli("validate", "--graph", bad, "--target",
                                 f"127.0.0.1:{support.free_port()}", "--attempts", "1")
        self.assertEqual(status, 14)  # UNAVAILABLE
        status, _, err = run_cli("plan", "--graph", self.path("missing.json"), "--device-memory", "1GiB")
        self.assertEqual(status, 2)
        status, _, err = run_cli("plan", "--graph", bad)
        self.assertEqual((status, "--device-memory is required" in err), (2, True))
        status, _, err = run_cli("export", "no_such_module_xyz:f")
        self.assertEqual(status, 2)

    def test_usage_errors_exit_2_with_the_usage_line(self):
        # Bad usage is reported as argparse reports its own: the command's
        # usage line, "<prog> <command>: error: <message>", exit 2, no traceback.
        cases = [
            (("export", "torchvision.models:resnet18"),
             "ResNet.forward() takes 1 argument(s) (x) but 0 --input-shape given"),
            (("export", "torchvision.models:resnet18", "--input-shape", "1,3,32,32",
              "--input-shape", "2"), "but 2 --input-shape given"),
            (("export", f"{self.model_path}:Net", "--input-shape", "2,5:int64"),
             "Net.forward() takes 2 argument(s) (ids, scale) but 1"),
            (("export", "torchvision.models:resnet18", "--kwargs", "{bad"), "argument --kwargs: not JSON"),
            (("export", "torchvision.models:resnet18", "--kwargs", "[1]"),
             "argument --kwargs: want a JSON object"),
            (("export", f"{self.model_path}:Net", "--kwargs", '{"depth": 3}', "--input-shape", "2,5:int64",
              "--input-shape", ""), "--kwargs for " + f"{self.model_path}:Net(width=16): "
             "got an unexpected keyword argument 'depth'"),
            (("plan", "--graph", self.path("missing.json"), "--device-memory", "1GiB"),
             "--graph " + self.path("missing.json")),
            (("plan", "--graph", os.path.join(support.REPO, "client", "examples", "graph_mlp.json")),
             "--device-memory is required"),
        ]
        for argv, message in cases:
            with self.subTest(argv=argv):
                status, out, err = run_cli(*argv)
                self.assertEqual(status, 2, err)
                self.assertEqual(out, "")
                self.assertTrue(err.startswith(f"usage: python3 -m partplan {argv[0]} "), err)
                self.assertIn(f"python3 -m partplan {argv[0]}: error: ", err)
                self.assertIn(message, err)
                self.assertNotIn("Traceback", err)

    def test_export_without_input_shape_as_a_process(self):
        # The real `python3 -m partplan export` with no --input-shape: exit 2,
        # a usage line and no traceback (it used to exit 1 with a traceback).
        env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR)
        done = subprocess.run([sys.executable, "-m", "partplan", "export", f"{self.model_path}:make_net",
                               "--out", self.path("never.json")],
                              capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertTrue(done.stderr.startswith("usage: python3 -m partplan export "), done.stderr)
        self.assertIn("error: Net.forward() takes 2 argument(s) (ids, scale) but 0 --input-shape given",
                      done.stderr)
        self.assertNotIn("Traceback", done.stderr)
        self.assertFalse(os.path.exists(self.path("never.json")))

    def test_export_with_shapes_the_model_cannot_take_as_a_process(self):
        # The model fails on the example inputs (a [2, 4] output times a
        # [3, 3] scale): exit 2 naming the node and the model's error, and
        # no traceback (torch.fx's ShapeProp prints one of its own).
        env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR)
        done = subprocess.run([sys.executable, "-m", "partplan", "export", f"{self.model_path}:make_net",
                               "--input-shape", "2,5:int64", "--input-shape", "3,3",
                               "--out", self.path("never.json")],
                              capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertTrue(done.stderr.startswith("usage: python3 -m partplan export "), done.stderr)
        self.assertIn("error: --input-shape 2,5:int64 3,3: the model does not run on the example "
                      "inputs: RuntimeError: ", done.stderr)
        self.assertIn("(at node 'mul', call_function mul)", done.stderr)
        self.assertNotIn("Traceback", done.stderr)
        self.assertFalse(os.path.exists(self.path("never.json")))

    def test_bad_graph_file_names_the_field(self):
        bad = self.path("bad_field.json")
        with open(bad, "w") as f:
            json.dump({"nodes": [{"name": "x", "op": "PLACEHOLDER"},
                                 {"name": "a", "op": "CALL_FUNCTION", "target": "torch.relu",
                                  "args": [{"node": "x"}, {"int": "two"}]}]}, f)
        status, out, err = run_cli("plan", "--graph", bad, "--target", self.server.target,
                                   "--device-memory", "1GiB")
        self.assertEqual(status, 2, err)
        self.assertIn(f"error: --graph {bad}: graph.nodes[1].args[1].int: invalid literal", err)
        self.assertNotIn("Traceback", err)
        request = self.path("bad_request.json")
        with open(request, "w") as f:
            json.dump({"graph": {"nodes": []}, "config": {"mode": "BEST"}}, f)
        status, out, err = run_cli("call", "PartitionGraph", "--request", request,
                                   "--target", self.server.target)
        self.assertEqual(status, 2, err)
        self.assertIn(f"--request {request}: config.mode: Invalid enum value BEST", err)

    def test_tokens(self):
        # A server started with --auth_tokens_file, as the prod overlay runs it.
        tokens = self.path("tokens")
        with open(tokens, "w") as f:
            f.write("# accepted tokens\ncli-t0k3n\n")
        token_file = self.path("my.token")
        with open(token_file, "w") as f:
            f.write("  cli-t0k3n\n")
        empty = self.path("empty.token")
        open(empty, "w").close()
        server = support.ServerProcess(f"--auth_tokens_file={tokens}")
        try:
            graph = os.path.join(support.REPO, "client", "examples", "graph_mlp.json")
            base = ["validate", "--graph", graph, "--target", server.target, "--attempts", "1"]
            status, out, err = run_cli(*base)
            self.assertEqual(status, 16, err)  # UNAUTHENTICATED
            self.assertIn("error: UNAUTHENTICATED", err)
            status, out, err = run_cli(*base, "--token", "wrong")
            self.assertEqual(status, 16, err)
            status, out, err = run_cli(*base, "--token", "cli-t0k3n")
            self.assertEqual(status, 0, err)
            self.assertEqual(json.loads(out)["nodeCount"], 12)
            status, out, err = run_cli(*base, "--token-file", token_file)
            self.assertEqual(status, 0, err)
            status, out, err = run_cli("plan", "--graph", graph, "--target", server.target,
                                       "--device-memory", "8MiB", "--devices", "3",
                                       "--token-file", token_file)
            self.assertEqual(status, 0, err)
            self.assertEqual(len(json_format.Parse(out, pb.PlanResponse()).plan.partitions), 3)
            status, out, err = run_cli("call", "Validate", "--request",
                                       os.path.join(support.REPO, "client", "examples", "validate.json"),
                                       "--target", server.target, "--token", "cli-t0k3n")
            self.assertEqual(status, 0, err)
            for argv, message in (
                    (("--token", "cli-t0k3n", "--token-file", token_file), "not both"),
                    (("--token-file", empty), "is empty"),
                    (("--token-file", self.path("no.token")), "--token-file: ")):
                status, out, err = run_cli(*base, *argv)
                self.assertEqual(status, 2, err)
                self.assertIn(message, err)
                self.assertIn("usage: python3 -m partplan validate", err)
        finally:
            server.stop()

    def test_call_and_validate(self):
        request = os.path.join(support.REPO, "client", "examples", "split_graph.json")
        status, out, err = run_cli("call", "SplitGraph", "--request", request, "--target", self.server.target)
        self.assertEqual(status, 0, err)
        self.assertTrue(json_format.Parse(out, pb.SplitGraphResponse()).submodules)
        status, out, err = run_cli("validate", "--graph", request, "--target", self.server.target)
        self.assertEqual(status, 0, err)
        self.assertEqual(json.loads(out)["nodeCount"], 12)

    def test_request_id(self):
        validate = os.path.join(support.REPO, "client", "examples", "validate.json")
        with support.FakeServer() as server:
            for argv in ((), ("--request-id", "cli-42")):
                status, out, err = run_cli("call", "Validate", "--request", validate,
                                           "--target", server.target, *argv)
                self.assertEqual(status, 0, err)
            first, second = server.planner.calls
            self.assertRegex(first["x-request-id"], "^[0-9a-f]{32}$")
            self.assertEqual(second["x-request-id"], "cli-42")
            # A binary request is handed over to the client; a retry reads
            # the file again.
            binary = self.path("validate.pb")
            with open(binary, "wb") as f:
                f.write(pb.ValidateRequest(graph=pb.Graph()).SerializeToString())
            server.planner.calls.clear()
            server.planner.fail_first = 2
            status, out, err = run_cli("call", "Validate", "--request", binary,
                                       "--target", server.target)
            self.assertEqual(status, 0, err)
            self.assertEqual(json.loads(out), {"nodeCount": 1})
            self.assertEqual(len(server.planner.calls), 3)

    def example_responses(self):
        """A response to every example request (and by index where a plan
        can be), and made-up ones: strings to escape, 0 and negative
        partitions, int64 sizes, doubles, enums, an empty message in a long
        list."""
        examples = os.path.join(support.REPO, "client", "examples")
        client = partplan.Client(self.server.target, timeout=60)
        self.addCleanup(client.close)
        responses = []
        for name in ("partition_graph", "plan", "split_graph", "shard_graph", "plan_training",
                     "plan_data_parallel", "build_pipeline_graph", "validate"):
            method = "".join(w.title() for w in name.split("_"))
            with open(os.path.join(examples, f"{name}.json")) as f:
                request = json.load(f)
            responses.append(client.call(method, request))
            if "graph" in request and method in ("PartitionGraph", "Plan", "ShardGraph"):
                request["nodeReferences"] = "NODE_REFERENCES_INDICES"
                responses.append(client.call(method, request))
        plan = pb.PartitionGraphResponse()
        for i in range(1000):
            plan.plan.assignments.add(node=f"n\u00e9\"{i}\\\n", partition=i % 3 - 1)
        plan.plan.assignments.add()
        part = plan.plan.partitions.add(id=2, memory_bytes=1 << 40, latency_seconds=0.1)
        part.nodes.extend(f"n{i}" for i in range(600))
        plan.plan.summary.planner = "x"
        plan.plan.partition_by_node_index.extend(range(-1, 700))
        responses.append(plan)
        responses.append(pb.PartitionGraphResponse())
        # As the server writes a large plan: names that need no escaping,
        # partitions 0 (left out) to 11 (a byte like the tag), names of the
        # tag's length, node indices.
        plan = pb.PartitionGraphResponse()
        for i in range(5000):
            plan.plan.assignments.add(node=("x" * (i % 20)) + f"_{i}", partition=i % 12)
        for p in range(3):
            part = plan.plan.partitions.add(id=p, memory_bytes=p * 1000, latency_seconds=p / 3)
            part.nodes.extend(f"{'y' * (i % 30)}{i}" for i in range(p, 5000, 3))
            part.node_indices.extend(range(p, 5000, 3))
            part.children.extend([p + 1] * (p < 2))
        plan.plan.summary.planner = "partitioner/size_based"
        responses.append(plan)
        return responses

    def test_json_output_is_json_format(self):
        # The JSON written as it goes is MessageToJson's text, to the byte,
        # whichever parts of a message are written whole.
        responses = self.example_responses()
        for whole_elements in (cli._JSON_WHOLE_ELEMENTS, 2, 0):
            for response in responses:
                with self.subTest(type(response).__name__, whole_elements=whole_elements):
                    old = cli._JSON_WHOLE_ELEMENTS
                    cli._JSON_WHOLE_ELEMENTS = whole_elements
                    try:
                        out = io.StringIO()
                        cli.write_json(response, out)
                    finally:
                        cli._JSON_WHOLE_ELEMENTS = old
                    self.assertEqual(out.getvalue(), json_format.MessageToJson(response, indent=1) + "\n")

    def assert_wire_json(self, data, response_class):
        """json_writer's text of `data` is MessageToJson's of the message it
        holds, whether runs are read with numpy from 16 KiB on or from 0."""
        from partplan import json_writer

        expected = json_format.MessageToJson(response_class.FromString(data), indent=1) + "\n"
        defaults = (json_writer._BULK_MIN_BYTES, json_writer._WINDOW, json_writer._CHUNK)
        # As they are; runs from 0 bytes on, looked for and converted in
        # small pieces.
        for bulk, window, chunk in (defaults, (0, 4096, 1000)):
            with self.subTest(response_class.__name__, bulk=bulk, size=len(data)):
                json_writer._BULK_MIN_BYTES, json_writer._WINDOW, json_writer._CHUNK = \
                    bulk, window, chunk
                try:
                    text = "".join(json_writer.message_json(data, response_class.DESCRIPTOR))
                finally:
                    json_writer._BULK_MIN_BYTES, json_writer._WINDOW, json_writer._CHUNK = defaults
                self.assertEqual(text, expected)

    def test_json_from_the_wire_is_json_format(self):
        # The CLI writes a response's JSON from its bytes (json_writer):
        # MessageToJson's text, to the byte.
        for response in self.example_responses():
            self.assert_wire_json(response.SerializeToString(), type(response))

    def test_json_from_unusual_wire(self):
        from partplan import json_writer

        def field(number, payload):
            return bytes([number << 3 | 2]) + json_writer_varint(len(payload)) + payload

        def node_partition(*parts):
            return field(1, b"".join(p.SerializeToString() for p in parts))

        # Fields of an element in any order, one left out, one given twice
        # (the last counts), an empty element: assignments read in passes.
        elements = []
        for i in range(3000):
            name, part = pb.NodePartition(node=f"n{i}"), pb.NodePartition(partition=i % 5)
            elements.append(node_partition(*((part, name) if i % 3 else (name, part))))
        elements.append(node_partition(pb.NodePartition(partition=4)))
        elements.append(node_partition())
        elements.append(node_partition(pb.NodePartition(node="a"), pb.NodePartition(node="b")))
        elements.append(node_partition(pb.NodePartition(partition=-7)))
        self.assert_wire_json(field(1, b"".join(elements)), pb.PartitionGraphResponse)
        # Non-ASCII and escaped names in a long run of strings; a partition
        # given in two runs with another field between.
        part = pb.Partition(id=1, nodes=[f"\u00e9{i}" if i % 7 == 0 else f"n{i}\t" for i in range(4000)])
        part2 = pb.Partition(nodes=[f"m{i}" for i in range(4000)], memory_bytes=5)
        body = (pb.PartitionPlan(partitions=[part]).SerializeToString()
                + pb.PartitionPlan(partitions=[part2]).SerializeToString())
        data = pb.PartitionGraphResponse(plan=pb.PartitionPlan.FromString(body)).SerializeToString()
        self.assert_wire_json(data, pb.PartitionGraphResponse)
        split = pb.Partition(nodes=[f"a{i}" for i in range(3000)]).SerializeToString()
        split += pb.Partition(id=3).SerializeToString()
        split += pb.Partition(nodes=[f"b{i}" for i in range(3000)]).SerializeToString()
        data = pb.PartitionGraphResponse(
            plan=pb.PartitionPlan(partitions=[pb.Partition.FromString(split)])).SerializeToString()
        self.assert_wire_json(data, pb.PartitionGraphResponse)
        # A name holding the byte that separates names as they are gathered;
        # a name of 20000 bytes (a length of three) amid short ones.
        for odd in ("a\x01b", "z" * 20000):
            part = pb.Partition(nodes=[f"n{i}" for i in range(3000)] + [odd]
                                + [f"m{i}" for i in range(3000)])
            plan = pb.PartitionPlan(partitions=[part], assignments=[
                pb.NodePartition(node=name, partition=1) for name in part.nodes])
            self.assert_wire_json(pb.PartitionGraphResponse(plan=plan).SerializeToString(),
                                  pb.PartitionGraphResponse)
        # A long packed run of integers, written in decimal by numpy: signs,
        # the extremes, every length; and int64s in quotes.
        plan = pb.PartitionPlan(partition_by_node_index=[
            v for i in range(3000) for v in (i, -i, i * 715827)] + [2**31 - 1, -2**31, 0])
        self.assert_wire_json(pb.PartitionGraphResponse(plan=plan).SerializeToString(),
                              pb.PartitionGraphResponse)
        import numpy as np

        for values, dtype in (([0, -1, 9, 10, -2**63, 2**63 - 1, 12345], np.int64),
                              ([0, 1, 2**64 - 1, 10**19], np.uint64)):
            for quoted in (False, True):
                self.assertEqual(
                    json_writer._decimals(np, np.array(values, dtype=dtype), ",\n  ", quoted),
                    ",\n  ".join(('"%d"' if quoted else "%d") % v for v in values))
        # What it leaves to json_format: an unknown field, a message field
        # given twice (they merge), bytes that are no message.
        for data in (b"\x10\x01", b"\x0a\x00\x0a\x00", b"\x0a\x05\x0a"):
            with self.subTest(data=data):
                with self.assertRaises(json_writer.Unsupported):
                    json_writer.message_json(data, pb.PartitionGraphResponse.DESCRIPTOR)

    def test_json_stopping_part_way_ends_with_json_formats_text(self):
        # The CLI writes json_writer's pieces as they come; where json_writer
        # stops part way (here an unknown field in a partition, after 40,000
        # assignments), what it wrote is json_format's text up to there, and
        # the rest comes from the parsed response.
        import io

        from partplan import cli, json_writer

        def field(number, payload):
            return bytes([number << 3 | 2]) + json_writer_varint(len(payload)) + payload

        plan = pb.PartitionPlan(assignments=[pb.NodePartition(node=f"node_{i}", partition=i % 3)
                                             for i in range(40_000)])
        partition = pb.Partition(id=2, nodes=["node_1"]).SerializeToString() + b"\xf8\x06\x01"
        data = field(1, plan.SerializeToString() + field(2, partition))
        expected = json_format.MessageToJson(pb.PartitionGraphResponse.FromString(data),
                                             indent=1) + "\n"
        made = []
        with self.assertRaises(json_writer.Unsupported):
            json_writer.message_json(data, pb.PartitionGraphResponse.DESCRIPTOR, out=made)
        self.assertGreater(len("".join(made)), 1 << 20)
        self.assertTrue(expected.startswith("".join(made)))
        for binary in (False, True):
            with self.subTest(binary=binary):
                raw = io.BytesIO()
                out = io.TextIOWrapper(raw, encoding="ascii") if binary else io.StringIO()
                with contextlib.redirect_stdout(out):
                    self.assertTrue(cli._write_response_bytes(data, pb.PartitionGraphResponse))
                out.flush()
                text = raw.getvalue().decode("ascii") if binary else out.getvalue()
                self.assertEqual(text, expected)
        # Stopped at once: nothing written, and the caller converts it all.
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertFalse(cli._write_response_bytes(b"\x10\x01", pb.PartitionGraphResponse))
        self.assertEqual(out.getvalue(), "")

    def test_call_with_a_binary_request_writes_json_from_the_wire(self):
        examples = os.path.join(support.REPO, "client", "examples")
        with open(os.path.join(examples, "partition_graph.json")) as f:
            request = json_format.Parse(f.read(), pb.PartitionGraphRequest())
        binary = self.path("partition_graph.pb")
        with open(binary, "wb") as f:
            f.write(request.SerializeToString())
        status, out, err = run_cli("call", "PartitionGraph", "--request", binary,
                                   "--target", self.server.target)
        self.assertEqual(status, 0, err)
        response = json_format.Parse(out, pb.PartitionGraphResponse())
        self.assertTrue(response.plan.assignments)
        self.assertEqual(out, json_format.MessageToJson(response, indent=1) + "\n")

    def test_module_entry_point(self):
        # The real `python3 -m partplan`, which plans without importing torch.
        graph = os.path.join(support.REPO, "client", "examples", "graph_mlp.json")
        env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR)
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "partplan", "plan", "--graph", graph,
             "--target", self.server.target, "--device-memory", "8MiB,8MiB,8MiB", "--output", "table"],
            capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("partitioner/size_based", done.stdout)
        self.assertNotIn("| torch\n", done.stderr)  # -X importtime lists every import
        done = subprocess.run([sys.executable, "-m", "partplan", "gen-protos", "--check"],
                              capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual((done.returncode, done.stdout.strip()), (0, "current"))


class CodegenTest(unittest.TestCase):
    def test_generated_code_is_current_and_outside_the_source_tree(self):
        from partplan import _codegen

        self.assertTrue(_codegen.is_current())
        directory = _codegen.generated_dir()
        self.assertFalse(_codegen.generate(directory))  # nothing to do
        generated = os.path.join(directory, "partplan", "v1", "planner_service_pb2_grpc.py")
        self.assertTrue(os.path.exists(generated))
        self.assertEqual(pb.planner_service_pb2_grpc.__file__, generated)
        # Imported from the checkout: the per-user cache, not the package.
        self.assertFalse(_codegen.is_bundled())
        self.assertNotEqual(os.path.commonpath([directory, support.PYTHON_DIR]), support.PYTHON_DIR)
        self.assertEqual(os.path.dirname(directory), _codegen.cache_root())

    def test_generates_into_a_fresh_directory(self):
        # The same generator, pointed elsewhere, produces importable code.
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR)
            script = textwrap.dedent(f"""
                import partplan._codegen as c
                assert c.generate({tmp!r}) is True
                assert c.generate({tmp!r}) is False
                assert c.is_complete({tmp!r})
            """)
            done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                  timeout=60)
            self.assertEqual(done.returncode, 0, done.stderr)
            names = sorted(os.listdir(os.path.join(tmp, "partplan", "v1")))
            self.assertIn("graph_pb2.py", names)
            self.assertIn("planner_service_pb2_grpc.py", names)
            self.assertTrue(os.path.exists(os.path.join(tmp, "google_rpc.desc")))

    def test_a_changed_proto_gets_new_code(self):
        # The cache directory is named after a hash of the protos: a changed
        # .proto makes the code stale and is generated afresh, elsewhere.
        with tempfile.TemporaryDirectory() as tmp:
            protos = os.path.join(tmp, "proto")
            shutil.copytree(os.path.join(support.REPO, "proto", "partplan"), os.path.join(protos, "partplan"))
            env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR, PARTPLAN_PROTO_DIR=protos,
                       PARTPLAN_CACHE_DIR=os.path.join(tmp, "cache"))
            script = textwrap.dedent(f"""
                import json, partplan, partplan.v1.graph_pb2 as g
                from partplan import _codegen as c
                first = c.generated_dir()
                assert c.is_current() and "AddedForTheTest" not in dir(g)
                with open({os.path.join(protos, "partplan", "v1", "graph.proto")!r}, "a") as f:
                    f.write("\\nmessage AddedForTheTest {{ int32 x = 1; }}\\n")
                stale = not c.is_current()
                second = c.ensure()
                print(json.dumps([first, stale, second, c.is_current(), c.is_complete(first)]))
            """)
            done = subprocess.run([sys.executable, "-B", "-c", script], env=env, capture_output=True,
                                  text=True, timeout=120)
            self.assertEqual(done.returncode, 0, done.stderr)
            first, stale, second, current, first_kept = json.loads(done.stdout)
            self.assertTrue(stale)
            self.assertTrue(current)
            self.assertNotEqual(first, second)
            self.assertTrue(first_kept)
            self.assertEqual(os.path.dirname(first), os.path.join(tmp, "cache"))
            with open(os.path.join(second, "partplan", "v1", "graph_pb2.py")) as f:
                self.assertIn("_ADDEDFORTHETEST", f.read())

    def test_every_rpc_has_a_method(self):
        service = pb.planner_service_pb2.DESCRIPTOR.services_by_name["PartitionPlanner"]
        names = [m.name for m in service.methods]
        self.assertEqual(sorted(names), sorted(partplan.client.RPCS))
        for name, (method, request_cls, response_cls) in partplan.client.RPCS.items():
            self.assertTrue(callable(getattr(partplan.Client, method)), method)
            descriptor = service.methods_by_name[name]
            self.assertEqual(descriptor.input_type.full_name, request_cls.DESCRIPTOR.full_name)
            self.assertEqual(descriptor.output_type.full_name, response_cls.DESCRIPTOR.full_name)


if __name__ == "__main__":
    unittest.main()

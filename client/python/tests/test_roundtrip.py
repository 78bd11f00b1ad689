"""Round trips through the real server: export -> plan -> apply_plan -> the
split module computes what the model computes."""

import unittest

import support

import grpc
import torch
import torch.nn as nn
import torchvision

import partplan
from partplan import messages as pb

MODES = ["size_based", "sparse_nn", "cost_aware", "kl_based", "aot_based"]


class Recommender(nn.Module):
    """Embedding tables, a dense MLP and an interaction: sparse_nn's kind of model."""

    def __init__(self):
        super().__init__()
        self.dense = nn.Sequential(nn.Linear(13, 32), nn.ReLU(), nn.Linear(32, 8))
        self.tables = nn.ModuleList(nn.EmbeddingBag(n, 8, mode="sum") for n in (400, 300, 500))
        self.top = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, dense, ids, offsets):
        x = self.dense(dense)
        embs = [table(ids, offsets) for table in self.tables]
        return torch.sigmoid(self.top(torch.cat([x] + embs, dim=1)))


def models():
    torch.manual_seed(0)
    return [
        ("resnet18", torchvision.models.resnet18(), [torch.randn(2, 3, 64, 64)]),
        ("mobilenet_v2", torchvision.models.mobilenet_v2(), [torch.randn(1, 3, 64, 64)]),
        ("transformer", support.transformer_model(layers=3), [torch.randint(0, 50, (2, 12))]),
        ("attention", support.manual_attention_model(), [torch.randn(2, 8, 32)]),
        ("recommender", Recommender(),
         [torch.randn(4, 13), torch.randint(0, 300, (10,)), torch.tensor([0, 3, 5, 8])]),
        # torch._assert nodes, which nothing uses: COST_AWARE leaves them in
        # partitions of their own, which output nothing.
        ("vit", torchvision.models.VisionTransformer(
            image_size=32, patch_size=16, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64),
         [torch.randn(2, 3, 32, 32)]),
    ]


RECORDED = []


@torch.fx.wrap
def record_batch(x):
    """An effect torch.fx records as a call: appends the batch size."""
    RECORDED.append(x.shape[0])


class Guarded(nn.Module):
    """A check and a record that nothing downstream uses: nodes kept for
    their effects only."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        torch._assert((x > -100).all(), "inputs below -100")
        record_batch(x)
        return self.fc2(torch.relu(self.fc1(x)))


def contiguous_stages(graph, stages):
    """{call_* node: stage}: the op nodes cut into `stages` runs of equal count."""
    ops = [n.name for n in graph.nodes if n.op in (pb.CALL_MODULE, pb.CALL_FUNCTION, pb.CALL_METHOD)]
    return {name: i * stages // len(ops) for i, name in enumerate(ops)}


def outputs_close(a, b):
    if isinstance(a, torch.Tensor):
        return torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    return len(a) == len(b) and all(outputs_close(x, y) for x, y in zip(a, b))


class RoundTripTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = support.shared_server()
        cls.client = partplan.Client(cls.server.target, timeout=60)
        cls.models = []
        for name, model, inputs in models():
            model.eval()
            gm = partplan.trace(model)
            graph = partplan.export(gm, inputs)
            with torch.no_grad():
                expected = model(*inputs)
            cls.models.append((name, model, gm, graph, inputs, expected))

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    # Devices to try, as fractions of the graph's size, until the planner
    # cuts the graph: each planner has its own constraints (sparse_nn wants
    # every embedding partition to fit one device with the dense ones,
    # size_based's leftovers must fit somewhere, ...).
    LADDER = [(0.4,) * 4, (0.6,) * 3, (0.3,) * 6, (0.75,) * 2, (0.25,) * 10, (1.2,) * 2]

    def config_for(self, mode, graph, device_count=3):
        if mode == "aot_based":
            stages = min(3, device_count)
            return partplan.aot_config(contiguous_stages(graph, stages), {i: [i] for i in range(stages)})
        return pb.PartitionerConfig(mode=partplan.client.partition_mode(mode))

    @staticmethod
    def ladder_devices(graph, fractions):
        devices = support.devices_for(graph, *fractions)
        devices.transfer_rate_bytes_per_second = 1e9
        for d in devices.devices:
            d.compute_flops_per_second = 1e12
            d.memory_bandwidth_bytes_per_second = 1e11
        return devices

    def plan(self, graph, mode="size_based", rpc="plan", node_references="names"):
        """The first plan of the ladder with two partitions or more (or the
        first plan at all). Skips the test when the planner is not there or
        declines graphs of this size."""
        config = self.config_for(mode, graph)
        found, errors = None, []
        for fractions in self.LADDER:
            devices = support.devices_for(graph, *fractions)
            if mode in ("cost_aware", "kl_based"):
                devices.transfer_rate_bytes_per_second = 1e9
                for d in devices.devices:
                    d.compute_flops_per_second = 1e12
                    d.memory_bandwidth_bytes_per_second = 1e11
            try:
                if rpc == "plan":
                    response = self.client.plan(graph, devices, partitioner=config,
                                                node_references=node_references)
                else:
                    response = self.client.partition_graph(graph, devices, config=config,
                                                           node_references=node_references)
            except partplan.PartplanError as e:
                if e.code == grpc.StatusCode.UNIMPLEMENTED:
                    self.skipTest(f"{mode}: {e.message}")
                if e.code == grpc.StatusCode.FAILED_PRECONDITION and "at most" in e.message:
                    self.skipTest(f"{mode}: {e.message}")  # cost_aware's graph size limit
                self.assertEqual(e.code, grpc.StatusCode.FAILED_PRECONDITION, e)
                errors.append(f"{fractions}: {e.message}")
                continue
            if found is None:
                found = response
            if len(response.plan.partitions) >= 2:
                return response
            if mode == "aot_based":
                break
        self.assertIsNotNone(found, f"{mode}: no plan on any devices tried:\n" + "\n".join(errors))
        return found

    def check_split(self, name, gm, split, inputs, expected, partitions):
        submodules = [n for n, _ in split.named_children() if n.startswith("submod_")]
        self.assertEqual(len(submodules), len(partitions), name)
        with torch.no_grad():
            got = split(*inputs)
            traced = gm(*inputs)
        self.assertTrue(outputs_close(got, expected), f"{name}: split output differs from the model's")
        self.assertTrue(outputs_close(traced, expected), name)

    def test_every_ok_plan_applies(self):
        # Every plan the service gives, with every planner, on every rung of
        # the device ladder, applies and computes what the model computes:
        # PartitionGraph in each mode, Plan with each shard planner, and
        # ShardGraph. FAILED_PRECONDITION (no plan on these devices) is the
        # only answer allowed besides a plan, and each planner must give at
        # least one plan per model.
        planners = [("PartitionGraph", mode) for mode in MODES]
        planners += [("Plan", "shard/fairscale"), ("Plan", "shard/balanced"),
                     ("ShardGraph", "fairscale")]
        for name, model, gm, graph, inputs, expected in self.models:
            applied = {}  # assignment -> the planner that gave it first
            for rpc, planner in planners:
                with self.subTest(model=name, rpc=rpc, planner=planner):
                    plans, declined = 0, []
                    for fractions in self.LADDER:
                        devices = self.ladder_devices(graph, fractions)
                        try:
                            response = self.call_planner(rpc, planner, graph, devices)
                        except partplan.PartplanError as e:
                            if e.code == grpc.StatusCode.UNIMPLEMENTED or (
                                    e.code == grpc.StatusCode.FAILED_PRECONDITION
                                    and "at most" in e.message):
                                self.skipTest(f"{planner}: {e.message}")  # cost_aware's size limit
                            self.assertEqual(e.code, grpc.StatusCode.FAILED_PRECONDITION, e)
                            declined.append(f"{fractions}: {e.message}")
                            continue
                        plans += 1
                        assignment = tuple(sorted(partplan.assignment_of(response).items()))
                        if assignment in applied:
                            continue  # the same split, already checked
                        applied[assignment] = planner
                        split = partplan.apply_plan(gm, response)
                        partitions = (response.plan.partitions if rpc != "ShardGraph"
                                      else response.shards)
                        self.check_split(f"{name} {planner} {fractions}", gm, split, inputs,
                                         expected, partitions)
                    self.assertGreater(plans, 0, f"{name} {planner}: no plan on any devices tried:\n"
                                       + "\n".join(declined))

    def call_planner(self, rpc, planner, graph, devices):
        count = len(devices.devices)
        if rpc == "PartitionGraph":
            return self.client.partition_graph(graph, devices,
                                               config=self.config_for(planner, graph, count))
        if rpc == "Plan":
            mode = planner.split("/")[1].upper()
            return self.client.plan(graph, devices, shard=pb.ShardConfig(
                mode=pb.ShardConfig.Mode.Value(mode), shard_count=count))
        return self.client.shard_graph(graph, count, mode=planner)

    def test_partitions_that_output_nothing_still_run(self):
        # torch 1.13's split_module cannot build a partition none of whose
        # values is used outside it (an IndexError); apply_plan keeps it as a
        # submodule that returns nothing and is called for its effects.
        torch.manual_seed(0)
        model = Guarded().eval()
        gm = partplan.trace(model)
        ops = {n.name: n for n in gm.graph.nodes if n.op in partplan.apply.OP_NODES}
        check = {"gt", "all_1", "_assert"}
        self.assertEqual(check | {"record_batch", "fc1", "relu", "fc2"}, set(ops))
        assignment = {n: 0 if n in check else 1 if n == "record_batch" else 2 for n in ops}
        assignment["fc2"] = 3
        x = torch.randn(3, 8)
        with torch.no_grad():
            expected = model(x)
        for keep in (False, True):
            with self.subTest(keep_original_order=keep):
                split = partplan.apply_plan(gm, assignment, keep_original_order=keep)
                calls = [n.target for n in split.graph.nodes if n.op == "call_module"]
                self.assertEqual(sorted(calls), ["submod_0", "submod_1", "submod_2", "submod_3"])
                for part in (0, 1):
                    out = next(n for n in getattr(split, f"submod_{part}").graph.nodes
                               if n.op == "output")
                    self.assertEqual(out.args, ((),), part)  # returns nothing
                del RECORDED[:]
                with torch.no_grad():
                    self.assertTrue(torch.allclose(split(x), expected))
                self.assertEqual(RECORDED, [3])  # the record is still made
                bad = x.clone()
                bad[0, 0] = -1000.0
                with self.assertRaisesRegex(AssertionError, "inputs below -100"):
                    split(bad)  # and the check still checks
                # The server splits the same way.
                graph = partplan.export(gm, [x])
                response = self.client.split_graph(graph, assignment, keep_original_order=keep)
                self.assertEqual([s.name for s in response.submodules], calls)
                self.assertEqual([list(s.outputs) for s in response.submodules
                                  if s.name in ("submod_0", "submod_1")], [[], []])
                for s in response.submodules:
                    sub = getattr(split, s.name)
                    self.assertEqual([n.name for n in sub.graph.nodes if n.op == "placeholder"],
                                     list(s.inputs), s.name)

    def test_plan_apply_every_mode(self):
        for name, model, gm, graph, inputs, expected in self.models:
            for mode in MODES:
                with self.subTest(model=name, mode=mode):
                    response = self.plan(graph, mode)
                    plan = response.plan
                    if mode not in ("sparse_nn",):
                        self.assertGreaterEqual(len(plan.partitions), 2, f"{name} {mode}")
                    split = partplan.apply_plan(gm, response)
                    self.check_split(name, gm, split, inputs, expected, plan.partitions)

    def test_plan_by_node_index_applies_the_same(self):
        # A plan by node index is read with the GraphModule's node names.
        for name, model, gm, graph, inputs, expected in self.models:
            with self.subTest(model=name):
                by_name = self.plan(graph)
                by_index = self.plan(graph, node_references="indices")
                self.assertEqual(partplan.assignment_of(by_index, graph),
                                 partplan.assignment_of(by_name))
                split = partplan.apply_plan(gm, by_index)
                self.check_split(name, gm, split, inputs, expected, by_index.plan.partitions)

    def test_partition_graph_response_and_devices(self):
        name, model, gm, graph, inputs, expected = self.models[0]
        response = self.plan(graph, rpc="partition_graph")
        ids = {d for p in response.plan.partitions for d in p.logical_device_ids}
        split = partplan.apply_plan(gm, response, devices={i: "cpu" for i in ids})
        self.check_split(name, gm, split, inputs, expected, response.plan.partitions)
        self.assertIsInstance(split.submod_0, partplan.apply._DeviceCall)

    def test_model_instead_of_graph_module(self):
        # The model itself, traced again: the same node names.
        name, model, gm, graph, inputs, expected = self.models[2]
        response = self.plan(graph)
        split = partplan.apply_plan(model, response)
        self.check_split(name, gm, split, inputs, expected, response.plan.partitions)

    def test_split_graph_matches_split_module(self):
        # The server's SplitGraph and torch.fx's split_module agree on the
        # submodules, their order, inputs and outputs, and the result runs.
        for name, model, gm, graph, inputs, expected in self.models:
            with self.subTest(model=name):
                plan = self.plan(graph).plan
                response = self.client.split_graph(graph, plan)
                split = partplan.apply_plan(gm, response)
                calls = [n for n in split.graph.nodes if n.op == "call_module"]
                self.assertEqual([c.target for c in calls], [s.name for s in response.submodules])
                for s in response.submodules:
                    sub = getattr(split, s.name)
                    placeholders = [n.name for n in sub.graph.nodes if n.op == "placeholder"]
                    self.assertEqual(placeholders, list(s.inputs), s.name)
                self.check_split(name, gm, split, inputs, expected, response.submodules)

    def test_plan_that_does_not_match(self):
        name, model, gm, graph, inputs, expected = self.models[3]
        assignment = contiguous_stages(graph, 2)
        assignment.pop(next(iter(assignment)))
        assignment["nonexistent"] = 0
        with self.assertRaisesRegex(ValueError, "without a partition.*not in the graph"):
            partplan.apply_plan(gm, assignment)


if __name__ == "__main__":
    unittest.main()

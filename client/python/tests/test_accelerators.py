"""partplan.accelerators and device_inventory's preset=, kind=,
flops_per_second= and memory_bandwidth=: what they fill, what overrides
what, the errors, and that the planners use the figures."""

import math
import os
import unittest

import support

import grpc
from google.protobuf import json_format

import partplan
from partplan import accelerators
from partplan import messages as pb

EXAMPLES = os.path.join(support.REPO, "client", "examples")


def device_tuple(device):
    return (device.name, device.logical_id, device.available_memory_bytes, device.kind,
            device.compute_flops_per_second, device.memory_bandwidth_bytes_per_second)


class PresetTableTest(unittest.TestCase):

    def test_every_preset_is_complete_and_sourced(self):
        self.assertEqual(accelerators.names(), list(accelerators.PRESETS))
        for name, a in accelerators.PRESETS.items():
            with self.subTest(preset=name):
                self.assertEqual(a.name, name)
                self.assertIsInstance(a.memory_bytes, int)
                for figure in ("memory_bytes", "flops_per_second", "memory_bandwidth"):
                    value = getattr(a, figure)
                    self.assertTrue(math.isfinite(value) and value > 0, (figure, value))
                    self.assertTrue(a.sources[figure].startswith("https://"), figure)
                if a.interconnect_bandwidth is not None:
                    self.assertGreater(a.interconnect_bandwidth, 0)
                    self.assertTrue(a.sources["interconnect_bandwidth"].startswith("https://"))
                else:
                    self.assertNotIn("interconnect_bandwidth", a.sources)

    def test_docs_list_every_preset_with_its_figures(self):
        # docs/accelerators.md is the table users read: it must not drift
        # from the code.
        with open(os.path.join(support.REPO, "docs", "accelerators.md")) as f:
            doc = f.read()
        for name, a in accelerators.PRESETS.items():
            with self.subTest(preset=name):
                rows = [line for line in doc.splitlines() if line.startswith(f"| {name} |")]
                self.assertEqual(len(rows), 1, f"no single row for {name} in docs/accelerators.md")
                row = rows[0]
                self.assertIn(f"{a.memory_bytes // 10**9} GB", row)
                self.assertIn(f"{a.flops_per_second / 1e12:g} TFLOP/s", row)
                self.assertIn(f"{a.memory_bandwidth / 1e9:g} GB/s", row)
                for url in a.sources.values():
                    self.assertIn(url, doc)

    def test_names_and_aliases(self):
        self.assertIs(accelerators.get("a100"), accelerators.PRESETS["A100-80GB"])
        self.assertIs(accelerators.get("H100"), accelerators.PRESETS["H100-SXM"])
        self.assertIs(accelerators.get("h100_sxm5"), accelerators.PRESETS["H100-SXM"])
        self.assertIs(accelerators.get("mi300x"), accelerators.PRESETS["MI300X"])
        self.assertIs(accelerators.get("tpu v5e"), accelerators.PRESETS["TPU-v5e"])
        self.assertIs(accelerators.get(" A100-40GB "), accelerators.PRESETS["A100-40GB"])
        custom = accelerators.Accelerator("X1", "Acme", 10**9, 1e12, 1e11, None, {})
        self.assertIs(accelerators.get(custom), custom)
        with self.assertRaisesRegex(ValueError, r"preset: unknown accelerator 'h200'; known presets: "
                                                r"A100-40GB, .*TPU-v5e"):
            accelerators.get("h200")
        with self.assertRaisesRegex(ValueError, "preset: expected an accelerator name"):
            accelerators.get(100)

    def test_the_table_is_read_only(self):
        with self.assertRaises(TypeError):
            accelerators.PRESETS["H100-SXM"] = None
        with self.assertRaises(TypeError):
            accelerators.PRESETS["H100-SXM"].sources["memory_bytes"] = "x"


class DeviceInventoryTest(unittest.TestCase):

    def test_a_preset_fills_every_figure(self):
        h100 = accelerators.get("H100-SXM")
        inv = partplan.device_inventory(preset="h100", count=2)
        self.assertEqual([device_tuple(d) for d in inv.devices], [
            (f"gpu{i}", i, h100.memory_bytes, "H100-SXM", h100.flops_per_second, h100.memory_bandwidth)
            for i in range(2)])
        self.assertEqual(inv.transfer_rate_bytes_per_second, 0)
        # One device without count; names give the count too.
        self.assertEqual(len(partplan.device_inventory(preset="MI300X").devices), 1)
        named = partplan.device_inventory(preset="TPU-v5e", names=["t0", "t1", "t2"])
        self.assertEqual([d.name for d in named.devices], ["t0", "t1", "t2"])
        self.assertEqual({d.kind for d in named.devices}, {"TPU-v5e"})

    def test_mixed_presets(self):
        inv = partplan.device_inventory(preset=["H100-SXM", "A100-80GB", "a100-40gb"],
                                        transfer_rate="100GB")
        self.assertEqual([d.kind for d in inv.devices], ["H100-SXM", "A100-80GB", "A100-40GB"])
        self.assertEqual([d.available_memory_bytes for d in inv.devices],
                         [80 * 10**9, 80 * 10**9, 40 * 10**9])
        self.assertEqual([d.memory_bandwidth_bytes_per_second for d in inv.devices],
                         [accelerators.get(k).memory_bandwidth for k in ("H100-SXM", "A100-80GB", "A100-40GB")])
        self.assertEqual(inv.transfer_rate_bytes_per_second, 100e9)

    def test_explicit_arguments_override_the_preset(self):
        a100 = accelerators.get("A100-80GB")
        inv = partplan.device_inventory("70GiB", preset="a100", count=2,
                                        flops_per_second=0.4 * a100.flops_per_second)
        self.assertEqual([device_tuple(d) for d in inv.devices], [
            (f"gpu{i}", i, 70 << 30, "A100-80GB", 0.4 * a100.flops_per_second, a100.memory_bandwidth)
            for i in range(2)])
        inv = partplan.device_inventory(preset="MI300X", count=2, kind=["left", "right"],
                                        flops_per_second=[1e12, 2e12], memory_bandwidth="2TB/s")
        self.assertEqual([(d.kind, d.compute_flops_per_second, d.memory_bandwidth_bytes_per_second,
                           d.available_memory_bytes) for d in inv.devices],
                         [("left", 1e12, 2e12, 192 * 10**9), ("right", 2e12, 2e12, 192 * 10**9)])
        # 0 clears a figure (proto3: unset), as the server reads it.
        inv = partplan.device_inventory(preset="H100-SXM", memory_bandwidth=0)
        self.assertEqual(inv.devices[0].memory_bandwidth_bytes_per_second, 0)
        self.assertEqual(inv.devices[0].compute_flops_per_second, accelerators.get("h100").flops_per_second)

    def test_figures_without_a_preset(self):
        inv = partplan.device_inventory("24GiB", count=2, kind="my-gpu", flops_per_second=100e12,
                                        memory_bandwidth=["1TB", 1.5e12])
        self.assertEqual([device_tuple(d) for d in inv.devices], [
            ("gpu0", 0, 24 << 30, "my-gpu", 100e12, 1e12),
            ("gpu1", 1, 24 << 30, "my-gpu", 100e12, 1.5e12)])
        # The calls of before are unchanged: no kind, no figures.
        plain = partplan.device_inventory("8GiB,4GiB")
        self.assertEqual([device_tuple(d) for d in plain.devices],
                         [("gpu0", 0, 8 << 30, "", 0, 0), ("gpu1", 1, 4 << 30, "", 0, 0)])

    def test_errors_name_the_argument(self):
        cases = [
            (dict(preset="h200"), r"^preset: unknown accelerator 'h200'; known presets: A100-40GB, A100-80GB, "),
            (dict(preset=["a100", "tpu v4"]), r"^preset\[1\]: unknown accelerator 'tpu v4'"),
            (dict(preset=["a100", "a100"], count=3), r"^preset: 2 values for 3 devices"),
            (dict(), r"^memory: give the devices' memory sizes, or a preset= \(one of A100-40GB"),
            (dict(preset="a100", count=0), r"^count: expected a positive number of devices"),
            (dict(memory="1GiB", flops_per_second="312T"), r"^flops_per_second: expected FLOP/s as a number"),
            (dict(memory="1GiB", flops_per_second=True), r"^flops_per_second: expected FLOP/s as a number"),
            (dict(memory="1GiB", flops_per_second=-1.0), r"^flops_per_second: expected finite, non-negative"),
            (dict(memory="1GiB", flops_per_second=math.inf), r"^flops_per_second: expected finite"),
            (dict(memory=["1GiB", "1GiB"], flops_per_second=[1e12, math.nan]), r"^flops_per_second\[1\]: "),
            (dict(memory=["1GiB", "1GiB"], flops_per_second=[1e12]), r"^flops_per_second: 1 values for 2 devices"),
            (dict(memory="1GiB", memory_bandwidth="fast"), r"^memory_bandwidth: invalid byte size 'fast'"),
            (dict(memory="1GiB", memory_bandwidth=-5), r"^memory_bandwidth: invalid byte size -5"),
            (dict(memory="1GiB", kind=7), r"^kind: expected a string, got int"),
            (dict(memory="1GiB", names=["a", "b"]), r"^2 names for 1 devices"),
        ]
        for kwargs, pattern in cases:
            with self.subTest(**{k: repr(v) for k, v in kwargs.items()}):
                with self.assertRaisesRegex(ValueError, pattern):
                    partplan.device_inventory(**kwargs)


def flops_graph(flops_per_linear: float) -> pb.Graph:
    """The example MLP with FLOPs on its Linear layers and no latencies: the
    planners must take its times from the devices' FLOP/s."""
    with open(os.path.join(EXAMPLES, "graph_mlp.json")) as f:
        graph = json_format.Parse(f.read(), pb.Graph())
    for node in graph.nodes:
        assert not node.HasField("latency"), node.name
        if node.op == pb.CALL_MODULE:
            node.flops = flops_per_linear
    return graph


class PlannersUseThePresetsTest(unittest.TestCase):
    """Against partplan_server on loopback."""

    FLOPS = 1e12  # per Linear layer: large enough that compute dominates

    @classmethod
    def setUpClass(cls):
        cls.server = support.shared_server()
        cls.client = partplan.Client(cls.server.target, timeout=60)
        cls.graph = flops_graph(cls.FLOPS)
        cls.total_flops = sum(n.flops for n in cls.graph.nodes)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def critical_path(self, inventory):
        response = self.client.partition_graph(self.graph, inventory, mode="kl_based")
        return response.plan.summary.critical_path_latency_seconds

    def step_seconds(self, inventory):
        request = pb.PlanTrainingRequest(graph=self.graph, devices=inventory)
        request.config.micro_batches = 4
        return self.client.plan_training(request).plan.step_seconds

    def test_kl_based_critical_path_from_the_presets_flops(self):
        # The MLP is one chain on one device: its critical path is every
        # Linear's FLOPs over the device's FLOP/s, plus the bytes each node
        # moves over its memory bandwidth where those take longer.
        seconds = {}
        for name in ("A100-80GB", "H100-SXM", "MI300X", "TPU-v5e"):
            with self.subTest(preset=name):
                a = accelerators.get(name)
                seconds[name] = self.critical_path(partplan.device_inventory(preset=name, count=2))
                compute_only = self.total_flops / a.flops_per_second
                self.assertGreaterEqual(seconds[name], compute_only * (1 - 1e-9))
                self.assertAlmostEqual(seconds[name] / compute_only, 1.0, delta=0.01)
                # Without the bandwidth, exactly FLOPs over FLOP/s.
                exact = self.critical_path(partplan.device_inventory(
                    preset=name, count=2, memory_bandwidth=0))
                self.assertAlmostEqual(exact / compute_only, 1.0, places=9)
        # So faster presets plan shorter critical paths, in inverse proportion.
        a100, h100 = accelerators.get("A100-80GB"), accelerators.get("H100-SXM")
        self.assertAlmostEqual(seconds["A100-80GB"] / seconds["H100-SXM"],
                               h100.flops_per_second / a100.flops_per_second, delta=0.05)

    def test_without_figures_the_critical_path_is_zero(self):
        # The same graph on plain memory sizes has nothing to derive times
        # from: the FLOP/s of the preset is what made them above.
        self.assertEqual(self.critical_path(partplan.device_inventory("80GB", count=2)), 0)

    def test_plan_training_step_scales_inversely_with_flops(self):
        a100, h100 = accelerators.get("A100-80GB"), accelerators.get("H100-SXM")
        slow = self.step_seconds(partplan.device_inventory(preset="A100-80GB", count=2))
        fast = self.step_seconds(partplan.device_inventory(preset="H100-SXM", count=2))
        self.assertGreater(fast, 0)
        self.assertAlmostEqual(slow / fast, h100.flops_per_second / a100.flops_per_second, places=6)
        # Scaling a preset's FLOP/s (what a run reaches) scales the step.
        derated = self.step_seconds(partplan.device_inventory(
            preset="H100-SXM", count=2, flops_per_second=0.5 * h100.flops_per_second))
        self.assertAlmostEqual(derated / fast, 2.0, places=6)

    def test_plan_training_wants_flops_on_all_devices_or_none(self):
        h100 = accelerators.get("H100-SXM")
        inventory = partplan.device_inventory(preset="H100-SXM", count=2,
                                              flops_per_second=[h100.flops_per_second, 0])
        with self.assertRaises(partplan.PartplanError) as caught:
            self.step_seconds(inventory)
        self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("devices.devices[1].compute_flops_per_second",
                      [v.field for v in caught.exception.field_violations])


if __name__ == "__main__":
    unittest.main()

"""partplan.pipeline_run: one real pipeline training step on CPU processes
(gloo on loopback), against a single-process step on the whole batch; the
saved-activation bytes GPipe and 1F1B hold per stage; the checks of its
arguments. It needs no server.

Every run_pipeline call starts one process per stage, which takes a few
seconds on a loaded machine: the cases use few runs and no timings.
"""

import copy
import unittest

import support  # noqa: F401  (sets sys.path)

import torch
import torch.nn as nn

import partplan
from partplan.pipeline_run import run_pipeline, schedule_order, split_stages, stages_from_plan

WIDTH = 16


class Blocks(nn.Module):
    """Identical Linear + ReLU blocks: balanced stages."""

    def __init__(self, count: int, width: int = WIDTH):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(count))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class SkipNet(nn.Module):
    """Values that skip a stage (h, and the input x on the last stage), a
    tuple-valued node whose items cross a boundary, and a parameter read by
    get_attr rather than through a module."""

    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.a = nn.Linear(width, width)
        self.b = nn.Linear(width, width)
        self.c = nn.Linear(width, width)
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, width))

    def forward(self, x):
        h = torch.relu(self.a(x))
        halves = torch.chunk(h, 2, dim=1)
        g = self.b(torch.cat([halves[1], halves[0]], dim=1)) * self.scale
        return self.c(g + h) + x


def call_nodes(model):
    return [n.name for n in partplan.trace(model).graph.nodes
            if n.op in ("call_module", "call_function", "call_method")]


def even_stages(names, count):
    """count contiguous stages of (nearly) equal node counts."""
    size, extra = divmod(len(names), count)
    stages, start = [], 0
    for s in range(count):
        end = start + size + (1 if s < extra else 0)
        stages.append(names[start:end])
        start = end
    return stages


def reference_step(model, x, y, loss_fn):
    """(loss, {name: grad}) of one step of a copy of model on the whole batch."""
    model = copy.deepcopy(model)
    loss = loss_fn(model(x), y)
    loss.backward()
    return float(loss), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def batch(rows, width=WIDTH, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, width, generator=gen, dtype=torch.float64),
            torch.randn(rows, width, generator=gen, dtype=torch.float64))


class ScheduleOrderTest(unittest.TestCase):
    def test_gpipe_runs_every_forward_then_every_backward(self):
        self.assertEqual(schedule_order("gpipe", 1, 3, 3),
                         [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("B", 1), ("B", 2)])

    def test_1f1b_warms_up_then_alternates(self):
        # Megatron-LM's order: P - s - 1 warm-up forwards on stage s.
        def text(stage, stages, micro_batches):
            return " ".join(f"{k}{m}" for k, m in schedule_order("1f1b", stage, stages, micro_batches))
        self.assertEqual(text(0, 3, 4), "F0 F1 F2 B0 F3 B1 B2 B3")
        self.assertEqual(text(1, 3, 4), "F0 F1 B0 F2 B1 F3 B2 B3")
        self.assertEqual(text(2, 3, 4), "F0 B0 F1 B1 F2 B2 F3 B3")
        # Fewer micro-batches than stages: the warm-up is every micro-batch.
        self.assertEqual(text(0, 4, 2), "F0 F1 B0 B1")


class StagesFromPlanTest(unittest.TestCase):
    def test_partitions_in_order_of_their_first_node(self):
        model = Blocks(2)
        n = call_nodes(model)
        assignment = {n[0]: 7, n[1]: 7, n[2]: 3, n[3]: 3}
        self.assertEqual(stages_from_plan(model, assignment), [n[:2], n[2:]])
        response = partplan.PartitionPlan(assignments=[
            partplan.NodePartition(node=name, partition=i // 3) for i, name in enumerate(n)])
        self.assertEqual(stages_from_plan(model, response), [n[:3], n[3:]])


class GradientTest(unittest.TestCase):
    """The pipeline's gradients are those of one step on the whole batch."""

    def check(self, model, stage_count, schedule, micro_batches=4, rows=8):
        x, y = batch(rows)
        loss_fn = nn.MSELoss()
        want_loss, want = reference_step(model, x, y, loss_fn)
        stages = even_stages(call_nodes(model), stage_count)
        result = run_pipeline(model, x, loss_fn, stages, schedule, micro_batches, target=y)
        self.assertEqual(sorted(result.grads), sorted(want))
        for name, grad in want.items():
            self.assertTrue(torch.allclose(result.grads[name], grad, rtol=1e-10, atol=1e-13),
                            f"{name}: max difference "
                            f"{(result.grads[name] - grad).abs().max().item():.3g}")
        self.assertAlmostEqual(result.loss, want_loss, places=12)
        self.assertEqual([s.stage for s in result.stages], list(range(stage_count)))
        self.assertEqual([s.nodes for s in result.stages], stages)
        # The model is not touched: its gradients come back in the result.
        self.assertTrue(all(p.grad is None for p in model.parameters()))

    def test_blocks(self):
        model = Blocks(6).double()
        for stage_count in (2, 3):
            for schedule in ("gpipe", "1f1b"):
                with self.subTest(stages=stage_count, schedule=schedule):
                    self.check(model, stage_count, schedule)

    def test_values_that_skip_stages(self):
        model = SkipNet().double()
        self.check(model, 3, "1f1b")


class SavedActivationTest(unittest.TestCase):
    """Balanced stages, yet under 1F1B stage 0 holds the most activations
    (DeepSpeed issue #4477): min(P - s, B) micro-batches on stage s. Under
    GPipe every stage holds all B."""

    STAGES, MICRO_BATCHES, ROWS = 4, 6, 12

    @classmethod
    def setUpClass(cls):
        cls.model = Blocks(2 * cls.STAGES).double()
        cls.stages = even_stages(call_nodes(cls.model), cls.STAGES)
        cls.x, cls.y = batch(cls.ROWS)

    def run_schedule(self, schedule):
        result = run_pipeline(self.model, self.x, nn.MSELoss(), self.stages, schedule,
                              self.MICRO_BATCHES, target=self.y)
        for stage in result.stages:
            per = stage.saved_bytes_per_micro_batch
            self.assertEqual(len(per), self.MICRO_BATCHES)
            self.assertEqual(len(set(per)), 1, f"stage {stage.stage}: {per}")
            self.assertGreater(per[0], 0)
        # Each stage but the last runs two Linear + ReLU blocks: Linear saves
        # its input, ReLU its output, which the next Linear saves again: three
        # (rows x width) float64 storages per micro-batch. Were the
        # micro-batches views of the batch, stage 0 would count all of it.
        rows = self.ROWS // self.MICRO_BATCHES
        for stage in result.stages[:-1]:
            self.assertEqual(stage.saved_bytes_per_micro_batch[0], 3 * rows * WIDTH * 8)
        return result

    def test_1f1b_stage_0_holds_the_most(self):
        result = self.run_schedule("1f1b")
        p, b = self.STAGES, self.MICRO_BATCHES
        peaks = [stage.peak_saved_bytes for stage in result.stages]
        for stage in result.stages:
            s = stage.stage
            want = min(p - s, b) * stage.saved_bytes_per_micro_batch[0]
            self.assertLessEqual(abs(stage.peak_saved_bytes - want), 0.05 * want,
                                 f"stage {s}: peak {stage.peak_saved_bytes}, want {want}")
            self.assertEqual(stage.max_in_flight, min(p - s, b))
            self.assertEqual(stage.order, [f"{k}{m}" for k, m in schedule_order("1f1b", s, p, b)])
        self.assertEqual(max(peaks), peaks[0])
        self.assertTrue(all(peaks[0] > peak for peak in peaks[1:]), peaks)

    def test_gpipe_every_stage_holds_every_micro_batch(self):
        result = self.run_schedule("gpipe")
        for stage in result.stages:
            want = self.MICRO_BATCHES * stage.saved_bytes_per_micro_batch[0]
            self.assertLessEqual(abs(stage.peak_saved_bytes - want), 0.05 * want,
                                 f"stage {stage.stage}: peak {stage.peak_saved_bytes}, want {want}")
            self.assertEqual(stage.max_in_flight, self.MICRO_BATCHES)


def mse_per_element(output, target):
    """Not a scalar: the last stage must refuse it."""
    return (output - target) ** 2


class BadInputTest(unittest.TestCase):
    """Arguments are checked before any process starts, with a ValueError
    that says what is wrong."""

    @classmethod
    def setUpClass(cls):
        cls.model = Blocks(3).double()
        cls.names = call_nodes(cls.model)  # layers_0, relu, layers_1, relu_1, ...
        cls.x, cls.y = batch(8)

    def raises(self, pattern, stages=None, schedule="1f1b", micro_batches=4, loss_fn=None, x=None):
        stages = stages if stages is not None else even_stages(self.names, 2)
        with self.assertRaisesRegex(ValueError, pattern):
            run_pipeline(self.model, self.x if x is None else x, loss_fn or nn.MSELoss(), stages,
                         schedule, micro_batches, target=self.y)

    def test_stages_that_are_not_contiguous(self):
        n = self.names
        self.raises(r"stage 0 is not the next contiguous run.*'relu' missing",
                    [[n[0], n[2]], [n[1]] + n[3:]])
        self.raises(r"stage 1 is not the next contiguous run", [n[:2], n[3:], [n[2]]])
        with self.assertRaisesRegex(ValueError, "not the next contiguous run"):
            split_stages(self.model, [n[2:], n[:2]])

    def test_unknown_and_misplaced_nodes(self):
        n = self.names
        self.raises(r"stage 1: no node named 'layers_9'", [n[:2], ["layers_9"] + n[2:]])
        self.raises(r"stage 0: 'x' is a placeholder node", [["x"] + n[:2], n[2:]])
        self.raises(r"stage 1: node 'relu' is already in stage 0", [n[:2], ["relu"] + n[2:]])
        self.raises(r"leave out 2 call_\* node\(s\).*'relu_2'", [n[:2], n[2:4]])
        self.raises(r"stage 1 must be a non-empty list", [n, []])
        self.raises(r"non-empty list of lists", [])

    def test_micro_batches(self):
        for bad in (0, -1, 2.0, True, None):
            with self.subTest(micro_batches=bad):
                self.raises(r"micro_batches must be an integer >= 1", micro_batches=bad)
        self.raises(r"8 rows \(dim 0\), which 3 micro-batches do not divide", micro_batches=3)
        self.raises(r"batch sizes \(dim 0\) differ: \[4, 8\]", x=self.x[:4])

    def test_schedule_and_loss(self):
        self.raises(r"unknown schedule 'interleaved'", schedule="interleaved")
        self.raises(r"loss_fn must be picklable", loss_fn=lambda out, y: (out - y).pow(2).mean())

    def test_a_failing_stage_raises_in_the_caller(self):
        # The last stage fails; the others, waiting for it, are terminated.
        with self.assertRaisesRegex(RuntimeError, "loss_fn must return a scalar tensor"):
            run_pipeline(self.model, self.x, mse_per_element, even_stages(self.names, 2),
                         "gpipe", 2, target=self.y, timeout=120)


if __name__ == "__main__":
    unittest.main()

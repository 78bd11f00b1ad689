"""PlanTraining's predictions against a real run (issue #26, "Real runs, no
GPU needed").

Each case exports a model with export(training=True) on one micro-batch,
asks the real server's PlanTraining for its stages, turns the plan's
stage_by_item into run_pipeline stages and runs one GPipe or 1F1B step for
real (one CPU process per stage, gloo on loopback) on the whole batch of B
micro-batches. It checks the gradients against a single-process step and,
per stage, the peak bytes of saved activations the run measured against
the plan's prediction.

What is comparable. run_pipeline's `peak_saved_bytes` is the most bytes of
storages saved for backward alive at once on the stage's process: no
parameters or buffers (not activations), no gradients or backward working
set, but on the last stage also what the loss (loss_fn(output, target) / B)
saves. The plan's comparable figure is therefore
TrainingPlan.devices[d].memory.activations ("the most saved activations
held at once"), not `peak` (which adds model states and the backward's
working set `transient`). With one stage per device and no recompute it is
stage.saved_activation_bytes x stage.peak_in_flight, which the tests check
(where no two nodes of a stage save one storage: see PlannerGapTest).
The graph the plan is made for has no loss, so on the last stage the
prediction is
    memory.activations + peak_in_flight x (bytes the loss saves per micro-batch),
the second term measured here in-process on one micro-batch (the storages
the loss saves that the last stage's own nodes do not already save) and
reported separately, never folded into the tolerance. Every other stage is
compared with the plan's figure alone: within 5% in PredictedVsMeasuredTest,
exactly in the tests of cuts between two savers of a value.

Values saved on both sides of a cut: the exporter charges a storage that
several nodes save to the first of them (saved_activation_bytes) and lists
it in every later saver's NodeTraining.resaved. A cut between two savers
gives the later stage its own copy of the value, which it saves again (a
ReLU saves its output and the next Linear saves the same tensor as its
input), and the planner counts such a storage once on every stage holding
any of its savers. The models of PredictedVsMeasuredTest save every storage
at one node only (GELU saves its input, a Linear or conv its input, a
residual add nothing), which the test checks; the Linear + ReLU models of
DeepSpeed4477Test and PlannerGapTest have such cuts, and there the plan's
figure (plus the loss's bytes on the last stage) is exactly what each stage
held, the re-saved bytes measured here independently only to check the
exporter's entries and that the case has them.

Every run_pipeline call starts one process per stage and costs a few
seconds on a loaded machine: seven runs in all, and no timing assertions.
"""

import copy
import unittest

import support  # noqa: F401  (sets sys.path)

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

import partplan
from partplan import messages as pb
from partplan.pipeline_run import run_pipeline, stages_from_plan
from partplan.v1 import training_pb2 as tpb

TOLERANCE = 0.05
SCHEDULES = {"1f1b": tpb.ONE_F_ONE_B, "gpipe": tpb.GPIPE}


# ---------------------------------------------------------------------------
# Models none of the other tests use.

class GeluMLP(nn.Module):
    """8 Linear + GELU blocks."""

    def __init__(self, blocks: int = 8, width: int = 24):
        super().__init__()
        self.fcs = nn.ModuleList(nn.Linear(width, width) for _ in range(blocks))
        self.acts = nn.ModuleList(nn.GELU() for _ in range(blocks))

    def forward(self, x):
        for fc, act in zip(self.fcs, self.acts):
            x = act(fc(x))
        return x


class ResConv(nn.Module):
    """A conv stem, residual blocks of two 3x3 convs with GELU, a mean over
    the pixels and a Linear head (no BatchNorm: micro-batches give the whole
    batch's gradients)."""

    def __init__(self, channels: int = 8, blocks: int = 3, classes: int = 10):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.convs = nn.ModuleList(nn.Conv2d(channels, channels, 3, padding=1)
                                   for _ in range(2 * blocks))
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        h = F.gelu(self.stem(x))
        for i in range(0, len(self.convs), 2):
            h = F.gelu(self.convs[i + 1](F.gelu(self.convs[i](h))) + h)
        return self.head(h.mean((2, 3)))


class ReluBlocks(nn.Module):
    """Identical Linear + ReLU blocks (DeepSpeed issue #4477's setting)."""

    def __init__(self, blocks: int = 16, width: int = 32):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(blocks))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


# ---------------------------------------------------------------------------
# Helpers.

def training_request(graph, devices: int, micro_batches: int, micro_batch_size: int,
                     schedule: str, memory: int = 1 << 30, pins=(), **config):
    """A PlanTrainingRequest: `devices` devices of `memory` bytes, each with
    the same compute_flops_per_second (the export's FLOPs are the forward's
    work, so equal speeds give stages balanced by FLOPs), free transfers,
    no recompute (run_pipeline never recomputes)."""
    inventory = partplan.device_inventory([memory] * devices)
    for device in inventory.devices:
        device.compute_flops_per_second = 1e12
    cfg = tpb.TrainingConfig(schedule=SCHEDULES[schedule], micro_batches=micro_batches,
                             micro_batch_size=micro_batch_size,
                             recompute=tpb.RECOMPUTE_NEVER, **config)
    for node, pin in pins:
        cfg.pins.add(node=node, pin=pin)
    return pb.PlanTrainingRequest(graph=graph, devices=inventory, config=cfg)


def plan_training(request):
    with partplan.Client(support.shared_server().target) as client:
        return client.plan_training(request).plan


def run_stages(model, graph, plan):
    """The plan's stages as run_pipeline takes them: stage_by_item names the
    stage of every node but the placeholders and the output, in graph order."""
    items = [n.name for n in graph.nodes if n.op not in (pb.PLACEHOLDER, pb.OUTPUT)]
    if len(items) != len(plan.stage_by_item):
        raise AssertionError(f"{len(plan.stage_by_item)} stage_by_item entries for "
                             f"{len(items)} items")
    stages = stages_from_plan(model, dict(zip(items, plan.stage_by_item)))
    if len(stages) != len(plan.stages):
        raise AssertionError(f"{len(stages)} stages run for the plan's {len(plan.stages)}")
    return stages


def chunks(value, micro_batches):
    """The micro-batches as run_pipeline makes them (clones, so that a
    micro-batch's storage is its own)."""
    return [c.detach().clone(memory_format=torch.contiguous_format)
            for c in value.chunk(micro_batches, dim=0)]


def _storage(t):
    """(key, nbytes) of the storage a saved tensor keeps alive (written out
    here rather than taken from training_costs or pipeline_run)."""
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return (str(t.device), storage.data_ptr()), storage.nbytes()


class SavedStorages:
    """Every storage autograd saves in one forward of the model on one
    micro-batch, by node (all of a node's saves, not just the first saver's),
    and the storages loss_fn(output, target) / B saves: one in-process run,
    every saved tensor kept alive to its end so that no address is reused."""

    def __init__(self, model, x, loss_fn, target, micro_batches):
        gm = partplan.trace(model)
        state = {_storage(t)[0] for t in list(gm.parameters()) + list(gm.buffers())}
        self.by_node = {}
        self.loss = {}
        kept = []

        def recorder(into):
            def pack(t):
                kept.append(t)
                key, nbytes = _storage(t)
                if key not in state:
                    into[key] = nbytes
                return t
            return pack

        by_node = self.by_node

        class Recorder(torch.fx.Interpreter):
            def run_node(self, n):
                saved = by_node.setdefault(n.name, {})
                with torch.autograd.graph.saved_tensors_hooks(recorder(saved), lambda t: t):
                    return super().run_node(n)

        with torch.enable_grad():
            output = Recorder(gm).run(x)
            with torch.autograd.graph.saved_tensors_hooks(recorder(self.loss), lambda t: t):
                loss = loss_fn(output, target) / micro_batches
        del loss, output
        kept.clear()

    def _stage_keys(self, stage):
        keys = {}
        for name in stage:
            keys.update(self.by_node.get(name, {}))
        return keys

    def loss_bytes(self, last_stage):
        """Bytes per micro-batch the loss saves on the last stage beyond what
        the stage's nodes already save."""
        own = self._stage_keys(last_stage)
        return sum(n for key, n in self.loss.items() if key not in own)

    def resaved_bytes(self, stages):
        """Per stage, bytes per micro-batch of storages its nodes save that a
        node of an earlier stage saves too: values crossing a cut (or model
        inputs every stage reads) that the exporter charges to the earlier
        node and lists in the later ones' NodeTraining.resaved, and that the
        later stage holds a copy of."""
        earlier, result = set(), []
        for stage in stages:
            keys = self._stage_keys(stage)
            result.append(sum(n for key, n in keys.items() if key in earlier))
            earlier |= set(keys)
        return result


def exported_resaved_bytes(graph, stages):
    """Per stage, the same figure as SavedStorages.resaved_bytes from the
    exported graph alone: the bytes of the distinct storages listed in the
    NodeTraining.resaved of the stage's nodes whose first saver is on an
    earlier stage."""
    stage_of = {name: s for s, stage in enumerate(stages) for name in stage}
    nodes = {n.name: n for n in graph.nodes}
    result = []
    for s, stage in enumerate(stages):
        storages = {}
        for name in stage:
            for r in nodes[name].training.resaved:
                if stage_of.get(r.node, -1) < s:
                    storages[(r.node, r.storage)] = r.bytes
        result.append(sum(storages.values()))
    return result


def reference_grads(model, x, y, loss_fn):
    model = copy.deepcopy(model)
    loss_fn(model(x), y).backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def same_ranking(predicted, measured):
    """Whether the stages rank the same by both (ties allowed): no pair of
    stages is strictly ordered one way by one figure and the other way by
    the other."""
    n = len(predicted)
    return all(not (predicted[i] < predicted[j] and measured[i] > measured[j]) and
               not (predicted[i] > predicted[j] and measured[i] < measured[j])
               for i in range(n) for j in range(n))


class Case:
    """One model planned and run: the plan, the stages, the run."""

    def __init__(self, name, model, x, y, loss_fn, schedule, devices, micro_batches, **request):
        self.name, self.model, self.x, self.y, self.loss_fn = name, model, x, y, loss_fn
        self.schedule, self.micro_batches = schedule, micro_batches
        rows = x.shape[0] // micro_batches
        torch.manual_seed(0)
        self.graph = partplan.export(model, (chunks(x, micro_batches)[0],), training=True)
        self.plan = plan_training(training_request(self.graph, devices, micro_batches, rows,
                                                   schedule, **request))
        self.stages = run_stages(model, self.graph, self.plan)
        self.saved = SavedStorages(model, chunks(x, micro_batches)[0], loss_fn,
                                   chunks(y, micro_batches)[0], micro_batches)
        self.loss_bytes = self.saved.loss_bytes(self.stages[-1])
        self.resaved = self.saved.resaved_bytes(self.stages)
        self.exported_resaved = exported_resaved_bytes(self.graph, self.stages)
        self.result = None

    def run(self):
        self.result = run_pipeline(self.model, self.x, self.loss_fn, self.stages, self.schedule,
                                   self.micro_batches, target=self.y)
        return self

    def plan_activations(self):
        """The plan's activations held at peak, per stage (= device)."""
        return [d.memory.activations for d in self.plan.devices]

    def predicted(self):
        """The plan's activations held at peak plus, on the last stage, the
        loss's saved bytes per micro-batch in flight."""
        out = []
        for s, (stage, held) in enumerate(zip(self.plan.stages, self.plan_activations())):
            per = self.loss_bytes if s == len(self.plan.stages) - 1 else 0
            out.append(held + stage.peak_in_flight * per)
        return out

    def measured(self):
        return [s.peak_saved_bytes for s in self.result.stages]

    def table(self):
        rows = [f"{self.name} {self.schedule} P={len(self.stages)} B={self.micro_batches}: "
                "stage nodes in_flight plan.saved plan.activations loss resaved predicted measured"]
        for s, (stage, measured, predicted) in enumerate(zip(
                self.plan.stages, self.measured(), self.predicted())):
            loss = self.loss_bytes if s == len(self.stages) - 1 else 0
            rows.append(f"  {s} {stage.node_count} {stage.peak_in_flight} "
                        f"{stage.saved_activation_bytes} {self.plan_activations()[s]:.0f} {loss} "
                        f"{self.resaved[s]} {predicted:.0f} {measured}")
        return "\n".join(rows)


def randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _seeded(cls, seed, *args):
    torch.manual_seed(seed)
    return cls(*args).double()


# ---------------------------------------------------------------------------

class PredictedVsMeasuredTest(unittest.TestCase):
    """Two models, two schedules each: the plan's activations at peak per
    stage against the run's measured peak saved bytes."""

    @classmethod
    def setUpClass(cls):
        mlp = _seeded(GeluMLP, 1)
        conv = _seeded(ResConv, 2)
        classes = torch.randint(0, 10, (12,), generator=torch.Generator().manual_seed(3))
        cls.cases = [
            Case("GeluMLP", mlp, randn(16, 24, seed=4), randn(16, 24, seed=5), nn.MSELoss(),
                 "1f1b", devices=4, micro_batches=4),
            Case("GeluMLP", mlp, randn(20, 24, seed=6), randn(20, 24, seed=7), nn.MSELoss(),
                 "gpipe", devices=3, micro_batches=5),
            Case("ResConv", conv, randn(12, 3, 8, 8, seed=8), classes, nn.CrossEntropyLoss(),
                 "1f1b", devices=3, micro_batches=6),
            Case("ResConv", conv, randn(8, 3, 8, 8, seed=9), classes[:8], nn.CrossEntropyLoss(),
                 "gpipe", devices=4, micro_batches=4),
        ]
        for case in cls.cases:
            case.run()

    def each_case(self):
        for case in self.cases:
            with self.subTest(model=case.name, schedule=case.schedule):
                yield case

    def test_gradients_equal_a_single_process_step(self):
        for case in self.each_case():
            want = reference_grads(case.model, case.x, case.y, case.loss_fn)
            self.assertEqual(sorted(case.result.grads), sorted(want))
            self.assertTrue(all(torch.allclose(case.result.grads[n], g, rtol=1e-10, atol=1e-13)
                                for n, g in want.items()))

    def test_plan_is_what_was_run(self):
        """One stage per device, no recompute, as many micro-batches in
        flight as the plan says, and memory.activations = stage saved bytes
        x peak_in_flight (so either is the comparable figure)."""
        for case in self.each_case():
            p, b = len(case.stages), case.micro_batches
            self.assertEqual(len(case.plan.devices), p)
            self.assertEqual(case.plan.estimated_saved_bytes_nodes, 0)
            for s, (stage, run) in enumerate(zip(case.plan.stages, case.result.stages)):
                self.assertFalse(stage.recompute)
                self.assertEqual(stage.node_count, len(case.stages[s]))
                in_flight = min(p - s, b) if case.schedule == "1f1b" else b
                self.assertEqual(stage.peak_in_flight, in_flight)
                self.assertEqual(run.max_in_flight, stage.peak_in_flight)
                self.assertEqual(case.plan.devices[s].memory.activations,
                                 stage.saved_activation_bytes * stage.peak_in_flight)

    def test_no_storage_is_saved_on_two_stages(self):
        """These models save each storage at one node only (see
        PlannerGapTest for a model that does not)."""
        for case in self.each_case():
            self.assertEqual(case.resaved, [0] * len(case.stages))
            self.assertFalse(any(n.training.resaved for n in case.graph.nodes))
            self.assertGreater(case.loss_bytes, 0)

    def test_peak_saved_bytes_within_5_percent(self):
        for case in self.each_case():
            table = case.table()
            for s, (predicted, measured) in enumerate(zip(case.predicted(), case.measured())):
                self.assertLessEqual(abs(measured - predicted), TOLERANCE * predicted,
                                     f"stage {s}\n{table}")
            # Each micro-batch's bytes, too: the plan's per-micro-batch saved bytes.
            for s, (stage, run) in enumerate(zip(case.plan.stages, case.result.stages)):
                want = stage.saved_activation_bytes + (
                    case.loss_bytes if s == len(case.stages) - 1 else 0)
                for got in run.saved_bytes_per_micro_batch:
                    self.assertLessEqual(abs(got - want), TOLERANCE * want, f"stage {s}\n{table}")

    def test_loss_free_stages_match_the_plan_alone(self):
        """Every stage but the last, against the plan's figure with nothing added."""
        for case in self.each_case():
            for s, (held, run) in enumerate(zip(case.plan_activations()[:-1], case.result.stages)):
                self.assertLessEqual(abs(run.peak_saved_bytes - held), TOLERANCE * held,
                                     f"stage {s}\n{case.table()}")

    def test_stages_rank_alike(self):
        for case in self.each_case():
            self.assertTrue(same_ranking(case.predicted(), case.measured()), case.table())


class DeepSpeed4477Test(unittest.TestCase):
    """DeepSpeed issue #4477 end to end: identical layers, 1F1B, P = 4; stage
    0 holds P micro-batches, so the balanced plan's stage 0 peaks highest. A
    memory cap just below that peak must move layers off stage 0, and the
    real run of the capped plan must hold less on stage 0.

    Model states are priced at 0 bytes per parameter here: #4477 is about
    activations, which is all the run measures. With states priced, the
    planner meets such a cap by moving one Linear off stage 0 whose input
    the ReLU before it already saves: fewer parameters on stage 0, the same
    activations, which no run of saved bytes can show lower
    (test_with_model_states_priced checks that plan without running it)."""

    P, B, MICRO_BATCH, WIDTH = 4, 4, 8, 32
    NO_STATES = dict(weight_bytes_per_parameter=0, gradient_bytes_per_parameter=0,
                     optimizer_bytes_per_parameter=0)
    # float64 weights and their gradients, plain SGD: no optimizer state.
    STATES = dict(weight_bytes_per_parameter=8, gradient_bytes_per_parameter=8,
                  optimizer_bytes_per_parameter=0)

    @classmethod
    def setUpClass(cls):
        cls.model = _seeded(ReluBlocks, 10, 16, cls.WIDTH)
        rows = cls.B * cls.MICRO_BATCH
        cls.x, cls.y = randn(rows, cls.WIDTH, seed=11), randn(rows, cls.WIDTH, seed=12)
        common = dict(devices=cls.P, micro_batches=cls.B, **cls.NO_STATES)
        cls.balanced = Case("ReluBlocks", cls.model, cls.x, cls.y, nn.MSELoss(), "1f1b", **common)
        cls.cap = int(cls.balanced.plan.devices[0].memory.peak) - 1
        cls.capped = Case("ReluBlocks capped", cls.model, cls.x, cls.y, nn.MSELoss(), "1f1b",
                          memory=cls.cap, **common)
        cls.balanced.run()
        cls.capped.run()

    def test_balanced_plan_has_stage_0_peak_highest(self):
        plan = self.balanced.plan
        peaks = [d.memory.peak for d in plan.devices]
        self.assertEqual(max(peaks), peaks[0], peaks)
        self.assertEqual([s.peak_in_flight for s in plan.stages], [4, 3, 2, 1])
        measured = self.balanced.measured()
        self.assertEqual(max(measured), measured[0], self.balanced.table())

    def test_capped_plan_moves_layers_off_stage_0(self):
        balanced, capped = self.balanced.plan, self.capped.plan
        self.assertLess(capped.stages[0].node_count, balanced.stages[0].node_count)
        for d in capped.devices:
            self.assertEqual(d.memory.available, self.cap)
            self.assertLessEqual(d.memory.peak, self.cap, d.device)
        self.assertFalse(any(s.recompute for s in capped.stages))

    def test_capped_run_holds_less_on_stage_0(self):
        balanced, capped = self.balanced.measured()[0], self.capped.measured()[0]
        self.assertLess(capped, balanced, "\n" + self.balanced.table() + "\n" +
                        self.capped.table())
        for case in (self.balanced, self.capped):
            self.assertEqual(case.measured()[0], case.predicted()[0], case.table())

    def test_every_stage_matches_the_plan(self):
        """Values cross the cuts and are saved on both sides (the ReLU's
        output and the next stage's Linear), which the plan counts on both
        stages: the measured peaks are the plan's plus the loss's bytes on
        the last stage, exactly; the ranking follows. The balanced plan cuts
        there; the capped one may cut before or after such a pair, which
        take the same time and cross the same bytes."""
        self.assertGreater(sum(self.balanced.resaved), 0, self.balanced.table())
        for case in (self.balanced, self.capped):
            table = case.table()
            self.assertEqual(case.exported_resaved, case.resaved, table)
            self.assertEqual(case.measured(), case.predicted(), table)
            # Each micro-batch's bytes: the device's activations per
            # micro-batch in flight (see PlannerGapTest for the stages'
            # saved_activation_bytes).
            for s, (stage, held, run) in enumerate(zip(case.plan.stages, case.plan_activations(),
                                                       case.result.stages)):
                want = held // stage.peak_in_flight + (
                    case.loss_bytes if s == len(case.stages) - 1 else 0)
                self.assertEqual(run.saved_bytes_per_micro_batch,
                                 [want] * case.micro_batches, f"stage {s}\n{table}")
            self.assertTrue(same_ranking(case.predicted(), case.measured()), table)

    def test_with_model_states_priced(self):
        """Plans only: weights and gradients priced, a cap just below the
        ample plan's stage-0 peak; the capped plan is OK, has fewer nodes on
        stage 0 and every device under the cap."""
        graph = self.balanced.graph
        ample = plan_training(training_request(graph, self.P, self.B, self.MICRO_BATCH, "1f1b",
                                               **self.STATES))
        cap = int(ample.devices[0].memory.peak) - 1
        capped = plan_training(training_request(graph, self.P, self.B, self.MICRO_BATCH, "1f1b",
                                                memory=cap, **self.STATES))
        self.assertLess(capped.stages[0].node_count, ample.stages[0].node_count)
        self.assertLess(capped.devices[0].memory.peak, ample.devices[0].memory.peak)
        for d in capped.devices:
            self.assertLessEqual(d.memory.peak, cap, d.device)


class PlannerGapTest(unittest.TestCase):
    """A value saved on both sides of a cut (once a gap in the planner's
    model).

    Linear + ReLU blocks, P = 2, the cut pinned between relu_1 and
    layers_2. relu_1 saves its output r (ReLU's backward reads its result)
    and layers_2 saves its input, the same r: the exporter charges r to
    relu_1 (layers_2's saved_activation_bytes is 0) and lists it in
    layers_2's NodeTraining.resaved (relu_1, storage 0, r's bytes). Stage 1
    saves its own received copy of r, and the plan counts r on both stages,
    so the plan predicts what each stage holds exactly.
    """

    P, B, MICRO_BATCH, WIDTH = 2, 4, 8, 32

    @classmethod
    def setUpClass(cls):
        model = _seeded(ReluBlocks, 20, 4, cls.WIDTH)
        rows = cls.B * cls.MICRO_BATCH
        cls.case = Case("ReluBlocks pinned", model, randn(rows, cls.WIDTH, seed=21),
                        randn(rows, cls.WIDTH, seed=22), nn.MSELoss(), "1f1b",
                        devices=cls.P, micro_batches=cls.B,
                        pins=[("relu_1", tpb.FIRST_STAGE), ("layers_2", tpb.LAST_STAGE)])
        cls.case.run()

    def test_cut_where_pinned(self):
        self.assertEqual(self.case.stages[0][-1], "relu_1", self.case.stages)
        self.assertEqual(self.case.stages[1][0], "layers_2", self.case.stages)
        r = self.MICRO_BATCH * self.WIDTH * 8
        self.assertEqual(self.case.resaved, [0, r])

    def test_exporter_lists_the_re_saved_value(self):
        nodes = {n.name: n for n in self.case.graph.nodes}
        r = self.MICRO_BATCH * self.WIDTH * 8
        self.assertEqual(nodes["layers_2"].training.saved_activation_bytes, 0)
        self.assertEqual([(e.node, e.storage, e.bytes) for e in nodes["layers_2"].training.resaved],
                         [("relu_1", 0, r)])
        self.assertEqual(self.case.exported_resaved, [0, r])

    def test_stage_1_counts_the_re_saved_value(self):
        """Stage 1's activations: its nodes' own saved bytes plus r, per
        micro-batch in flight."""
        case = self.case
        nodes = {n.name: n for n in case.graph.nodes}
        r = self.MICRO_BATCH * self.WIDTH * 8
        own = sum(nodes[name].training.saved_activation_bytes for name in case.stages[1])
        self.assertEqual(case.plan_activations()[1],
                         (own + r) * case.plan.stages[1].peak_in_flight, case.table())

    def test_plan_predicts_stage_1(self):
        case = self.case
        self.assertEqual(case.measured(), case.predicted(), case.table())

    def test_stage_saved_bytes_count_a_shared_storage_once(self):
        """TrainingStage.saved_activation_bytes ("saved activation bytes of
        one micro-batch") against memory.activations / peak_in_flight: a
        storage two of the stage's nodes save counts once."""
        case = self.case
        for s, stage in enumerate(case.plan.stages):
            self.assertEqual(stage.saved_activation_bytes * stage.peak_in_flight,
                             case.plan_activations()[s], f"stage {s}\n{case.table()}")


if __name__ == "__main__":
    unittest.main()

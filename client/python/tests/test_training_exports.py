"""partplan.training_exports: a training plan as torch.distributed.pipelining's
split_spec, DeepSpeed's parts and Megatron-LM's layout, each read back to the
plan's stages (and pipeline_run.stages_from_plan's), at many cuts; the cuts
each format cannot express; and one real PlanTraining answer when a server
binary is available. Plans are built by hand from the traced node order."""

import os
import unittest

import support  # noqa: F401  (sets sys.path)

import torch
import torch.nn as nn
import torch.nn.functional as F
from google.protobuf import json_format

import partplan
from partplan import messages as pb
from partplan import training_exports as te
from partplan.pipeline_run import stages_from_plan
from partplan.v1 import training_pb2

DIM, VOCAB = 16, 20


class Block(nn.Module):
    """A transformer-ish block: pre-norm MLP with a residual."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, 2 * DIM)
        self.fc2 = nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, x):
        return self.out(self.norm(x))


def lm():
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(VOCAB, DIM), *[Block() for _ in range(6)], Head())


class Shared(nn.Module):
    """One activation module called twice, and root-level ops between modules."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(DIM, DIM)
        self.act = nn.ReLU()
        self.b = nn.Linear(DIM, DIM)
        self.c = nn.Linear(DIM, DIM)

    def forward(self, x):
        x = self.act(self.a(x))
        x = self.act(self.b(x))
        x = torch.tanh(x * 2)
        return self.c(x)


def items_of(model, leaf_modules=()):
    gm = partplan.trace(model, leaf_modules=leaf_modules)
    return [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]


def plan_at(model, first_nodes, *, leaf_modules=(), by_item=True, by_range=True):
    """A TrainingPlan whose stage k >= 1 starts at node first_nodes[k - 1]."""
    items = items_of(model, leaf_modules)
    names = [n.name for n in items]
    starts = [0] + [names.index(f) for f in first_nodes] + [len(items)]
    plan = training_pb2.TrainingPlan()
    for k, (a, b) in enumerate(zip(starts, starts[1:])):
        if by_range:
            plan.stages.add(stage=k, device=f"gpu{k}", first_node=names[a], last_node=names[b - 1],
                            node_count=b - a)
        if by_item:
            plan.stage_by_item.extend([k] * (b - a))
    return plan


def assignment(model, plan):
    """{node: stage} for stages_from_plan, from stage_by_item."""
    return {n.name: s for n, s in zip(items_of(model), plan.stage_by_item)
            if n.op != "get_attr"}


def layer_starts(layers):
    """The first node of each top-level layer of lm() named by index."""
    return ["_0" if i == 0 else (f"_{i}_ln" if i < 7 else "_7_norm") for i in layers]


LAYER_CUTS = [[1], [1, 4], [2, 5, 7], [3], [7], [1, 2, 3, 4, 5, 6, 7], [4, 6]]


class PlanReading(unittest.TestCase):
    def test_forms_of_the_plan(self):
        model = lm()
        plan = plan_at(model, layer_starts([1, 4]))
        expected = stages_from_plan(model, assignment(model, plan))
        self.assertEqual(len(expected), 3)
        response = pb.PlanTrainingResponse(plan=plan)
        forms = {
            "TrainingPlan": plan, "PlanTrainingResponse": response,
            "dict of the plan": json_format.MessageToDict(plan),
            "dict of the response": json_format.MessageToDict(response),
            "proto field names": json_format.MessageToDict(response,
                                                           preserving_proto_field_name=True),
            "first/last only": plan_at(model, layer_starts([1, 4]), by_item=False),
            "stage_by_item only": plan_at(model, layer_starts([1, 4]), by_range=False),
        }
        for label, form in forms.items():
            with self.subTest(label):
                self.assertEqual(te.training_stages(model, form), expected)
                self.assertEqual(te.deepspeed_parts(model, form), [0, 1, 4, 8])

    def test_apply_plan_makes_a_submodule_a_stage(self):
        model = lm().eval()
        plan = plan_at(model, layer_starts([1, 4]))
        x = torch.randint(0, VOCAB, (2, 5))
        for form in (plan, pb.PlanTrainingResponse(plan=plan), json_format.MessageToDict(plan)):
            gm = partplan.apply_plan(model, form)
            self.assertEqual([name for name, _ in gm.named_children()],
                             ["submod_0", "submod_1", "submod_2"])
            self.assertTrue(torch.equal(gm(x), model(x)))
        self.assertFalse(te.is_training_plan({"fc1": 0, "fc2": 1}))

    def test_plans_that_do_not_match(self):
        model = lm()
        plan = plan_at(model, layer_starts([2]))
        short = training_pb2.TrainingPlan()
        short.CopyFrom(plan)
        del short.stage_by_item[-1]
        with self.assertRaisesRegex(ValueError, "stage_by_item entries"):
            te.training_stages(model, short)
        other = training_pb2.TrainingPlan()
        other.CopyFrom(plan)
        other.stages[0].first_node = "nowhere"
        with self.assertRaisesRegex(ValueError, "'nowhere' is not in the traced model"):
            te.training_stages(model, other)
        mixed = plan_at(model, layer_starts([2]), by_item=False)
        mixed.stage_by_item.extend(plan_at(model, layer_starts([3])).stage_by_item)
        with self.assertRaisesRegex(ValueError, "differ"):
            te.training_stages(model, mixed)
        with self.assertRaises(TypeError):
            te.training_stages(model, [0, 1])


class SplitSpec(unittest.TestCase):
    def test_round_trips(self):
        model = lm()
        names = [n.name for n in items_of(model)]
        cuts = [layer_starts(c) for c in LAYER_CUTS] + [
            ["_2_fc1"], ["gelu_1"], ["add_2"], ["_1_ln", "gelu_1", "_3_fc2", "add_4", "_7_out"],
            ["_2_fc1", "gelu_1"], ["_2_ln", "_2_fc1", "gelu_1", "add_1", "_3_fc1"],
            [n for n in names[1:] if not n.startswith("add")],  # every op but the adds a stage
        ]
        for first_nodes in cuts:
            with self.subTest(first_nodes=first_nodes):
                plan = plan_at(model, first_nodes)
                spec = te.split_spec(model, plan)
                self.assertEqual(len(spec), len(first_nodes))
                expected = stages_from_plan(model, assignment(model, plan))
                self.assertEqual(te.training_stages(model, plan), expected)
                self.assertEqual(te.stages_from_split_spec(model, spec), expected)
                outer = te.split_spec(model, plan, outermost=True)
                self.assertEqual(te.stages_from_split_spec(model, outer), expected)

    def test_names_and_points(self):
        model = lm()
        spec = te.split_spec(model, plan_at(model, ["_2_ln", "gelu_3", "add_4", "_7_norm"]))
        self.assertEqual(spec, {"2.ln": te.BEGINNING, "4.fc1": te.END, "5.fc2": te.END,
                                "7.norm": te.BEGINNING})
        spec = te.split_spec(model, plan_at(model, ["_2_ln", "gelu_3", "_7_norm"]), outermost=True)
        self.assertEqual(spec, {"2": te.BEGINNING, "4.fc1": te.END, "7": te.BEGINNING})
        try:
            from torch.distributed.pipelining import SplitPoint
        except ImportError:
            self.assertEqual(te.BEGINNING, "SplitPoint.BEGINNING")
            self.assertEqual(te.END, "SplitPoint.END")
        else:
            self.assertIs(te.BEGINNING, SplitPoint.BEGINNING)
            self.assertIs(te.END, SplitPoint.END)

    def test_one_module_one_point(self):
        # A stage of the leaf '2.fc1' alone: BEGINNING on 2.fc1 would leave
        # the next stage (from gelu_1, only 2.fc1 END) nothing; 2.ln END
        # cuts where 2.fc1 BEGINNING does.
        model = lm()
        plan = plan_at(model, ["_2_fc1", "gelu_1"])
        spec = te.split_spec(model, plan)
        self.assertEqual(spec, {"2.ln": te.END, "2.fc1": te.END})
        self.assertEqual(te.stages_from_split_spec(model, spec),
                         stages_from_plan(model, assignment(model, plan)))
        # 1.fc2 alone as a stage, then the residual add: before fc2 is gelu
        # (no module ends there) and after it only 1.fc2 ends.
        with self.assertRaisesRegex(ValueError, r"stage 2 starts at 'add' .*\(1.fc2 END\) are "
                                    "needed for other stages"):
            te.split_spec(model, plan_at(model, ["_1_fc2", "add"]))

    def test_shared_module(self):
        model = Shared()
        self.assertEqual([n.name for n in items_of(model)],
                         ["a", "act", "b", "act_1", "mul", "tanh", "c"])
        # act is called twice: it marks neither of its calls.
        cases = {("b",): {"b": te.BEGINNING}, ("act_1",): {"b": te.END},
                 ("act",): {"a": te.END}, ("mul",): None, ("tanh",): None,
                 ("c",): {"c": te.BEGINNING}}
        for first_nodes, want in cases.items():
            with self.subTest(first_nodes=first_nodes):
                plan = plan_at(model, list(first_nodes))
                if want is None:
                    with self.assertRaisesRegex(ValueError, f"stage 1 starts at '{first_nodes[0]}'"
                                                r".*cannot express.*pipe_split\(\)"):
                        te.split_spec(model, plan)
                    continue
                spec = te.split_spec(model, plan)
                self.assertEqual(spec, want)
                self.assertEqual(te.stages_from_split_spec(model, spec),
                                 stages_from_plan(model, assignment(model, plan)))

    def test_reader_errors(self):
        model = Shared()
        # BEGINNING on the shared act cuts twice: three stages.
        self.assertEqual(te.stages_from_split_spec(model, {"act": "SplitPoint.BEGINNING"}),
                         [["a"], ["act", "b"], ["act_1", "mul", "tanh", "c"]])
        # A cut right after another is dropped, as pipelining drops it.
        self.assertEqual(te.stages_from_split_spec(model, {"a": te.END, "act": te.BEGINNING}),
                         [["a"], ["act", "b"], ["act_1", "mul", "tanh", "c"]])
        with self.assertRaisesRegex(ValueError, "first stage would be empty"):
            te.stages_from_split_spec(model, {"a": te.BEGINNING})
        with self.assertRaisesRegex(ValueError, "last stage would be empty"):
            te.stages_from_split_spec(model, {"c": te.END})
        with self.assertRaisesRegex(ValueError, "not a submodule"):
            te.stages_from_split_spec(model, {"d": te.END})
        with self.assertRaisesRegex(ValueError, "unknown split point"):
            te.stages_from_split_spec(model, {"b": "MIDDLE"})


class DeepSpeedParts(unittest.TestCase):
    def test_round_trips(self):
        model = lm()
        for layers in LAYER_CUTS:
            with self.subTest(layers=layers):
                plan = plan_at(model, layer_starts(layers))
                parts = te.deepspeed_parts(model, plan)
                self.assertEqual(parts, [0] + layers + [8])
                self.assertEqual(te.stages_from_deepspeed_parts(model, parts),
                                 stages_from_plan(model, assignment(model, plan)))

    def test_cut_inside_a_layer(self):
        model = lm()
        for first_nodes, layer in ((["_2_fc1"], "layer 2 \\('2', Block\\)"),
                                   (["_3_ln", "add_4"], "layer 5 \\('5', Block\\)"),
                                   (["_7_out"], "layer 7 \\('7', Head\\)")):
            with self.subTest(first_nodes=first_nodes):
                with self.assertRaisesRegex(ValueError, "inside " + layer):
                    te.deepspeed_parts(model, plan_at(model, first_nodes))

    def test_not_a_sequence_and_bad_parts(self):
        with self.assertRaisesRegex(ValueError, "not a sequence of layers"):
            te.deepspeed_parts(Shared(), plan_at(Shared(), ["b"]))
        model = lm()
        for parts in ([0, 4], [1, 8], [0, 5, 3, 8], [0]):
            with self.subTest(parts=parts):
                with self.assertRaisesRegex(ValueError, "must rise from 0"):
                    te.stages_from_deepspeed_parts(model, parts)
        with self.assertRaisesRegex(ValueError, "stage 1 .* has no ops"):
            te.stages_from_deepspeed_parts(model, [0, 3, 3, 8])


class MegatronLayout(unittest.TestCase):
    def test_round_trips(self):
        model = lm()
        want = {(1,): "E|t*6L", (1, 4): "E|t*3|t*3L", (2, 5, 7): "Et|t*3|t*2|L", (3,): "Et*2|t*4L",
                (7,): "Et*6|L", (1, 2, 3, 4, 5, 6, 7): "E|t|t|t|t|t|t|L", (4, 6): "Et*3|t*2|tL"}
        for layers in LAYER_CUTS:
            with self.subTest(layers=layers):
                plan = plan_at(model, layer_starts(layers))
                layout = te.megatron_layout(model, plan)
                self.assertEqual(layout, want[tuple(layers)])
                self.assertEqual(te.parse_megatron_layout(layout, model),
                                 stages_from_plan(model, assignment(model, plan)))

    def test_grammar(self):
        # Megatron-LM's parse_str_to_list examples and forms.
        parse = te.parse_megatron_layout
        self.assertEqual(parse("Ettt|(tt|)*2,m|L"),
                         [list("Ettt"), ["t", "t"], ["t", "t"], ["m"], ["L"]])
        self.assertEqual(parse("E|t*3|t*3L"), [["E"], ["t"] * 3, ["t"] * 3 + ["L"]])
        self.assertEqual(parse("Et*3|(tt|)*2,L"),
                         [["E", "t", "t", "t"], ["t", "t"], ["t", "t"], ["L"]])
        self.assertEqual(parse("E||tL"), [["E"], [], ["t", "L"]])
        self.assertEqual(parse("E,t,L"), [["E", "t", "L"]])
        with self.assertRaisesRegex(ValueError, r"unknown layer characters \['x'\]"):
            parse("E|x|L")
        with self.assertRaisesRegex(ValueError, "not a multiple"):
            parse("E|t|tL", pipeline_model_parallel_size=2)
        self.assertEqual(len(parse("E|t|t|tL", pipeline_model_parallel_size=2)), 4)
        # Repeated groups read back to the model's stages.
        model = lm()
        self.assertEqual(parse("Et|(tt|)*2,tL", model),
                         te.stages_from_deepspeed_parts(model, [0, 2, 4, 6, 8]))

    def test_classifier(self):
        model = lm()
        plan = plan_at(model, layer_starts([4]))

        def with_mtp(name, module, index, count):
            return "m" if index == 6 else te.default_megatron_classifier(name, module, index, count)

        layout = te.megatron_layout(model, plan, with_mtp)
        self.assertEqual(layout, "Et*3|t*2mL")
        self.assertEqual(te.parse_megatron_layout(layout, model, with_mtp),
                         te.training_stages(model, plan))
        with self.assertRaisesRegex(ValueError, "has layers 'EtttttmL', but .* 'EttttttL'"):
            te.parse_megatron_layout(layout, model)  # the default classifier: no m
        with self.assertRaisesRegex(ValueError, "one L"):
            te.megatron_layout(model, plan, lambda n, m, i, c: "E" if i == 0 else "t")
        with self.assertRaisesRegex(ValueError, "one E"):
            te.megatron_layout(model, plan, lambda n, m, i, c: "L" if i == c - 1 else "t")
        with self.assertRaisesRegex(ValueError, "MTP"):
            te.megatron_layout(model, plan, lambda n, m, i, c: "EmtttttL"[i])
        with self.assertRaisesRegex(ValueError, "must give one of"):
            te.megatron_layout(model, plan, lambda n, m, i, c: "decoder")

    def test_cut_inside_a_layer(self):
        model = lm()
        with self.assertRaisesRegex(ValueError, "inside layer 3 \\('3', Block\\)"):
            te.megatron_layout(model, plan_at(model, ["gelu_2"]))


def _server_available() -> bool:
    return os.access(support.server_binary(), os.X_OK)


@unittest.skipUnless(_server_available(), "no partplan_server binary ($PARTPLAN_SERVER)")
class RealPlan(unittest.TestCase):
    def test_plan_training_answer(self):
        model = lm()
        tokens = torch.randint(0, VOCAB, (8, 12))
        graph = partplan.export(model, (tokens,), training=True)
        request = pb.PlanTrainingRequest(
            graph=graph, devices=partplan.device_inventory(["1GiB"] * 3),
            config=training_pb2.TrainingConfig(schedule=training_pb2.ONE_F_ONE_B,
                                               micro_batches=4))
        server = support.shared_server()
        with partplan.Client(server.target) as client:
            response = client.call("PlanTraining", request)
        self.assertEqual(len(response.plan.stages), 3)
        expected = te.training_stages(model, response)
        self.assertEqual(expected, stages_from_plan(model, assignment(model, response.plan)))
        self.assertEqual([s[0] for s in expected[1:]],
                         [s.first_node for s in response.plan.stages[1:]])
        spec = te.split_spec(model, response)
        self.assertEqual(te.stages_from_split_spec(model, spec), expected)
        try:
            parts = te.deepspeed_parts(model, response)
        except ValueError as e:  # a cut inside a block: both layer formats refuse it
            self.assertIn("inside layer", str(e))
            with self.assertRaisesRegex(ValueError, "inside layer"):
                te.megatron_layout(model, response)
        else:
            self.assertEqual(te.stages_from_deepspeed_parts(model, parts), expected)
            self.assertEqual(te.parse_megatron_layout(te.megatron_layout(model, response), model),
                             expected)

        # With the blocks as leaves every cut is between layers.
        leaves = (Block, Head)
        graph = partplan.export(model, (tokens,), training=True, leaf_modules=leaves)
        request.graph.CopyFrom(graph)
        with partplan.Client(server.target) as client:
            response = client.call("PlanTraining", request)
        expected = te.training_stages(model, response, leaf_modules=leaves)
        self.assertEqual(len(expected), 3)
        parts = te.deepspeed_parts(model, response, leaf_modules=leaves)
        self.assertEqual(te.stages_from_deepspeed_parts(model, parts, leaf_modules=leaves),
                         expected)
        layout = te.megatron_layout(model, response, leaf_modules=leaves)
        self.assertEqual(te.parse_megatron_layout(layout, model, leaf_modules=leaves), expected)
        self.assertEqual(layout.count("|"), 2)
        spec = te.split_spec(model, response, leaf_modules=leaves)
        self.assertEqual(set(spec.values()), {te.BEGINNING})
        self.assertEqual(sorted(spec), [str(p) for p in parts[1:-1]])
        self.assertEqual(te.stages_from_split_spec(model, spec, leaf_modules=leaves), expected)


if __name__ == "__main__":
    unittest.main()

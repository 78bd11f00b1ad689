"""partplan.export(training=True): Node.training's saved activation bytes
against an independent measurement of the whole forward, views counting
their whole storage, nodes that save nothing, the re-saved storages
(NodeTraining.resaved) pointing to their first saver, and the backward FLOP
rule."""

import math
import unittest

import support  # noqa: F401  (sets sys.path)

import torch
import torch.nn as nn
import torch.nn.functional as F

import partplan
from partplan import messages as pb
from partplan import training_costs


def _storage(t):
    """(key, nbytes) of the storage t keeps alive, written out here rather
    than taken from training_costs."""
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return (str(t.device), storage.data_ptr()), storage.nbytes()


def autograd_saved_bytes(model, inputs):
    """Bytes of the distinct non-parameter storages autograd saves in one
    forward of the whole model, under one saved_tensors_hooks context (no
    fx, no per-node bookkeeping)."""
    state = {_storage(t)[0] for t in list(model.parameters()) + list(model.buffers())}
    kept, saved = [], {}

    def pack(t):
        kept.append(t)  # no storage is freed, so no address is reused
        key, nbytes = _storage(t)
        if key not in state:
            saved[key] = nbytes
        return t

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(*inputs)
    del out, kept
    return sum(saved.values())


def saved_by_node(graph):
    return {n.name: n.training.saved_activation_bytes for n in graph.nodes}


def resaved_by_node(graph):
    """{node name: [(first saver, storage index, bytes), ...]} of the nodes
    with re-saved storages."""
    return {n.name: [(r.node, r.storage, r.bytes) for r in n.training.resaved]
            for n in graph.nodes if n.training.resaved}


class MLPWithDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(24, 48)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(48, 48)
        self.fc3 = nn.Linear(48, 10)

    def forward(self, x):
        h = self.drop(F.relu(self.fc1(x)))
        h = F.dropout(torch.relu(self.fc2(h)), 0.1, training=self.training) + h
        return self.fc3(h.view(h.shape[0], -1))


class SmallConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(16 * 4 * 4, 5)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.pool(F.relu(self.bn2(self.conv2(h))))
        return self.head(torch.flatten(h, 1))


class TinyEncoder(nn.Module):
    """A TransformerEncoderLayer (a leaf: one call_module node, whose
    attention and feed-forward save inside it) between an embedding and a
    head."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.pos = nn.Parameter(torch.randn(12, 1, 32))
        self.layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.1)
        self.head = nn.Linear(32, 7)

    def forward(self, ids):
        h = self.emb(ids) + self.pos
        h = self.layer(h)
        return self.head(h.mean(dim=0))


class TrainingExportTest(unittest.TestCase):
    def check_against_whole_forward(self, model, inputs):
        torch.manual_seed(0)
        model.train()
        graph = partplan.export(model, inputs, training=True)
        per_node = saved_by_node(graph)
        for n in graph.nodes:
            self.assertTrue(n.HasField("training"), n.name)
            self.assertGreaterEqual(n.training.saved_activation_bytes, 0, n.name)
        expected = autograd_saved_bytes(model, inputs)
        self.assertGreater(expected, 0)
        self.assertEqual(sum(per_node.values()), expected, per_node)
        return graph, per_node

    def test_mlp_with_relu_and_dropout(self):
        x = torch.randn(6, 24)
        graph, per_node = self.check_against_whole_forward(MLPWithDropout(), (x,))
        # fc1 saves its input x (6 x 24 floats); relu its output; nn.Dropout
        # on CPU its mask (6 x 48 floats); F.dropout inside the graph too.
        self.assertEqual(per_node["fc1"], 6 * 24 * 4)
        self.assertEqual(per_node["relu"], 6 * 48 * 4)
        self.assertEqual(per_node["drop"], 6 * 48 * 4)
        self.assertEqual(per_node["dropout"], 6 * 48 * 4)
        # In eval mode dropout is the identity and saves nothing.
        eval_graph = partplan.export(MLPWithDropout().eval(), (x,), training=True)
        self.assertEqual(saved_by_node(eval_graph)["drop"], 0)

    def test_mlp_input_that_requires_grad(self):
        self.check_against_whole_forward(MLPWithDropout(), (torch.randn(6, 24, requires_grad=True),))

    def test_conv_net_with_batchnorm(self):
        model = SmallConvBN()
        graph, per_node = self.check_against_whole_forward(model, (torch.randn(4, 3, 16, 16),))
        # BatchNorm in training mode saves its input and its per-channel mean
        # and inverse std; its weight and running statistics are not counted.
        self.assertEqual(per_node["bn1"], 4 * 8 * 16 * 16 * 4 + 2 * 8 * 4)
        self.assertEqual(per_node["conv1"], 4 * 3 * 16 * 16 * 4)

    def test_transformer_encoder_layer(self):
        model = TinyEncoder()
        ids = torch.randint(0, 50, (12, 3))
        graph, per_node = self.check_against_whole_forward(model, (ids,))
        # Everything the layer's attention and feed-forward save (float64
        # scaling scalar and dropout masks included) is the call_module's.
        self.assertGreater(per_node["layer"], 10 * 12 * 3 * 32 * 4)
        self.assertEqual(per_node["emb"], 12 * 3 * 8)  # the int64 ids
        self.assertEqual(per_node["add"], 0)

    def test_view_counts_its_whole_storage(self):
        class M(nn.Module):
            def forward(self, x):
                big = x + 1                 # saves nothing
                part = big[:1]              # a view: saves nothing
                s = torch.sin(part)         # saves the view: all of big
                c = torch.cos(big)          # saves big again: already counted
                return s.sum() + c.sum()

        x = torch.randn(64, 64, requires_grad=True)
        graph = partplan.export(M(), (x,), training=True)
        per_node = saved_by_node(graph)
        self.assertEqual(per_node["sin"], 64 * 64 * 4)
        self.assertEqual(per_node["cos"], 0)
        self.assertEqual(sum(per_node.values()), 64 * 64 * 4)
        self.assertEqual(sum(per_node.values()), autograd_saved_bytes(M(), (x,)))

    def test_nodes_that_save_nothing_get_zero(self):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(16, 4096))

            def forward(self, x):
                y = x.view(8, 16) + 2.0      # view, add: nothing saved
                z = y @ self.w               # saves y (and w, a parameter)
                return z.reshape(-1)[:10]

        graph = partplan.export(M(), (torch.randn(128),), training=True)
        per_node = saved_by_node(graph)
        self.assertEqual(per_node["matmul"], 8 * 16 * 4)  # not the 256 KiB weight
        for name in ("x", "view", "add", "w", "reshape", "getitem", "output"):
            self.assertEqual(per_node[name], 0, name)
        for n in graph.nodes:
            self.assertTrue(n.HasField("training"), n.name)

    def test_no_side_effects_and_options(self):
        model = SmallConvBN().train()
        x = torch.randn(2, 3, 16, 16)
        before = [b.clone() for b in model.buffers()]
        partplan.export(model, (x,), training=True)
        for b, a in zip(before, model.buffers()):
            self.assertTrue(torch.equal(a, b))
        # The measuring run draws dropout masks from a forked generator:
        # the generator ends where an export without training=True leaves it
        # (shape propagation's own dropout draws are not undone).
        mlp, x = MLPWithDropout().train(), torch.randn(6, 24)
        start = torch.get_rng_state()
        partplan.export(mlp, (x,))
        after_plain = torch.get_rng_state()
        torch.set_rng_state(start)
        partplan.export(mlp, (x,), training=True)
        self.assertTrue(torch.equal(torch.get_rng_state(), after_plain))
        # Without training=True there is no Node.training.
        plain = partplan.export(model, (torch.randn(2, 3, 16, 16),))
        self.assertFalse(any(n.HasField("training") for n in plain.nodes))
        # Nothing that requires grad: autograd saves nothing, which is an error.
        frozen = SmallConvBN().requires_grad_(False)
        with self.assertRaises(ValueError):
            partplan.export(frozen, (torch.randn(2, 3, 16, 16),), training=True)
        gm = partplan.trace(SmallConvBN())
        partplan.export(gm, (torch.randn(2, 3, 16, 16),))  # shapes, not training costs
        with self.assertRaises(ValueError):
            partplan.export(gm, training=True)


class ReluThenLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 24)
        self.fc2 = nn.Linear(24, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class TwoSaves(nn.Module):
    """A leaf whose forward saves two storages, in a known order: relu's
    output a (6 x 20 floats), then tanh's output b (6 floats)."""

    def forward(self, x):
        a = torch.relu(x)
        return torch.tanh(a.sum(dim=1)), a


class ResavedStorageTest(unittest.TestCase):
    """NodeTraining.resaved: a node saving a storage an earlier node saved
    first names that node and the storage's index among the storages it
    saved first; saved_activation_bytes still charges the first saver only
    and adds up to the whole forward's."""

    def check_whole_forward(self, model, inputs, graph):
        self.assertEqual(sum(saved_by_node(graph).values()), autograd_saved_bytes(model, inputs))

    def test_linear_after_relu(self):
        torch.manual_seed(0)
        model = ReluThenLinear()
        x = torch.randn(5, 16)
        graph = partplan.export(model, (x,), training=True)
        with torch.no_grad():
            r = torch.relu(model.fc1(x))
        r_bytes = _storage(r)[1]
        self.assertEqual(r_bytes, 5 * 24 * 4)
        per_node = saved_by_node(graph)
        # relu saves its output r first; fc2 saves the same r as its input.
        self.assertEqual(per_node["relu"], r_bytes)
        self.assertEqual(per_node["fc2"], 0)
        self.assertEqual(resaved_by_node(graph), {"fc2": [("relu", 0, r_bytes)]})
        self.check_whole_forward(model, (x,), graph)

    def test_an_input_view_counts_as_its_own_tensor(self):
        # A micro-batch sliced from the batch: measured as the micro-batch
        # of a real step is, its own storage, not the whole batch's.
        torch.manual_seed(0)
        model = ReluThenLinear()
        batch = torch.randn(20, 16)
        from_view = saved_by_node(partplan.export(model, (batch[:5],), training=True))
        from_copy = saved_by_node(partplan.export(model, (batch[:5].clone(),), training=True))
        self.assertEqual(from_view, from_copy)
        self.assertEqual(from_view["fc1"], 5 * 16 * 4)

    def test_storage_saved_by_three_nodes(self):
        class M(nn.Module):
            def forward(self, x):
                r = torch.relu(x)           # saves r first (its output)
                s = torch.sin(r)            # saves r (its input)
                m = r * r                   # saves r twice: one entry
                return s.sum() + m.sum()

        x = torch.randn(10, 12, requires_grad=True)
        graph = partplan.export(M(), (x,), training=True)
        r_bytes = 10 * 12 * 4
        per_node = saved_by_node(graph)
        self.assertEqual(per_node["relu"], r_bytes)
        self.assertEqual(per_node["sin"], 0)
        self.assertEqual(per_node["mul"], 0)
        self.assertEqual(resaved_by_node(graph), {"sin": [("relu", 0, r_bytes)],
                                                  "mul": [("relu", 0, r_bytes)]})
        self.check_whole_forward(M(), (x,), graph)

    def test_index_among_the_first_savers_storages(self):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.two = TwoSaves()

            def forward(self, x):
                out = self.two(x)
                b, a = out[0], out[1]
                return torch.sin(b).sum() + torch.cos(a[:3]).sum()

        x = torch.randn(6, 20, requires_grad=True)
        gm = partplan.trace(M(), leaf_modules=[TwoSaves])
        graph = partplan.export(gm, (x,), training=True)
        a_bytes, b_bytes = 6 * 20 * 4, 6 * 4
        per_node = saved_by_node(graph)
        self.assertEqual(per_node["two"], a_bytes + b_bytes)
        # sin saves b, the second storage `two` saved first (index 1); cos
        # saves a view of a, the first (index 0): its whole storage's bytes.
        self.assertEqual(resaved_by_node(graph), {"sin": [("two", 1, b_bytes)],
                                                  "cos": [("two", 0, a_bytes)]})
        self.assertEqual(per_node["sin"], 0)
        self.assertEqual(per_node["cos"], 0)
        self.check_whole_forward(M(), (x,), graph)

    def test_recorded_in_node_meta_and_checks_still_hold(self):
        # The models of TrainingExportTest: saved bytes still add up to the
        # whole forward's, and every re-saved entry points to an earlier
        # node whose first-saved storages include that index.
        cases = [(MLPWithDropout(), (torch.randn(6, 24),)),
                 (SmallConvBN(), (torch.randn(4, 3, 16, 16),)),
                 (TinyEncoder(), (torch.randint(0, 50, (12, 3)),)),
                 (ReluThenLinear(), (torch.randn(3, 16, requires_grad=True),))]
        for model, inputs in cases:
            with self.subTest(model=type(model).__name__):
                torch.manual_seed(0)
                model.train()
                graph = partplan.export(model, inputs, training=True)
                self.check_whole_forward(model, inputs, graph)
                order = [n.name for n in graph.nodes]
                per_node = saved_by_node(graph)
                for name, entries in resaved_by_node(graph).items():
                    self.assertEqual(len({(n, i) for n, i, _ in entries}), len(entries), name)
                    for first, index, nbytes in entries:
                        self.assertLess(order.index(first), order.index(name), name)
                        self.assertGreaterEqual(index, 0)
                        self.assertGreater(nbytes, 0)
                        self.assertLessEqual(nbytes, per_node[first], name)
        # measure_saved_activations leaves the entries in node.meta.
        gm = partplan.trace(ReluThenLinear())
        training_costs.measure_saved_activations(gm, (torch.randn(2, 16),))
        meta = {n.name: n.meta[training_costs.RESAVED_META_KEY] for n in gm.graph.nodes}
        self.assertEqual(meta["fc2"], [training_costs.ResavedStorage("relu", 0, 2 * 24 * 4)])
        self.assertEqual(meta["relu"], [])
        self.assertEqual(meta["fc1"], [])


class BackwardFlopsTest(unittest.TestCase):
    def training_of(self, model, inputs):
        graph = partplan.export(model, inputs, training=True)
        return {n.name: (n.flops, n.training.backward_input_flops, n.training.backward_weight_flops)
                for n in graph.nodes}

    def test_linear(self):
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        got = self.training_of(model, (torch.randn(4, 16),))
        forward = 2 * 4 * 32 * 16 + 4 * 32
        self.assertEqual(got["_0"], (forward, forward, forward))
        self.assertEqual(got["_1"], (4 * 32, 4 * 32, 0))  # no weights
        model[0].weight.requires_grad_(False)                # frozen: no weight gradient
        self.assertEqual(self.training_of(model, (torch.randn(4, 16),))["_0"],
                         (forward, forward, 0))

    def test_functional_matmuls(self):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(8, 16))

            def forward(self, q, k):
                h = F.linear(q, self.w)                     # activation x weight
                return h @ k.transpose(-2, -1)              # activation x activation

        q, k = torch.randn(2, 5, 16, requires_grad=True), torch.randn(2, 6, 8)
        got = self.training_of(M(), (q, k))
        linear = 2 * 2 * 5 * 8 * 16
        self.assertEqual(got["linear"], (linear, linear, linear))
        scores = 2 * 2 * 5 * 6 * 8
        self.assertEqual(got["matmul"], (scores, 2 * scores, 0))
        self.assertEqual(got["transpose"], (0, 0, 0))  # no forward FLOPs known

    def test_multihead_attention(self):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(16, 2)

            def forward(self, x):
                return self.attn(x, x, x)[0]

        got = self.training_of(M(), (torch.randn(5, 3, 16),))
        forward, backward_input, backward_weight = got["attn"]
        projections = 4 * 2.0 * 15 * 16 * 16
        attention = 2 * 2.0 * 3 * 5 * 5 * 16
        self.assertEqual(backward_weight, projections)
        self.assertEqual(backward_input, forward + attention)

    def test_rule_is_documented(self):
        doc = training_costs.__doc__
        self.assertIn("matmul-like", doc)
        self.assertIn("input F, weight F", doc)
        self.assertIn("training=True", partplan.exporter.__doc__)


if __name__ == "__main__":
    unittest.main()

"""partplan.export: sizes against torch.fx's get_size_of_all_nodes, metadata,
argument encoding, FLOPs, the module hierarchy, and the aten export."""

import copy
import json
import operator
import os
import tempfile
import unittest

import support  # noqa: F401  (sets sys.path)

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from google.protobuf import json_format
from torch.fx.passes.graph_manipulation import get_size_of_all_nodes, get_size_of_node
from torch.fx.passes.shape_prop import ShapeProp

import partplan
from partplan import exporter
from partplan import messages as pb


def torch_sizes(model, inputs, leaf_modules=()):
    """({node: (total, output)}, {node: error}) from torch.fx's own
    get_size_of_all_nodes, or, when that fails on a node it cannot size (a
    tuple or non-tensor output), from its get_size_of_node node by node."""
    gm = partplan.trace(model, leaf_modules=leaf_modules)
    ShapeProp(gm).propagate(*inputs)
    try:
        get_size_of_all_nodes(gm, None)
    except (AttributeError, RuntimeError):
        pass
    else:
        return {n.name: (n.size_bytes.total_size, n.size_bytes.output_size)
                for n in gm.graph.nodes if n.op != "output"}, {}
    sizes, unsizable = {}, {}
    for n in gm.graph.nodes:
        if n.op == "output":
            break
        try:
            s = get_size_of_node(gm, n)
        except (AttributeError, RuntimeError) as e:
            unsizable[n.name] = n.meta.get("tensor_meta")
            continue
        sizes[n.name] = (s.total_size, s.output_size)
    return sizes, unsizable


def exported_sizes(graph):
    return {n.name: (n.size_bytes.total_bytes, n.size_bytes.output_bytes)
            for n in graph.nodes if n.op != pb.OUTPUT}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)) + 1.0)


class EmbeddingModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.bag = nn.EmbeddingBag(50, 16, mode="sum")
        self.norm = nn.LayerNorm(16)
        self.proj = nn.Linear(16, 4)

    def forward(self, ids, bag_ids, offsets):
        h = self.emb(ids).mean(dim=1) + self.bag(bag_ids, offsets)
        return self.proj(self.norm(h))


class MixedDtypes(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8).double()
        self.register_buffer("scale", torch.ones(8, dtype=torch.float16))

    def forward(self, x):
        y = self.fc(x.double())
        return y.half() * self.scale, (y > 0).sum()


class SharedWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = self.a  # the same module twice

    def forward(self, x):
        return self.b(self.a(x))


class SizesTest(unittest.TestCase):
    """size_bytes equal torch.fx's get_size_of_all_nodes, node for node."""

    CASES = [
        ("resnet18", lambda: torchvision.models.resnet18(), lambda: [torch.randn(1, 3, 64, 64)]),
        ("mobilenet_v2", lambda: torchvision.models.mobilenet_v2(), lambda: [torch.randn(1, 3, 64, 64)]),
        ("transformer", lambda: support.transformer_model(), lambda: [torch.randint(0, 50, (2, 8))]),
        ("mlp", MLP, lambda: [torch.randn(4, 16)]),
        ("embedding", EmbeddingModel,
         lambda: [torch.randint(0, 100, (4, 3)), torch.randint(0, 50, (8,)), torch.tensor([0, 2, 4, 6])]),
        ("shared_weights", SharedWeights, lambda: [torch.randn(2, 8)]),
        ("squeezenet", lambda: torchvision.models.squeezenet1_1(), lambda: [torch.randn(1, 3, 64, 64)]),
    ]

    def test_sizes_equal_torch_fx(self):
        for name, make, inputs in self.CASES:
            with self.subTest(model=name):
                torch.manual_seed(0)
                model = make().eval()
                x = inputs()
                expected, unsizable = torch_sizes(model, x)
                graph = partplan.export(model, x)
                exported = exported_sizes(graph)
                self.assertEqual({k: v for k, v in exported.items() if k not in unsizable}, expected)
                self.assertGreaterEqual(len(expected), 3)
                # Where torch.fx gives up: tuples add up, non-tensors are 0.
                for name, meta in unsizable.items():
                    if meta is None:
                        self.assertEqual(exported[name], (0, 0), name)
                    else:
                        self.assertIsInstance(meta, tuple, name)
                        self.assertGreater(exported[name][1], 0, name)
        self.assertEqual(len(self.CASES), 7)

    def test_dtypes(self):
        # float64 module output, float16 buffer read, a bool comparison and an
        # int64 sum: torch.fx sizes each at its own element size.
        model = MixedDtypes()
        x = [torch.randn(2, 8)]
        graph = partplan.export(model, x)
        sizes = exported_sizes(graph)
        nodes = {n.name: n for n in graph.nodes}
        # torch.fx cannot size the tuple output node, but every other node.
        self.assertEqual(sizes["fc"], ((64 + 8 + 16) * 8, 16 * 8))
        self.assertEqual(nodes["fc"].outputs[0].dtype, "torch.float64")
        self.assertEqual(nodes["scale"].outputs[0].dtype, "torch.float16")
        self.assertEqual(sizes["scale"], (16, 16))
        self.assertEqual(nodes["gt"].outputs[0].dtype, "torch.bool")
        self.assertEqual(sizes["gt"], (16, 16))
        self.assertEqual(nodes["sum_1"].outputs[0].dtype, "torch.int64")
        self.assertEqual(list(nodes["sum_1"].outputs[0].shape), [])
        self.assertEqual(sizes["sum_1"], (8, 8))

    def test_tuple_outputs_add_up(self):
        # torch.max(x, dim) gives (values float32, indices int64); torch.fx's
        # get_size_of_node cannot size it, partplan adds the elements up.
        class M(nn.Module):
            def forward(self, x):
                m = torch.max(x, 1)
                return m[0] + 1, m[1]

        graph = partplan.export(M(), [torch.randn(3, 5)])
        node = {n.name: n for n in graph.nodes}["max_1"]
        self.assertEqual([(list(o.shape), o.dtype) for o in node.outputs],
                         [([3], "torch.float32"), ([3], "torch.int64")])
        self.assertEqual((node.size_bytes.total_bytes, node.size_bytes.output_bytes), (36, 36))
        out = graph.nodes[-1]
        self.assertEqual(out.op, pb.OUTPUT)
        self.assertEqual(json_format.MessageToDict(out)["args"],
                         [{"tuple": 2}, {"node": "add"}, {"node": "getitem_1"}])

    def test_leaf_module_with_tuple_output(self):
        # nn.MultiheadAttention is a leaf returning (output, None).
        model = support.transformer_model(layers=1).eval()
        graph = partplan.export(model, [torch.randint(0, 50, (2, 8))])
        attn = {n.name: n for n in graph.nodes}["blocks_0_attn"]
        self.assertEqual(attn.module_type, "torch.nn.MultiheadAttention")
        self.assertEqual([list(o.shape) for o in attn.outputs], [[2, 8, 32]])
        params = sum(p.numel() for p in model.blocks[0].attn.parameters())
        self.assertEqual(attn.parameter_count, params)
        self.assertEqual(attn.size_bytes.total_bytes, (params + 2 * 8 * 32) * 4)
        self.assertGreater(attn.flops, 0)

    def test_tuple_unpacking_of_proxies(self):
        # `n, c, h, w = x.size()` (torchvision's shufflenet, ViT) does not
        # trace with torch.fx 1.13 on Python 3.11; partplan.trace fixes it.
        class ChannelShuffle(nn.Module):
            def forward(self, x):
                n, c, h, w = x.size()
                x = x.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous()
                return x.view(n, c, h, w)

        x = [torch.randn(2, 4, 3, 3)]
        graph = partplan.export(ChannelShuffle(), x)
        self.assertEqual([n.target for n in graph.nodes if n.target == "operator.getitem"],
                         ["operator.getitem"] * 4)
        model = torchvision.models.shufflenet_v2_x0_5().eval()
        x = [torch.randn(1, 3, 64, 64)]
        expected, unsizable = torch_sizes(model, x)
        exported = exported_sizes(partplan.export(model, x))
        self.assertEqual({k: v for k, v in exported.items() if k not in unsizable}, expected)
        self.assertTrue(all(exported[k] == (0, 0) for k, meta in unsizable.items() if meta is None))
        self.assertIn("size", unsizable)  # x.size(): no tensor

    def test_non_tensor_nodes_need_nothing(self):
        class M(nn.Module):
            def forward(self, x):
                return x.view(x.size(0), -1)

        graph = partplan.export(M(), [torch.randn(2, 3, 4)])
        size = {n.name: n for n in graph.nodes}["size"]
        self.assertEqual(len(size.outputs), 0)
        self.assertTrue(size.HasField("size_bytes"))
        self.assertEqual(size.size_bytes.total_bytes, 0)


class MetadataTest(unittest.TestCase):
    def test_resnet18_nodes(self):
        model = torchvision.models.resnet18().eval()
        graph = partplan.export(model, torch.randn(1, 3, 64, 64))
        self.assertEqual(graph.name, "ResNet")
        nodes = {n.name: n for n in graph.nodes}
        x = graph.nodes[0]
        self.assertEqual((x.name, x.op, x.target), ("x", pb.PLACEHOLDER, "x"))
        self.assertEqual(list(x.outputs[0].shape), [1, 3, 64, 64])
        conv1 = nodes["conv1"]
        self.assertEqual(conv1.op, pb.CALL_MODULE)
        self.assertEqual(conv1.module_type, "torch.nn.Conv2d")
        self.assertEqual(conv1.parameter_count, 64 * 3 * 7 * 7)
        self.assertEqual(conv1.parameter_bytes, 64 * 3 * 7 * 7 * 4)
        self.assertEqual(list(conv1.outputs[0].shape), [1, 64, 32, 32])
        add = nodes["add"]
        self.assertEqual((add.op, add.target), (pb.CALL_FUNCTION, "operator.add"))
        flatten = nodes["flatten"]
        self.assertEqual(flatten.target, "torch.flatten")
        self.assertEqual(json_format.MessageToDict(flatten)["args"], [{"node": "avgpool"}, {"int": "1"}])
        self.assertEqual(graph.nodes[-1].op, pb.OUTPUT)
        self.assertEqual(sum(1 for n in graph.nodes if n.op == pb.OUTPUT), 1)

    def test_module_hierarchy(self):
        model = torchvision.models.resnet18()
        graph = partplan.export(model, torch.randn(1, 3, 64, 64))
        modules = {m.qualified_name: m for m in graph.modules}
        self.assertEqual(len(graph.modules), len(list(model.named_modules())))
        self.assertEqual(graph.modules[0].qualified_name, "")
        self.assertEqual(graph.modules[0].module_type, "torchvision.models.resnet.ResNet")
        self.assertEqual(graph.modules[0].parameter_count, sum(p.numel() for p in model.parameters()))
        self.assertEqual(modules["layer1.0"].module_type, "torchvision.models.resnet.BasicBlock")
        self.assertEqual(modules["layer1.0"].parameter_count,
                         sum(p.numel() for p in model.layer1[0].parameters()))
        self.assertEqual(modules["layer1.0.bn1"].parameter_bytes, 2 * 64 * 4)
        # Parents before children.
        seen = set()
        for m in graph.modules:
            parent = m.qualified_name.rpartition(".")[0]
            if m.qualified_name:
                self.assertIn(parent, seen, m.qualified_name)
            seen.add(m.qualified_name)

    def test_hierarchy_of_traced_graph_module(self):
        # A GraphModule replaces containers by plain modules; a GraphModule
        # from partplan.trace still reports the model's own classes.
        model = torchvision.models.resnet18()
        gm = partplan.trace(model)
        graph = partplan.export(gm, torch.randn(1, 3, 64, 64))
        modules = {m.qualified_name: m for m in graph.modules}
        self.assertEqual(modules["layer1.0"].module_type, "torchvision.models.resnet.BasicBlock")
        plain = partplan.export(torch.fx.symbolic_trace(model), torch.randn(1, 3, 64, 64), name="g")
        self.assertEqual(plain.name, "g")
        self.assertEqual({m.qualified_name: m.module_type for m in plain.modules}["layer1.0"],
                         "torch.nn.Module")

    def test_get_attr_parameters(self):
        model = support.transformer_model(layers=1)
        graph = partplan.export(model, [torch.randint(0, 50, (2, 8))])
        pos = {n.name: n for n in graph.nodes}["pos"]
        self.assertEqual(pos.op, pb.GET_ATTR)
        self.assertEqual(pos.parameter_count, 16 * 32)
        self.assertEqual(pos.parameter_bytes, 16 * 32 * 4)

    def test_no_side_effects(self):
        # Shape propagation in training mode would update BatchNorm's running
        # statistics; export restores them.
        model = torchvision.models.resnet18().train()
        before = copy.deepcopy(model.state_dict())
        partplan.export(model, torch.randn(2, 3, 32, 32))
        self.assertTrue(model.training)
        after = model.state_dict()
        for key, value in before.items():
            self.assertTrue(torch.equal(value, after[key]), key)

    def test_leaf_modules(self):
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return torch.relu(self.fc(x))

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = Block()
                self.b = Block()

            def forward(self, x):
                return self.b(self.a(x))

        x = [torch.randn(2, 4)]
        traced = [n.target for n in partplan.export(Net(), x).nodes]
        self.assertEqual(traced, ["x", "a.fc", "torch.relu", "b.fc", "torch.relu", "output"])
        by_class = partplan.export(Net(), x, leaf_modules=[Block])
        self.assertEqual([n.target for n in by_class.nodes], ["x", "a", "b", "output"])
        self.assertTrue(by_class.nodes[1].module_type.endswith(".Block"))
        self.assertEqual(by_class.nodes[1].parameter_count, 20)
        by_name = partplan.export(Net(), x, leaf_modules=["b"])
        self.assertEqual([n.target for n in by_name.nodes], ["x", "a.fc", "torch.relu", "b", "output"])

    def test_needs_inputs(self):
        with self.assertRaisesRegex(ValueError, "example_inputs"):
            partplan.export(MLP())

    def test_graph_module_with_shapes_needs_no_inputs(self):
        gm = partplan.trace(MLP())
        ShapeProp(gm).propagate(torch.randn(4, 16))
        graph = partplan.export(gm)
        self.assertEqual(list(graph.nodes[-2].outputs[0].shape), [4, 8])


class ArgumentsTest(unittest.TestCase):
    def encoded(self, graph, name):
        node = {n.name: n for n in graph.nodes}[name]
        d = json_format.MessageToDict(node)
        return d.get("args", []), {k["name"]: k["value"] for k in d.get("kwargs", [])}

    def test_flat_encoding(self):
        class M(nn.Module):
            def forward(self, x, y):
                a = torch.cat((x, y), dim=0)
                b = torch.stack([x, y, x])
                c = F.pad(x, [1, 2], value=0.5)
                d = x[:, 1:3, ...]
                e = x.to(torch.float64)
                f = torch.sum(a, dim=0, keepdim=True)
                g = x.new_zeros((2, 3), requires_grad=None)
                return a, b, c, d, e, f, g

        graph = partplan.export(M(), [torch.randn(2, 4), torch.randn(2, 4)])
        args, kwargs = self.encoded(graph, "cat")
        self.assertEqual(args, [{"tuple": 2}, {"node": "x"}, {"node": "y"}])
        self.assertEqual(kwargs, {"dim": [{"int": "0"}]})
        args, _ = self.encoded(graph, "stack")
        self.assertEqual(args, [{"list": 3}, {"node": "x"}, {"node": "y"}, {"node": "x"}])
        args, kwargs = self.encoded(graph, "pad")
        self.assertEqual(args, [{"node": "x"}, {"list": 2}, {"int": "1"}, {"int": "2"}])
        self.assertEqual(kwargs, {"value": [{"float": 0.5}]})
        args, _ = self.encoded(graph, "getitem")
        self.assertEqual(args, [{"node": "x"}, {"tuple": 3}, {"repr": "slice(None, None, None)"},
                                {"repr": "slice(1, 3, None)"}, {"repr": "Ellipsis"}])
        args, _ = self.encoded(graph, "to")
        self.assertEqual(args, [{"node": "x"}, {"repr": "torch.float64"}])
        _, kwargs = self.encoded(graph, "sum_1")
        self.assertEqual(kwargs, {"dim": [{"int": "0"}], "keepdim": [{"bool": True}]})
        args, kwargs = self.encoded(graph, "new_zeros")
        self.assertEqual(args, [{"node": "x"}, {"tuple": 2}, {"int": "2"}, {"int": "3"}])
        self.assertEqual(kwargs, {"requires_grad": [{"none": True}]})
        self.assertEqual({n.name: n for n in graph.nodes}["to"].op, pb.CALL_METHOD)

    def test_nested_as_documented(self):
        # graph.proto's example: (x, [y, 2]).
        out = []
        g = torch.fx.Graph()
        x, y = g.placeholder("x"), g.placeholder("y")
        exporter.flat_values((x, [y, 2]), out)
        self.assertEqual(out, [{"tuple": 2}, {"node": "x"}, {"list": 2}, {"node": "y"}, {"int": "2"}])

    def test_slice_with_a_node_keeps_the_dependency(self):
        class M(nn.Module):
            def forward(self, x):
                return x[:, : x.shape[1] - 1]

        graph = partplan.export(M(), [torch.randn(2, 5)])
        getitems = [n for n in graph.nodes if n.target == "operator.getitem"]
        args = json_format.MessageToDict(getitems[-1])["args"]
        self.assertIn({"node": "sub"}, args)
        self.assertEqual(list(getitems[-1].outputs[0].shape), [2, 4])

    def test_special_floats(self):
        out = []
        exporter.flat_values([float("inf"), float("-inf"), float("nan")], out)
        self.assertEqual(out, [{"list": 3}, {"float": "Infinity"}, {"float": "-Infinity"}, {"float": "NaN"}])
        graph = json_format.ParseDict({"nodes": [{"name": "c", "op": "CALL_FUNCTION", "args": out}]},
                                      pb.Graph())
        self.assertEqual(graph.nodes[0].args[1].float, float("inf"))


class FlopsTest(unittest.TestCase):
    def flops(self, model, inputs, **kwargs):
        graph = partplan.export(model, inputs, **kwargs)
        return {n.name: n.flops for n in graph.nodes}

    def test_linear_and_elementwise(self):
        f = self.flops(MLP(), [torch.randn(4, 16)])
        self.assertEqual(f["fc1"], 2 * 4 * 32 * 16 + 4 * 32)
        self.assertEqual(f["relu"], 4 * 32)
        self.assertEqual(f["add"], 4 * 32)
        self.assertEqual(f["fc2"], 2 * 4 * 8 * 32 + 4 * 8)
        self.assertEqual(f["x"], 0)

    def test_conv(self):
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, groups=2, bias=False))
        f = self.flops(model, [torch.randn(1, 3, 10, 10)])
        self.assertEqual(f["_0"], 2 * (8 * 10 * 10) * 3 * 9 + 8 * 10 * 10)
        self.assertEqual(f["_1"], 2 * (8 * 8 * 8) * 4 * 9)

    def test_functional_and_matmuls(self):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(6, 5))
                self.b = nn.Parameter(torch.randn(6))
                self.k = nn.Parameter(torch.randn(4, 3, 3, 3))

            def forward(self, x, a, b, img):
                y = F.linear(x, self.w, self.b)
                m = torch.matmul(a, b)
                bm = torch.bmm(a, b)
                at = a @ b
                mm = torch.mm(x, self.w.t())
                am = torch.addmm(self.b, x, self.w.t())
                c = F.conv2d(img, self.k, stride=2)
                return y, m, bm, at, mm, am, c

        x, a, b = torch.randn(2, 5), torch.randn(7, 3, 4), torch.randn(7, 4, 9)
        img = torch.randn(1, 3, 9, 9)
        f = self.flops(M(), [x, a, b, img])
        self.assertEqual(f["linear"], 2 * 2 * 6 * 5 + 2 * 6)
        self.assertEqual(f["matmul"], 2 * (7 * 3 * 9) * 4)
        self.assertEqual(f["bmm"], 2 * (7 * 3 * 9) * 4)
        self.assertEqual(f["matmul_1"], 2 * (7 * 3 * 9) * 4)
        self.assertEqual(f["mm"], 2 * (2 * 6) * 5)
        self.assertEqual(f["addmm"], 2 * (2 * 6) * 5 + 2 * 2 * 6)
        self.assertEqual(f["conv2d"], 2 * (4 * 4 * 4) * 27)

    def test_resnet_total(self):
        # torchvision's resnet18 at 224x224 is 1.82 GMACs (3.6 GFLOPs);
        # convolutions and the classifier dominate.
        graph = partplan.export(torchvision.models.resnet18().eval(), torch.randn(1, 3, 224, 224))
        total = sum(n.flops for n in graph.nodes)
        self.assertGreater(total, 3.6e9)
        self.assertLess(total, 3.7e9)

    def test_no_flops(self):
        graph = partplan.export(MLP(), [torch.randn(4, 16)], flops=False, modules=False)
        self.assertTrue(all(n.flops == 0 for n in graph.nodes))
        self.assertEqual(len(graph.modules), 0)


class SerialisationTest(unittest.TestCase):
    def test_json_and_binary_round_trip(self):
        graph = partplan.export(support.transformer_model(layers=1), [torch.randint(0, 50, (2, 8))])
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("g.json", "g.pb"):
                path = os.path.join(tmp, name)
                partplan.save_message(graph, path)
                self.assertEqual(partplan.load_graph(path), graph)
            with open(os.path.join(tmp, "g.json")) as f:
                doc = json.load(f)
            self.assertIn("sizeBytes", doc["nodes"][1])
            self.assertIsInstance(doc["nodes"][1]["sizeBytes"]["totalBytes"], str)
            # A request file holding a graph reads as its graph.
            with open(os.path.join(tmp, "req.json"), "w") as f:
                json.dump({"graph": doc, "devices": {}}, f)
            self.assertEqual(partplan.load_graph(os.path.join(tmp, "req.json")), graph)


class AtenExportTest(unittest.TestCase):
    def test_forward(self):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        x = torch.randn(3, 4)
        result = partplan.export_aten(model, x)
        graph = result.graph
        placeholders = [n for n in graph.nodes if n.op == pb.PLACEHOLDER]
        self.assertEqual(len(placeholders), 5)
        self.assertEqual([result.roles[p.name] for p in placeholders], ["PARAMETER"] * 4 + ["ACTIVATION"])
        self.assertEqual(sorted(result.parameter_names.values()), ["0.bias", "0.weight", "2.bias", "2.weight"])
        targets = [n.target for n in graph.nodes if n.op == pb.CALL_FUNCTION]
        self.assertTrue(all(t.startswith("aten.") for t in targets), targets)
        self.assertIn("aten.addmm.default", targets)
        self.assertTrue(all(n.outputs for n in graph.nodes if n.op != pb.OUTPUT))
        addmm = next(n for n in graph.nodes if n.target == "aten.addmm.default")
        self.assertEqual(addmm.flops, 2 * 3 * 8 * 4 + 2 * 3 * 8)
        # The traced function computes what the model does.
        params = [p for p in model.parameters()]
        out = result.graph_module(*params, x)
        torch.testing.assert_close(out, model(x))

    def test_with_backward(self):
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        result = partplan.export_aten(model, torch.randn(5, 4), with_backward=True)
        targets = [n.target for n in result.graph.nodes]
        self.assertIn("aten.tanh_backward.default", targets)
        output = result.graph.nodes[-1]
        # (output, 4 gradients)
        self.assertEqual(json_format.MessageToDict(output)["args"][0], {"tuple": 5})

    def test_tuple_valued_nodes_list_every_element(self):
        # graph.proto: one TensorMeta per element of a tuple output.
        # native_batch_norm and max_pool2d_with_indices return tuples; make_fx
        # records no metadata for them. Checked against the values the
        # traced graph computes, node by node.
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                              nn.MaxPool2d(2, return_indices=True))
        x = torch.randn(2, 3, 8, 8)
        for train, backward in ((True, False), (False, False), (True, True)):
            with self.subTest(train=train, with_backward=backward):
                model.train(train)
                result = partplan.export_aten(
                    model, x, with_backward=backward, loss_fn=lambda out: out[0].sum())
                values = {}

                class Record(torch.fx.Interpreter):
                    def run_node(self, n):
                        values[n.name] = super().run_node(n)
                        return values[n.name]

                flat = [p.detach() for p in model.parameters()]
                flat += [b.detach().clone() for b in model.buffers()] + [x]
                Record(result.graph_module).run(*flat)
                tuples = [n for n in result.graph.nodes
                          if n.op == pb.CALL_FUNCTION and isinstance(values[n.name], tuple)]
                self.assertIn("aten.native_batch_norm.default", {n.target for n in tuples})
                self.assertIn("aten.max_pool2d_with_indices.default", {n.target for n in tuples})
                for node in result.graph.nodes:
                    if node.op == pb.OUTPUT:
                        continue
                    value = values[node.name]
                    tensors = []
                    torch.fx.node.map_aggregate(
                        value, lambda v: tensors.append(v) if isinstance(v, torch.Tensor) else None)
                    self.assertEqual(
                        [(list(o.shape), o.dtype) for o in node.outputs],
                        [(list(t.shape), str(t.dtype)) for t in tensors], node.name)
                    self.assertEqual(node.size_bytes.output_bytes,
                                     sum(t.numel() * t.element_size() for t in tensors), node.name)


if __name__ == "__main__":
    unittest.main()


class MessageFromDictTest(unittest.TestCase):
    """graph_io.message_from_dict, which export uses in place of
    json_format.ParseDict, builds the same message from the exporter's dicts."""

    def test_same_message_as_parse_dict(self):
        class Mixed(nn.Module):
            def forward(self, x):
                y = torch.clamp(x, min=float("nan"), max=float("inf"))
                z = torch.cat((y, x), dim=-1)
                return F.pad(z, [1, 1], value=-2.5).sum(dim=0, keepdim=False), None

        for model, inputs in ((Mixed(), (torch.randn(2, 3),)),
                              (torchvision.models.resnet18().eval(), (torch.randn(1, 3, 32, 32),))):
            with self.subTest(model=type(model).__name__):
                gm = partplan.trace(model)
                exporter.propagate_shapes(gm, inputs)
                doc = exporter.graph_to_dict(gm, name="m")
                expected = json_format.ParseDict(doc, pb.Graph())
                built = partplan.graph_io.message_from_dict(doc, pb.Graph())
                # As bytes: a NaN argument is unequal to itself in a comparison.
                self.assertEqual(built.SerializeToString(deterministic=True),
                                 expected.SerializeToString(deterministic=True))
        # Presence of an empty message is kept, as ParseDict keeps it.
        node = partplan.graph_io.message_from_dict({"name": "n", "sizeBytes": {}}, pb.Node())
        self.assertTrue(node.HasField("size_bytes"))
        with self.assertRaisesRegex(ValueError, "no field 'sizeByte'"):
            partplan.graph_io.message_from_dict({"sizeByte": {}}, pb.Node())

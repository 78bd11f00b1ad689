"""Parallelize from Python, against the real server: partplan.transformer,
partplan.cluster, partplan.parallelize, format_configurations and
`python3 -m partplan parallelize`.

The cost-model checks recompute, by hand and from proto/partplan/v1/
parallelize.proto's formulas only, the model-state bytes of a
configuration's fullest device and its model FLOPs utilisation, and compare
them with the server's to 1e-6 relative; and, for pipeline_parallel = 1
(one stage, a closed-form step), every configuration's step seconds and
breakdown to 1e-9 relative.
"""

import contextlib
import io
import json
import math
import os
import tempfile
import unittest

import support

import grpc

import partplan
from partplan import cli
from partplan import messages as pb
from partplan.parallelize import options as parallelize_options

EXAMPLE = os.path.join(support.REPO, "client", "examples", "parallelize.json")

# docs/parallelize.md, "Megatron-LM's published runs": DGX A100 hosts.
NVSWITCH = 300e9
INFINIBAND = 25e9
A100_PEAK = 312e12

# ParallelizeOptions' documented defaults: bytes per parameter of the
# weights, gradients and optimizer state (mixed-precision Adam).
WEIGHT_BYTES, GRADIENT_BYTES, OPTIMIZER_BYTES = 2.0, 2.0, 12.0

RELATIVE = 1e-6


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


def example_request() -> pb.ParallelizeRequest:
    return partplan.load_message(EXAMPLE, pb.ParallelizeRequest)


def training_graph() -> pb.Graph:
    path = os.path.join(os.path.dirname(EXAMPLE), "plan_training.json")
    return partplan.load_message(path, pb.PlanTrainingRequest).graph


# ---------------------------------------------------------------------------
# The documented formulas, written out again here (not read from the server).
# ---------------------------------------------------------------------------


def layer_parameters(h: int, f: int, experts: int) -> tuple:
    """(divided by t, not divided) parameters of one transformer layer:
    4h^2 + 4h (attention) + (2hf + f + h) x E (the MLPs) + hE (a router,
    when E > 1) and the two norms' 4h, which tensor parallelism does not
    divide. For f = 4h, E = 1: 12h^2 + 13h in all."""
    e = max(experts, 1)
    divided = 4 * h * h + 4 * h + (2 * h * f + f + h) * e + (h * e if e > 1 else 0)
    return divided, 4 * h


def device_parameters(model: pb.TransformerSummary, config: pb.ParallelConfig, device: str) -> float:
    """Parameters the device holds: those of every stage whose
    tensor-parallel groups list it. The embedding is Vh (divided by t) + sh
    (the position embedding, not divided); the head shares the embedding's
    weights, and a last stage that is not also the first holds that copy;
    the final norm 2h goes with the head."""
    h, V, s = model.hidden_size, model.vocabulary_size, model.sequence_length
    f = model.ffn_hidden_size or 4 * h
    t = config.tensor_parallel
    divided, norms = layer_parameters(h, f, model.experts)
    total = 0.0
    for stage in config.stages:
        if not any(device in group.split(",") for group in stage.tensor_parallel_groups):
            continue
        layers = stage.last_layer - stage.first_layer + 1
        total += layers * (divided / t + norms)
        if stage.embedding:
            total += V * h / t + s * h
        if stage.head:
            total += 2 * h
            if not stage.embedding:
                total += V * h / t
    return total


def model_states(model, config) -> tuple:
    """(weights, gradients, optimizer) bytes of the fullest device, the
    ZeRO stage dividing them by d: ZeRO-1 the optimizer state, ZeRO-2 the
    gradients too, ZeRO-3 the weights too."""
    parameters = device_parameters(model, config, config.fullest_device)
    d = config.data_parallel
    zero = config.zero
    return (parameters * WEIGHT_BYTES / (d if zero >= pb.ZERO_PARAMETERS else 1),
            parameters * GRADIENT_BYTES / (d if zero >= pb.ZERO_GRADIENTS else 1),
            parameters * OPTIMIZER_BYTES / (d if zero >= pb.ZERO_OPTIMIZER else 1))


def model_flops_per_sequence(model: pb.TransformerSummary) -> float:
    """3 x the forward (backward twice the forward, no recompute); the
    forward 24sh^2 + 4s^2h a layer for f = 4h and one expert a token, and
    the logits 2shV."""
    h, V, s, l = model.hidden_size, model.vocabulary_size, model.sequence_length, model.layers
    assert model.ffn_hidden_size in (0, 4 * h) and model.experts_per_token in (0, 1)
    forward = l * (24 * s * h * h + 4 * s * s * h) + 2 * s * h * V
    return 3 * forward


def model_flops_utilization(model, config, global_batch: int, peak: float) -> float:
    return global_batch * model_flops_per_sequence(model) / config.step_seconds / (
        config.devices * peak)


# -- Seconds, with one pipeline stage ------------------------------------------
#
# With pipeline_parallel = 1 the one stage holds every item (the embedding,
# the l layers, the head) and the one rank runs the B micro-batches one after
# another, so the training planner's schedule has a closed form:
#   step = B x sum over the items of (F + B + W) + (1 - data_parallel_overlap)
#          x the rank's gradient exchange after the step.
# With one stage the tied embedding and head share it: no tied all-reduce.

COMPUTE_EFFICIENCY = 0.6  # ParallelizeOptions.compute_efficiency's default.


def available_devices(cluster: pb.Cluster) -> list:
    """Every device as (host, device), hosts in order, each host's devices in
    order, the busy ones left out."""
    busy = set(cluster.busy_devices)
    devices, host = [], 0
    for group in cluster.host_groups:
        for _ in range(group.hosts):
            devices += [(host, i) for i in range(group.devices_per_host)
                        if f"{host}:{i}" not in busy]
            host += 1
    return devices


def tensor_groups(cluster: pb.Cluster, t: int) -> list:
    """The available devices cut into tensor groups of t devices of one host,
    in order (a host's leftover devices unused)."""
    by_host = {}
    for host, device in available_devices(cluster):
        by_host.setdefault(host, []).append((host, device))
    groups = []
    for host in sorted(by_host):
        devices = by_host[host]
        groups += [devices[i:i + t] for i in range(0, len(devices) - t + 1, t)]
    return groups


def one_stage_seconds(request: pb.ParallelizeRequest, config: pb.ParallelConfig) -> dict:
    """The documented seconds of a pipeline_parallel = 1 configuration, by
    part: compute (kernels, recompute included), tensor (the AR
    all-reduces), zero_scatter (ZeRO-2/3's per-micro-batch gradient GA in W),
    zero_gather (ZeRO-3's two weight GAs per micro-batch in W), the whole
    post-step exchange and its exposed share, and the step."""
    model, options = request.transformer, request.options
    (host_group,) = request.cluster.host_groups
    h, s, V, l = model.hidden_size, model.sequence_length, model.vocabulary_size, model.layers
    f = model.ffn_hidden_size or 4 * h
    E = max(model.experts, 1)
    k = model.experts_per_token or 1
    t, d, b, B = (config.tensor_parallel, config.data_parallel, config.micro_batch_size,
                  config.micro_batches)
    zero, recompute = config.zero, config.recompute
    weight_bytes = (options.weight_bytes_per_parameter
                    if options.HasField("weight_bytes_per_parameter") else WEIGHT_BYTES)
    gradient_bytes = (options.gradient_bytes_per_parameter
                      if options.HasField("gradient_bytes_per_parameter") else GRADIENT_BYTES)
    efficiency = (options.compute_efficiency if options.HasField("compute_efficiency")
                  else COMPUTE_EFFICIENCY)
    peak = host_group.accelerator.peak_flops_per_second
    intra, inter = (host_group.intra_host_bytes_per_second,
                    host_group.inter_host_bytes_per_second)

    # Devices: replica j of the one rank is tensor group j.
    groups = tensor_groups(request.cluster, t)[:d]
    assert len(groups) == d, (t, d)
    tensor_link = intra  # a tensor group is within one host
    hosts = {host for group in groups for host, _ in group}
    ring_link = intra if len(hosts) == 1 else inter

    def seconds(flops):
        return flops / (t * efficiency * peak)

    def AR(x):
        return 2 * (t - 1) / t * x / tensor_link

    def GA(y):
        return (d - 1) / d * y / ring_link

    x = 2 * b * s * h  # bytes a tensor-parallel collective moves
    # A layer, per micro-batch.
    gemm = b * (8 * s * h * h + 4 * s * h * f * k + (2 * s * h * E if E > 1 else 0))
    att = 4 * b * s * s * h
    forward_flops = gemm + att
    backward_flops = gemm + 2 * att
    backward_ar = 2
    if recompute == pb.LAYER_RECOMPUTE_SELECTIVE:
        backward_flops += att
    elif recompute == pb.LAYER_RECOMPUTE_FULL:
        backward_flops += forward_flops  # plus F, its 2 AR included
        backward_ar += 2
    weight_flops = gemm
    layer_compute = seconds(forward_flops + backward_flops + weight_flops)
    layer_tensor = (2 + backward_ar) * AR(x)
    # The embedding: F = AR, B = 0. The head: F = logits, B = logits + AR,
    # W = logits.
    logits = 2 * b * s * h * V
    embedding_compute, embedding_tensor = 0.0, AR(x)
    head_compute, head_tensor = seconds(3 * logits), AR(x)
    # Parameters on a device; the word embedding's Vh/t counted by both the
    # embedding's and the head's ZeRO exchanges, once in P.
    divided, norms = layer_parameters(h, f, model.experts)
    layer_params = divided / t + norms
    word = V * h / t
    item_params = [s * h + word] + [layer_params] * l + [2 * h + word]
    P = l * layer_params + s * h + 2 * h + word
    # ZeRO, per micro-batch in W.
    zero_scatter = zero_gather = 0.0
    for q in item_params:
        if zero >= pb.ZERO_GRADIENTS:
            zero_scatter += GA(q * gradient_bytes)
        if zero == pb.ZERO_PARAMETERS:
            zero_gather += 2 * GA(q * weight_bytes)
    # The gradient exchange after the step.
    exchange = {pb.ZERO_NONE: 2 * GA(P * gradient_bytes),
                pb.ZERO_OPTIMIZER: GA(P * (gradient_bytes + weight_bytes)),
                pb.ZERO_GRADIENTS: GA(P * weight_bytes),
                pb.ZERO_PARAMETERS: 0.0}[zero]
    exposed = (1 - options.data_parallel_overlap) * exchange
    compute = B * (l * layer_compute + embedding_compute + head_compute)
    tensor = B * (l * layer_tensor + embedding_tensor + head_tensor)
    end = compute + tensor + B * (zero_scatter + zero_gather)
    return dict(step=end + exposed, compute=compute, tensor=tensor,
                zero_scatter=B * zero_scatter, zero_gather=B * zero_gather,
                exchange=exchange, exposed=exposed,
                groups=[",".join(f"{host}:{i}" for host, i in g) for g in groups])


class ParallelizeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = support.shared_server()
        cls.client = partplan.Client(cls.server.target, timeout=120)
        cls.request = example_request()
        cls.response = cls.client.parallelize(cls.request)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def close(self, got, expected, what):
        self.assertTrue(math.isclose(got, expected, rel_tol=RELATIVE, abs_tol=0),
                        f"{what}: server {got!r}, by hand {expected!r} "
                        f"(relative {abs(got - expected) / abs(expected):.3g})")

    # -- the example request -------------------------------------------------

    def check_configurations(self, request, response):
        """The invariants every returned configuration must meet."""
        model, cluster = request.transformer, request.cluster
        busy = set(cluster.busy_devices)
        available = sum(g.hosts * g.devices_per_host for g in cluster.host_groups) - len(busy)
        global_batch = request.options.global_batch_size
        self.assertTrue(response.configurations)
        steps = [c.step_seconds for c in response.configurations]
        self.assertEqual(steps, sorted(steps), "ranked by step, best first")
        for rank, c in enumerate(response.configurations):
            with self.subTest(configuration=rank + 1):
                t, p, d = c.tensor_parallel, c.pipeline_parallel, c.data_parallel
                self.assertEqual(c.devices, t * p * d)
                self.assertLessEqual(c.devices, available)
                self.assertEqual(c.micro_batches * c.micro_batch_size * d, global_batch)
                self.assertGreater(c.step_seconds, 0)
                self.close(c.tokens_per_second, global_batch * model.sequence_length / c.step_seconds,
                           "tokens/s")
                # Stages: p x v of them, in order, covering every layer once.
                v = max(c.chunks_per_device, 1)
                self.assertEqual([s.stage for s in c.stages], list(range(p * v)))
                next_layer = 0
                for s in c.stages:
                    self.assertEqual(s.first_layer, next_layer, f"stage {s.stage}")
                    self.assertGreaterEqual(s.last_layer, s.first_layer)
                    next_layer = s.last_layer + 1
                self.assertEqual(next_layer, model.layers)
                self.assertEqual([s.embedding for s in c.stages],
                                 [i == 0 for i in range(len(c.stages))])
                self.assertEqual([s.head for s in c.stages],
                                 [i == len(c.stages) - 1 for i in range(len(c.stages))])
                # Devices: d groups of t a stage, none busy; a pipeline rank's
                # chunks share devices, and the ranks use t x p x d in all.
                used = set()
                for s in c.stages:
                    self.assertEqual(len(s.tensor_parallel_groups), d, f"stage {s.stage}")
                    devices = [n for g in s.tensor_parallel_groups for n in g.split(",")]
                    self.assertEqual(len(devices), d * t)
                    self.assertEqual(len(set(devices)), d * t)
                    self.assertFalse(busy & set(devices), f"stage {s.stage} uses a busy device")
                    for g in s.tensor_parallel_groups:
                        if not request.options.tensor_parallel_across_hosts:
                            self.assertEqual(len({n.split(":")[0] for n in g.split(",")}), 1,
                                             f"group {g} spans hosts")
                    rank_devices = set(devices)
                    if s.stage >= p:
                        self.assertEqual(
                            rank_devices,
                            {n for g in c.stages[s.stage % p].tensor_parallel_groups
                             for n in g.split(",")})
                    used |= rank_devices
                self.assertEqual(len(used), c.devices)
                self.assertIn(c.fullest_device, used)
                self.assertGreater(c.memory.peak, 0)
                self.assertLessEqual(c.memory.peak, c.memory.available)

    def test_example_returns_ranked_configurations(self):
        response = self.response
        self.assertLessEqual(len(response.configurations), self.request.options.max_configurations)
        self.assertGreater(len(response.configurations), 1)
        self.check_configurations(self.request, response)
        self.assertIn("3:7", self.request.cluster.busy_devices)
        self.assertTrue(response.why)
        self.assertGreater(response.candidates, 0)
        self.assertGreater(response.planned, 0)
        self.assertLessEqual(response.pruned_by_memory + response.planned + response.pruned_by_bound,
                             response.candidates)

    def test_python_api_builds_the_example(self):
        model = partplan.transformer(layers=40, hidden_size=5120, attention_heads=40,
                                     sequence_length=2048, vocabulary_size=51200)
        hosts = partplan.cluster("A100-SXM4-80GB", hosts=4, devices_per_host=8,
                                 memory_bytes="80GiB", intra_host_bytes_per_second="300GB/s",
                                 inter_host_bytes_per_second=INFINIBAND, busy=[(3, 7)])
        request = partplan.parallelize_request(model, hosts, global_batch_size=256,
                                               max_configurations=5)
        self.assertEqual(request, self.request)
        response = partplan.parallelize(self.client, model, hosts, global_batch_size=256,
                                        max_configurations=5, timeout=120)
        self.assertIsInstance(response, pb.ParallelizeResponse)
        self.assertEqual(response, self.response)
        # A target instead of a client; a whole request.
        self.assertEqual(partplan.parallelize(self.server.target, request=request), self.response)

    def test_preset_figures_come_from_accelerators(self):
        a100 = partplan.accelerators.get("A100-80GB")
        hosts = partplan.cluster("a100", hosts=2, devices_per_host=4,
                                 intra_host_bytes_per_second=NVSWITCH,
                                 inter_host_bytes_per_second=INFINIBAND)
        (group,) = hosts.host_groups
        self.assertEqual(group.accelerator.memory_bytes, a100.memory_bytes)
        self.assertEqual(group.accelerator.peak_flops_per_second, a100.flops_per_second)
        self.assertEqual(group.accelerator.name, "a100")
        own = partplan.cluster({"name": "X1", "memory_bytes": "24GiB",
                                "peak_flops_per_second": 100e12},
                               devices_per_host=2, intra_host_bytes_per_second=50e9,
                               inter_host_bytes_per_second=10e9)
        self.assertEqual(own.host_groups[0].accelerator,
                         pb.Accelerator(name="X1", memory_bytes=24 * 2**30,
                                        peak_flops_per_second=100e12))
        two = partplan.cluster(host_groups=[
            partplan.host_group("H100", hosts=1, devices_per_host=8,
                                intra_host_bytes_per_second=450e9, inter_host_bytes_per_second=50e9),
            dict(preset="A100", hosts=2, devices_per_host=8, intra_host_bytes_per_second=NVSWITCH,
                 inter_host_bytes_per_second=INFINIBAND)], busy="0:1,2:3")
        self.assertEqual([g.hosts for g in two.host_groups], [1, 2])
        self.assertEqual(list(two.busy_devices), ["0:1", "2:3"])

    def test_client_side_errors_name_the_argument(self):
        links = dict(intra_host_bytes_per_second=NVSWITCH, inter_host_bytes_per_second=INFINIBAND)
        cases = [
            ("intra_host_bytes_per_second",
             lambda: partplan.cluster("A100", devices_per_host=8, inter_host_bytes_per_second=25e9)),
            ("inter_host_bytes_per_second",
             lambda: partplan.cluster("A100", devices_per_host=8, intra_host_bytes_per_second=3e11)),
            ("devices_per_host", lambda: partplan.cluster("A100", **links)),
            ("preset", lambda: partplan.cluster("B999", devices_per_host=8, **links)),
            ("memory_bytes", lambda: partplan.cluster(devices_per_host=8, **links)),
            ("busy[0]", lambda: partplan.cluster("A100", devices_per_host=8, busy=["3-7"], **links)),
            ("hosts", lambda: partplan.cluster("A100", hosts=0, devices_per_host=8, **links)),
            ("hidden_size", lambda: partplan.transformer(layers=2, hidden_size=0, attention_heads=1,
                                                         sequence_length=8, vocabulary_size=8)),
            ("zero_stages[0]", lambda: parallelize_options(8, zero_stages=["zero_4"])),
            ("schedules[0]", lambda: parallelize_options(8, schedules=["2f2b"])),
            ("global_batch_size", lambda: parallelize_options(0)),
        ]
        for field, make in cases:
            with self.subTest(field=field):
                with self.assertRaises(ValueError) as raised:
                    make()
                self.assertTrue(str(raised.exception).startswith(field), str(raised.exception))
        with self.assertRaises(TypeError):
            parallelize_options(8, tensor_paralel=2)
        self.assertEqual(
            parallelize_options(8, schedules="1f1b", zero_stages=[1, "zero_3"],
                                recompute=["selective", "full"]),
            pb.ParallelizeOptions(global_batch_size=8, schedules=[pb.ONE_F_ONE_B],
                                  zero_stages=[pb.ZERO_OPTIMIZER, pb.ZERO_PARAMETERS],
                                  recompute=[pb.LAYER_RECOMPUTE_SELECTIVE,
                                             pb.LAYER_RECOMPUTE_FULL]))

    # -- the server's refusals -------------------------------------------------

    def test_bad_input_is_invalid_argument_naming_the_field(self):
        cases = [
            ("transformer.attention_heads",
             lambda r: setattr(r.transformer, "attention_heads", 48)),  # 48 does not divide 5120
            ("options.global_batch_size", lambda r: setattr(r.options, "global_batch_size", 0)),
            ("cluster.busy_devices[1]", lambda r: r.cluster.busy_devices.append("9:0")),
            ("cluster.host_groups[0].inter_host_bytes_per_second",
             lambda r: setattr(r.cluster.host_groups[0], "inter_host_bytes_per_second", 0)),
            ("options.compute_efficiency", lambda r: setattr(r.options, "compute_efficiency", 1.5)),
            # A graph beside the summary must hold its 40 layers as a numbered
            # module list; the example MLP's modules are fc1..fc8.
            ("graph", lambda r: r.graph.CopyFrom(training_graph())),
        ]
        for field, spoil in cases:
            with self.subTest(field=field):
                request = example_request()
                spoil(request)
                with self.assertRaises(partplan.PartplanError) as raised:
                    self.client.parallelize(request)
                error = raised.exception
                self.assertEqual(error.code, grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn(field, [v.field for v in error.field_violations])
                self.assertTrue(error.message.startswith(field + ":"), error.message)
        # Through the Python API too: heads not dividing hidden.
        model = partplan.transformer(layers=4, hidden_size=1000, attention_heads=3,
                                     sequence_length=128, vocabulary_size=1000)
        hosts = partplan.cluster("A100", devices_per_host=4, intra_host_bytes_per_second=NVSWITCH,
                                 inter_host_bytes_per_second=INFINIBAND)
        with self.assertRaises(partplan.PartplanError) as raised:
            partplan.parallelize(self.client, model, hosts, global_batch_size=8)
        self.assertEqual(raised.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual([v.field for v in raised.exception.field_violations],
                         ["transformer.attention_heads"])

    # -- the cost model, recomputed by hand --------------------------------------

    def check_cost_model(self, request, config):
        model = request.transformer
        self.assertFalse(request.options.HasField("weight_bytes_per_parameter"))
        self.assertFalse(request.options.HasField("gradient_bytes_per_parameter"))
        self.assertFalse(request.options.HasField("optimizer_bytes_per_parameter"))
        weights, gradients, optimizer = model_states(model, config)
        self.close(config.memory.weights, weights, "weights of the fullest device")
        self.close(config.memory.gradients, gradients, "gradients of the fullest device")
        self.close(config.memory.optimizer, optimizer, "optimizer state of the fullest device")
        (group,) = request.cluster.host_groups
        self.close(config.model_flops_utilization,
                   model_flops_utilization(model, config, request.options.global_batch_size,
                                           group.accelerator.peak_flops_per_second),
                   "model FLOPs utilisation")

    def test_top_configuration_matches_the_documented_formulas(self):
        top = self.response.configurations[0]
        self.check_cost_model(self.request, top)
        # The numbers behind it, for the example's t=1 p=7 d=4 ZeRO-1 winner
        # (if the ranking changes, the check above still holds).
        h = 5120
        self.assertEqual(layer_parameters(h, 4 * h, 0)[0] + layer_parameters(h, 4 * h, 0)[1],
                         12 * h * h + 13 * h)
        self.assertEqual(model_flops_per_sequence(self.request.transformer),
                         3 * (40 * (24 * 2048 * h * h + 4 * 2048 * 2048 * h) + 2 * 2048 * h * 51200))

    def test_every_configuration_matches_the_documented_formulas(self):
        # The example's configurations, then ones holding the head, ZeRO-2 and
        # -3, tensor parallelism and interleaved stages.
        for config in self.response.configurations:
            with self.subTest(example=True, t=config.tensor_parallel,
                              p=config.pipeline_parallel, d=config.data_parallel):
                self.check_cost_model(self.request, config)
        variants = [
            dict(zero_stages=[pb.ZERO_GRADIENTS, pb.ZERO_PARAMETERS], max_configurations=12),
            dict(schedules=[pb.INTERLEAVED_1F1B], zero_stages=[pb.ZERO_NONE], tensor_parallel=4,
                 max_configurations=6),
            dict(pipeline_parallel=1, tensor_parallel=8, zero_stages=[pb.ZERO_GRADIENTS],
                 max_configurations=4),
        ]
        for fields in variants:
            request = example_request()
            request.options.MergeFrom(pb.ParallelizeOptions(**fields))
            response = self.client.parallelize(request)
            self.check_configurations(request, response)
            for config in response.configurations:
                with self.subTest(options=fields, t=config.tensor_parallel,
                                  p=config.pipeline_parallel, d=config.data_parallel,
                                  v=config.chunks_per_device, zero=config.zero):
                    self.check_cost_model(request, config)

    # -- seconds, by hand, with one pipeline stage --------------------------------

    SECONDS_RELATIVE = 1e-9

    @staticmethod
    def one_stage_requests() -> list:
        """pipeline_parallel = 1 requests on 2 hosts x 8 devices, every
        configuration that fits returned: (name, request)."""
        def request(model, *, intra, inter, peak=A100_PEAK, busy=(), **options):
            cluster = pb.Cluster(
                host_groups=[pb.HostGroup(
                    hosts=2, devices_per_host=8,
                    accelerator=pb.Accelerator(name="X", memory_bytes=1e13,
                                               peak_flops_per_second=peak),
                    intra_host_bytes_per_second=intra, inter_host_bytes_per_second=inter)],
                busy_devices=list(busy))
            return pb.ParallelizeRequest(
                transformer=model, cluster=cluster,
                options=pb.ParallelizeOptions(global_batch_size=32, all_configurations=True,
                                              pipeline_parallel=1, **options))

        example = example_request().transformer
        moe = pb.TransformerSummary(layers=6, hidden_size=1024, attention_heads=16,
                                    sequence_length=512, vocabulary_size=32000,
                                    ffn_hidden_size=2816, experts=4, experts_per_token=2)
        return [
            # Defaults: 2/2/12 bytes a parameter (so no plain data
            # parallelism beside ZeRO-1), efficiency 0.6, no overlap.
            ("example, defaults", request(example, intra=NVSWITCH, inter=INFINIBAND)),
            # Weights wider than gradients (plain data parallelism tried),
            # half the exchange hidden, efficiency 0.5, a busy device.
            ("example, 4-byte weights, overlap 0.5, 0:3 busy",
             request(example, intra=150e9, inter=12.5e9, busy=["0:3"],
                     weight_bytes_per_parameter=4, gradient_bytes_per_parameter=2,
                     compute_efficiency=0.5, data_parallel_overlap=0.5)),
            # Experts, f != 4h, 4-byte gradients, plain data parallelism and
            # ZeRO-2 only, a quarter hidden.
            ("MoE, 4-byte gradients, ZeRO 0 and 2, overlap 0.25",
             request(moe, intra=200e9, inter=50e9, peak=100e12,
                     weight_bytes_per_parameter=2, gradient_bytes_per_parameter=4,
                     data_parallel_overlap=0.25,
                     zero_stages=[pb.ZERO_NONE, pb.ZERO_GRADIENTS])),
        ]

    def one_stage_configurations(self):
        """(name, request, configuration, the formulas' seconds) for every
        configuration of one_stage_requests(), checked to cover tensor and
        data parallelism over both links, every ZeRO stage and recompute."""
        cls = type(self)
        if not hasattr(cls, "_one_stage"):
            found = []
            for name, request in self.one_stage_requests():
                response = self.client.parallelize(request)
                self.check_configurations(request, response)
                for config in response.configurations:
                    found.append((name, request, config, one_stage_seconds(request, config)))
            cls._one_stage = found
        found = cls._one_stage
        self.assertEqual({c.zero for _, _, c, _ in found},
                         {pb.ZERO_NONE, pb.ZERO_OPTIMIZER, pb.ZERO_GRADIENTS, pb.ZERO_PARAMETERS})
        self.assertEqual({c.recompute for _, _, c, _ in found},
                         {pb.LAYER_RECOMPUTE_NONE, pb.LAYER_RECOMPUTE_SELECTIVE,
                          pb.LAYER_RECOMPUTE_FULL})
        self.assertTrue({1, 2, 4, 8} <= {c.tensor_parallel for _, _, c, _ in found})
        self.assertTrue({1, 2, 4, 8, 16} <= {c.data_parallel for _, _, c, _ in found})
        self.assertGreater(len({c.micro_batch_size for _, _, c, _ in found}), 3)
        self.assertEqual({c.pipeline_parallel for _, _, c, _ in found}, {1})
        # Both the intra-host and the inter-host data-parallel ring.
        rings = {len({n.split(":")[0] for g in c.stages[0].tensor_parallel_groups
                      for n in g.split(",")}) for _, _, c, _ in found if c.data_parallel > 1}
        self.assertEqual(rings, {1, 2})
        return found

    def close_seconds(self, got, expected, what, scale):
        """Within SECONDS_RELATIVE of expected, or of the step when expected
        is 0."""
        self.assertTrue(
            math.isclose(got, expected, rel_tol=self.SECONDS_RELATIVE,
                         abs_tol=self.SECONDS_RELATIVE * scale),
            f"{what}: server {got!r}, by hand {expected!r} "
            f"(difference {got - expected:.6g} s)")

    def one_stage_subtest(self, name, c):
        return self.subTest(request=name, t=c.tensor_parallel, d=c.data_parallel,
                            b=c.micro_batch_size, zero=pb.ZeroStageKind.Name(c.zero),
                            recompute=pb.LayerRecompute.Name(c.recompute))

    def check_one_stage_step(self, c, by_hand):
        """The step, and ZeRO's exchanges in W with the exposed share of the
        one after the step, whichever of zero_gather_seconds and
        data_parallel_seconds holds the gradient scatters (see
        test_one_stage_zero_gather_holds_zeros_micro_batch_exchanges)."""
        step = by_hand["step"]
        self.close_seconds(c.step_seconds, step, "step_seconds", step)
        self.close_seconds(
            c.breakdown.zero_gather_seconds + c.breakdown.data_parallel_seconds,
            by_hand["zero_scatter"] + by_hand["zero_gather"] + by_hand["exposed"],
            "breakdown.zero_gather_seconds + data_parallel_seconds", step)

    def test_one_stage_seconds_match_the_documented_formulas(self):
        """Every configuration: its stage and devices, the compute and
        tensor-parallel parts, no pipeline idle, the breakdown adding up to
        the step. Those with no ZeRO exchange in W (plain data parallelism,
        ZeRO-1, d = 1): the step and the exposed gradient exchange too (ZeRO-2
        and -3: the next test)."""
        for name, request, c, by_hand in self.one_stage_configurations():
            with self.one_stage_subtest(name, c):
                (stage,) = c.stages
                self.assertEqual((stage.first_layer, stage.last_layer, stage.embedding, stage.head),
                                 (0, request.transformer.layers - 1, True, True))
                self.assertEqual(list(stage.tensor_parallel_groups), by_hand["groups"])
                parts, step = c.breakdown, by_hand["step"]
                self.close_seconds(parts.compute_seconds, by_hand["compute"],
                                   "breakdown.compute_seconds", step)
                self.close_seconds(parts.tensor_parallel_seconds, by_hand["tensor"],
                                   "breakdown.tensor_parallel_seconds", step)
                self.close_seconds(parts.pipeline_idle_seconds, 0,
                                   "breakdown.pipeline_idle_seconds", step)
                self.close_seconds(parts.compute_seconds + parts.tensor_parallel_seconds
                                   + parts.zero_gather_seconds + parts.pipeline_idle_seconds
                                   + parts.data_parallel_seconds, c.step_seconds,
                                   "the breakdown's sum against step_seconds", step)
                if c.zero < pb.ZERO_GRADIENTS:
                    self.check_one_stage_step(c, by_hand)
                    self.close_seconds(parts.zero_gather_seconds, 0,
                                       "breakdown.zero_gather_seconds", step)
                    self.close_seconds(parts.data_parallel_seconds, by_hand["exposed"],
                                       "breakdown.data_parallel_seconds", step)

    # The head's ZeRO exchanges count its own 2h (the final norm) as well as
    # the word embedding's Vh/t, as the proto says.
    def test_one_stage_zero_2_and_3_seconds_match_the_documented_formulas(self):
        """ZeRO-2 and -3 configurations: the step and ZeRO's exchanges."""
        for name, request, c, by_hand in self.one_stage_configurations():
            if c.zero >= pb.ZERO_GRADIENTS:
                with self.one_stage_subtest(name, c):
                    self.check_one_stage_step(c, by_hand)

    def test_one_stage_zero_gather_holds_zeros_micro_batch_exchanges(self):
        """StepBreakdown.zero_gather_seconds: ZeRO-2's gradient scatters and
        ZeRO-3's also its weight gathers, in every micro-batch."""
        for name, request, c, by_hand in self.one_stage_configurations():
            if c.zero >= pb.ZERO_GRADIENTS:
                with self.one_stage_subtest(name, c):
                    self.close_seconds(c.breakdown.zero_gather_seconds,
                                       by_hand["zero_scatter"] + by_hand["zero_gather"],
                                       "breakdown.zero_gather_seconds", by_hand["step"])

    # -- text and command line -------------------------------------------------

    def test_format_configurations(self):
        text = partplan.format_configurations(self.response)
        lines = text.splitlines()
        self.assertEqual(lines[0], "Configurations (best first):")
        self.assertEqual(lines[1].split(), ["#", "t", "p", "d", "b", "B", "schedule", "ZeRO",
                                            "recompute", "step", "tokens/s", "MFU",
                                            "peak", "memory/available", "fullest"])
        n = len(self.response.configurations)
        for i, c in enumerate(self.response.configurations):
            cells = lines[2 + i].split()
            self.assertEqual(cells[:6], [str(i + 1), str(c.tensor_parallel),
                                         str(c.pipeline_parallel), str(c.data_parallel),
                                         str(c.micro_batch_size), str(c.micro_batches)])
            self.assertIn(f"{c.step_seconds:.3f} s", lines[2 + i])
            self.assertIn(f"{100 * c.model_flops_utilization:.1f}%", lines[2 + i])
            self.assertEqual(cells[-1], c.fullest_device)
        self.assertIn(self.response.why, text)
        self.assertTrue(lines[-1].startswith(f"{self.response.candidates} configurations: "))
        self.assertEqual(len(lines), 2 + n + 3)

    def test_cli_table_and_json(self):
        status, out, err = run_cli("parallelize", "--request", EXAMPLE, "--output", "table",
                                   "--target", self.server.target)
        self.assertEqual(status, 0, err)
        self.assertEqual(out, partplan.format_configurations(self.response))
        status, out, err = run_cli("parallelize", "--request", EXAMPLE, "--target",
                                   self.server.target)
        self.assertEqual(status, 0, err)
        response = partplan.graph_io.parse_dict(json.loads(out), pb.ParallelizeResponse)
        self.assertEqual(response, self.response)

    def test_cli_errors(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bad.json")
            with open(EXAMPLE) as f:
                doc = json.load(f)
            doc["transformer"]["attentionHeads"] = 48
            with open(path, "w") as f:
                json.dump(doc, f)
            status, out, err = run_cli("parallelize", "--request", path, "--output", "table",
                                       "--target", self.server.target)
            self.assertEqual(status, 3, err)  # INVALID_ARGUMENT
            self.assertIn("field transformer.attention_heads:", err)
            self.assertEqual(out, "")
            status, _, err = run_cli("parallelize", "--request", os.path.join(tmp, "none.json"),
                                     "--target", self.server.target)
            self.assertEqual(status, 2)
            self.assertIn("--request", err)
        status, _, err = run_cli("parallelize", "--target", self.server.target)
        self.assertEqual(status, 2)
        self.assertIn("--request", err)


if __name__ == "__main__":
    unittest.main()

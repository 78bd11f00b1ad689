"""The plan report (client/report/report.html) in a real browser.

Every example request in client/examples is sent to the real server; its
response becomes a report twice, through the Python package (partplan.show)
and through the C++ CLI (`partplan report`), and headless Chromium (Debian's
`chromium`) renders each page. The page must draw every partition or stage
and every device, log no error, and fetch nothing. A screenshot of each is
kept in $PARTPLAN_TEST_OUTPUTS (else a temporary directory named in the log).
A Parallelize report must draw every configuration (a table row and a step
bar each), the selected configuration's stages, and every device of the
request's cluster, as many of them used and busy as the configuration and
the request say.
"""

import html
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from google.protobuf import json_format

import support
import partplan
from partplan import messages as pb

EXAMPLES = os.path.join(support.REPO, "client", "examples")
# Example file -> RPC (client/examples/README.md).
EXAMPLE_RPCS = {
    "partition_graph.json": "PartitionGraph",
    "plan.json": "Plan",
    "validate.json": "Validate",
    "split_graph.json": "SplitGraph",
    "shard_graph.json": "ShardGraph",
    "build_pipeline_graph.json": "BuildPipelineGraph",
    "plan_data_parallel.json": "PlanDataParallel",
    "plan_training.json": "PlanTraining",
    "parallelize.json": "Parallelize",
}
# The one URL a page may hold: SVG's namespace, which is not fetched.
ALLOWED_URLS = {"http://www.w3.org/2000/svg"}


def chromium() -> str:
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.access(path, os.X_OK):
        raise RuntimeError("Debian's chromium is needed: run tools/install_deps.sh --python")
    return path


def cli_binary() -> str:
    # The CLI is built beside the server (tools/test.sh builds //...).
    return os.path.join(os.path.dirname(os.path.dirname(support.server_binary())),
                        "client", "cli", "partplan")


def outputs_dir() -> str:
    path = os.environ.get("PARTPLAN_TEST_OUTPUTS")
    if not path:
        path = tempfile.mkdtemp(prefix="partplan-report-")
    os.makedirs(path, exist_ok=True)
    return path


def browser(*args: str, url: str) -> str:
    """Chromium's stdout for `url`, headless, after the page's script ran."""
    profile = tempfile.mkdtemp(prefix="partplan-chromium-")
    try:
        done = subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={profile}",
             "--virtual-time-budget=5000", *args, url],
            capture_output=True, text=True, timeout=180)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def body_attributes(dom: str) -> dict:
    body = re.search(r"<body([^>]*)>", dom)
    return dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', body.group(1))) if body else {}


# The configurations a Parallelize report draws at most (MAX_CONFIGS).
MAX_CONFIGS = 200


def cluster_devices(request) -> int:
    return sum(g.hosts * g.devices_per_host for g in request.cluster.host_groups)


def expected_counts(response, request=None) -> tuple:
    """(partitions or stages, devices) a report of `response` draws."""
    if isinstance(response, pb.ParallelizeResponse):
        # Configurations; the cluster map's cells (without the request, the
        # hosts the configurations use: not checked here).
        return (min(len(response.configurations), MAX_CONFIGS),
                cluster_devices(request) if request is not None else None)
    plan = getattr(response, "plan", None)
    if isinstance(plan, pb.PartitionPlan):
        return len(plan.partitions), len(plan.device_usage)
    if isinstance(plan, pb.TrainingPlan):
        return len(plan.stages), len(plan.devices)
    if isinstance(response, pb.ShardGraphResponse):
        return len(response.shards), 0
    if isinstance(response, pb.SplitGraphResponse):
        return len(response.submodules), 0
    if isinstance(response, pb.BuildPipelineGraphResponse):
        return len(response.modules), 0
    return 0, 0


class ReportPageTest(unittest.TestCase):
    """What partplan.report_html writes, without a browser."""

    def test_data_cannot_close_its_element(self):
        response = pb.PartitionGraphResponse()
        response.plan.partitions.add(nodes=["</script><script>alert(1)</script>&"])
        page = partplan.report_html(response)
        self.assertNotIn("</script><script>alert(1)", page)
        self.assertIn("\\u003c/script\\u003e", page)
        self.assertNotIn("__PARTPLAN_DATA__", page)
        self.assertEqual(page.count('id="partplan-data"'), 1)

    def test_a_serialised_request_is_read_for_the_report(self):
        request = pb.PartitionGraphRequest()
        request.graph.nodes.add(name="x")
        response = pb.PartitionGraphResponse()
        self.assertEqual(partplan.report_html(response, request.SerializeToString()),
                         partplan.report_html(response, request))

    def test_responses_show_themselves_in_a_notebook(self):
        response = pb.PlanTrainingResponse()
        response.plan.stages.add(device="gpu0")
        frame = response._repr_html_()
        self.assertTrue(frame.startswith("<iframe"))
        self.assertIn("srcdoc=", frame)
        self.assertIn("&quot;rpc&quot;:&quot;PlanTraining&quot;", frame)
        report = partplan.show(response, title="t")
        with tempfile.TemporaryDirectory() as tmp:
            path = report.save(os.path.join(tmp, "r.html"))
            with open(path, encoding="utf-8") as f:
                self.assertEqual(f.read(), report.html)


class ReportInBrowserTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = support.shared_server()
        cls.outputs = outputs_dir()
        print(f"report screenshots: {cls.outputs}")

    def render(self, page: str, name: str, fragment: str = "") -> dict:
        path = os.path.join(self.outputs, name + ".html")
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        url = "file://" + path + fragment
        dom = browser("--dump-dom", url=url)
        browser("--window-size=1400,1800", f"--screenshot={os.path.join(self.outputs, name + '.png')}",
                url=url)
        self.assertTrue(os.path.getsize(os.path.join(self.outputs, name + ".png")) > 0)
        attributes = body_attributes(dom)
        attributes["boxes"] = len(re.findall(r'<g data-box="', dom))
        attributes["bars"] = len(re.findall(r'<g data-device="', dom))
        # Parallelize: configuration rows and step bars, the selected
        # configuration's stages, device cells by state.
        attributes["config_rows"] = len(re.findall(r'<tr data-config="', dom))
        attributes["step_bars"] = len(re.findall(r'<g data-breakdown="', dom))
        attributes["stages"] = len(re.findall(r'<g data-stage="', dom))
        for state in ("used", "busy", "unused"):
            attributes[state] = len(re.findall(r'<g data-device="[^"]*" data-state="%s"' % state, dom))
        selected = re.search(r'<tr data-config="(\d+)" class="[^"]*\bselected\b', dom)
        attributes["selected"] = int(selected.group(1)) if selected else None
        attributes["dom"] = dom
        errors = re.search(r'<pre id="partplan-errors"[^>]*>(.*?)</pre>', dom, re.S)
        attributes["error_text"] = errors.group(1) if errors else ""
        return attributes

    def check(self, page: str, name: str, response, request=None, fragment: str = ""):
        urls = set(re.findall(r"https?://[^\s\"'<>)]+", page))
        self.assertLessEqual(urls, ALLOWED_URLS, "the page must fetch nothing")
        self.assertNotRegex(page, r"<(script|link|img)[^>]+(src|href)=")
        seen = self.render(page, name, fragment)
        self.assertEqual(seen.get("data-rendered"), "ok", seen["error_text"])
        self.assertEqual(seen.get("data-errors"), "0", seen["error_text"])
        partitions, devices = expected_counts(response, request)
        self.assertEqual(int(seen.get("data-partitions", -1)), partitions)
        if isinstance(response, pb.ParallelizeResponse):
            self.check_parallelize(seen, response, request, fragment)
            return seen
        self.assertEqual(seen["boxes"], partitions, "every partition or stage drawn")
        self.assertEqual(int(seen.get("data-devices", -1)), devices)
        self.assertEqual(seen["bars"], devices, "every device drawn")
        return seen

    def check_parallelize(self, seen, response, request, fragment):
        configurations = response.configurations
        self.assertGreater(len(configurations), 0, "the example must have configurations to draw")
        self.assertEqual(seen["config_rows"], len(configurations), "a table row per configuration")
        self.assertEqual(seen["step_bars"], len(configurations), "a step bar per configuration")
        self.assertEqual(seen["boxes"], 0)
        # The why sentence, as the server wrote it.
        self.assertIn(html.escape(response.why, quote=False), seen["dom"])
        # The selected configuration: the first, or #config=N's.
        chosen = re.search(r"config=(\d+)", fragment)
        index = int(chosen.group(1)) - 1 if chosen else 0
        config = configurations[index]
        self.assertEqual(seen["selected"], index)
        self.assertEqual(seen["stages"], len(config.stages), "every stage of the selected configuration")
        # Every device of the cluster a cell; those the configuration uses,
        # the busy ones and the rest told apart.
        devices = cluster_devices(request)
        self.assertEqual(int(seen.get("data-devices", -1)), devices)
        self.assertEqual(seen["bars"], devices, "every device of the cluster drawn")
        self.assertEqual(seen["used"], config.devices)
        self.assertEqual(seen["busy"], len(set(request.cluster.busy_devices)))
        self.assertEqual(seen["unused"], devices - config.devices - seen["busy"])
        # The fullest device's memory, by kind.
        self.assertEqual(len(re.findall(r'<g data-memory="', seen["dom"])), 1)

    def test_every_example_renders_from_both_clients(self):
        for example, rpc in sorted(EXAMPLE_RPCS.items()):
            with self.subTest(example=example):
                with open(os.path.join(EXAMPLES, example)) as f:
                    request = json_format.Parse(f.read(), getattr(pb, rpc + "Request")())
                with partplan.Client(self.server.target) as client:
                    response = client.call(rpc, request)
                stem = example[: -len(".json")]
                self.check(partplan.report_html(response, request, title=example), stem + "_python",
                           response, request)
                # The CLI embeds the same renderer: its page of the same
                # response draws the same.
                with tempfile.TemporaryDirectory() as tmp:
                    saved = os.path.join(tmp, "response.pb")
                    with open(saved, "wb") as f:
                        f.write(response.SerializeToString())
                    done = subprocess.run(
                        [cli_binary(), "report", rpc, f"--response={saved}",
                         f"--request={os.path.join(EXAMPLES, example)}"],
                        capture_output=True, text=True, timeout=60)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.check(done.stdout, stem + "_cli", response, request)

    def test_a_parallelize_report_opens_on_the_configuration_its_address_names(self):
        with open(os.path.join(EXAMPLES, "parallelize.json")) as f:
            request = json_format.Parse(f.read(), pb.ParallelizeRequest())
        with partplan.Client(self.server.target) as client:
            response = client.call("Parallelize", request)
        self.assertGreater(len(response.configurations), 1)
        last = len(response.configurations)
        self.check(partplan.report_html(response, request, title="parallelize.json"),
                   f"parallelize_config{last}", response, request, fragment=f"#config={last}")
        # A click on a row selects its configuration: the page's own
        # handler, run by a script added to a copy of the page.
        page = partplan.report_html(response, request).replace(
            "</body>", "<script>document.querySelector('tr[data-config=\"1\"]').click();</script></body>")
        seen = self.render(page, "parallelize_clicked")
        self.assertEqual(seen.get("data-rendered"), "ok", seen["error_text"])
        self.assertEqual(seen["selected"], 1)
        self.assertEqual(seen["stages"], len(response.configurations[1].stages))
        self.assertEqual(seen["used"], response.configurations[1].devices)

    def test_a_parallelize_report_without_its_request_or_configurations(self):
        with open(os.path.join(EXAMPLES, "parallelize.json")) as f:
            request = json_format.Parse(f.read(), pb.ParallelizeRequest())
        with partplan.Client(self.server.target) as client:
            response = client.call("Parallelize", request)
        # Without the request the map holds the hosts the configurations
        # use, busy devices unknown.
        seen = self.render(partplan.report_html(response), "parallelize_no_request")
        self.assertEqual(seen.get("data-rendered"), "ok", seen["error_text"])
        self.assertEqual(seen["config_rows"], len(response.configurations))
        self.assertEqual(seen["used"], response.configurations[0].devices)
        self.assertEqual(seen["busy"], 0)
        self.assertEqual(int(seen.get("data-devices", -1)), seen["bars"])
        # Nothing fits: the page says so and draws nothing.
        seen = self.render(partplan.report_html(pb.ParallelizeResponse(candidates=7, pruned_by_memory=7)),
                           "parallelize_none")
        self.assertEqual(seen.get("data-rendered"), "ok", seen["error_text"])
        self.assertEqual(seen.get("data-partitions"), "0")
        self.assertEqual(seen.get("data-devices"), "0")
        self.assertIn("No configuration fits", seen["dom"])

    def test_a_plan_too_large_to_draw_is_summarised(self):
        response = pb.PartitionGraphResponse()
        for p in range(600):
            response.plan.partitions.add(id=p, nodes=[f"n{p}"], memory_bytes=10, logical_device_ids=[p],
                                         parents=[p - 1] if p else [], children=[p + 1] if p < 599 else [])
            response.plan.device_usage.add(logical_id=p, name=f"gpu{p}", used_bytes=10, available_bytes=20)
            response.plan.assignments.add(node=f"n{p}", partition=p)
        seen = self.render(partplan.report_html(response), "large")
        self.assertEqual(seen.get("data-rendered"), "ok", seen["error_text"])
        self.assertEqual(seen.get("data-partitions"), "0")
        self.assertEqual(seen["bars"], 600)


if __name__ == "__main__":
    unittest.main()

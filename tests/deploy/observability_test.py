"""Checks the Grafana dashboard (deploy/grafana) and the alert rules
(deploy/k8s/base/prometheusrule.yaml) against what the server really
exports: it starts partplan_server, scrapes /metrics, and requires every
metric, label and label value the queries use to be there.

    bazel test //tests/deploy:observability_test
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest
import urllib.request

import yaml

import deploy_testing
from deploy_testing import ARGS

# Labels Prometheus adds to every scraped series (ServiceMonitor targets).
TARGET_LABELS = {"namespace", "pod", "job", "instance", "service", "container", "endpoint"}

METRIC_NAME = re.compile(r"\b((?:grpc_server|partplan)_[a-zA-Z0-9_]*)\b")
SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


class Exposition:
    """Series exported by the server: {series name: {label: {values}}}."""

    def __init__(self, text):
        self.series = {}
        self.types = {}
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(maxsplit=3)
                self.types[name] = kind
            if not line or line.startswith("#"):
                continue
            name, _, rest = line.partition("{")
            name = name.split()[0]
            labels = self.series.setdefault(name, {})
            if rest:
                for label, value in re.findall(r'(\w+)="([^"]*)"', rest.rpartition("}")[0]):
                    labels.setdefault(label, set()).add(value)


def start_server_and_scrape(server):
    process = subprocess.Popen(
        [server, "--host=127.0.0.1", "--port=0", "--metrics_port=0", "--planner_threads=1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={"PATH": "/usr/bin:/bin"})
    try:
        port = None
        deadline = time.monotonic() + 30
        log = []
        while port is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            log.append(line)
            match = re.search(r"\bserving\b.*\bmetrics_port=(\d+)", line)
            if match:
                port = int(match.group(1))
        if port is None:
            raise AssertionError("the server did not start:\n" + "".join(log))
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
            return r.read().decode()
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def dashboard_queries(path):
    with open(path) as f:
        dashboard = json.load(f)
    queries = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            queries.append(("panel %r" % panel["title"], target["expr"]))
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if variable.get("type") == "query" and query:
            queries.append(("variable %r" % variable["name"], query))
    return dashboard, queries


def alert_rules(path):
    with open(path) as f:
        rule = yaml.safe_load(f)
    return [r for g in rule["spec"]["groups"] for r in g["rules"]]


class ObservabilityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.exported = Exposition(start_server_and_scrape(ARGS.server))
        cls.dashboard, cls.dashboard_exprs = dashboard_queries(ARGS.dashboard)
        cls.rules = alert_rules(ARGS.rules)

    def check_query(self, where, expr):
        """Every metric, label and matched value of `expr` is exported."""
        metrics = set(METRIC_NAME.findall(expr))
        self.assertTrue(metrics, "%s uses no partplan metric: %s" % (where, expr))
        labels_seen = set(TARGET_LABELS) | {"le"}
        for metric in metrics:
            self.assertTrue(metric in self.exported.series,
                            "%s: %s is not exported by the server" % (where, metric))
            labels_seen |= set(self.exported.series[metric])
        for metric, matchers in SELECTOR.findall(expr):
            if metric not in self.exported.series:
                continue  # a function call, e.g. label_values(...)
            exported = self.exported.series[metric]
            for label, op, value in MATCHER.findall(matchers):
                if label in TARGET_LABELS:
                    continue
                self.assertIn(label, exported, "%s: %s has no label %s" % (where, metric, label))
                if op == "=" or (op == "=~" and re.fullmatch(r"[\w.|]+", value)):
                    for alternative in value.split("|"):
                        self.assertIn(alternative, exported[label],
                                      "%s: %s{%s} never takes the value %r"
                                      % (where, metric, label, alternative))
        for grouping in GROUPING.findall(expr):
            for label in filter(None, (l.strip() for l in grouping.split(","))):
                self.assertIn(label, labels_seen, "%s: grouped by unknown label %s" % (where, label))

    def test_dashboard_queries_use_exported_metrics(self):
        self.assertTrue(self.dashboard_exprs)
        for where, expr in self.dashboard_exprs:
            self.check_query(where, expr)

    def test_alert_rules_use_exported_metrics(self):
        self.assertTrue(self.rules)
        for rule in self.rules:
            self.check_query("alert " + rule["alert"], rule["expr"])

    def test_dashboard_covers_the_issue(self):
        exprs = " ".join(e for _, e in self.dashboard_exprs)
        for metric in ["grpc_server_started_total", "grpc_server_handled_total",
                       "grpc_server_handling_seconds_bucket", "partplan_planner_queue_depth",
                       "partplan_planner_seconds_bucket", "partplan_graph_nodes_bucket"]:
            self.assertIn(metric, exprs, "request rate, errors, latency, queue, planner "
                          "time and graph sizes are all on the dashboard")
        self.assertIn("grpc_code", exprs, "errors by code")
        self.assertIn("histogram_quantile", exprs, "latency percentiles")

    def test_dashboard_is_importable(self):
        self.assertTrue(self.dashboard.get("uid"))
        self.assertTrue(self.dashboard.get("title"))
        ids = [p["id"] for p in self.dashboard["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "unique panel ids")
        for panel in self.dashboard["panels"]:
            self.assertEqual(panel["datasource"]["uid"], "${datasource}",
                             "no hard-coded data source")
            for key in ["x", "y", "w", "h"]:
                self.assertIn(key, panel["gridPos"])

    def test_alerts_cover_errors_saturation_and_latency(self):
        exprs = " ".join(r["expr"] for r in self.rules)
        self.assertIn("grpc_server_handled_total", exprs, "error ratio")
        self.assertIn("partplan_rejected_calls_total", exprs, "saturation")
        self.assertIn("grpc_server_handling_seconds_bucket", exprs, "latency")
        for rule in self.rules:
            self.assertRegex(rule["alert"], r"^Partplan[A-Za-z]+$")
            self.assertIn(rule.get("labels", {}).get("severity"), ["warning", "critical"])
            self.assertTrue(rule.get("for"), rule["alert"] + " waits before firing")
            self.assertTrue(rule.get("annotations", {}).get("summary"))

    def test_histogram_quantiles_group_by_le(self):
        for where, expr in self.dashboard_exprs + [("alert " + r["alert"], r["expr"])
                                                  for r in self.rules]:
            for match in re.finditer(r"histogram_quantile\(", expr):
                rest = expr[match.end():]
                grouping = GROUPING.search(rest)
                self.assertIsNotNone(grouping, where)
                self.assertIn("le", [l.strip() for l in grouping.group(1).split(",")], where)
                self.assertIn("_bucket", rest, where)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--dashboard", required=True)
    parser.add_argument("--rules", required=True)
    deploy_testing.main(sys.modules[__name__], parser)

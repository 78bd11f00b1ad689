"""Renders deploy/k8s (the base and every overlay) with `kubectl kustomize`
and checks what a reviewer would against the server binary: probe ports and
the health name match its flags, every ConfigMap variable is one of its
flags (and parses), the ServiceMonitor scrapes its metrics port, nothing
runs as root, and the grace period covers the drain.

    bazel test //tests/deploy:k8s_test
"""

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

import deploy_testing
from deploy_testing import ARGS

# Flags naming files the server reads at startup.
FILE_FLAGS = ["tls_cert", "tls_key", "tls_client_ca", "auth_tokens_file"]


def kubectl():
    path = shutil.which("kubectl")
    if path is None:
        raise AssertionError("kubectl not found: run tools/install_deps.sh (kubernetes-client)")
    return path


def render(directory):
    """The documents of `kubectl kustomize <directory>`."""
    home = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    result = subprocess.run([kubectl(), "kustomize", directory], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home})
    if result.returncode != 0:
        raise AssertionError("kubectl kustomize %s failed:\n%s" % (directory, result.stderr))
    return [d for d in yaml.safe_load_all(result.stdout) if d]


_K8S_COPY = []


def k8s_copy():
    """deploy/k8s copied out of the runfiles: Bazel links each file to the
    source tree, and kustomize refuses files whose real path is outside the
    kustomization's directory."""
    if not _K8S_COPY:
        target = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "k8s")
        shutil.copytree(ARGS.k8s, target)  # follows the links
        _K8S_COPY.append(target)
    return _K8S_COPY[0]


def memory_bytes(quantity):
    text = str(quantity)
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
             "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return float(text[:-len(suffix)]) * factor
    return float(text)


def cpu_cores(quantity):
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


class RenderedOverlay:
    """One overlay's documents, indexed the way the checks need them."""

    def __init__(self, directory):
        self.docs = render(directory)

    def of_kind(self, kind):
        return [d for d in self.docs if d.get("kind") == kind]

    def one(self, kind):
        found = self.of_kind(kind)
        if len(found) != 1:
            raise AssertionError("expected one %s, found %d" % (kind, len(found)))
        return found[0]


class OverlayChecks:
    """The checks, run once per overlay by the subclasses below."""

    overlay = None  # Set by the subclasses.

    @classmethod
    def setUpClass(cls):
        cls.flags = deploy_testing.server_flags(ARGS.server)
        cls.readiness = deploy_testing.readiness_service_name(ARGS.server_header)
        cls.rendered = RenderedOverlay(os.path.join(k8s_copy(), cls.overlay))

    # --- helpers --------------------------------------------------------

    def deployment(self):
        return self.rendered.one("Deployment")

    def pod(self):
        return self.deployment()["spec"]["template"]

    def container(self):
        containers = self.pod()["spec"]["containers"]
        self.assertEqual(len(containers), 1, "one container")
        return containers[0]

    def config(self):
        """The ConfigMap's data."""
        return self.rendered.one("ConfigMap").get("data", {})

    def effective_flags(self):
        """The server's flags as the pod runs it: defaults, then the
        ConfigMap's and the container's PARTPLAN_* variables."""
        flags = dict(self.flags)
        variables = dict(self.config())
        for env in self.container().get("env", []):
            if "value" in env:
                variables[env["name"]] = env["value"]
        for name, value in variables.items():
            flags[name[len("PARTPLAN_"):].lower()] = str(value)
        return flags

    def flag_int(self, name):
        return int(float(self.effective_flags()[name]))

    def probe_port(self):
        """Where the kubelet's gRPC probes must go."""
        health_port = self.flag_int("health_port")
        return health_port if health_port > 0 else self.flag_int("port")

    def container_port(self, name_or_number):
        if isinstance(name_or_number, int):
            return name_or_number
        for port in self.container().get("ports", []):
            if port.get("name") == name_or_number:
                return port["containerPort"]
        self.fail("no container port named %r" % name_or_number)

    # --- the checks -----------------------------------------------------

    def test_renders_every_kind(self):
        kinds = sorted(d["kind"] for d in self.rendered.docs)
        for kind in ["ConfigMap", "Deployment", "HorizontalPodAutoscaler",
                     "PodDisruptionBudget", "ServiceMonitor", "PrometheusRule",
                     "ServiceAccount"]:
            self.assertIn(kind, kinds)
        self.assertEqual(kinds.count("Service"), 2, "a ClusterIP and a headless Service")

    def test_configmap_variables_are_server_flags(self):
        names = list(self.config())
        names += [e["name"] for e in self.container().get("env", [])
                  if e["name"].startswith("PARTPLAN_")]
        self.assertTrue(names)
        for name in names:
            self.assertRegex(name, r"^PARTPLAN_[A-Z0-9_]+$")
            flag = name[len("PARTPLAN_"):].lower()
            self.assertIn(flag, self.flags,
                          "%s: partplan_server --help has no --%s" % (name, flag))

    def test_configmap_values_parse(self):
        # The server applies PARTPLAN_* variables before it handles
        # --version, and exits 1 naming the variable on a bad value.
        env = {"PATH": "/usr/bin:/bin"}
        env.update({k: str(v) for k, v in self.config().items()})
        result = subprocess.run([ARGS.server, "--version"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.assertEqual(result.returncode, 0, result.stdout)

    def test_container_takes_its_flags_from_the_configmap(self):
        sources = [s["configMapRef"]["name"] for s in self.container().get("envFrom", [])
                   if "configMapRef" in s]
        self.assertEqual(sources, [self.rendered.one("ConfigMap")["metadata"]["name"]])
        self.assertFalse(self.container().get("args"), "flags come from the ConfigMap")

    def test_probes_are_grpc_on_the_servers_health_port_and_name(self):
        container = self.container()
        for kind in ["startupProbe", "readinessProbe", "livenessProbe"]:
            self.assertIn(kind, container)
            self.assertIn("grpc", container[kind], kind + " is a native gRPC probe")
            self.assertEqual(container[kind]["grpc"]["port"], self.probe_port(), kind)
        self.assertEqual(container["readinessProbe"]["grpc"].get("service"), self.readiness)
        self.assertEqual(container["startupProbe"]["grpc"].get("service"), self.readiness)
        # Liveness must not follow readiness, which turns NOT_SERVING while
        # the pod drains.
        self.assertIn(container["livenessProbe"]["grpc"].get("service", ""), ["", None])

    def test_container_ports_are_the_servers_ports(self):
        ports = {p["name"]: p["containerPort"] for p in self.container()["ports"]}
        self.assertEqual(ports.get("grpc"), self.flag_int("port"))
        self.assertEqual(ports.get("metrics"), self.flag_int("metrics_port"))
        if self.flag_int("health_port") > 0:
            self.assertEqual(ports.get("health"), self.flag_int("health_port"))
        self.assertEqual(self.effective_flags()["host"], "0.0.0.0",
                         "probes and Services reach the pod IP")

    def test_services_select_the_pods_and_reach_the_grpc_port(self):
        labels = self.pod()["metadata"]["labels"]
        services = self.rendered.of_kind("Service")
        headless = [s for s in services if s["spec"].get("clusterIP") == "None"]
        cluster_ip = [s for s in services if s["spec"].get("clusterIP") != "None"]
        self.assertEqual(len(headless), 1, "a headless Service for client-side round_robin")
        self.assertEqual(len(cluster_ip), 1, "a ClusterIP Service for simple clients")
        self.assertFalse(headless[0]["spec"].get("publishNotReadyAddresses", False),
                         "draining pods leave DNS")
        for service in services:
            self.assertTrue(matches(service["spec"]["selector"], labels),
                            service["metadata"]["name"])
            grpc = [p for p in service["spec"]["ports"] if p["name"] == "grpc"]
            self.assertEqual(len(grpc), 1, service["metadata"]["name"])
            self.assertEqual(self.container_port(grpc[0]["targetPort"]), self.flag_int("port"))

    def test_service_monitor_scrapes_the_metrics_port_once(self):
        monitor = self.rendered.one("ServiceMonitor")
        selector = monitor["spec"]["selector"]["matchLabels"]
        scraped = [s for s in self.rendered.of_kind("Service")
                   if matches(selector, s["metadata"].get("labels", {}))]
        self.assertEqual(len(scraped), 1, "exactly one Service scraped, or every pod twice")
        service = scraped[0]
        endpoints = monitor["spec"]["endpoints"]
        self.assertEqual(len(endpoints), 1)
        self.assertEqual(endpoints[0].get("path", "/metrics"), "/metrics")
        ports = [p for p in service["spec"]["ports"] if p["name"] == endpoints[0]["port"]]
        self.assertEqual(len(ports), 1, "the endpoint names a port of the Service")
        self.assertEqual(self.container_port(ports[0]["targetPort"]),
                         self.flag_int("metrics_port"))
        namespaces = {d["metadata"].get("namespace") for d in (monitor, service)}
        self.assertEqual(len(namespaces), 1)

    def test_no_container_runs_as_root(self):
        spec = self.pod()["spec"]
        pod_context = spec.get("securityContext", {})
        self.assertFalse(spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"))
        for container in spec.get("initContainers", []) + spec["containers"]:
            context = dict(pod_context)
            context.update(container.get("securityContext", {}))
            name = container["name"]
            self.assertTrue(context.get("runAsNonRoot"), name)
            self.assertNotEqual(context.get("runAsUser", ARGS.image_uid), 0, name)
            self.assertNotEqual(context.get("runAsGroup", 1), 0, name)
            self.assertIs(context.get("allowPrivilegeEscalation"), False, name)
            self.assertFalse(context.get("privileged", False), name)
            self.assertIn("ALL", context.get("capabilities", {}).get("drop", []), name)
            self.assertFalse(context.get("capabilities", {}).get("add"), name)
            self.assertIs(context.get("readOnlyRootFilesystem"), True, name)
            self.assertEqual(context.get("seccompProfile", {}).get("type"), "RuntimeDefault",
                             name)

    def test_pod_user_is_the_images_user(self):
        user = self.pod()["spec"].get("securityContext", {}).get("runAsUser")
        self.assertEqual(user, ARGS.image_uid, "Dockerfile USER and runAsUser agree")

    def test_tmp_is_a_writable_empty_dir(self):
        volumes = {v["name"]: v for v in self.pod()["spec"].get("volumes", [])}
        mounts = {m["mountPath"]: m for m in self.container().get("volumeMounts", [])}
        self.assertIn("/tmp", mounts)
        self.assertIn("emptyDir", volumes[mounts["/tmp"]["name"]])

    def test_files_the_server_reads_are_mounted_read_only(self):
        flags = self.effective_flags()
        volumes = {v["name"]: v for v in self.pod()["spec"].get("volumes", [])}
        mounts = self.container().get("volumeMounts", [])
        for flag in FILE_FLAGS:
            path = flags.get(flag, "")
            if not path:
                continue
            under = [m for m in mounts if path.startswith(m["mountPath"].rstrip("/") + "/")]
            self.assertEqual(len(under), 1, "--%s=%s is on one mounted volume" % (flag, path))
            mount = under[0]
            self.assertTrue(mount.get("readOnly"), flag)
            self.assertNotIn("subPath", mount, "a subPath mount never sees rotated secrets")
            volume = volumes[mount["name"]]
            self.assertTrue("secret" in volume or "projected" in volume, flag)

    def test_grace_period_covers_prestop_and_drain(self):
        spec = self.pod()["spec"]
        command = self.container()["lifecycle"]["preStop"]["exec"]["command"]
        self.assertEqual(command[0], "sleep", "preStop pauses while endpoints are removed")
        pause = float(command[1])
        self.assertGreater(pause, 0)
        drain = float(self.effective_flags()["drain_deadline_seconds"])
        grace = spec["terminationGracePeriodSeconds"]
        self.assertGreater(grace, drain, "grace period longer than --drain_deadline_seconds")
        self.assertGreater(grace, pause + drain, "and than the preStop pause plus the drain")

    def test_resources_and_planner_threads_fit(self):
        resources = self.container()["resources"]
        for kind in ["requests", "limits"]:
            for resource in ["cpu", "memory"]:
                self.assertIn(resource, resources.get(kind, {}), kind + "." + resource)
        threads = self.flag_int("planner_threads")
        self.assertLessEqual(threads, math.ceil(cpu_cores(resources["limits"]["cpu"])),
                             "PARTPLAN_PLANNER_THREADS within the CPU limit (the server "
                             "would otherwise count the node's cores)")
        self.assertIn("PARTPLAN_PLANNER_THREADS", self.config())

    def test_admitted_requests_fit_in_memory(self):
        # Every call on a planner thread or in the queue may hold a request of
        # up to --max_receive_message_bytes; parsed, it takes more. Keep the
        # wire bytes within half the memory limit, or a burst of big graphs
        # gets the pod OOM-killed instead of RESOURCE_EXHAUSTED.
        admitted = self.flag_int("planner_threads") + self.flag_int("queue_depth")
        request_bytes = admitted * self.flag_int("max_receive_message_bytes")
        limit = memory_bytes(self.container()["resources"]["limits"]["memory"])
        self.assertLessEqual(request_bytes, limit / 2,
                             "(threads + queue) x max request = %.0f MiB, memory limit %.0f MiB"
                             % (request_bytes / 2**20, limit / 2**20))

    def test_autoscaler_scales_the_deployment_on_cpu(self):
        hpa = self.rendered.one("HorizontalPodAutoscaler")
        self.assertEqual(hpa["apiVersion"], "autoscaling/v2")
        target = hpa["spec"]["scaleTargetRef"]
        self.assertEqual((target["kind"], target["name"]),
                         ("Deployment", self.deployment()["metadata"]["name"]))
        resources = [m["resource"]["name"] for m in hpa["spec"]["metrics"]
                     if m["type"] == "Resource"]
        self.assertIn("cpu", resources)
        self.assertGreaterEqual(hpa["spec"]["minReplicas"], 1)
        self.assertLessEqual(hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"])
        self.assertNotIn("replicas", self.deployment()["spec"],
                         "the autoscaler owns the replica count")

    def test_disruption_budget_allows_drains(self):
        pdb = self.rendered.one("PodDisruptionBudget")
        self.assertEqual(pdb["apiVersion"], "policy/v1")
        self.assertTrue(matches(pdb["spec"]["selector"]["matchLabels"],
                                self.pod()["metadata"]["labels"]))
        min_replicas = self.rendered.one("HorizontalPodAutoscaler")["spec"]["minReplicas"]
        if "minAvailable" in pdb["spec"]:
            available = pdb["spec"]["minAvailable"]
            self.assertNotEqual(str(available), "100%")
            if isinstance(available, int):
                self.assertLess(available, min_replicas, "minAvailable == replicas blocks drains")
        else:
            unavailable = pdb["spec"]["maxUnavailable"]
            self.assertNotIn(str(unavailable), ["0", "0%"])

    def test_image_is_pinned(self):
        image = self.container()["image"]
        self.assertRegex(image, r"(:[\w.-]+|@sha256:[0-9a-f]{64})$")
        self.assertFalse(image.endswith(":latest"))


class OverlayOnlyChecks:
    def test_everything_is_in_the_overlays_restricted_namespace(self):
        namespace = self.rendered.one("Namespace")
        name = namespace["metadata"]["name"]
        labels = namespace["metadata"].get("labels", {})
        self.assertEqual(labels.get("pod-security.kubernetes.io/enforce"), "restricted")
        for doc in self.rendered.docs:
            if doc["kind"] != "Namespace":
                self.assertEqual(doc["metadata"].get("namespace"), name, doc["kind"])


class BaseTest(OverlayChecks, unittest.TestCase):
    overlay = "base"


class DevTest(OverlayChecks, OverlayOnlyChecks, unittest.TestCase):
    overlay = "overlays/dev"


class ProdTest(OverlayChecks, OverlayOnlyChecks, unittest.TestCase):
    overlay = "overlays/prod"

    def test_tls_probes_use_the_plaintext_health_port(self):
        self.assertTrue(self.effective_flags().get("tls_cert"))
        self.assertGreater(self.flag_int("health_port"), 0,
                           "kubelet gRPC probes cannot speak TLS: set PARTPLAN_HEALTH_PORT")
        self.assertNotEqual(self.probe_port(), self.flag_int("port"))

    def test_prod_serves_mutual_tls_with_tokens(self):
        flags = self.effective_flags()
        for flag in FILE_FLAGS:
            self.assertTrue(flags.get(flag), "--" + flag)


def image_uid(dockerfile):
    users = re.findall(r"^USER\s+(\d+)", open(dockerfile).read(), re.M)
    if not users:
        raise AssertionError("no numeric USER in " + dockerfile)
    return int(users[-1])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--k8s", required=True, help="the deploy/k8s directory")
    parser.add_argument("--server", required=True)
    parser.add_argument("--server_header", required=True)
    parser.add_argument("--dockerfile", required=True)
    args, _ = parser.parse_known_args()
    parser.set_defaults(image_uid=image_uid(args.dockerfile))
    deploy_testing.main(sys.modules[__name__], parser)

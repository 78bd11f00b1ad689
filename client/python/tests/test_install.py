"""`pip install ./client/python` offline, and imports that write nothing into
the source tree.

The install runs in a venv made with `--system-site-packages` (Debian's
grpcio, protobuf and torch), with `pip --isolated install --no-index`: it
must need nothing from any package index, not even for its build (the
backend is in-tree and `requires = []`). Skipped only when venv or ensurepip
is missing (Debian's python3-venv, tools/install_deps.sh --python).
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
import zipfile

import support

SOURCE = support.PYTHON_DIR
GIT_PATH = os.path.relpath(SOURCE, support.REPO)


def _tree(directory, skip_bytecode=False):
    """Every path under directory (files and directories)."""
    paths = set()
    for root, dirs, files in os.walk(directory):
        if skip_bytecode:
            dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in dirs + files:
            paths.add(os.path.relpath(os.path.join(root, name), directory))
    return paths


def _git_status():
    return subprocess.run(["git", "status", "--porcelain", "--", GIT_PATH], cwd=support.REPO,
                          capture_output=True, text=True, check=True).stdout


def _clean_env(**extra):
    """The environment without PYTHONPATH (so only what is installed is
    importable) and without the user's cache location."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PARTPLAN_CACHE_DIR", "PARTPLAN_PROTO_DIR",
                        "PARTPLAN_GOOGLEAPIS_DIR")}
    env.update(extra)
    return env


def _venv_unavailable():
    for module in ("venv", "ensurepip"):
        done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
        if done.returncode != 0:
            return (f"{sys.executable} has no {module} module: install Debian's python3-venv "
                    "(tools/install_deps.sh --python)")
    return None


class InstallTest(unittest.TestCase):
    """One venv for the class: making it and installing take a while."""

    @classmethod
    def setUpClass(cls):
        reason = _venv_unavailable()
        if reason:
            raise unittest.SkipTest(reason)
        cls._tmp = tempfile.TemporaryDirectory(prefix="partplan-install-")
        cls.tmp = cls._tmp.name
        cls.venv = os.path.join(cls.tmp, "venv")
        cls.python = os.path.join(cls.venv, "bin", "python")
        done = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", cls.venv],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            cls._tmp.cleanup()
            if "ensurepip" in done.stdout + done.stderr:
                raise unittest.SkipTest(f"venv without ensurepip: {done.stdout}{done.stderr}")
            raise RuntimeError(f"python3 -m venv failed:\n{done.stdout}{done.stderr}")
        cls.tree_before = _tree(SOURCE, skip_bytecode=True)
        cls.status_before = _git_status()
        cls.pip = subprocess.run(
            [cls.python, "-m", "pip", "--isolated", "install", "--no-index", SOURCE],
            cwd=cls.tmp, capture_output=True, text=True, timeout=900, env=_clean_env())
        cls.tree_after = _tree(SOURCE, skip_bytecode=True)
        cls.status_after = _git_status()

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def run_installed(self, script, **env):
        """Runs script in the venv from a directory outside the checkout,
        with an empty cache directory; returns its stdout."""
        cwd = tempfile.mkdtemp(dir=self.tmp)
        cache = tempfile.mkdtemp(dir=self.tmp)
        done = subprocess.run([self.python, "-c", textwrap.dedent(script)], cwd=cwd,
                              capture_output=True, text=True, timeout=300,
                              env=_clean_env(XDG_CACHE_HOME=cache, **env))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(os.listdir(cache), [], "an installed package generates nothing")
        return done.stdout

    def test_quickstart_notebook_runs_on_the_installed_package(self):
        """client/python/examples/quickstart.ipynb, executed by nbconvert with
        the venv's Python as its kernel, against the real server: a new
        user's notebook, with no path lines."""
        notebook = os.path.join(SOURCE, "examples", "quickstart.ipynb")
        out = os.path.join(tempfile.mkdtemp(dir=self.tmp), "quickstart.ipynb")
        cache = tempfile.mkdtemp(dir=self.tmp)
        # The venv as a kernel, as the notebook tells its reader (into the
        # venv here, not the user's home).
        kernel = subprocess.run(
            [self.python, "-m", "ipykernel", "install", "--prefix", self.venv, "--name", "partplan"],
            capture_output=True, text=True, timeout=300, env=_clean_env())
        self.assertEqual(kernel.returncode, 0, kernel.stderr)
        done = subprocess.run(
            [self.python, "-m", "nbconvert", "--to", "notebook", "--execute",
             "--ExecutePreprocessor.kernel_name=partplan",
             "--ExecutePreprocessor.timeout=600", "--output", out, notebook],
            cwd=os.path.dirname(out), capture_output=True, text=True, timeout=900,
            env=_clean_env(XDG_CACHE_HOME=cache, PARTPLAN_TARGET=support.shared_server().target))
        self.assertEqual(done.returncode, 0,
                         f"nbconvert (Debian's python3-nbconvert and python3-ipykernel, "
                         f"tools/install_deps.sh --python):\n{done.stderr[-4000:]}")
        with open(out) as f:
            cells = [c for c in json.load(f)["cells"] if c["cell_type"] == "code"]
        outputs = [o for c in cells for o in c["outputs"]]
        self.assertEqual([o for o in outputs if o["output_type"] == "error"], [])
        printed = "".join("".join(o.get("text", "")) for o in outputs if o["output_type"] == "stream")
        self.assertIn(" nodes, ", printed)
        self.assertIn("is the fullest device", printed)
        self.assertIn("is the busiest", printed)
        reports = ["".join(o["data"]["text/html"]) for o in outputs
                   if "text/html" in o.get("data", {})]
        self.assertEqual(len(reports), 2, "the partition plan's and the training plan's reports")
        for report in reports:
            self.assertTrue(report.startswith("<iframe"), report[:200])
        self.assertEqual(os.listdir(cache), [], "an installed package generates nothing")

    def test_pip_install_offline(self):
        self.assertEqual(self.pip.returncode, 0, self.pip.stdout + self.pip.stderr)
        self.assertIn("Successfully installed partplan", self.pip.stdout)

    def test_the_build_writes_nothing_into_the_source_tree(self):
        self.assertEqual(self.pip.returncode, 0, self.pip.stderr)
        self.assertEqual(self.tree_after - self.tree_before, set())
        self.assertEqual(self.status_after, self.status_before)

    def test_installed_package_imports_its_bundled_code(self):
        self.assertEqual(self.pip.returncode, 0, self.pip.stderr)
        out = self.run_installed("""
            import json, partplan
            import partplan.v1.graph_pb2, partplan.v1.planner_service_pb2_grpc
            from partplan import _codegen, errors
            print(json.dumps({
                "package": partplan.__file__,
                "graph_pb2": partplan.v1.graph_pb2.__file__,
                "generated": _codegen.generated_dir(),
                "bundled": _codegen.is_bundled(),
                "bad_request": errors.rpc_message_class("google.rpc.BadRequest") is not None,
                "graph": partplan.Graph is partplan.v1.graph_pb2.Graph,
                "report_template": len(partplan.report._template()),
            }))
        """)
        found = json.loads(out)
        venv = os.path.realpath(self.venv)
        for key in ("package", "graph_pb2", "generated"):
            self.assertTrue(os.path.realpath(found[key]).startswith(venv + os.sep), (key, found[key]))
        self.assertTrue(found["bundled"])
        self.assertTrue(found["bad_request"])
        self.assertTrue(found["graph"])
        self.assertGreater(found["report_template"], 0)  # client/report/report.html, carried along

    def test_gen_protos_of_an_installed_package(self):
        self.assertEqual(self.pip.returncode, 0, self.pip.stderr)
        cache = tempfile.mkdtemp(dir=self.tmp)
        env = _clean_env(XDG_CACHE_HOME=cache)
        check = subprocess.run([self.python, "-m", "partplan", "gen-protos", "--check"], cwd=self.tmp,
                               capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual((check.returncode, check.stdout.strip()), (0, "bundled"), check.stderr)
        gen = subprocess.run([self.python, "-m", "partplan", "gen-protos"], cwd=self.tmp,
                             capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(gen.returncode, 0, gen.stderr)
        self.assertIn("nothing to generate", gen.stdout)
        self.assertEqual(os.listdir(cache), [])

    def test_validate_through_the_installed_package(self):
        self.assertEqual(self.pip.returncode, 0, self.pip.stderr)
        if not os.access(support.server_binary(), os.X_OK):
            self.skipTest(f"no server binary at {support.server_binary()} (set PARTPLAN_SERVER)")
        server = support.shared_server()
        graph = os.path.join(support.REPO, "client", "examples", "graph_mlp.json")
        out = self.run_installed(f"""
            import partplan
            with partplan.Client({server.target!r}, timeout=60) as client:
                response = client.validate({graph!r})
            print(type(response).__module__, response.node_count)
        """)
        module, node_count = out.split()
        self.assertEqual(module, "partplan.v1.planner_service_pb2")
        self.assertGreater(int(node_count), 0)


class WheelContentsTest(unittest.TestCase):
    """The backend's wheel and sdist, built directly (no pip, no venv)."""

    def build(self, source, hook, out):
        script = ("import sys; sys.path.insert(0, 'build_backend'); import partplan_build_backend as b; "
                  f"print(b.{hook}({out!r}))")
        done = subprocess.run([sys.executable, "-B", "-c", script], cwd=source, capture_output=True,
                              text=True, timeout=300, env=_clean_env())
        self.assertEqual(done.returncode, 0, done.stderr)
        return os.path.join(out, done.stdout.strip())

    def test_wheel_record_and_sdist(self):
        import base64
        import hashlib
        import tarfile

        with tempfile.TemporaryDirectory() as tmp:
            wheel = self.build(SOURCE, "build_wheel", os.path.join(tmp, "wheel"))
            self.assertEqual(os.path.basename(wheel), "partplan-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(wheel) as z:
                names = set(z.namelist())
                record = z.read("partplan-0.1.0.dist-info/RECORD").decode().splitlines()
                metadata = z.read("partplan-0.1.0.dist-info/METADATA").decode()
                # RECORD lists every file but itself with its hash and size.
                listed = {}
                for line in record:
                    path, digest, size = line.rsplit(",", 2)
                    listed[path] = (digest, size)
                self.assertEqual(set(listed), names)
                for path, (digest, size) in listed.items():
                    if path.endswith("/RECORD"):
                        self.assertEqual((digest, size), ("", ""))
                        continue
                    data = z.read(path)
                    expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                    self.assertEqual((digest, size), (f"sha256={expected.decode()}", str(len(data))), path)
            self.assertIn("partplan/_generated/partplan/v1/graph_pb2.py", names)
            self.assertIn("partplan/_generated/google_rpc.desc", names)
            self.assertIn("partplan/_codegen.py", names)
            self.assertIn("partplan/report.html", names)
            self.assertFalse([n for n in names if "__pycache__" in n or n.endswith(".lock")])
            self.assertIn("Requires-Dist: grpcio", metadata)
            self.assertIn('Requires-Dist: torch; extra == "torch"', metadata)
            self.assertNotIn("Requires-Dist: torch\n", metadata)

            # An sdist carries its protos, so a wheel builds from it alone.
            sdist = self.build(SOURCE, "build_sdist", os.path.join(tmp, "sdist"))
            with tarfile.open(sdist) as tar:
                # The "data" filter where this Python has it (3.11.4+).
                safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                tar.extractall(os.path.join(tmp, "unpacked"), **safe)
            unpacked = os.path.join(tmp, "unpacked", "partplan-0.1.0")
            self.assertTrue(os.path.exists(os.path.join(unpacked, "PKG-INFO")))
            rebuilt = self.build(unpacked, "build_wheel", os.path.join(tmp, "rebuilt"))
            with zipfile.ZipFile(rebuilt) as z:
                rebuilt_names = z.namelist()
            self.assertIn("partplan/_generated/partplan/v1/planner_service_pb2_grpc.py", rebuilt_names)
            self.assertEqual(rebuilt_names.count("partplan/report.html"), 1)


class SourceTreeImportTest(unittest.TestCase):
    def test_first_import_writes_nothing_into_the_source_tree(self):
        # A fresh cache: the import generates, into the cache. -B keeps
        # Python's own bytecode out too, so the check is of every file.
        with tempfile.TemporaryDirectory() as cache:
            tree = _tree(SOURCE)
            status = _git_status()
            done = subprocess.run(
                [sys.executable, "-B", "-c",
                 "import partplan, partplan.v1.graph_pb2 as g; print(g.__file__)"],
                cwd=cache, capture_output=True, text=True, timeout=300,
                env=_clean_env(PYTHONPATH=SOURCE, XDG_CACHE_HOME=cache))
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(_tree(SOURCE) - tree, set())
            self.assertEqual(_git_status(), status)
            generated = done.stdout.strip()
            self.assertTrue(generated.startswith(os.path.join(cache, "partplan") + os.sep), generated)


if __name__ == "__main__":
    unittest.main()

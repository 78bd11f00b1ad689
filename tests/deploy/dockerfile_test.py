"""Checks deploy/docker/Dockerfile without a Docker engine: it is parsed
and compared with the server binary it packages.

    bazel test //tests/deploy:dockerfile_test
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import unittest

import deploy_testing
from deploy_testing import ARGS

# Packages every Debian image has (Priority: required), which the runtime
# stage need not install.
BASE_IMAGE_PACKAGES = {"libc6", "libgcc-s1"}


def parse_dockerfile(path):
    """[(INSTRUCTION, arguments)] with continuation lines joined and
    comments (and parser directives) dropped."""
    instructions = []
    current = ""
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            stripped = line.strip()
            if stripped.startswith("#") or (not stripped and not current):
                continue
            if line.endswith("\\"):
                current += line[:-1] + " "
                continue
            current += line
            keyword, _, rest = current.strip().partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
            current = ""
    if current.strip():
        keyword, _, rest = current.strip().partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    return instructions


class Stage:
    def __init__(self, image, name):
        self.image = image
        self.name = name
        self.instructions = []

    def all(self, keyword):
        return [args for kw, args in self.instructions if kw == keyword]


def stages_of(instructions):
    stages = []
    for keyword, args in instructions:
        if keyword == "FROM":
            words = args.split()
            words = [w for w in words if not w.startswith("--platform")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        elif not stages:
            if keyword != "ARG":
                raise AssertionError(keyword + " before the first FROM")
        else:
            stages[-1].instructions.append((keyword, args))
    return stages


def exec_form(args):
    """The JSON array of an exec-form instruction, or None for shell form."""
    try:
        value = json.loads(args)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def apt_installed(run_args):
    """Packages an `apt-get install` in a RUN installs."""
    packages = []
    for command in re.split(r"&&|;|\|\|", run_args):
        words = shlex.split(command)
        if "apt-get" in words and "install" in words:
            after = words[words.index("install") + 1:]
            packages += [w for w in after if not w.startswith("-")]
    return packages


def needed_libraries(binary):
    output = subprocess.run(["readelf", "-d", binary], check=True, stdout=subprocess.PIPE,
                            text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", output)


def packages_of(binary, sonames):
    """{soname: Debian package installing the library the binary loads for
    it}, from ldd's resolved paths and one `dpkg -S` (trying both sides of
    Debian's /usr merge)."""
    output = subprocess.run(["ldd", binary], check=True, stdout=subprocess.PIPE,
                            text=True).stdout
    paths = dict(re.findall(r"^\s*(\S+) => (/\S+)", output, re.M))
    # The dynamic loader, which a binary needs by name when it calls into it
    # (__tls_get_addr), is listed by its path alone.
    for path in re.findall(r"^\s*(/\S+) \(0x", output, re.M):
        paths.setdefault(os.path.basename(path), path)
    candidates = {}
    for soname in sonames:
        path = paths.get(soname)
        if path is None:
            continue
        other = path[4:] if path.startswith("/usr/") else "/usr" + path
        candidates[soname] = [path, other]
    result = subprocess.run(["dpkg", "-S"] + [p for c in candidates.values() for p in c],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    owner = {}
    for line in result.stdout.splitlines():
        packages, _, path = line.partition(": ")
        owner[path.strip()] = packages.split(",")[0].split(":")[0].strip()
    found = {}
    for soname, paths_of_soname in candidates.items():
        for path in paths_of_soname:
            if path in owner:
                found[soname] = owner[path]
                break
    return found


class DockerfileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.instructions = parse_dockerfile(ARGS.dockerfile)
        cls.stages = stages_of(cls.instructions)
        cls.runtime = cls.stages[-1]
        cls.flags = deploy_testing.server_flags(ARGS.server)

    def build_stage(self):
        """The stage the runtime stage copies the server from."""
        sources = [re.search(r"--from=(\S+)", a) for a in self.runtime.all("COPY")]
        names = [m.group(1) for m in sources if m]
        self.assertEqual(len(names), 1, "the runtime stage copies from exactly one stage")
        for stage in self.stages[:-1]:
            if stage.name == names[0]:
                return stage
        self.fail("no stage named " + names[0])

    def test_is_multi_stage_on_debian_bookworm(self):
        self.assertGreaterEqual(len(self.stages), 2)
        for stage in self.stages:
            self.assertRegex(stage.image, r"^debian:bookworm(-slim)?(@sha256:[0-9a-f]+)?$",
                             "every stage is Debian 12")
        self.assertTrue(self.runtime.image.startswith("debian:bookworm-slim"),
                        "the runtime stage is slim")

    def test_build_stage_installs_debian_packages_and_builds_with_bazel_opt(self):
        runs = " ;; ".join(self.build_stage().all("RUN"))
        self.assertIn("tools/install_deps.sh", runs)
        build = [r for r in self.build_stage().all("RUN") if re.search(r"\bbazel\b.*\bbuild\b", r)]
        self.assertEqual(len(build), 1, "one bazel build")
        self.assertRegex(build[0], r"(-c opt|--compilation_mode[= ]opt|--config[= ]opt)")
        self.assertIn("//server:partplan_server", build[0])

    def test_runtime_stage_has_no_build_tools(self):
        installed = [p for r in self.runtime.all("RUN") for p in apt_installed(r)]
        for package in installed:
            self.assertFalse(package.endswith("-dev"), package)
            self.assertNotIn(package, {"g++", "gcc", "bazel-bootstrap", "protobuf-compiler",
                                       "build-essential"})

    def test_runtime_packages_are_exactly_the_linked_libraries(self):
        installed = set(p for r in self.runtime.all("RUN") for p in apt_installed(r))
        sonames = needed_libraries(ARGS.server)
        owners = packages_of(ARGS.server, sonames)
        needed = {}
        for soname in sonames:
            self.assertIn(soname, owners, "no Debian package installs " + soname)
            needed.setdefault(owners[soname], []).append(soname)
        missing = set(needed) - installed - BASE_IMAGE_PACKAGES
        self.assertFalse(missing, "linked but not installed: %s" %
                         {p: needed[p] for p in missing})
        unused = installed - set(needed)
        self.assertFalse(unused, "installed but not linked: %s" % sorted(unused))

    def test_apt_keeps_the_image_small(self):
        for stage in self.stages:
            for run in stage.all("RUN"):
                if apt_installed(run) and "apt-get" in run:
                    self.assertIn("--no-install-recommends", run)
                    self.assertIn("rm -rf /var/lib/apt/lists", run,
                                  "apt lists removed in the same layer")

    def test_runs_as_a_numeric_non_root_user(self):
        users = self.runtime.all("USER")
        self.assertTrue(users, "the runtime stage sets USER")
        user = users[-1]
        self.assertRegex(user, r"^\d+(:\d+)?$",
                         "numeric, so that Kubernetes' runAsNonRoot can verify it")
        uid, _, gid = user.partition(":")
        self.assertNotEqual(int(uid), 0)
        if gid:
            self.assertNotEqual(int(gid), 0)
        # Nothing after USER switches back to root.
        last_user = max(i for i, (kw, _) in enumerate(self.runtime.instructions) if kw == "USER")
        for keyword, _ in self.runtime.instructions[last_user + 1:]:
            self.assertNotIn(keyword, {"RUN", "USER"})

    def test_exposes_the_servers_default_ports(self):
        exposed = set()
        for args in self.runtime.all("EXPOSE"):
            exposed |= {int(p.split("/")[0]) for p in args.split()}
        self.assertEqual(exposed, {int(self.flags["port"]), int(self.flags["metrics_port"])},
                         "EXPOSE equals --port and --metrics_port defaults of the binary")

    def test_entrypoint_is_the_server_with_flags_from_the_environment(self):
        entrypoints = self.runtime.all("ENTRYPOINT")
        self.assertEqual(len(entrypoints), 1)
        command = exec_form(entrypoints[0])
        self.assertIsNotNone(command, "exec form, so the server is PID 1 and gets SIGTERM")
        self.assertEqual(len(command), 1, "no flags baked in: they come from PARTPLAN_* variables")
        copies = [a for a in self.runtime.all("COPY") if "partplan_server" in a]
        self.assertEqual(len(copies), 1)
        self.assertEqual(command[0], copies[0].split()[-1])
        self.assertFalse(self.runtime.all("CMD"))
        self.assertNotIn("SHELL", [kw for kw, _ in self.runtime.instructions])

    def test_no_secrets_or_floating_tags(self):
        for stage in self.stages:
            self.assertNotRegex(stage.image, r":latest$")
            for env in stage.all("ENV") + stage.all("ARG"):
                self.assertNotRegex(env.upper(), r"(TOKEN|PASSWORD|SECRET|PRIVATE)")
            for add in stage.all("ADD"):
                self.assertNotRegex(add, r"https?://", "no downloads outside apt")

    def test_build_copies_what_the_server_is_built_from(self):
        copied = " ".join(self.build_stage().all("COPY"))
        for path in ["WORKSPACE", ".bazelrc", "third_party", "proto", "planner", "server",
                     "tools"]:
            self.assertIn(path, copied)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--dockerfile", required=True)
    parser.add_argument("--server", required=True)
    deploy_testing.main(sys.modules[__name__], parser)

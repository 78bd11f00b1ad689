"""Shared helpers of the deploy tests: the server's flags, and a unittest
runner that writes one JUnit <testcase> per test method to Bazel's
$XML_OUTPUT_FILE (tools/test.sh counts those).

The tests run from the runfiles root, with the paths of their data given on
the command line by tests/deploy/BUILD.bazel:

    run_py_test.sh tests/deploy/k8s_test.py --server=server/partplan_server ...
"""

import argparse
import os
import re
import subprocess
import sys
import time
import unittest
import xml.sax.saxutils

# Filled by main() from the command line, for the tests to read.
ARGS = argparse.Namespace()


def parse_args(argv, parser):
    """Parses our own arguments, leaving unittest's."""
    known, rest = parser.parse_known_args(argv[1:])
    for key, value in vars(known).items():
        setattr(ARGS, key, value)
    return [argv[0]] + rest


_HELP_ENTRY = re.compile(r"--(\w+) \((.*?)\);\s+default: (.*?);", re.S)


def server_flags(server):
    """{flag name: default value as printed} from `partplan_server --help`.

    absl prints each flag as `--name (help); default: value;` (wrapped over
    lines) and exits 1 after --help.
    """
    output = subprocess.run([server, "--help"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={"PATH": "/usr/bin:/bin"}).stdout
    flags = {}
    for name, _, default in _HELP_ENTRY.findall(output):
        flags[name] = default.strip().strip('"')
    if "port" not in flags:
        raise AssertionError("no --port in partplan_server --help:\n" + output)
    return flags


def readiness_service_name(server_header):
    """The value of kReadinessServiceName in server/server.h."""
    with open(server_header) as f:
        match = re.search(r'kReadinessServiceName\[\]\s*=\s*"([^"]*)"', f.read())
    if not match:
        raise AssertionError("no kReadinessServiceName in " + server_header)
    return match.group(1)


def flag_env_var(flag):
    """The environment variable of a server flag (server/flags.h)."""
    return "PARTPLAN_" + flag.upper()


class _RecordingResult(unittest.TextTestResult):
    """Records each test's outcome and duration for the JUnit report."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.records = []
        self._started = {}

    def startTest(self, test):
        self._started[test.id()] = time.monotonic()
        super().startTest(test)

    def _record(self, test, kind, text=""):
        elapsed = time.monotonic() - self._started.get(test.id(), time.monotonic())
        self.records.append((test, kind, text, elapsed))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "ok")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)


def _write_junit(path, suite_name, records):
    esc = xml.sax.saxutils.quoteattr
    failures = sum(1 for r in records if r[1] == "failure")
    errors = sum(1 for r in records if r[1] == "error")
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             "<testsuites>",
             "<testsuite name=%s tests=\"%d\" failures=\"%d\" errors=\"%d\">"
             % (esc(suite_name), len(records), failures, errors)]
    for test, kind, text, elapsed in records:
        cls, _, name = test.id().rpartition(".")
        attrs = "name=%s classname=%s time=\"%.3f\"" % (esc(name), esc(cls), elapsed)
        if kind == "ok":
            lines.append("<testcase %s/>" % attrs)
            continue
        lines.append("<testcase %s>" % attrs)
        tag = {"failure": "failure", "error": "error", "skipped": "skipped"}[kind]
        first_line = text.strip().splitlines()[-1] if text.strip() else kind
        lines.append("<%s message=%s>%s</%s>"
                     % (tag, esc(first_line), xml.sax.saxutils.escape(text), tag))
        lines.append("</testcase>")
    lines += ["</testsuite>", "</testsuites>", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main(module, parser):
    """Runs the TestCases of `module`; exit status 0 when all pass."""
    argv = parse_args(sys.argv, parser)
    loader = unittest.TestLoader()
    if len(argv) > 1:  # test names given, as unittest takes them
        suite = loader.loadTestsFromNames(argv[1:], module)
    else:
        suite = loader.loadTestsFromModule(module)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=_RecordingResult,
                                     stream=sys.stdout)
    result = runner.run(suite)
    xml_path = os.environ.get("XML_OUTPUT_FILE")
    if xml_path:
        _write_junit(xml_path, module.__name__, result.records)
    sys.exit(0 if result.wasSuccessful() else 1)

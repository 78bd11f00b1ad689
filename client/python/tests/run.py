#!/usr/bin/env python3
"""Runs the Python client's tests (stdlib unittest) and prints a count.

    /usr/bin/python3 client/python/tests/run.py            # every test
    /usr/bin/python3 client/python/tests/run.py test_client  # some modules
    /usr/bin/python3 client/python/tests/run.py -v         # one line per test

The last line is `python tests: N passed, M failed, K skipped`, which
tools/test.sh adds to its own count (errors count as failures; skipped tests
count as neither). Exits 0 when nothing failed.
"""

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


class _Result(unittest.TextTestResult):
    """Counts subtests: a test's subtests each pass or fail on their own."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = 0
        self.failed_subtests = 0
        self._test_had_subtests = set()

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        self._test_had_subtests.add(test.id())
        if err is None:
            self.passed += 1
        elif not issubclass(err[0], unittest.SkipTest):
            self.failed_subtests += 1

    def addSuccess(self, test):
        super().addSuccess(test)
        if test.id() not in self._test_had_subtests:
            self.passed += 1


def main(argv):
    verbosity = 2 if "-v" in argv else 1
    names = [a for a in argv if not a.startswith("-")]
    sys.path.insert(0, os.path.dirname(HERE))
    sys.path.insert(0, HERE)
    loader = unittest.TestLoader()
    if names:
        suite = unittest.TestSuite(loader.loadTestsFromName(n) for n in names)
    else:
        suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    start = time.monotonic()
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=verbosity, resultclass=_Result)
    result = runner.run(suite)
    # failures/errors hold one entry per failing test or subtest.
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    sys.stdout.flush()
    print(f"python tests: {result.passed} passed, {failed} failed, {skipped} skipped "
          f"({time.monotonic() - start:.1f}s)", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

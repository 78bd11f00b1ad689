"""No C++ source behaves differently by build mode: no `assert`, no
`NDEBUG`, no `DCHECK`, no `__OPTIMIZE__`. tools/test.sh runs the C++ tests
once, built with --config=opt (-O2, NDEBUG defined, as the image's binary
is); this check is what makes the default build's behaviour the same code.

    run_py_test.sh tests/architecture/build_mode_test.py --root=.
"""

import argparse
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "deploy"))
import deploy_testing  # noqa: E402  (the JUnit runner shared with the deploy tests)
from layering_test import sources  # noqa: E402

FOLDERS = ("planner", "server", "client/cli")
# What changes meaning with -c opt (NDEBUG) or with the optimiser.
_BY_MODE = re.compile(r"(?<![\w.])(assert\s*\(|NDEBUG|DCHECK\w*|__OPTIMIZE__)")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def uses_of_the_build_mode(text):
    """What in `text` (comments and static_assert aside) depends on the mode."""
    code = _COMMENT.sub("", text)
    return [m.group(1) for m in _BY_MODE.finditer(code)]


class BuildModeTest(unittest.TestCase):

    def test_the_pattern_finds_what_it_is_for(self):
        self.assertEqual(uses_of_the_build_mode("  assert(x > 0);"), ["assert("])
        self.assertEqual(uses_of_the_build_mode("#ifndef NDEBUG"), ["NDEBUG"])
        self.assertEqual(uses_of_the_build_mode("DCHECK_EQ(a, b);"), ["DCHECK_EQ"])
        self.assertEqual(uses_of_the_build_mode("static_assert(sizeof(int) == 4);"), [])
        self.assertEqual(uses_of_the_build_mode("// assert(x) in a comment"), [])
        self.assertEqual(uses_of_the_build_mode("self.assert_(x)"), [])

    def test_no_source_depends_on_the_build_mode(self):
        seen = 0
        found = []
        for folder in FOLDERS:
            for path, text in sources(folder):
                seen += 1
                found += [f"{path}: {use}" for use in uses_of_the_build_mode(text)]
        self.assertGreater(seen, 100, "too few sources found: wrong --root?")
        self.assertEqual(found, [])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=".", help="the workspace (or runfiles) root")
    deploy_testing.main(sys.modules[__name__], parser)


if __name__ == "__main__":
    main()

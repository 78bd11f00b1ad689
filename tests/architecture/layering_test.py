"""The library's layers, drawn from the code: every `#include "planner/X/..."`
in a planner folder must point to a lower layer (or its own folder), and the
server may use only the entry points and the library's vocabulary.

The layers, lowest first (docs/architecture.md draws them):

    base <- graph <- split <- fx <- pipeline, data_parallel <- training <- parallelize <- wire <- api

(base: status, cancellation, limits; graph: import and validation into
domain types; split, fx, pipeline, data_parallel, training: the planner families, each
returning plain structs; wire: those structs written as response bytes; api:
the entry points and the table of RPCs.)

An arrow upward, or between the two planner families of one layer, is a
failure naming the file and the include; so is a planner folder this test does
not know (a new layer must be placed here on purpose).

    run_py_test.sh tests/architecture/layering_test.py --root=.
"""

import argparse
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "deploy"))
import deploy_testing  # noqa: E402  (the JUnit runner shared with the deploy tests)

ARGS = deploy_testing.ARGS

# Rank of each planner folder: an include may only go to a lower rank.
RANKS = {
    "base": 0,
    "graph": 1,
    "split": 2,
    "fx": 3,
    "pipeline": 4,
    "data_parallel": 4,
    "training": 5,
    "parallelize": 6,
    "wire": 7,
    "api": 8,
}
# What the server may include of the library.
SERVER_MAY_USE = {"api", "base"}

_INCLUDE = re.compile(r'^#include "planner/([a-z_]+)/[^"]+"', re.M)


def sources(folder):
    """(path, text) of every .h and .cc under `folder`."""
    for dirpath, _, names in os.walk(os.path.join(ARGS.root, folder)):
        for name in sorted(names):
            if name.endswith((".h", ".cc")):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    yield os.path.relpath(path, ARGS.root), f.read()


def includes(text):
    return _INCLUDE.findall(text)


class LayeringTest(unittest.TestCase):

    def test_every_planner_folder_has_a_layer(self):
        folders = sorted(d for d in os.listdir(os.path.join(ARGS.root, "planner"))
                         if os.path.isdir(os.path.join(ARGS.root, "planner", d)))
        self.assertTrue(folders, "no planner folders found under --root")
        self.assertEqual([d for d in folders if d not in RANKS], [])
        self.assertFalse([n for n in os.listdir(os.path.join(ARGS.root, "planner"))
                          if n.endswith((".h", ".cc"))],
                         "sources directly under planner/: each belongs to a layer")

    def test_includes_point_down(self):
        seen = 0
        upward = []
        for path, text in sources("planner"):
            layer = path.split(os.sep)[1]
            for target in includes(text):
                seen += 1
                if target != layer and RANKS.get(target, 99) >= RANKS[layer]:
                    upward.append("%s includes planner/%s/" % (path, target))
        self.assertGreater(seen, 100, "too few includes found: wrong --root?")
        self.assertEqual(upward, [])

    def test_server_uses_only_the_entry_points(self):
        seen = 0
        reaching_in = []
        for path, text in sources("server"):
            for target in includes(text):
                seen += 1
                if target not in SERVER_MAY_USE:
                    reaching_in.append("%s includes planner/%s/" % (path, target))
        self.assertGreater(seen, 0, "no server sources found: wrong --root?")
        self.assertEqual(reaching_in, [])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=".", help="the workspace (or runfiles) root")
    deploy_testing.main(sys.modules[__name__], parser)


if __name__ == "__main__":
    main()

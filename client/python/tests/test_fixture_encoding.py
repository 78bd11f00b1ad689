"""partplan's encoder reproduces the golden fixtures' request graphs.

tests/fixtures/partitioner/generate.py wrote the graphs of its
size_based/*.json fixtures with its own copy of the encoding. Rebuilding each
fixture model as generate.py does and encoding it with
partplan.graph_to_dict (sizes computed by partplan, not torch) must give
exactly the graph in the file, so that the generator can use partplan's
exporter instead of its copy without changing a byte of its output.
"""

import collections
import glob
import importlib.util
import json
import os
import unittest

import support

import partplan

FIXTURES = os.path.join(support.REPO, "tests", "fixtures", "partitioner")


def load_generator():
    spec = importlib.util.spec_from_file_location("partplan_fixture_generate",
                                                  os.path.join(FIXTURES, "generate.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FixtureEncodingTest(unittest.TestCase):
    def test_size_based_fixture_graphs(self):
        generate = load_generator()
        cases = collections.defaultdict(list)
        for path in sorted(glob.glob(os.path.join(FIXTURES, "size_based", "*.json"))):
            with open(path) as f:
                doc = json.load(f)
            cases[doc["name"]].append(doc["request"]["graph"])
        self.assertGreaterEqual(len(cases), 30)
        checked = 0
        for spec in generate.MODELS:
            names = [f"{spec['name']}_{variant}" for variant in spec["configs"]]
            names = [n for n in names if n in cases]
            if not names:
                continue
            with self.subTest(model=spec["name"]):
                gm = generate.prepare(*generate.build(spec))
                for node in gm.graph.nodes:  # partplan sizes the nodes itself
                    if hasattr(node, "size_bytes"):
                        del node.size_bytes
                for case in names:
                    encoded = partplan.graph_to_dict(gm, name=case, flops=False, modules=False)
                    expected = cases[case][0]
                    self.assertEqual(json.dumps(encoded, sort_keys=True, indent=1),
                                     json.dumps(expected, sort_keys=True, indent=1), case)
                    checked += 1
        self.assertEqual(checked, len(cases))


if __name__ == "__main__":
    unittest.main()

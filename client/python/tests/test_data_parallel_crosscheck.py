"""PlanDataParallel's own plans of models the fixtures do not use, run on
batch shards with torch and compared node by node with the whole batch:
tests/fixtures/data_parallel/crosscheck.py, one subtest per model and style.

It asks the planner through the plan_json binary of the same build as the
server under test ($PARTPLAN_PLAN_JSON, or beside $PARTPLAN_SERVER in
bazel-bin, or the workspace's bazel-bin).
"""

import importlib.util
import os
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CROSSCHECK = os.path.join(ROOT, "tests", "fixtures", "data_parallel", "crosscheck.py")
PLAN_JSON_IN_BIN = os.path.join("tests", "planner", "data_parallel", "plan_json")


def _plan_json() -> str:
    if os.environ.get("PARTPLAN_PLAN_JSON"):
        return os.environ["PARTPLAN_PLAN_JSON"]
    server = os.environ.get("PARTPLAN_SERVER")
    if server:  # BIN/server/partplan_server
        return os.path.join(os.path.dirname(os.path.dirname(server)), PLAN_JSON_IN_BIN)
    return os.path.join(ROOT, "bazel-bin", PLAN_JSON_IN_BIN)


def _load_crosscheck():
    spec = importlib.util.spec_from_file_location("data_parallel_crosscheck", CROSSCHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class DataParallelCrossCheckTest(unittest.TestCase):
    def test_plans_hold_on_batch_shards(self):
        plan_json = _plan_json()
        self.assertTrue(os.access(plan_json, os.X_OK),
                        f"no plan_json binary at {plan_json}: bazel build "
                        "//tests/planner/data_parallel:plan_json")
        check = _load_crosscheck()
        check.PLAN_JSON = plan_json
        rules = check.ruled_targets()
        for style in ("REPLICATE", "FULLY_SHARD"):
            check.STYLE = style
            for name in check.MODELS:
                with self.subTest(model=name, style=style):
                    result = check.check_model(name, rules)
                    self.assertNotIn("error", result, result.get("error"))
                    # Every node matches the whole batch or says it may not.
                    self.assertEqual(result["failures"], [])
                    self.assertEqual(result["unflagged"], [])
                    self.assertGreater(result["checked"], 0)


if __name__ == "__main__":
    unittest.main()

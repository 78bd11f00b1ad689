// libFuzzer target: BuildPipelineGraph requests, parsed and run through the planner
// library's entry point, checked against its contract (fuzz_harness.h).
#include "tests/fuzz/fuzz_harness.h"

PARTPLAN_FUZZ_TARGET(BuildPipelineGraph)

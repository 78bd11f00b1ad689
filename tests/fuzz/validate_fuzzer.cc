// libFuzzer target: request parsing and validation. Validate requests,
// parsed and run through the planner library's entry point (graph import
// and device inventory checks), checked against its contract
// (fuzz_harness.h).
#include "tests/fuzz/fuzz_harness.h"

PARTPLAN_FUZZ_TARGET(Validate)

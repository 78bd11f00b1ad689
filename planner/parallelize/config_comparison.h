// Why one parallel configuration beats another, in a sentence with numbers:
// the two steps, then the parts of the step (parallel_search.h StepParts)
// that differ the most, and the memory when it is what rules the loser's
// choices out.
//
//   const std::string why = WhyFirstBeatsSecond(model, result.configs[0],
//   result.configs[1]);
//   // "t=8 p=4 d=32 b=1 (1F1B) takes 1.92 s a step, 0.18 s less than
//   //  t=4 p=8 d=32 b=1 (1F1B): ..."
#ifndef PARTPLAN_PLANNER_PARALLELIZE_CONFIG_COMPARISON_H_
#define PARTPLAN_PLANNER_PARALLELIZE_CONFIG_COMPARISON_H_

#include <string>

#include "planner/parallelize/parallel_search.h"

namespace partplan {

// A configuration in a few words: "t=8 p=4 d=32 b=1, interleaved 1F1B v=2,
// ZeRO-1, selective recompute".
std::string DescribeConfig(const ParallelCandidate& candidate);

std::string WhyFirstBeatsSecond(const ParallelConfigResult& first,
                                const ParallelConfigResult& second);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PARALLELIZE_CONFIG_COMPARISON_H_

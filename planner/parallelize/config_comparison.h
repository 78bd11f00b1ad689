// Why one parallel configuration beats another, in a sentence with numbers:
// the two steps, then the parts of the step (parallel_search.h StepParts)
// that differ the most, and the memory when it is what rules the loser's
// choices out.
//
//   const std::string why = WhyFirstBeatsSecond(result.configs[0], result.configs[1]);
//   // "t=8 p=4 d=32 b=1, 1F1B, ZeRO-1 takes 1.92 s a step, 180.0 ms less than
//   //  t=4 p=8 d=32 b=1, 1F1B, ZeRO-1 (2.10 s); on the device that ends the
//   //  step, pipeline idle time ..."
#ifndef PARTPLAN_PLANNER_PARALLELIZE_CONFIG_COMPARISON_H_
#define PARTPLAN_PLANNER_PARALLELIZE_CONFIG_COMPARISON_H_

#include <string>

#include "planner/parallelize/parallel_search.h"

namespace partplan {

std::string WhyFirstBeatsSecond(const ParallelConfigResult& first,
                                const ParallelConfigResult& second);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PARALLELIZE_CONFIG_COMPARISON_H_

// The Parallelize response, written from the configuration search's result
// (parallelize/parallel_search.h) as a message: per configuration its
// degrees and choices, the predicted step and what it gives, where the step
// goes, the fullest device's memory, and each stage's layers and devices;
// then why the first beats the second.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const ParallelSearchResult result,
//                             SearchParallelConfigs(problem, token));
//   ParallelizeResponseFromResult(problem, result, &response);
#ifndef PARTPLAN_PLANNER_WIRE_PARALLELIZE_RESPONSE_H_
#define PARTPLAN_PLANNER_WIRE_PARALLELIZE_RESPONSE_H_

#include "partplan/v1/parallelize.pb.h"
#include "planner/parallelize/parallel_search.h"
#include "planner/parallelize/parallelize_problem.h"

namespace partplan {

// Fills `*response` (which may live on an arena, and is cleared first).
void ParallelizeResponseFromResult(const ParallelizeProblem& problem,
                                   const ParallelSearchResult& result,
                                   v1::ParallelizeResponse* response);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_WIRE_PARALLELIZE_RESPONSE_H_

// What bounds a plan, in one or two sentences. A partition plan
// (PlanSummary.bound):
// the partition that takes longest (or, without latencies, the largest), the
// fullest device, and what the same planner gives with one more device like
// the largest, and with 10% more memory on every device.
//
//   PlanFigures now = FiguresOf(planned, devices);
//   std::string bound = DescribeBound(now, &with_one_more, "gpu0", &with_more_memory);
//
// The what-ifs plan the graph again; the entry point decides whether to
// run them (they are left out above kMaxNodesForWhatIfs nodes).
#ifndef PARTPLAN_PLANNER_API_PLAN_BOUND_H_
#define PARTPLAN_PLANNER_API_PLAN_BOUND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "planner/data_parallel/data_parallel_plan.h"
#include "planner/fx/partitioner.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"
#include "planner/pipeline/shard_graph.h"
#include "planner/training/stage_search.h"

namespace partplan {

// Graphs above this many nodes get the bound without the what-ifs: they
// would plan the graph twice more.
inline constexpr int kMaxNodesForWhatIfs = 1 << 17;

// The figures of a plan the sentence compares.
struct PlanFigures {
  int partitions = 0;
  double critical_path_seconds = 0;
  int32_t slowest_partition = -1;  // by latency; -1 without latencies
  double slowest_seconds = 0;
  int32_t largest_partition = -1;  // by memory
  int64_t largest_bytes = 0;
  std::string fullest_device;  // the most used share of its memory
  double fullest_share = 0;
  int64_t fullest_available = 0;
};

PlanFigures FiguresOf(const PartitionerPlan& plan, const DeviceList& devices);

// The sentence. `one_more` and `more_memory` are the what-ifs' figures, or
// null when they were not run; `one_more_like` names the device copied;
// `skipped_what_ifs` says they were left out for the graph's size.
std::string DescribeBound(const PlanFigures& now, const PlanFigures* one_more,
                          absl::string_view one_more_like, const PlanFigures* more_memory,
                          bool skipped_what_ifs);

// A shard plan (ShardGraph's PlanSummary.bound): its largest shard and,
// for BALANCED, the one with the most work. No what-ifs: shards are not
// placed on memory.
std::string DescribeShardBound(const ShardPlan& plan, int64_t graph_total_bytes);

// A data-parallel plan (PlanDataParallelResponse.bound): the bytes each
// step moves, the redistribution moving the most, and the nodes decided
// without a rule. No what-ifs: the plan does not depend on memory.
std::string DescribeDataParallelBound(const CompactGraph& graph, const DataParallelPlan& plan);

// Training plans (TrainingPlan.bound): the busiest stage, the device
// nearest its memory, and the step of the first plan found (no search:
// every plan found fits, so the optimum is no slower) with 10% more memory
// on every device and with one more device like the last. Left out when
// items x stages is above kMaxTrainingWorkForWhatIfs.
inline constexpr int64_t kMaxTrainingWorkForWhatIfs = int64_t{1} << 22;

// The step of a what-if: `found` false when it made no plan.
struct TrainingWhatIf {
  bool found = false;
  double step_seconds = 0;
};

// `one_more_like` names the device copied; what-ifs null when not run.
std::string DescribeTrainingBound(const TrainingStagePlan& plan,
                                  const std::vector<TrainingDevice>& devices,
                                  const TrainingWhatIf* more_memory, const TrainingWhatIf* one_more,
                                  absl::string_view one_more_like, bool skipped_what_ifs);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_API_PLAN_BOUND_H_

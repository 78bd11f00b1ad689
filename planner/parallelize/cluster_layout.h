// How a configuration lays the cluster's free devices out: tensor groups of
// t devices, p pipeline ranks of d replicas each (Megatron-LM's order), and
// what each rank's devices give the model (RankLinks: the slowest device's
// peak, the smallest memory, the slowest link of each collective).
//
//   const std::vector<std::vector<int>> groups = TensorGroups(cluster, 8, false);
//   const Layout layout = MakeLayout(cluster, groups, /*t=*/8, /*p=*/4, /*d=*/32);
//   const std::vector<RankLinks> ranks = RanksOf(cluster, groups, 8, 4, 32, nullptr);
//
// O(p d t) each, reading every device of the layout once.
#ifndef PARTPLAN_PLANNER_PARALLELIZE_CLUSTER_LAYOUT_H_
#define PARTPLAN_PLANNER_PARALLELIZE_CLUSTER_LAYOUT_H_

#include <utility>
#include <vector>

#include "planner/parallelize/parallelize_problem.h"
#include "planner/parallelize/transformer_costs.h"

namespace partplan {

// One way to lay t-device groups out as p ranks of d replicas: group
// r d + j is replica j of rank r (Megatron-LM's order).
// Only its summary is kept per layout (the lattice has many); the ranks'
// links are made again (RanksOf) for the configurations planned.
struct Layout {
  int tensor = 1, pipeline = 1, data = 1;
  RankLinks first;  // rank 0's: the reference of the costs
  // The ranks' distinct links, with how many ranks have each: bounds
  // are computed per distinct value.
  std::vector<std::pair<RankLinks, int>> distinct;
  double most_memory = 0;
  double fastest_data_rate = 0;
  double peak_flops_sum = 0;  // over every device used
};

// Tensor groups of `t` devices (indices into cluster.free): per host, its
// free devices in order, t at a time; or, across hosts, every free device in
// order.
std::vector<std::vector<int>> TensorGroups(const ParallelizeCluster& cluster, int t,
                                           bool across_hosts);

// Each pipeline rank's links when tensor groups `groups` make p ranks of
// d replicas; `*peak_flops_sum` (if not null) adds every device's peak.
std::vector<RankLinks> RanksOf(const ParallelizeCluster& cluster,
                               const std::vector<std::vector<int>>& groups, int t, int p, int d,
                               double* peak_flops_sum);

// The summary of the layout of groups `groups` as p ranks of d replicas.
Layout MakeLayout(const ParallelizeCluster& cluster, const std::vector<std::vector<int>>& groups,
                  int t, int p, int d);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PARALLELIZE_CLUSTER_LAYOUT_H_

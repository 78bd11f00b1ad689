#include "planner/parallelize/cluster_layout.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

namespace partplan {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

bool SameLinks(const RankLinks& a, const RankLinks& b) {
  return a.peak_flops == b.peak_flops && a.memory_bytes == b.memory_bytes &&
         a.tensor_bytes_per_second == b.tensor_bytes_per_second &&
         a.data_bytes_per_second == b.data_bytes_per_second &&
         a.next_bytes_per_second == b.next_bytes_per_second;
}

// One direction between two devices: the host's link, else the slower of
// the two devices' network shares.
double LinkRate(const ParallelizeCluster& cluster, const ClusterDevice& a, const ClusterDevice& b) {
  const DeviceType& ta = cluster.types[a.type];
  const DeviceType& tb = cluster.types[b.type];
  if (a.host == b.host) return ta.intra_host_bytes_per_second;
  return std::min(ta.inter_host_bytes_per_second, tb.inter_host_bytes_per_second);
}

// The slowest link of a ring through `devices` (infinity for one device).
double RingRate(const ParallelizeCluster& cluster, const std::vector<const ClusterDevice*>& ring) {
  if (ring.size() <= 1) return kInfinity;
  double rate = kInfinity;
  for (size_t i = 0; i < ring.size(); ++i) {
    rate = std::min(rate, LinkRate(cluster, *ring[i], *ring[(i + 1) % ring.size()]));
  }
  return rate;
}

}  // namespace

std::vector<std::vector<int>> TensorGroups(const ParallelizeCluster& cluster, int t,
                                           bool across_hosts) {
  std::vector<std::vector<int>> groups;
  std::vector<int> group;
  for (int i = 0; i < static_cast<int>(cluster.free.size()); ++i) {
    if (!across_hosts && !group.empty() && cluster.free[group[0]].host != cluster.free[i].host) {
      group.clear();
    }
    group.push_back(i);
    if (static_cast<int>(group.size()) == t) {
      groups.push_back(group);
      group.clear();
    }
  }
  return groups;
}

std::vector<RankLinks> RanksOf(const ParallelizeCluster& cluster,
                               const std::vector<std::vector<int>>& groups, int t, int p, int d,
                               double* peak_flops_sum) {
  std::vector<RankLinks> ranks;
  ranks.reserve(p);
  auto device = [&](int rank, int replica, int tensor_rank) -> const ClusterDevice& {
    return cluster.free[groups[rank * d + replica][tensor_rank]];
  };
  std::vector<const ClusterDevice*> ring;
  for (int r = 0; r < p; ++r) {
    RankLinks links;
    links.peak_flops = kInfinity;
    links.memory_bytes = kInfinity;
    links.tensor_bytes_per_second = kInfinity;
    links.data_bytes_per_second = kInfinity;
    links.next_bytes_per_second = kInfinity;
    for (int j = 0; j < d; ++j) {
      ring.clear();
      for (int k = 0; k < t; ++k) {
        const ClusterDevice& dev = device(r, j, k);
        const DeviceType& type = cluster.types[dev.type];
        links.peak_flops = std::min(links.peak_flops, type.peak_flops);
        links.memory_bytes = std::min(links.memory_bytes, type.memory_bytes);
        if (peak_flops_sum != nullptr) *peak_flops_sum += type.peak_flops;
        ring.push_back(&dev);
      }
      links.tensor_bytes_per_second =
          std::min(links.tensor_bytes_per_second, RingRate(cluster, ring));
      if (p > 1) {
        links.next_bytes_per_second =
            std::min(links.next_bytes_per_second,
                     LinkRate(cluster, device(r, j, 0), device((r + 1) % p, j, 0)));
      }
    }
    // Each tensor rank's data-parallel ring crosses the same hosts as the
    // first's unless groups cross hosts; the first's stands for them.
    ring.clear();
    for (int j = 0; j < d; ++j) ring.push_back(&device(r, j, 0));
    links.data_bytes_per_second = RingRate(cluster, ring);
    ranks.push_back(links);
  }
  return ranks;
}

Layout MakeLayout(const ParallelizeCluster& cluster, const std::vector<std::vector<int>>& groups,
                  int t, int p, int d) {
  Layout layout;
  layout.tensor = t;
  layout.pipeline = p;
  layout.data = d;
  const std::vector<RankLinks> ranks = RanksOf(cluster, groups, t, p, d, &layout.peak_flops_sum);
  layout.first = ranks[0];
  for (const RankLinks& links : ranks) {
    layout.most_memory = std::max(layout.most_memory, links.memory_bytes);
    layout.fastest_data_rate = std::max(layout.fastest_data_rate, links.data_bytes_per_second);
    bool seen = false;
    for (auto& [value, count] : layout.distinct) {
      if (SameLinks(value, links)) {
        ++count;
        seen = true;
        break;
      }
    }
    if (!seen) layout.distinct.push_back({links, 1});
  }
  return layout;
}

}  // namespace partplan

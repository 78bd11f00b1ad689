#include "planner/fx/first_fit_index.h"

#include <algorithm>

namespace partplan {

FirstFitIndex::FirstFitIndex(const std::vector<int64_t>& capacities) {
  while (leaves_ < static_cast<int>(capacities.size())) leaves_ *= 2;
  max_.assign(2 * leaves_, -1);
  std::copy(capacities.begin(), capacities.end(), max_.begin() + leaves_);
  for (int i = leaves_ - 1; i >= 1; --i) max_[i] = std::max(max_[2 * i], max_[2 * i + 1]);
}

int FirstFitIndex::FindFirst(int64_t need) const {
  if (max_[1] < need) return -1;
  int i = 1;
  while (i < leaves_) i = max_[2 * i] >= need ? 2 * i : 2 * i + 1;
  return i - leaves_;
}

void FirstFitIndex::Take(int i) {
  int node = i + leaves_;
  max_[node] = -1;
  for (node /= 2; node >= 1; node /= 2) {
    max_[node] = std::max(max_[2 * node], max_[2 * node + 1]);
  }
}

}  // namespace partplan

#include "planner/training/shared_saves.h"

#include <algorithm>
#include <utility>

namespace partplan {

SharedSaveSums::SharedSaveSums(int items, std::vector<SharedSave> pairs)
    : items_(items), nodes_(1), root_(items + 1, 0) {
  std::sort(pairs.begin(), pairs.end(),
            [](const SharedSave& a, const SharedSave& b) { return a.first > b.first; });
  size_t next = 0;
  int root = 0;
  for (int begin = items - 1; begin >= 0; --begin) {
    for (; next < pairs.size() && pairs[next].first == begin; ++next) {
      root = Insert(root, 0, items, pairs[next].second, pairs[next].bytes);
    }
    root_[begin] = root;
  }
}

// A new path from the root to `at`'s leaf with `bytes` added; the rest is
// shared with the version before.
int SharedSaveSums::Insert(int node, int low, int high, int at, int64_t bytes) {
  TreeNode copy = nodes_[node];
  copy.sum += bytes;
  if (high - low > 1) {
    const int middle = low + (high - low) / 2;
    if (at < middle) {
      copy.left = Insert(copy.left, low, middle, at, bytes);
    } else {
      copy.right = Insert(copy.right, middle, high, at, bytes);
    }
  }
  nodes_.push_back(copy);
  return static_cast<int>(nodes_.size()) - 1;
}

int64_t SharedSaveSums::Below(int node, int low, int high, int end) const {
  int64_t sum = 0;
  while (node != 0 && low < end) {
    if (high <= end) return sum + nodes_[node].sum;
    const int middle = low + (high - low) / 2;
    if (end <= middle) {
      node = nodes_[node].left;
      high = middle;
    } else {
      sum += nodes_[nodes_[node].left].sum;
      node = nodes_[node].right;
      low = middle;
    }
  }
  return sum;
}

int64_t SharedSaveSums::Within(int begin, int end) const {
  if (nodes_.size() == 1 || begin >= items_) return 0;
  return Below(root_[begin], 0, items_, end);
}

}  // namespace partplan

// SharedSaveSums: how many bytes a stage would count twice if it summed its
// items' saved activations, when two of its items save the same storage.
//
//   SharedSaveSums shared(items, {{/*first=*/3, /*second=*/4, /*bytes=*/4096}});
//   shared.Within(2, 6);  // 4096: items 3 and 4 are both in [2, 6)
//   shared.Within(4, 6);  // 0: only item 4 is
//
// A storage saved by items s_1 < s_2 < ... < s_m (with no other saver
// between consecutive ones) is listed as the pairs (s_j, s_j+1). A stage is
// a range of items, so the savers inside it are consecutive ones, and the
// storage counts once when each saver counts it and each pair inside takes
// it back: a stage's saved bytes are the sum over its items minus
// Within(begin, end). Each query is O(log n) on a persistent segment tree
// (one version per begin, over the pairs' second item), built in
// O(m log n) time and memory for m pairs.
#ifndef PARTPLAN_PLANNER_TRAINING_SHARED_SAVES_H_
#define PARTPLAN_PLANNER_TRAINING_SHARED_SAVES_H_

#include <cstdint>
#include <vector>

namespace partplan {

// Two consecutive items that save the same storage: first < second.
struct SharedSave {
  int first = 0;
  int second = 0;
  int64_t bytes = 0;
};

class SharedSaveSums {
 public:
  SharedSaveSums() : SharedSaveSums(0, {}) {}
  // `pairs` must have 0 <= first < second < items.
  SharedSaveSums(int items, std::vector<SharedSave> pairs);

  // The bytes of the pairs with begin <= first and second < end.
  int64_t Within(int begin, int end) const;

 private:
  struct TreeNode {
    int left = 0;
    int right = 0;
    int64_t sum = 0;
  };
  int Insert(int node, int low, int high, int at, int64_t bytes);
  int64_t Below(int node, int low, int high, int end) const;

  int items_ = 0;
  std::vector<TreeNode> nodes_;  // nodes_[0]: the empty tree
  std::vector<int> root_;        // per begin, the tree of pairs with first >= begin
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_TRAINING_SHARED_SAVES_H_

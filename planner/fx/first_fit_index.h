// FirstFitIndex: the first item, in list order, whose capacity is at least a
// request, among items not yet taken, in O(log n) per query.
//
//   FirstFitIndex index({16, 4, 32});   // capacities in list order
//   int i = index.FindFirst(10);          // -> 0
//   index.Take(i);
//   index.FindFirst(10);                  // -> 2
//
// A max segment tree over capacities; taken items hold -1.
#ifndef PARTPLAN_PLANNER_FX_FIRST_FIT_INDEX_H_
#define PARTPLAN_PLANNER_FX_FIRST_FIT_INDEX_H_

#include <cstdint>
#include <vector>

namespace partplan {

class FirstFitIndex {
 public:
  explicit FirstFitIndex(const std::vector<int64_t>& capacities);

  // The lowest index not taken with capacity >= `need`, or -1.
  int FindFirst(int64_t need) const;
  // Marks item `i` taken (idempotent).
  void Take(int i);

 private:
  int leaves_ = 1;             // a power of two >= number of items
  std::vector<int64_t> max_;   // 2 * leaves_ entries; max_[1] is the root
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_FIRST_FIT_INDEX_H_

// SharedSaveSums against the pairs counted one by one, on every range of
// random instances.
#include "planner/training/shared_saves.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace partplan {
namespace {

TEST(SharedSaveSumsTest, MatchesCountingEveryPair) {
  std::mt19937 random(3);
  for (int round = 0; round < 200; ++round) {
    const int items = std::uniform_int_distribution<int>(1, 40)(random);
    std::vector<SharedSave> pairs;
    const int count = std::uniform_int_distribution<int>(0, 30)(random);
    for (int p = 0; p < count && items > 1; ++p) {
      std::uniform_int_distribution<int> item(0, items - 1);
      int a = item(random), b = item(random);
      if (a == b) continue;
      if (a > b) std::swap(a, b);
      pairs.push_back({a, b, std::uniform_int_distribution<int64_t>(0, 1000)(random)});
    }
    const SharedSaveSums sums(items, pairs);
    for (int begin = 0; begin <= items; ++begin) {
      for (int end = begin; end <= items; ++end) {
        int64_t expected = 0;
        for (const SharedSave& pair : pairs) {
          if (begin <= pair.first && pair.second < end) expected += pair.bytes;
        }
        ASSERT_EQ(sums.Within(begin, end), expected)
            << "round " << round << " [" << begin << ", " << end << ")";
      }
    }
  }
}

TEST(SharedSaveSumsTest, EmptyCountsNothing) {
  EXPECT_EQ(SharedSaveSums().Within(0, 0), 0);
  EXPECT_EQ(SharedSaveSums(5, {}).Within(0, 5), 0);
}

}  // namespace
}  // namespace partplan

#include "planner/fx/first_fit_index.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace partplan {
namespace {

TEST(FirstFitIndexTest, FindsTheFirstUntakenItemThatFits) {
  FirstFitIndex index({16, 4, 32, 8, 32});
  EXPECT_EQ(index.FindFirst(10), 0);
  EXPECT_EQ(index.FindFirst(4), 0);
  index.Take(0);
  EXPECT_EQ(index.FindFirst(4), 1);
  EXPECT_EQ(index.FindFirst(10), 2);
  index.Take(2);
  EXPECT_EQ(index.FindFirst(10), 4);
  index.Take(4);
  EXPECT_EQ(index.FindFirst(10), -1);
  EXPECT_EQ(index.FindFirst(8), 3);
}

TEST(FirstFitIndexTest, AgreesWithALinearScan) {
  std::mt19937 random(7);
  for (int round = 0; round < 50; ++round) {
    const int n = 1 + static_cast<int>(random() % 40);
    std::vector<int64_t> capacity(n);
    for (int64_t& c : capacity) c = random() % 100;
    std::vector<bool> taken(n, false);
    FirstFitIndex index(capacity);
    for (int step = 0; step < n; ++step) {
      const int64_t need = random() % 100;
      int expected = -1;
      for (int i = 0; i < n && expected < 0; ++i) {
        if (!taken[i] && capacity[i] >= need) expected = i;
      }
      ASSERT_EQ(index.FindFirst(need), expected);
      if (expected >= 0) {
        index.Take(expected);
        taken[expected] = true;
      }
    }
  }
}

}  // namespace
}  // namespace partplan

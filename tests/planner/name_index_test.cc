#include "planner/name_index.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace partplan {
namespace {

std::vector<std::string> Names(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(absl::StrCat("layers_", i, "_linear"));
  return names;
}

TEST(NameIndexTest, FindsWhatWasInserted) {
  const std::vector<std::string> names = Names(1000);
  NameIndex index(names.size());
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(index.Insert(names, i, NameIndex::Hash(names[i])), -1);
  }
  EXPECT_EQ(index.size(), 1000);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(index.Find(names, names[i]), i);
  EXPECT_EQ(index.Find(names, "layers_1000_linear"), -1);
  EXPECT_EQ(index.Find(names, ""), -1);
  EXPECT_EQ(index.Find(names, "layers_1_linea"), -1);
}

TEST(NameIndexTest, EmptyIndexFindsNothing) {
  const std::vector<std::string> names = Names(1);
  NameIndex index;
  EXPECT_EQ(index.Find(names, names[0]), -1);
}

TEST(NameIndexTest, DuplicateReturnsTheFirstAndAddsNothing) {
  const std::vector<std::string> names = {"a", "b", "a", "b", "c"};
  NameIndex index(names.size());
  EXPECT_EQ(index.Insert(names, 0, NameIndex::Hash("a")), -1);
  EXPECT_EQ(index.Insert(names, 1, NameIndex::Hash("b")), -1);
  EXPECT_EQ(index.Insert(names, 2, NameIndex::Hash("a")), 0);
  EXPECT_EQ(index.Insert(names, 3, NameIndex::Hash("b")), 1);
  EXPECT_EQ(index.Insert(names, 4, NameIndex::Hash("c")), -1);
  EXPECT_EQ(index.size(), 3);
  EXPECT_EQ(index.Find(names, "a"), 0);
  EXPECT_EQ(index.Find(names, "c"), 4);
}

// Without a reservation, and with far more names than reserved, the table
// doubles as it fills and keeps every name.
TEST(NameIndexTest, GrowsPastItsReservation) {
  const std::vector<std::string> names = Names(50000);
  for (int reserved : {0, 1, 100}) {
    NameIndex index(reserved);
    for (int i = 0; i < 50000; ++i) {
      ASSERT_EQ(index.Insert(names, i, NameIndex::Hash(names[i])), -1) << i;
    }
    for (int i = 0; i < 50000; ++i) ASSERT_EQ(index.Find(names, names[i]), i);
    // A second Reserve does not drop what is indexed.
    index.Reserve(1 << 20);
    EXPECT_EQ(index.Find(names, names[49999]), 49999);
  }
}

// Names whose hashes share their low bits collide on a slot; linear probing
// must still tell them apart by the whole name.
TEST(NameIndexTest, CollidingSlotsAreToldApartByName) {
  const std::vector<std::string> names = Names(20000);
  NameIndex index(8);  // 16 slots at first: every name collides early on
  std::vector<int> ids;
  for (int i = 0; i < 20000; i += 7) {
    ASSERT_EQ(index.Insert(names, i, NameIndex::Hash(names[i])), -1);
    ids.push_back(i);
  }
  for (int i = 0; i < 20000; ++i) {
    EXPECT_EQ(index.Find(names, names[i]), i % 7 == 0 ? i : -1) << names[i];
  }
}

}  // namespace
}  // namespace partplan

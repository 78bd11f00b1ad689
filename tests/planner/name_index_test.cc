#include "planner/graph/name_index.h"

#include <climits>
#include <cstdint>
#include <map>
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

// Names of a few ids far apart, up to the largest NodeId.
struct SparseNames {
  const std::string& operator[](int32_t id) const { return by_id.at(id); }
  std::map<int32_t, std::string> by_id;
};

// A slot keeps an id in as many low bits as the table's size needs; a larger
// id widens them for every slot already filled, which must stay findable.
TEST(NameIndexTest, IdsLargerThanTheTableWidenTheirBits) {
  SparseNames names;
  const std::vector<int32_t> ids = {0, 3, 17, 1 << 12, 1 << 20, (1 << 30) + 5, INT32_MAX};
  for (int32_t id : ids) names.by_id[id] = absl::StrCat("node_", id);
  names.by_id[7] = "never_inserted";
  NameIndex index(4);
  for (int32_t id : ids) {
    ASSERT_EQ(index.Insert(names, id, NameIndex::Hash(names[id])), -1) << id;
    for (int32_t earlier : ids) {
      if (earlier > id) break;
      EXPECT_EQ(index.Find(names, names[earlier]), earlier) << "after inserting " << id;
    }
  }
  EXPECT_EQ(index.Find(names, "never_inserted"), -1);
  // The same name again is the first id's.
  names.by_id[9] = "node_17";
  EXPECT_EQ(index.Insert(names, 9, NameIndex::Hash(names[9])), 17);
  EXPECT_EQ(index.size(), static_cast<int64_t>(ids.size()));
}

}  // namespace
}  // namespace partplan

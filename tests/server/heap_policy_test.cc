// RetainFreedHeap: its bounds, and that freed blocks stay in the heap.
#include "server/heap_policy.h"

#include <malloc.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace partplan {
namespace {

TEST(RetainFreedHeapTest, RejectsSizesGlibcCannotTake) {
  EXPECT_EQ(RetainFreedHeap(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RetainFreedHeap(int64_t{1} << 31).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RetainFreedHeapTest, ZeroChangesNothing) { EXPECT_TRUE(RetainFreedHeap(0).ok()); }

#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer replaces glibc's malloc, and its mallopt takes nothing.
TEST(RetainFreedHeapTest, AnotherAllocatorIsUnimplemented) {
  EXPECT_EQ(RetainFreedHeap(kDefaultRetainedHeapBytes).code(), absl::StatusCode::kUnimplemented);
}
#else
// In a fresh process glibc maps each block of 1 MiB on its own and unmaps it
// when freed; with the policy the blocks come from the heap and stay there,
// free, for the next allocation.
TEST(RetainFreedHeapTest, FreedBlocksStayInTheHeap) {
  ASSERT_TRUE(RetainFreedHeap(kDefaultRetainedHeapBytes).ok());
  constexpr size_t kBlock = 1 << 20;
  constexpr int kBlocks = 64;
  std::vector<char*> blocks;
  for (int i = 0; i < kBlocks; ++i) {
    blocks.push_back(static_cast<char*>(malloc(kBlock)));
    ASSERT_NE(blocks.back(), nullptr);
    memset(blocks.back(), i, kBlock);
  }
  const size_t in_use = mallinfo2().uordblks;
  EXPECT_GE(in_use, kBlocks * kBlock) << "the blocks were not taken from the heap";
  for (char* block : blocks) free(block);
  EXPECT_GE(mallinfo2().fordblks, kBlocks * kBlock) << "the freed blocks left the heap";
}
#endif  // defined(__SANITIZE_ADDRESS__)

}  // namespace
}  // namespace partplan

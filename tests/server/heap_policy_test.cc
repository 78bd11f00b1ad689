// RetainFreedHeap: its bounds, and that freed blocks stay in glibc's heaps,
// the main thread's and a worker thread's (where the server plans).
#include "server/heap_policy.h"

#include <malloc.h>

#include <cstdint>
#include <cstring>
#include <thread>
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
#elif !defined(__SANITIZE_THREAD__)  // ThreadSanitizer's allocator is not glibc's either.
// Allocates 100 blocks of 1 MiB, frees them, and returns how much more free
// memory glibc's arenas hold than before the frees. In a fresh process glibc
// maps each such block on its own and unmaps it when freed; with the policy
// the blocks come from the heap and stay there, free, for the next
// allocation.
size_t FreedBytesKept() {
  constexpr size_t kBlock = 1 << 20;
  std::vector<char*> blocks;
  blocks.reserve(100);
  for (int i = 0; i < 100; ++i) {
    blocks.push_back(static_cast<char*>(malloc(kBlock)));
    if (blocks.back() == nullptr) return 0;
    memset(blocks.back(), i, kBlock);
  }
  const size_t free_before = mallinfo2().fordblks;  // every arena's
  for (char* block : blocks) free(block);
  const size_t free_after = mallinfo2().fordblks;
  return free_after > free_before ? free_after - free_before : 0;
}

TEST(RetainFreedHeapTest, FreedBlocksStayInTheHeaps) {
  ASSERT_TRUE(RetainFreedHeap(kDefaultRetainedHeapBytes).ok());
  // Most of the 100 MiB (a block may merge with free memory the arena had).
  constexpr size_t kMost = size_t{90} << 20;
  EXPECT_GE(FreedBytesKept(), kMost) << "the main thread's blocks left the heap";
  // A thread's arena grows by heaps of 64 MiB: 100 MiB needs two.
  size_t kept_by_thread = 0;
  std::thread worker([&kept_by_thread] { kept_by_thread = FreedBytesKept(); });
  worker.join();
  EXPECT_GE(kept_by_thread, kMost) << "a worker thread's blocks left its arena";
}
#endif

}  // namespace
}  // namespace partplan

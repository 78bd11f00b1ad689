// How much memory freed by finished calls the process keeps for the next
// ones, instead of handing it back to the kernel.
//
// glibc's malloc serves a block larger than its mmap threshold (128 KiB at
// first, rising to at most 32 MiB as such blocks are freed) with a mapping
// of its own, unmapped when freed, and gives the free top of a heap back to
// the kernel once it exceeds the trim threshold (twice the mmap threshold).
// A large call allocates large arrays and frees them at its end, so by
// default every such call has the kernel map, zero and fault in that memory
// again, where a small call's arrays come from the heaps: large graphs then
// cost more per node than small ones (docs/performance.md, "Memory"). RetainFreedHeap fixes the mmap threshold at 32 MiB,
// where glibc's own adaptive threshold stops rising, so that blocks up to
// that size come from the heaps; raises the trim threshold to `bytes`, so
// that the main arena keeps up to that much free memory at its top; and
// sets the top pad to `bytes`, without which a thread's arena unmaps each of
// its 64 MiB heaps as soon as it is wholly free (the planner runs on
// threads). With `bytes` of 64 MiB or more, a thread's arena keeps every
// heap it has grown to.
//
// The cost: each arena keeps about what its threads last needed at once, so
// a warm process holds up to the sum of its arenas' peaks; with several
// planner threads that can be more than was ever in use at one time, though
// not more than all of them busy at once may take, which the server's
// admission control bounds (README, "Limits"; docs/performance.md,
// "Memory").
//
// Settings of glibc's malloc, for the whole process: call it from main()
// before other threads start. Only a refusal is detected: an allocator put
// in glibc's place (jemalloc preloaded, ThreadSanitizer's) that leaves
// glibc's mallopt answering goes unnoticed, and keeps its own policy.
//
//   if (absl::Status s = partplan::RetainFreedHeap(256 << 20); !s.ok()) ...
#ifndef PARTPLAN_SERVER_HEAP_POLICY_H_
#define PARTPLAN_SERVER_HEAP_POLICY_H_

#include <cstdint>

#include "absl/status/status.h"

namespace partplan {

// The server's default: room for a few 10^6-node calls' memory.
inline constexpr int64_t kDefaultRetainedHeapBytes = int64_t{256} << 20;

// OK, or INVALID_ARGUMENT when `bytes` is negative or 2 GiB or more (glibc's
// setting is an int).
absl::Status CheckRetainedHeapBytes(int64_t bytes);

// Keeps up to `bytes` of freed memory per malloc arena; 0 leaves glibc's
// defaults alone. CheckRetainedHeapBytes' error for a bad `bytes`;
// UNIMPLEMENTED when the process's allocator takes no such setting (a
// sanitizer's allocator, which replaces glibc's malloc): the process then
// runs with that allocator's own policy, which is no reason to stop it.
absl::Status RetainFreedHeap(int64_t bytes);

}  // namespace partplan

#endif  // PARTPLAN_SERVER_HEAP_POLICY_H_

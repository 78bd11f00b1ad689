#include "server/heap_policy.h"

#include <malloc.h>

#include <climits>

#include "absl/strings/str_cat.h"

namespace partplan {
namespace {

// Where glibc's adaptive mmap threshold stops rising on 64-bit systems
// (DEFAULT_MMAP_THRESHOLD_MAX), half the size of a thread arena's heap:
// much larger blocks could not come from a thread's heap anyway.
constexpr int kMmapThreshold = 32 << 20;

}  // namespace

absl::Status CheckRetainedHeapBytes(int64_t bytes) {
  if (bytes < 0 || bytes > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("retained heap bytes must be in [0, ", INT_MAX, "], got ", bytes));
  }
  return absl::OkStatus();
}

absl::Status RetainFreedHeap(int64_t bytes) {
  if (absl::Status status = CheckRetainedHeapBytes(bytes); !status.ok()) return status;
  if (bytes == 0) return absl::OkStatus();
  // mallopt returns 1 on success; AddressSanitizer's returns 0 for all.
  // The trim threshold keeps the main arena's free top; a thread's arena
  // also unmaps each of its heaps (64 MiB) that becomes wholly free unless
  // the top pad is larger than what that would give back, so the pad is set
  // too (tests/server/heap_policy_test frees memory on a worker thread and
  // checks that the thread's arena keeps it).
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(bytes)) != 1 ||
      mallopt(M_TOP_PAD, static_cast<int>(bytes)) != 1) {
    return absl::UnimplementedError(
        "the process's malloc refused glibc's heap settings (mallopt); a sanitizer's allocator "
        "does");
  }
  return absl::OkStatus();
}

}  // namespace partplan

#include "server/heap_policy.h"

#include <malloc.h>

#include <climits>

#include "absl/strings/str_cat.h"

namespace partplan {
namespace {

// The largest mmap threshold glibc accepts on 64-bit systems (half its
// per-thread heap size); larger blocks are always mapped on their own.
constexpr int kLargestMmapThreshold = 32 << 20;

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
  // mallopt returns 1 on success.
  if (mallopt(M_MMAP_THRESHOLD, kLargestMmapThreshold) != 1 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(bytes)) != 1) {
    return absl::InternalError("glibc's mallopt refused the heap settings");
  }
  return absl::OkStatus();
}

}  // namespace partplan

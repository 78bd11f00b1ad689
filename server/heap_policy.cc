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
  // mallopt returns 1 on success; AddressSanitizer's returns 0 for all.
  if (mallopt(M_MMAP_THRESHOLD, kLargestMmapThreshold) != 1 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(bytes)) != 1) {
    return absl::UnimplementedError(
        "the process's malloc refused glibc's heap settings (mallopt); a sanitizer's allocator "
        "does");
  }
  return absl::OkStatus();
}

}  // namespace partplan

#include "tests/bench/peak_heap.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace partplan {
namespace {

std::atomic<int64_t> in_use{0};
std::atomic<int64_t> peak{0};
std::atomic<int64_t> at_reset{0};

void* CountedAllocate(std::size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  const int64_t now =
      in_use.fetch_add(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed) +
      static_cast<int64_t>(malloc_usable_size(p));
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
  return p;
}

void CountedFree(void* p) {
  if (p == nullptr) return;
  in_use.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

int64_t PeakHeap::InUse() { return in_use.load(std::memory_order_relaxed); }

void PeakHeap::Reset() {
  const int64_t now = InUse();
  at_reset.store(now, std::memory_order_relaxed);
  peak.store(now, std::memory_order_relaxed);
}

int64_t PeakHeap::PeakAboveReset() {
  return peak.load(std::memory_order_relaxed) - at_reset.load(std::memory_order_relaxed);
}

}  // namespace partplan

// libstdc++'s array and nothrow forms call these two.
void* operator new(std::size_t size) { return partplan::CountedAllocate(size); }
void operator delete(void* p) noexcept { partplan::CountedFree(p); }
void operator delete(void* p, std::size_t) noexcept { partplan::CountedFree(p); }

// PeakHeap: the most heap memory in use at once over a stretch of code, for
// benchmarks that report peak memory next to time.
//
// Linking the `peak_heap` library replaces the global operator new and
// operator delete of the binary with counting ones (malloc underneath; the
// count is malloc_usable_size of each block). Protobuf arenas, strings and
// containers all allocate through them; memory from aligned operator new or
// from malloc directly is not counted.
//
//   PeakHeap::Reset();                 // peak = what is in use now
//   RunPlanner();
//   int64_t bytes = PeakHeap::PeakAboveReset();
#ifndef PARTPLAN_TESTS_BENCH_PEAK_HEAP_H_
#define PARTPLAN_TESTS_BENCH_PEAK_HEAP_H_

#include <cstdint>

namespace partplan {

class PeakHeap {
 public:
  // Bytes in use now.
  static int64_t InUse();
  // Starts a new peak from what is in use now.
  static void Reset();
  // The most bytes in use at once since Reset(), less those in use at Reset().
  static int64_t PeakAboveReset();
};

}  // namespace partplan

#endif  // PARTPLAN_TESTS_BENCH_PEAK_HEAP_H_

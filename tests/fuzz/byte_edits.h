// Byte-level edits of a serialised message, as a fuzzer makes them: a byte
// changed, a byte dropped, or the bytes cut short. Most edited messages no
// longer parse; the tests that use them check that what still reads, reads
// the same, and what does not is refused cleanly.
//
//   std::mt19937_64 random(seed);
//   std::string bytes = request.SerializeAsString();
//   EditBytes(&bytes, /*edits=*/2, random);
#ifndef PARTPLAN_TESTS_FUZZ_BYTE_EDITS_H_
#define PARTPLAN_TESTS_FUZZ_BYTE_EDITS_H_

#include <cstddef>
#include <string>

namespace partplan::fuzz {

// Makes `edits` edits of `*bytes` at random (fewer if it runs out of bytes).
template <typename Random>
void EditBytes(std::string* bytes, int edits, Random& random) {
  for (; edits > 0 && !bytes->empty(); --edits) {
    const size_t at = static_cast<size_t>(random() % bytes->size());
    switch (random() % 3) {
      case 0:
        (*bytes)[at] = static_cast<char>(random() & 0xff);
        break;
      case 1:
        bytes->erase(at, 1);
        break;
      default:
        bytes->resize(at);
        break;
    }
  }
}

}  // namespace partplan::fuzz

#endif  // PARTPLAN_TESTS_FUZZ_BYTE_EDITS_H_

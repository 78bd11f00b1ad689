// Byte sizes on the command line: parsing "16GiB"-style flag values and
// printing byte counts for people.
//
//   absl::StatusOr<int64_t> bytes = partplan::cli::ParseByteSize("1.5GiB");
//   // -> 1610612736
//   std::string text = partplan::cli::FormatByteSize(1610612736);
//   // -> "1.5 GiB"
//
// Suffixes are case-insensitive. K, M, G, T (also KB, MB, ...) are powers of
// 1000 and KiB, MiB, GiB, TiB (also Ki, Mi, ...) powers of 1024, as in
// Kubernetes quantities; B or no suffix means bytes.
#ifndef PARTPLAN_CLIENT_CLI_BYTE_SIZE_H_
#define PARTPLAN_CLIENT_CLI_BYTE_SIZE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace partplan {
namespace cli {

// A non-negative quantity of bytes, possibly fractional before scaling
// ("1.5G"), optionally in exponent form ("1.2e10"). The result is rounded to
// the nearest byte; INVALID_ARGUMENT quoting `text` when it is not a size.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// `bytes` in the largest binary unit that keeps it at least 1, with one
// decimal: "512 B", "1.5 KiB", "16.0 GiB".
std::string FormatByteSize(int64_t bytes);

}  // namespace cli
}  // namespace partplan

#endif  // PARTPLAN_CLIENT_CLI_BYTE_SIZE_H_

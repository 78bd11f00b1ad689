#include "client/cli/byte_size.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace partplan {
namespace cli {
namespace {

struct Unit {
  absl::string_view suffix;
  double multiplier;
};

constexpr double kKibi = 1024.0;
constexpr double kKilo = 1000.0;

// Longer suffixes first: "KiB" must win over "B", "KB" over "B".
constexpr Unit kUnits[] = {
    {"KiB", kKibi},
    {"MiB", kKibi* kKibi},
    {"GiB", kKibi* kKibi* kKibi},
    {"TiB", kKibi* kKibi* kKibi* kKibi},
    {"Ki", kKibi},
    {"Mi", kKibi* kKibi},
    {"Gi", kKibi* kKibi* kKibi},
    {"Ti", kKibi* kKibi* kKibi* kKibi},
    {"KB", kKilo},
    {"MB", kKilo* kKilo},
    {"GB", kKilo* kKilo* kKilo},
    {"TB", kKilo* kKilo* kKilo* kKilo},
    {"K", kKilo},
    {"M", kKilo* kKilo},
    {"G", kKilo* kKilo* kKilo},
    {"T", kKilo* kKilo* kKilo* kKilo},
    {"B", 1.0},
};

absl::Status NotAByteSize(absl::string_view text) {
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid byte size '", text,
      "': want a number with an optional suffix B, K, M, G, T (powers of "
      "1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g. 16GiB"));
}

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  absl::string_view number = absl::StripAsciiWhitespace(text);
  double multiplier = 1.0;
  for (const Unit& unit : kUnits) {
    if (absl::EndsWithIgnoreCase(number, unit.suffix)) {
      number.remove_suffix(unit.suffix.size());
      multiplier = unit.multiplier;
      break;
    }
  }
  number = absl::StripTrailingAsciiWhitespace(number);
  double value = 0;
  // SimpleAtod also takes "inf", "nan" and hex ("0x10"); sizes are decimal.
  if (number.empty() ||
      number.find_first_not_of("0123456789.eE+-") != absl::string_view::npos ||
      !absl::SimpleAtod(number, &value) || !std::isfinite(value) || value < 0) {
    return NotAByteSize(text);
  }
  const double bytes = std::round(value * multiplier);
  // 2^63 is exactly representable; anything at or above it overflows int64.
  if (bytes >= 9223372036854775808.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size '", text, "' is too large"));
  }
  return static_cast<int64_t>(bytes);
}

std::string FormatByteSize(int64_t bytes) {
  static constexpr absl::string_view kBinaryUnits[] = {"KiB", "MiB", "GiB",
                                                       "TiB", "PiB", "EiB"};
  if (bytes > -1024 && bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  value /= kKibi;
  while (std::fabs(value) >= kKibi &&
         unit + 1 < sizeof(kBinaryUnits) / sizeof(kBinaryUnits[0])) {
    value /= kKibi;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kBinaryUnits[unit]);
}

}  // namespace cli
}  // namespace partplan

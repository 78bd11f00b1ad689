// Tests of byte-size flag values: units, fractions, and rejected input.
#include "client/cli/byte_size.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace partplan {
namespace cli {
namespace {

using ::testing::HasSubstr;

struct SizeCase {
  std::string text;
  int64_t bytes;
};

TEST(ParseByteSizeTest, AcceptsPlainBytesAndUnits) {
  const SizeCase cases[] = {
      {"0", 0},
      {"4096", 4096},
      {"512B", 512},
      {"16GiB", int64_t{16} << 30},
      {"16gib", int64_t{16} << 30},
      {"16Gi", int64_t{16} << 30},
      {"8 MiB", int64_t{8} << 20},
      {"2KiB", 2048},
      {"1TiB", int64_t{1} << 40},
      {"1.5G", 1500000000},
      {"1.5GB", 1500000000},
      {"1.5GiB", 1610612736},
      {"12K", 12000},
      {"3M", 3000000},
      {"1.2e10", 12000000000},
      {" 7 ", 7},
  };
  for (const SizeCase& c : cases) {
    absl::StatusOr<int64_t> bytes = ParseByteSize(c.text);
    ASSERT_TRUE(bytes.ok()) << c.text << ": " << bytes.status();
    EXPECT_EQ(*bytes, c.bytes) << c.text;
  }
}

TEST(ParseByteSizeTest, RejectsWhatIsNotASize) {
  for (const char* text : {"12XB", "", "GiB", "-1", "-1GiB", "1..5G", "12 X",
                           "nan", "inf", "1e", "0x10", "16GiBs", "1,5G"}) {
    absl::StatusOr<int64_t> bytes = ParseByteSize(text);
    ASSERT_FALSE(bytes.ok()) << "'" << text << "' parsed as " << *bytes;
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(bytes.status().message()),
                HasSubstr(absl::StrCat("'", text, "'")));
  }
}

TEST(ParseByteSizeTest, RejectsSizesBeyondInt64) {
  EXPECT_FALSE(ParseByteSize("9000000TiB").ok());
  EXPECT_TRUE(ParseByteSize("8000000TiB").ok());
}

TEST(FormatByteSizeTest, UsesTheLargestBinaryUnitAtLeastOne) {
  EXPECT_EQ(FormatByteSize(0), "0 B");
  EXPECT_EQ(FormatByteSize(1023), "1023 B");
  EXPECT_EQ(FormatByteSize(1024), "1.0 KiB");
  EXPECT_EQ(FormatByteSize(1536), "1.5 KiB");
  EXPECT_EQ(FormatByteSize(int64_t{16} << 30), "16.0 GiB");
  EXPECT_EQ(FormatByteSize(9183232), "8.8 MiB");
}

}  // namespace
}  // namespace cli
}  // namespace partplan

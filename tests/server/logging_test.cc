#include "server/logging.h"

#include <string>

#include "gtest/gtest.h"

namespace partplan {
namespace {

TEST(LoggingTest, TextIsMessageThenKeyValues) {
  EXPECT_EQ(FormatLogBody(LogFormat::kText, "rpc",
                          {{"method", "Validate"}, {"nodes", 3}, {"duration_ms", 1.5}}),
            "rpc method=Validate nodes=3 duration_ms=1.5");
}

TEST(LoggingTest, TextQuotesValuesThatWouldBeAmbiguous) {
  EXPECT_EQ(
      FormatLogBody(LogFormat::kText, "rpc",
                    {{"error", "graph.nodes: no 'output'"}, {"request_id", ""}, {"name", "a\"b"}}),
      R"(rpc error="graph.nodes: no 'output'" request_id="" name="a\"b")");
}

TEST(LoggingTest, JsonIsObjectMembersWithEscapedStrings) {
  EXPECT_EQ(FormatLogBody(LogFormat::kJson, "rpc",
                          {{"error", "a\"b\\c\nd\x01"}, {"nodes", int64_t{4000000}}}),
            R"("msg":"rpc","error":"a\"b\\c\nd\u0001","nodes":4000000)");
}

TEST(LoggingTest, FormatFlagRoundTrips) {
  LogFormat format;
  std::string error;
  ASSERT_TRUE(AbslParseFlag("json", &format, &error));
  EXPECT_EQ(format, LogFormat::kJson);
  EXPECT_EQ(AbslUnparseFlag(format), "json");
  EXPECT_FALSE(AbslParseFlag("xml", &format, &error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace partplan

// Structured log lines on spdlog's default logger, as text or as JSON lines.
//
// Every line is a message plus key/value fields. In text form:
//   2024-05-01T12:00:00.123456Z info rpc method=Validate nodes=3 code=OK duration_ms=0.412
// and as JSON lines (one object per line, for log collectors):
//   {"time":"2024-05-01T12:00:00.123456Z","level":"info","msg":"rpc","method":"Validate",...}
//
//   partplan::ConfigureLogging(partplan::LogFormat::kJson);   // once, in main
//   partplan::LogInfo("listening", {{"port", 50051}, {"host", "0.0.0.0"}});
#ifndef PARTPLAN_SERVER_LOGGING_H_
#define PARTPLAN_SERVER_LOGGING_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "absl/types/variant.h"

namespace partplan {

enum class LogFormat { kText, kJson };

// absl flag support: "text" or "json".
bool AbslParseFlag(absl::string_view text, LogFormat* format, std::string* error);
std::string AbslUnparseFlag(LogFormat format);

// One key=value of a log line.
struct LogField {
  LogField(absl::string_view key, absl::string_view value) : key(key), value(std::string(value)) {}
  LogField(absl::string_view key, const char* value) : key(key), value(std::string(value)) {}
  LogField(absl::string_view key, int64_t value) : key(key), value(value) {}
  LogField(absl::string_view key, int value) : key(key), value(int64_t{value}) {}
  LogField(absl::string_view key, double value) : key(key), value(value) {}

  absl::string_view key;
  absl::variant<std::string, int64_t, double> value;
};

// Sets the format and pattern of spdlog's default logger (UTC timestamps).
// Call once before logging from several threads.
void ConfigureLogging(LogFormat format);

// The body of a line (everything the logger's pattern puts after the level):
// `message k=v ...` for kText, `"msg":"message","k":v,...` for kJson.
std::string FormatLogBody(LogFormat format, absl::string_view message,
                          absl::Span<const LogField> fields);

void LogInfo(absl::string_view message, absl::Span<const LogField> fields = {});
void LogWarning(absl::string_view message, absl::Span<const LogField> fields = {});
void LogError(absl::string_view message, absl::Span<const LogField> fields = {});

}  // namespace partplan

#endif  // PARTPLAN_SERVER_LOGGING_H_

#include "server/logging.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace partplan {
namespace {

// The format of the default logger's pattern; the body must match it.
std::atomic<LogFormat> g_log_format{LogFormat::kText};

void AppendJsonString(absl::string_view text, std::string* out) {
  out->push_back('"');
  for (const char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<int>(c));
        } else {
          out->push_back(c);  // UTF-8 passes through unchanged.
        }
    }
  }
  out->push_back('"');
}

// Text values stay bare when that is unambiguous, and are quoted as JSON
// strings otherwise (empty, or with spaces, quotes, '=' or control
// characters), which logfmt parsers read back.
void AppendTextValue(absl::string_view text, std::string* out) {
  const bool bare = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return absl::ascii_isgraph(static_cast<unsigned char>(c)) && c != '"' && c != '=';
  });
  if (bare) {
    out->append(text.data(), text.size());
  } else {
    AppendJsonString(text, out);
  }
}

void AppendValue(LogFormat format, const LogField& field, std::string* out) {
  if (const auto* text = absl::get_if<std::string>(&field.value)) {
    if (format == LogFormat::kJson) {
      AppendJsonString(*text, out);
    } else {
      AppendTextValue(*text, out);
    }
  } else if (const auto* integer = absl::get_if<int64_t>(&field.value)) {
    absl::StrAppend(out, *integer);
  } else {
    absl::StrAppendFormat(out, "%.6g", absl::get<double>(field.value));
  }
}

void Log(spdlog::level::level_enum level, absl::string_view message,
         absl::Span<const LogField> fields) {
  spdlog::log(level, "{}", FormatLogBody(g_log_format.load(), message, fields));
}

}  // namespace

bool AbslParseFlag(absl::string_view text, LogFormat* format, std::string* error) {
  if (text == "text") {
    *format = LogFormat::kText;
    return true;
  }
  if (text == "json") {
    *format = LogFormat::kJson;
    return true;
  }
  *error = "expected 'text' or 'json'";
  return false;
}

std::string AbslUnparseFlag(LogFormat format) {
  return format == LogFormat::kJson ? "json" : "text";
}

void ConfigureLogging(LogFormat format) {
  g_log_format.store(format);
  spdlog::set_pattern(format == LogFormat::kJson
                          ? R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l",%v})"
                          : "%Y-%m-%dT%H:%M:%S.%fZ %l %v",
                      spdlog::pattern_time_type::utc);
}

std::string FormatLogBody(LogFormat format, absl::string_view message,
                          absl::Span<const LogField> fields) {
  std::string body;
  if (format == LogFormat::kJson) {
    body.append("\"msg\":");
    AppendJsonString(message, &body);
    for (const LogField& field : fields) {
      body.push_back(',');
      AppendJsonString(field.key, &body);
      body.push_back(':');
      AppendValue(format, field, &body);
    }
  } else {
    body.append(message.data(), message.size());
    for (const LogField& field : fields) {
      absl::StrAppend(&body, " ", field.key, "=");
      AppendValue(format, field, &body);
    }
  }
  return body;
}

void LogInfo(absl::string_view message, absl::Span<const LogField> fields) {
  Log(spdlog::level::info, message, fields);
}
void LogWarning(absl::string_view message, absl::Span<const LogField> fields) {
  Log(spdlog::level::warn, message, fields);
}
void LogError(absl::string_view message, absl::Span<const LogField> fields) {
  Log(spdlog::level::err, message, fields);
}

}  // namespace partplan

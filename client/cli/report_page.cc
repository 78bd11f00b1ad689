#include "client/cli/report_page.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"

namespace partplan {
namespace cli {
namespace {

constexpr absl::string_view kTemplate =
#include "client/cli/report_template.inc"
    ;
constexpr absl::string_view kPlaceholder = "__PARTPLAN_DATA__";

// Proto3 JSON as the CLI prints it (camelCase, defaults omitted), compact;
// "null" for no message.
std::string Json(const google::protobuf::Message* message) {
  if (message == nullptr) return "null";
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(*message, &json).ok()) return "null";
  return json;
}

// A JSON string literal.
std::string Quoted(absl::string_view text) {
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      absl::StrAppend(&quoted, "\\", std::string(1, c));
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&quoted, " ");
    } else {
      quoted.push_back(c);
    }
  }
  return quoted + "\"";
}

}  // namespace

std::string ReportPage(const google::protobuf::Message& response,
                       const google::protobuf::Message* request,
                       absl::string_view rpc, absl::string_view title) {
  const std::string method =
      rpc.empty() ? std::string(absl::StripSuffix(response.GetDescriptor()->name(), "Response"))
                  : std::string(rpc);
  const std::string data =
      absl::StrCat("{\"rpc\":", Quoted(method), ",\"title\":", Quoted(title),
                   ",\"response\":", Json(&response), ",\"request\":", Json(request), "}");
  // No value may close the script element that holds the data.
  const std::string escaped =
      absl::StrReplaceAll(data, {{"<", "\\u003c"}, {">", "\\u003e"}, {"&", "\\u0026"}});
  const size_t at = kTemplate.find(kPlaceholder);
  return absl::StrCat(kTemplate.substr(0, at), escaped,
                      kTemplate.substr(at + kPlaceholder.size()));
}

}  // namespace cli
}  // namespace partplan

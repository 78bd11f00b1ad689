#include "client/cli/message_io.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/wire_format_lite.h"

namespace partplan {
namespace cli {
namespace {

}  // namespace

bool IsJsonSource(absl::string_view contents, absl::string_view source_name) {
  if (absl::EndsWithIgnoreCase(source_name, ".json")) return true;
  for (absl::string_view extension : {".pb", ".bin", ".binpb"}) {
    if (absl::EndsWithIgnoreCase(source_name, extension)) return false;
  }
  // A binary message starting with '{' (field 15, wire type 3) would be a
  // deprecated group, which proto3 messages never contain.
  absl::string_view text = absl::StripLeadingAsciiWhitespace(contents);
  return !text.empty() && text.front() == '{';
}

absl::Status FileReadError(absl::string_view path, int error_number) {
  const std::string message =
      absl::StrCat("cannot read '", path, "': ", std::strerror(error_number));
  switch (error_number) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
      return absl::PermissionDeniedError(message);
    default:
      return absl::DataLossError(message);
  }
}

// stdio rather than iostreams because it reports why a read failed (errno),
// e.g. EISDIR for a directory, which an ifstream opens without complaint.
absl::StatusOr<std::string> ReadFile(absl::string_view path) {
  std::FILE* file = std::fopen(std::string(path).c_str(), "rb");
  if (file == nullptr) return FileReadError(path, errno);
  std::string contents;
  char chunk[1 << 16];
  size_t read;
  while ((read = std::fread(chunk, 1, sizeof(chunk), file)) > 0) {
    contents.append(chunk, read);
  }
  const int read_errno = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (read_errno != 0) return FileReadError(path, read_errno);
  return contents;
}

bool WellFormedAtTopLevel(google::protobuf::io::ZeroCopyInputStream* input) {
  google::protobuf::io::CodedInputStream coded(input);
  coded.SetTotalBytesLimit(INT_MAX);
  while (true) {
    const uint32_t tag = coded.ReadTag();
    // 0 at the end of the bytes, or a zero tag, which no message holds.
    if (tag == 0) return coded.ConsumedEntireMessage();
    if (!google::protobuf::internal::WireFormatLite::SkipField(&coded, tag)) return false;
  }
}

std::unique_ptr<google::protobuf::Message> NewMessage(
    const google::protobuf::Descriptor* type) {
  return std::unique_ptr<google::protobuf::Message>(
      google::protobuf::MessageFactory::generated_factory()
          ->GetPrototype(type)
          ->New());
}

absl::Status ReadMessageFile(absl::string_view path,
                             std::istream& standard_input,
                             google::protobuf::Message* message) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "no file given (use a path, or '-' for stdin)");
  }
  if (path == "-") {
    const std::string contents(std::istreambuf_iterator<char>(standard_input),
                               {});
    if (standard_input.bad()) return FileReadError("<stdin>", errno);
    return ParseMessage(contents, "<stdin>", message);
  }
  absl::StatusOr<std::string> file_contents = ReadFile(path);
  if (!file_contents.ok()) return file_contents.status();
  return ParseMessage(*file_contents, path, message);
}

absl::Status ParseMessage(absl::string_view contents,
                          absl::string_view source_name,
                          google::protobuf::Message* message) {
  const std::string& type = message->GetDescriptor()->full_name();
  message->Clear();
  if (IsJsonSource(contents, source_name)) {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    const auto status = google::protobuf::util::JsonStringToMessage(
        google::protobuf::StringPiece(contents.data(), contents.size()),
        message, options);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": not a valid JSON ", type, ": ",
                       status.message().as_string()));
    }
    return absl::OkStatus();
  }
  if (!message->ParseFromArray(contents.data(),
                               static_cast<int>(contents.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": not a valid binary ", type,
                     " (JSON files must end in .json or start with '{')"));
  }
  return absl::OkStatus();
}

std::string MessageToPrettyJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  std::string json;
  // Printing fails only for Any fields of types this binary does not know,
  // which partplan's API does not have; text format still shows everything.
  if (!google::protobuf::util::MessageToJsonString(message, &json, options)
           .ok()) {
    return message.DebugString();
  }
  if (json.empty() || json.back() != '\n') json.push_back('\n');
  return json;
}

}  // namespace cli
}  // namespace partplan

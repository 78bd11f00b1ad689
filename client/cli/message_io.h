// Reading protobuf messages from files the user names on the command line,
// and printing them as proto3 JSON.
//
//   partplan::v1::Graph graph;
//   absl::Status status =
//       partplan::cli::ReadMessageFile("client/examples/graph_mlp.json",
//                                      std::cin, &graph);
//   if (!status.ok()) { /* message names the file and what is wrong */ }
//   std::cout << partplan::cli::MessageToPrettyJson(graph);
//
// A file holds either proto3 JSON (what grpcurl -d takes) or the binary wire
// format. The extension decides (.json; .pb, .bin, .binpb), else the content
// does: JSON starts with '{' after whitespace. The path "-" is `stdin`.
#ifndef PARTPLAN_CLIENT_CLI_MESSAGE_IO_H_
#define PARTPLAN_CLIENT_CLI_MESSAGE_IO_H_

#include <istream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "google/protobuf/message.h"

namespace partplan {
namespace cli {

// The whole of the file at `path`. NOT_FOUND / PERMISSION_DENIED /
// DATA_LOSS, naming the file, when it cannot be read.
absl::StatusOr<std::string> ReadFile(absl::string_view path);

// NOT_FOUND / PERMISSION_DENIED / DATA_LOSS naming `path`, for a read that
// failed with `error_number` (errno).
absl::Status FileReadError(absl::string_view path, int error_number);

// Whether `contents` from `source_name` are proto3 JSON rather than binary:
// by the extension, else by a leading '{' (see above).
bool IsJsonSource(absl::string_view contents, absl::string_view source_name);

// Whether the bytes of `input` are protobuf's wire format at their top
// level: tags that parse, and fields that end within the bytes (so a
// truncated message fails). O(top-level fields): a length-delimited field
// is skipped, not read.
bool WellFormedAtTopLevel(google::protobuf::io::ZeroCopyInputStream* input);

// An empty message of the compiled-in type `type`.
std::unique_ptr<google::protobuf::Message> NewMessage(
    const google::protobuf::Descriptor* type);

// Replaces `*message` with the contents of `path` (or of `standard_input` for
// "-"). Unknown JSON fields are errors, so that typos in hand-written requests
// surface here rather than as a silently different request. Errors:
// NOT_FOUND / PERMISSION_DENIED / DATA_LOSS for unreadable files,
// INVALID_ARGUMENT for contents that do not parse; every message names the
// file and the expected message type.
absl::Status ReadMessageFile(absl::string_view path,
                             std::istream& standard_input,
                             google::protobuf::Message* message);

// Like ReadMessageFile, for contents already in memory; `source_name` is used
// in error messages and its extension in choosing the format.
absl::Status ParseMessage(absl::string_view contents,
                          absl::string_view source_name,
                          google::protobuf::Message* message);

// `message` as indented proto3 JSON (lowerCamelCase names, int64 as strings,
// enums by name, fields at their defaults omitted), ending in a newline.
std::string MessageToPrettyJson(const google::protobuf::Message& message);

}  // namespace cli
}  // namespace partplan

#endif  // PARTPLAN_CLIENT_CLI_MESSAGE_IO_H_

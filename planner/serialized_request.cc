#include "planner/serialized_request.h"

#include <limits>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "partplan/v1/graph.pb.h"

namespace partplan {

bool SplitField(absl::string_view message, int field_number,
                absl::FunctionRef<bool(absl::string_view payload)> on_field, std::string* rest) {
  using google::protobuf::internal::WireFormatLite;
  // CodedInputStream counts in int; gRPC bounds messages to 2 GiB anyway.
  if (message.size() > static_cast<size_t>(std::numeric_limits<int>::max())) return false;
  const uint32_t wanted_tag =
      WireFormatLite::MakeTag(field_number, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(message.data()),
                                               static_cast<int>(message.size()));
  for (;;) {
    const int start = input.CurrentPosition();
    const uint32_t tag = input.ReadTag();
    if (tag == 0) return static_cast<size_t>(start) == message.size();  // the end, or tag 0
    if (tag == wanted_tag) {
      uint32_t size = 0;
      if (!input.ReadVarint32(&size)) return false;
      const size_t offset = static_cast<size_t>(input.CurrentPosition());
      if (size > message.size() - offset) return false;
      input.Skip(static_cast<int>(size));
      if (!on_field(message.substr(offset, size))) return false;
    } else {
      if (!WireFormatLite::SkipField(&input, tag)) return false;
      rest->append(message.data() + start, static_cast<size_t>(input.CurrentPosition() - start));
    }
  }
}

std::optional<absl::string_view> ExtractField(absl::string_view message, int field_number,
                                              std::string* rest) {
  std::optional<absl::string_view> found;
  const bool split = SplitField(
      message, field_number,
      [&](absl::string_view payload) {
        if (found.has_value()) return false;
        found = payload;
        return true;
      },
      rest);
  if (!split) return std::nullopt;
  return found.value_or(absl::string_view());
}

int64_t CountSerializedNodes(absl::string_view graph) {
  int64_t count = 0;
  std::string header;
  const bool split = SplitField(
      graph, v1::Graph::kNodesFieldNumber,
      [&](absl::string_view) {
        ++count;
        return true;
      },
      &header);
  return split ? count : -1;
}

}  // namespace partplan

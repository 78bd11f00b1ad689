// Reading a serialised request apart from its graph, so that the graph is
// imported straight from its bytes (GraphSource::Serialized in
// graph_import.h) and no protobuf tree of it is ever built:
//
//   v1::PartitionGraphRequest request;  // every field but graph
//   std::optional<absl::string_view> graph = ParseAllButGraph(bytes, &request);
//   if (graph.has_value()) {
//     status = PartitionGraph(request, GraphSource::Serialized(*graph), limits, token, &response);
//   } else {
//     // Not a well-formed message, or a graph given in several pieces
//     // (protobuf merges them): parse the request whole instead.
//   }
//
// Only the top-level fields are scanned (tag and length); nothing in the
// graph is read, so splitting costs nothing next to a parse.
#ifndef PARTPLAN_PLANNER_SERIALIZED_REQUEST_H_
#define PARTPLAN_PLANNER_SERIALIZED_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace partplan {

// Walks the top-level fields of the serialised message `message`: calls
// `on_field` with the payload of each length-delimited field numbered
// `field_number`, in order, and appends the bytes of every other field to
// `*rest` (which then parses as the message without that field). Returns
// false when `message` is not a well-formed message (truncated, a bad tag or
// length) or as soon as `on_field` returns false.
bool SplitField(absl::string_view message, int field_number,
                absl::FunctionRef<bool(absl::string_view payload)> on_field, std::string* rest);

// The payload of the length-delimited field `field_number` of `message`
// (empty when absent), with the other fields' bytes in `*rest`; nullopt when
// `message` is not well-formed or holds that field more than once.
std::optional<absl::string_view> ExtractField(absl::string_view message, int field_number,
                                              std::string* rest);

// Parses every field of a serialised request but its graph into `*request`
// and returns the graph's bytes; nullopt when the request does not split or
// its other fields do not parse (parse it whole then, to report why).
template <typename Request>
std::optional<absl::string_view> ParseAllButGraph(absl::string_view bytes, Request* request) {
  std::string rest;
  const std::optional<absl::string_view> graph =
      ExtractField(bytes, Request::kGraphFieldNumber, &rest);
  if (!graph.has_value() || !request->ParseFromString(rest)) return std::nullopt;
  return graph;
}

// The number of nodes a serialised v1::Graph lists (counted, not parsed), or
// -1 when its fields do not scan.
int64_t CountSerializedNodes(absl::string_view graph);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_SERIALIZED_REQUEST_H_

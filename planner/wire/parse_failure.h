// ParseFailure: why bytes that protobuf refuses do not parse as a message,
// naming the field where they go wrong, so that a request that does not
// parse gets a google.rpc.BadRequest field violation like any other bad
// input:
//
//   if (!request.ParseFromZeroCopyStream(&stream)) {
//     return ParseFailure(*request.GetDescriptor(), bytes);
//     // INVALID_ARGUMENT "graph.nodes[7].name: not valid UTF-8 (a proto3
//     // string)", with the field path as InvalidFieldPath() reads it.
//   }
//
// It walks the wire format against the message's descriptor: a tag that is
// not one, a length or value cut short, a proto3 string that is not UTF-8,
// nesting deeper than protobuf's limit. Repeated fields are indexed by
// occurrence. Unknown fields and fields of another wire type are skipped,
// as protobuf's parser does. Bytes it finds nothing wrong with (which
// protobuf refused for a reason of its own) name the message itself.
// Only called on the error path: one pass, O(bytes x nesting depth).
#ifndef PARTPLAN_PLANNER_WIRE_PARSE_FAILURE_H_
#define PARTPLAN_PLANNER_WIRE_PARSE_FAILURE_H_

#include "absl/status/status.h"
#include "google/protobuf/descriptor.h"
#include "planner/graph/serialized_request.h"

namespace partplan {

// INVALID_ARGUMENT (an InvalidFieldError) saying where `bytes` stop being a
// `type`.
absl::Status ParseFailure(const google::protobuf::Descriptor& type, const ChunkedBytes& bytes);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_WIRE_PARSE_FAILURE_H_

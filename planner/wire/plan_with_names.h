// SerializeResponseWithNames: a PartitionGraph, Plan or ShardGraph response
// naming its nodes, written as bytes straight from the same response by node
// index and the graph.
//
// A plan by name lists every node's name twice (the assignments and the
// partitions' nodes). Built as protobuf messages, that is a message and a
// std::string per node and name, on the heap, then serialised: on a large
// graph, a large share of the server's time and of the call's peak memory.
// The same plan by node index holds two packed integer arrays, and the
// names are in the graph, so the bytes of the plan by name can be written
// directly, in a single pass over the names:
//
//   v1::PartitionGraphResponse by_index;  // planned with NODE_REFERENCES_INDICES
//   ...
//   absl::Cord bytes;
//   SerializeResponseWithNames(graph, &by_index, &bytes);
//   // bytes == the serialisation of the response the same request gets
//   // with NODE_REFERENCES_NAMES, byte for byte.
//
// The bytes are protobuf's serialisation of that response exactly (fields in
// number order, defaults left out), so that the plan cache, tests and
// clients cannot tell the two ways apart.
#ifndef PARTPLAN_PLANNER_WIRE_PLAN_WITH_NAMES_H_
#define PARTPLAN_PLANNER_WIRE_PLAN_WITH_NAMES_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/graph/graph.h"
#include "planner/wire/wire_writer.h"

namespace partplan {

// Writes into `*bytes` (replacing what it held) the serialised response
// that lists nodes by name, from `by_index`, the plan of the same graph with
// NODE_REFERENCES_INDICES. The bytes are in pieces of about `piece_bytes`,
// so that a large response reuses memory the allocator already holds rather
// than being mapped afresh on every call: each assignment and node name is
// whole within a piece, other fields may be cut anywhere. Takes the per-node
// lists out of `*by_index` rather than copying them; it is left unspecified.
// A response over protobuf's 2 GiB limit on a message is INTERNAL, as
// protobuf's own serialiser refuses it, and `*bytes` is then unspecified.
absl::Status SerializeResponseWithNames(const CompactGraph& graph,
                                        v1::PartitionGraphResponse* by_index, absl::Cord* bytes,
                                        size_t piece_bytes = kResponsePieceBytes);
// The same for the Plan RPC, whose response holds its plan as
// PartitionGraph's does (the same field), whichever planner made it.
absl::Status SerializeResponseWithNames(const CompactGraph& graph, v1::PlanResponse* by_index,
                                        absl::Cord* bytes,
                                        size_t piece_bytes = kResponsePieceBytes);
// The same for ShardGraph, whose response lists its shards' nodes by name
// in `assignments` and each shard's `nodes` as a plan lists its partitions'.
absl::Status SerializeResponseWithNames(const CompactGraph& graph, v1::ShardGraphResponse* by_index,
                                        absl::Cord* bytes,
                                        size_t piece_bytes = kResponsePieceBytes);

// Serialises `response` into `*bytes`: INTERNAL where protobuf refuses, a
// message over its 2 GiB limit (SerializeToString's false).
absl::Status SerializeWithinLimit(const google::protobuf::Message& response, absl::Cord* bytes);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_WIRE_PLAN_WITH_NAMES_H_

// SplitGraphPlan: the SplitGraph RPC's planner, torch.fx's split_module from
// a node -> partition assignment, with the qualname_map split_module builds.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const std::vector<int32_t> partition_of,
//                             PartitionOfNodes(graph, request.assignments(), token));
//   PARTPLAN_ASSIGN_OR_RETURN(
//       const GraphSplit split,
//       SplitGraphPlan(graph, partition_of, request.keep_original_order(), token));
//
// PartitionOfNodes checks the request's assignment at the edge (every
// call_* node exactly once; no other node; known names). SplitGraphPlan
// returns the submodules with their nodes, ordered inputs and outputs, the
// submodules each depends on and its dependents, the split module's
// top-level calls with split_module's own node names and the values its
// output returns (ModuleSplit, module_split.h), and the qualname_map. A
// cycle between partitions is INVALID_ARGUMENT on `assignments`, naming the
// partitions. The response is written from a GraphSplit in
// wire/split_graph_response.h.
//
// O(nodes + edges).
#ifndef PARTPLAN_PLANNER_SPLIT_SPLIT_GRAPH_H_
#define PARTPLAN_PLANNER_SPLIT_SPLIT_GRAPH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "partplan/v1/plan.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"
#include "planner/graph/name_index.h"
#include "planner/split/module_split.h"

namespace partplan {

// split_module's qualname_map: per call_module node, in graph order, the
// split name `submod_X.<target with . as _>` and the target (the original
// name); an entry for the first use of each split name only.
struct QualifiedNames {
  StringPool split_names;     // per call_module node
  StringPool original_names;  // per call_module node
  // The map's entries: indices into the two pools, in graph order.
  std::vector<int32_t> entries;
};

struct GraphSplit {
  ModuleSplit split;
  QualifiedNames qualified_names;
};

// The partition of every call_* node (-1 for the others) from a request's
// assignments: INVALID_ARGUMENT on `assignments[i].node` for an unknown
// node, a node that is not call_*, or one assigned twice, and on
// `assignments` for a call_* node with no partition.
absl::StatusOr<std::vector<int32_t>> PartitionOfNodes(
    const CompactGraph& graph,
    const google::protobuf::RepeatedPtrField<v1::NodePartition>& assignments,
    const CancellationToken& token);

absl::StatusOr<GraphSplit> SplitGraphPlan(const CompactGraph& graph,
                                          absl::Span<const int32_t> partition_of,
                                          bool keep_original_order,
                                          const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_SPLIT_SPLIT_GRAPH_H_

// SplitModule: torch.fx's split_module, computed on a CompactGraph.
//
// Given the partition of every call_* node, it finds what torch.fx's
// `split_module` would build: per partition its nodes, its inputs and
// outputs (in order of first cross-partition use), the partitions it
// depends on and its dependents; the order submodules are constructed in
// (topological, from split_module's LIFO worklist, or the order of first
// appearance on request); and the names the split module's top-level graph
// gives to each submodule call and to the `getitem` nodes unpacking
// submodules with several outputs. Placeholders and get_attrs belong to no
// partition: they are inputs of the partitions that read them.
//
//   PARTPLAN_ASSIGN_OR_RETURN(ModuleSplit split,
//       SplitModule(graph, set.partition_of, /*keep_original_order=*/false,
//                   "assignments", token));
//   for (int i : split.construction_order) split.partitions[i].submodule_name;
//
// O(nodes + edges). A cycle between partitions is INVALID_ARGUMENT on
// `assignment_field`, naming the partitions on it.
#ifndef PARTPLAN_PLANNER_SPLIT_MODULE_SPLIT_H_
#define PARTPLAN_PLANNER_SPLIT_MODULE_SPLIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"

namespace partplan {

struct SplitPartition {
  int32_t partition = 0;              // the caller's partition id
  std::vector<NodeId> nodes;          // call_* nodes, graph order
  std::vector<NodeId> inputs;         // split_module's Partition.inputs
  std::vector<NodeId> outputs;        // split_module's Partition.outputs
  std::vector<int32_t> depends_on;    // indices into ModuleSplit::partitions
  std::vector<int32_t> dependents;    // indices into ModuleSplit::partitions

  // Names in the split module's top-level graph.
  std::string submodule_name;         // `submod_<partition>`
  std::vector<std::string> argument_names;  // one per input
  std::vector<std::string> result_names;    // getitems, or the call itself
  // torch.fx's DAGNode.output_nodes: the getitem nodes when the submodule has
  // several outputs; otherwise the nodes using its single output when there
  // are more than one of them; otherwise the call itself.
  std::vector<std::string> dag_output_names;
};

struct ModuleSplit {
  // Partitions in order of first appearance (split_module's dict order).
  std::vector<SplitPartition> partitions;
  // Indices into `partitions`, in construction order.
  std::vector<int32_t> construction_order;
  // The top-level graph's nodes the graph output returns, one per node
  // reference in the output's arguments, in order.
  std::vector<std::string> output_values;
};

absl::StatusOr<ModuleSplit> SplitModule(const CompactGraph& graph,
                                        absl::Span<const int32_t> partition_of,
                                        bool keep_original_order,
                                        absl::string_view assignment_field,
                                        const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_SPLIT_MODULE_SPLIT_H_

#include "planner/fx/aot_partitioner.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {

absl::StatusOr<PartitionSet> AotPartition(const CompactGraph& graph,
                                          const AotAssignment& assignment,
                                          const CancellationToken& token) {
  const int num_partitions = static_cast<int>(assignment.partition_devices.size());
  PartitionSet set;
  set.partitions.resize(num_partitions);
  for (int p = 0; p < num_partitions; ++p) {
    set.partitions[p].logical_device_ids = assignment.partition_devices[p];
  }
  int64_t work = num_partitions;  // steps of the loops below, for the token's polls
  // Until the node lists are made below, partition_of holds the partition
  // given to input nodes too.
  std::vector<int32_t>& partition_of = set.partition_of;
  partition_of = assignment.partition_of;

  // The node lists, in graph order by construction (no sort): each call_*
  // node in its partition; each input node in the partition it was given, if
  // any, and in those of the call_* nodes reading it (torch.fx's add_node
  // copies them in).
  std::vector<NodeId> last_added(num_partitions, -1);
  const auto add = [&](int32_t p, NodeId v) {
    if (last_added[p] == v) return;
    last_added[p] = v;
    set.partitions[p].nodes.push_back(v);
  };
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    if (graph.is_op_node(v)) {
      if (partition_of[v] < 0) {
        return InvalidFieldError(
            "config.node_partitions",
            absl::StrCat("node '", graph.name(v), "' (graph.nodes[", v, "]) has no partition"));
      }
      add(partition_of[v], v);
    } else if (graph.is_input_node(v)) {
      if (partition_of[v] >= 0) add(partition_of[v], v);
      partition_of[v] = -1;
      for (NodeId user : graph.users(v)) {
        PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
        // A user with no partition yet is reported when the loop reaches it.
        if (graph.is_op_node(user) && partition_of[user] >= 0) add(partition_of[user], v);
      }
    }
  }
  NodeSetMemory memory(graph);
  for (int p = 0; p < num_partitions; ++p) {
    const std::vector<NodeId>& nodes = set.partitions[p].nodes;
    // NodeSetMemory costs the nodes and their inputs.
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(1 + static_cast<int64_t>(nodes.size()), &work));
    if (nodes.empty()) {
      return InvalidFieldError(absl::StrCat("config.partition_devices"),
                               absl::StrCat("partition ", p, " has no nodes"));
    }
    set.partitions[p].memory_bytes = memory.Compute(nodes);
  }
  PARTPLAN_RETURN_IF_ERROR(LinkPartitions(graph, token, &set));
  return set;
}

}  // namespace partplan

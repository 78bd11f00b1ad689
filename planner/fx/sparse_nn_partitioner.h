// SparseNnPartition: torch.fx's `sparse_nn` mode (torch 1.13 semantics),
// for recommendation models whose embedding tables dwarf their dense parts.
//
// Walks the call_* nodes in order, cutting a new partition when the walk
// crosses between embedding and non-embedding nodes or when the next node
// would overflow a device. Then, separately among embedding and among
// non-embedding partitions, repeatedly merges the smallest partition into
// the largest one it fits with whose DAG level differs by at most one. Each
// embedding partition gets its own device (inventory order); the
// non-embedding partitions run on all of those devices, and are left
// unplaced when there is no embedding partition (the caller then places
// them best fit; torch.fx crashes there).
//
// A node is an embedding node when it calls a module whose type, or the
// type of a module on its path or below it in Graph.modules, contains
// "Embedding" (torch.fx tests the printed module, which includes children).
//
// Requires devices of equal memory (the caller checks). Fails with
// FAILED_PRECONDITION when a node fits no device, when there are more
// embedding partitions than devices, or when an embedding partition and the
// non-embedding ones do not fit one device together.
//
// Cost: O(N + E) for the cuts; merging is PartitionMerger's (see
// partition_merge.h), O(N + E) and then what each merge changes in the
// partition DAG (torch.fx: O(P^2 x N^2) for P initial partitions).
//
//   PARTPLAN_ASSIGN_OR_RETURN(PartitionSet set,
//                             SparseNnPartition(graph, devices, token));
#ifndef PARTPLAN_PLANNER_FX_SPARSE_NN_PARTITIONER_H_
#define PARTPLAN_PLANNER_FX_SPARSE_NN_PARTITIONER_H_

#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/fx/partition.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

absl::StatusOr<PartitionSet> SparseNnPartition(const CompactGraph& graph,
                                               const DeviceList& devices,
                                               const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_FX_SPARSE_NN_PARTITIONER_H_

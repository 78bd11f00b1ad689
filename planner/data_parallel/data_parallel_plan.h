// PlanDataParallelPlan: the PlanDataParallel RPC's planner: how to run an
// aten-level training graph (make_fx) data-parallel over the devices of one
// mesh axis. It takes the graph, the options and the inventory validated at
// the edge, and returns a DataParallelPlan, which
// wire/data_parallel_response.h writes as the response.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices,
//                             ImportDevices(request.devices(), limits));
//   PARTPLAN_ASSIGN_OR_RETURN(const DataParallelOptions options,
//                             DataParallelOptions::FromRequest(request, graph, devices));
//   PARTPLAN_ASSIGN_OR_RETURN(const DataParallelPlan plan,
//                             PlanDataParallelPlan(graph, options, devices, token));
//   plan.nodes[v].placement.kind;   // node v's placement
//
// The graph must be imported from a parsed v1::Graph (CompactGraph::parsed):
// the analysis reads its nodes' arguments there.
//
// For every node, in graph order: its batch dim (-1 none, -2 Partial), its
// placement on the data-parallel axis (Shard(d), Replicate, Partial with
// `sum` or `avg`), whether the batch dim was ambiguous, the ambiguous node
// its placement rests on if any (`guessed_at`: the node itself, or one it
// is computed from), and a note saying why where there is more to say
// (batch_dim_analysis.h, parameter_placement.h). Shard and Replicate
// placements of the backward of a mean loss, from where it divides by the
// number of samples, carry `scale` = N: each device divides by its own B/N,
// so its values are N times the full batch's. A full reduction over the
// batch that each device keeps (a loss) is Shard(its reduced batch dim)
// with `reduce_op` saying whether the devices' values average or add up to
// the whole. A Shard whose dim merges
// other elements outside the batch (attention's [S, B, H] viewed as
// [S*B, H]) says how many in `interleave`: each device's rows interleave
// rather than forming one block. Other mesh axes are not planned here.
//
// Then the redistributions the placements need, in graph order of their
// first consumer: one per value and target placement (later consumers
// reuse it):
// - an op on activations reads model state whole: all_gather of a sharded
//   parameter (FULLY_SHARD's gather before use);
// - a Partial value read by an op that is not linear in it: all_reduce to
//   Replicate, or reduce_scatter to Shard(0) when the op updates sharded
//   model state (the gradient reduction of DDP / FSDP);
// - a batch-sharded value read by an op that needs the whole batch: all_gather;
// - a replicated value read by a sharded update, or by an elementwise op on
//   batch-sharded values without broadcasting, or a gathered batch (the
//   result of a flip or sort over it) read by an op on samples:
//   local_chunk (no traffic);
// - before a training-mode batch norm or its backward (SyncBatchNorm): an
//   all_reduce, Partial(sum) to Replicate, of 2 x C per-channel statistics
//   of its operand 0, with `statistics` saying which.
// A gathered or cut value keeps its scale; a reduced Partial has none.
// Local scalars (a loss) are used where they are; the graph's outputs are
// returned as they lie. Bytes are those each device sends with ring
// collectives over the axis' N devices, for a value of S bytes:
// all_reduce 2(N-1)S/N, all_gather and reduce_scatter (N-1)S/N,
// all_to_all (N-1)S/N^2, local_chunk 0. communication_bytes_per_step is
// their sum.
//
// Errors: INVALID_ARGUMENT for a graph the analysis cannot follow (unknown
// op without shapes, shape mismatches; batch_dim_analysis.h);
// FAILED_PRECONDITION when MEMORY_AWARE finds no placement that fits; the
// token's status when it fires. (A bad request is the options' error:
// data_parallel_options.h.)
// O(nodes + edges + argument values), plus a sort of the parameter groups.
#ifndef PARTPLAN_PLANNER_DATA_PARALLEL_DATA_PARALLEL_PLAN_H_
#define PARTPLAN_PLANNER_DATA_PARALLEL_DATA_PARALLEL_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "planner/base/cancellation.h"
#include "planner/data_parallel/batch_dim_analysis.h"
#include "planner/data_parallel/data_parallel_options.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"

namespace partplan {

// A placement on the data-parallel axis.
struct DataParallelPlacement {
  enum Kind : uint8_t { kNone, kShard, kReplicate, kPartial };
  Kind kind = kNone;  // kNone: not a tensor
  int32_t dim = 0;    // kShard
  ReduceOp reduce = ReduceOp::kSum;  // kPartial, and kShard of a local scalar
  // kShard, kReplicate: the devices' values are `scale` times the whole
  // value's (ValueLayout::scaled). A property of the values, not of where
  // they lie: placements compare without it.
  int32_t scale = 1;
  // kShard: the batch's dim merges this many outer elements with it, so
  // each device's rows interleave (ValueLayout::batch_outer); 1 for a block.
  int64_t interleave = 1;
  // kShard of a local scalar: `reduce` says how the devices' values combine.
  bool local_scalar = false;
};

// What the plan says of one node.
struct DataParallelNode {
  int32_t batch_dim = -1;  // -1 none, -2 Partial
  DataParallelPlacement placement;
  bool ambiguous = false;
  NodeId guessed_at = -1;  // the ambiguous node the placement rests on, or -1
  std::string note;        // why, where there is more to say; else empty
};

// One redistribution: `value` moved for `consumer`.
struct DataParallelRedistribution {
  NodeId value = -1;
  NodeId consumer = -1;
  DataParallelPlacement from;
  DataParallelPlacement to;
  absl::string_view collective;  // "all_reduce", "all_gather", ... (static)
  int64_t bytes = 0;             // each device sends
  std::string statistics;        // SyncBatchNorm's: which statistics; else empty
};

struct DataParallelPlan {
  std::vector<DataParallelNode> nodes;  // by node id
  std::vector<DataParallelRedistribution> redistributions;
  int64_t communication_bytes_per_step = 0;
};

// `options` must come from DataParallelOptions::FromRequest for `graph` and
// `devices` (which therefore holds at least one device).
absl::StatusOr<DataParallelPlan> PlanDataParallelPlan(const CompactGraph& graph,
                                                      const DataParallelOptions& options,
                                                      const DeviceList& devices,
                                                      const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_DATA_PARALLEL_DATA_PARALLEL_PLAN_H_

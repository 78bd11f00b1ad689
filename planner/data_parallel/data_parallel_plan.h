// PlanDataParallelPlan: the PlanDataParallel RPC: how to run an aten-level
// training graph (make_fx) data-parallel over the devices of one mesh axis.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph,
//                             ImportGraph(request.graph(), limits, token));
//   PARTPLAN_ASSIGN_OR_RETURN(v1::PlanDataParallelResponse response,
//                             PlanDataParallelPlan(graph, request, token));
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
// Errors: INVALID_ARGUMENT for a bad request (data_parallel_options.h) or a
// graph the analysis cannot follow (unknown op without shapes, shape
// mismatches; batch_dim_analysis.h); FAILED_PRECONDITION when MEMORY_AWARE
// finds no placement that fits; the token's status when it fires.
// O(nodes + edges + argument values), plus a sort of the parameter groups.
#ifndef PARTPLAN_PLANNER_DATA_PARALLEL_DATA_PARALLEL_PLAN_H_
#define PARTPLAN_PLANNER_DATA_PARALLEL_DATA_PARALLEL_PLAN_H_

#include "absl/status/statusor.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"

namespace partplan {

absl::StatusOr<v1::PlanDataParallelResponse> PlanDataParallelPlan(
    const CompactGraph& graph, const v1::PlanDataParallelRequest& request,
    const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_DATA_PARALLEL_DATA_PARALLEL_PLAN_H_

#include "planner/wire/data_parallel_response.h"

#include <cstdint>
#include <string>

#include "planner/base/status_util.h"

namespace partplan {
namespace {

v1::Placement::Kind KindOf(DataParallelPlacement::Kind kind) {
  switch (kind) {
    case DataParallelPlacement::kShard:
      return v1::Placement::SHARD;
    case DataParallelPlacement::kReplicate:
      return v1::Placement::REPLICATE;
    case DataParallelPlacement::kPartial:
      return v1::Placement::PARTIAL;
    case DataParallelPlacement::kNone:
      break;
  }
  return v1::Placement::KIND_UNSPECIFIED;
}

void WritePlacement(const DataParallelPlacement& place, v1::Placement* placement) {
  const bool shard = place.kind == DataParallelPlacement::kShard;
  placement->set_kind(KindOf(place.kind));
  if (shard) placement->set_dim(place.dim);
  if (place.kind == DataParallelPlacement::kPartial || (shard && place.local_scalar)) {
    placement->set_reduce_op(ReduceOpName(place.reduce));
  }
  if (place.scale > 1) placement->set_scale(place.scale);
  if (shard && place.interleave > 1) placement->set_interleave(place.interleave);
}

}  // namespace

absl::Status DataParallelResponseFromPlan(const CompactGraph& graph,
                                          const DataParallelPlan& plan,
                                          const CancellationToken& token,
                                          v1::PlanDataParallelResponse* response) {
  response->Clear();
  const int32_t n = static_cast<int32_t>(plan.nodes.size());
  response->mutable_nodes()->Reserve(n);
  for (NodeId v = 0; v < n; ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(v));
    const DataParallelNode& node = plan.nodes[v];
    v1::NodeSharding* sharding = response->add_nodes();
    sharding->set_node(std::string(graph.name(v)));
    sharding->set_batch_dim(node.batch_dim);
    if (node.placement.kind != DataParallelPlacement::kNone) {
      WritePlacement(node.placement, sharding->mutable_placement());
    }
    sharding->set_ambiguous(node.ambiguous);
    if (node.guessed_at >= 0) sharding->set_guessed_at(std::string(graph.name(node.guessed_at)));
    sharding->set_note(node.note);
  }
  int64_t i = 0;
  for (const DataParallelRedistribution& move : plan.redistributions) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i++));
    v1::Redistribution* redistribution = response->add_redistributions();
    redistribution->set_value(std::string(graph.name(move.value)));
    redistribution->set_consumer(std::string(graph.name(move.consumer)));
    WritePlacement(move.from, redistribution->mutable_from_placement());
    WritePlacement(move.to, redistribution->mutable_to_placement());
    redistribution->set_collective(std::string(move.collective));
    redistribution->set_bytes(move.bytes);
    if (!move.statistics.empty()) redistribution->set_statistics(move.statistics);
  }
  response->set_communication_bytes_per_step(plan.communication_bytes_per_step);
  return absl::OkStatus();
}

}  // namespace partplan

#include "planner/data_parallel/data_parallel_plan.h"

#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "planner/base/status_util.h"
#include "planner/data_parallel/batch_dim_analysis.h"
#include "planner/data_parallel/data_parallel_options.h"
#include "planner/data_parallel/parameter_placement.h"

namespace partplan {
namespace {

// A placement on the data-parallel axis.
struct Place {
  v1::Placement::Kind kind = v1::Placement::KIND_UNSPECIFIED;
  int32_t dim = 0;                   // SHARD
  ReduceOp reduce = ReduceOp::kSum;  // PARTIAL
  // SHARD, REPLICATE: the devices' values are `scale` times the whole
  // value's (ValueLayout::scaled). A property of the values, not of where
  // they lie: placements compare without it.
  int32_t scale = 1;
  // SHARD: the batch's dim merges this many outer elements with it, so each
  // device's rows interleave (ValueLayout::batch_outer); 1 for a block.
  int64_t interleave = 1;
  // SHARD of a local scalar: `reduce` says how the devices' values combine.
  bool local_scalar = false;

  bool operator==(const Place& other) const {
    return kind == other.kind &&
           (kind != v1::Placement::SHARD || (dim == other.dim && interleave == other.interleave)) &&
           (kind != v1::Placement::PARTIAL || reduce == other.reduce);
  }
  // A key for de-duplicating redistributions of one value (with interleave).
  int64_t Key() const {
    return (static_cast<int64_t>(kind) << 40) | (static_cast<int64_t>(reduce) << 32) |
           static_cast<uint32_t>(dim);
  }
  void ToProto(v1::Placement* placement) const {
    placement->set_kind(kind);
    if (kind == v1::Placement::SHARD) placement->set_dim(dim);
    if (kind == v1::Placement::PARTIAL || (kind == v1::Placement::SHARD && local_scalar)) {
      placement->set_reduce_op(ReduceOpName(reduce));
    }
    if (scale > 1) placement->set_scale(scale);
    if (kind == v1::Placement::SHARD && interleave > 1) placement->set_interleave(interleave);
  }
};

Place Replicate() { return Place{v1::Placement::REPLICATE, 0, ReduceOp::kSum}; }
Place ShardOn(int32_t dim, int64_t interleave = 1) {
  Place place{v1::Placement::SHARD, dim, ReduceOp::kSum};
  place.interleave = interleave;
  return place;
}

// The collective that moves a value from one placement to another, and the
// bytes each of `n` devices sends for a value of `bytes` (ring algorithms).
struct Collective {
  const char* name;
  int64_t bytes;
};

Collective CollectiveFor(const Place& from, const Place& to, int64_t bytes, int32_t n) {
  // bytes x (n - 1) x numerator / (n x denominator), without overflow.
  const auto share = [bytes, n](int64_t numerator, int64_t denominator) {
    const __int128 sent = static_cast<__int128>(bytes) * (n - 1) * numerator;
    return static_cast<int64_t>(sent / (static_cast<__int128>(n) * denominator));
  };
  using K = v1::Placement;
  if (from.kind == K::PARTIAL) {
    if (to.kind == K::REPLICATE) return {"all_reduce", share(2, 1)};
    return {"reduce_scatter", share(1, 1)};
  }
  if (from.kind == K::SHARD) {
    if (to.kind == K::REPLICATE) return {"all_gather", share(1, 1)};
    return {"all_to_all", share(1, n)};
  }
  return {"local_chunk", 0};
}

class PlanBuilder {
 public:
  PlanBuilder(const CompactGraph& graph, const v1::PlanDataParallelRequest& request,
              const CancellationToken& token)
      : graph_(graph), request_(request), token_(token) {}

  absl::StatusOr<v1::PlanDataParallelResponse> Run() {
    options_ = DataParallelOptions::FromRequest(request_);
    PARTPLAN_RETURN_IF_ERROR(options_.CheckAndSetup(graph_));
    PARTPLAN_ASSIGN_OR_RETURN(analysis_, AnalyzeBatchDims(graph_, options_.batch, token_));
    PARTPLAN_ASSIGN_OR_RETURN(
        placement_,
        PlaceParameters(graph_, analysis_, options_.resolved_style, options_.group_size,
                        options_.device_memory_bytes, options_.smallest_device, token_));
    const int32_t n = graph_.num_nodes();
    places_.reserve(n);
    v1::PlanDataParallelResponse response;
    response.mutable_nodes()->Reserve(n);
    for (NodeId v = 0; v < n; ++v) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(v));
      places_.push_back(PlaceOf(v));
      AddNodeSharding(v, &response);
    }
    for (NodeId v = 0; v < n; ++v) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(v));
      const BatchDimAnalysis::StatisticsSync* sync = analysis_.statistics_sync(v);
      if (sync != nullptr) AddStatisticsSync(v, *sync, &response);
      for (NodeId u : graph_.inputs(v)) {
        const absl::optional<Place> need = Need(u, v);
        if (!need.has_value() || *need == places_[u]) continue;
        if (!redistributed_.insert({u, need->Key(), need->interleave}).second) {
          continue;  // already there
        }
        AddRedistribution(u, v, *need, &response);
      }
    }
    return response;
  }

 private:
  const ValueLayout& layout(NodeId v) const { return analysis_.layout(v); }

  Place PlaceOf(NodeId v) const {
    Place place = UnscaledPlaceOf(v);
    // The backward of a mean loss each device takes over its own B/N
    // samples: N times the whole's values (an even split).
    if (layout(v).scaled) place.scale = options_.group_size;
    return place;
  }

  Place UnscaledPlaceOf(NodeId v) const {
    const ValueLayout& value = layout(v);
    switch (value.layout) {
      case Layout::kModelState:
        return placement_.sharded(v) ? ShardOn(0) : Replicate();
      case Layout::kShard:
        return ShardOn(value.dim, value.batch_outer);
      case Layout::kLocalScalar: {  // upstream keeps a full reduction sharded
        Place place = ShardOn(value.dim);
        place.local_scalar = true;
        place.reduce = value.reduce;
        return place;
      }
      case Layout::kPartial:
        return Place{v1::Placement::PARTIAL, 0, value.reduce};
      case Layout::kReplicate:
        return Replicate();
      case Layout::kNotTensor:
        break;
    }
    return Place{};
  }

  static int32_t BatchDimOf(const ValueLayout& value) {
    switch (value.layout) {
      case Layout::kShard:
      case Layout::kLocalScalar:
        return value.dim;
      case Layout::kPartial:
        return -2;
      default:
        return -1;
    }
  }

  void AddNodeSharding(NodeId v, v1::PlanDataParallelResponse* response) const {
    v1::NodeSharding* sharding = response->add_nodes();
    sharding->set_node(std::string(graph_.name(v)));
    sharding->set_batch_dim(BatchDimOf(layout(v)));
    if (places_[v].kind != v1::Placement::KIND_UNSPECIFIED) {
      places_[v].ToProto(sharding->mutable_placement());
    }
    sharding->set_ambiguous(analysis_.ambiguous(v));
    const NodeId guess = analysis_.guess_of(v);
    if (guess >= 0 && graph_.op(v) != v1::OUTPUT) sharding->set_guessed_at(std::string(graph_.name(guess)));
    const std::string& why = analysis_.note(v);
    const std::string& placed = placement_.note(v);
    sharding->set_note(why.empty() || placed.empty() ? absl::StrCat(why, placed)
                                                     : absl::StrCat(why, "; ", placed));
  }

  // The placement consumer v needs operand u in, if it needs one.
  absl::optional<Place> Need(NodeId u, NodeId v) const {
    // Outputs are returned as they lie; a getitem takes its element so.
    if (graph_.op(v) == v1::OUTPUT || analysis_.selects_element(v)) return absl::nullopt;
    const ValueLayout& in = layout(u);
    if (in.layout == Layout::kNotTensor || in.layout == Layout::kLocalScalar) {
      return absl::nullopt;
    }
    if (layout(v).layout == Layout::kModelState) {
      if (placement_.group_of(v) < 0 || places_[v] == Replicate()) return Replicate();
      // A sharded update: its group is sharded alike; gradients arrive
      // reduce-scattered; replicated operands are cut to the shard unless
      // they broadcast along dim 0.
      if (placement_.group_of(u) >= 0 || in.layout == Layout::kPartial) return places_[v];
      return BroadcastsAlongDim0(u, v) ? absl::nullopt : absl::make_optional(places_[v]);
    }
    switch (in.layout) {
      case Layout::kModelState:
        // A buffer read per sample (a fixed target) gives each device its
        // rows; other uses need it whole.
        if (const int32_t dim = analysis_.cut_dim(u, v); dim >= 0) return ShardOn(dim);
        return Replicate();
      case Layout::kPartial:
        if (analysis_.keeps_partial_operands(v)) return absl::nullopt;
        return Replicate();
      case Layout::kShard:
        if (analysis_.gathers_batch(v)) return Replicate();
        return absl::nullopt;
      case Layout::kReplicate:
        // A gathered batch read by an op on samples (one the analysis took
        // it as sharded for): each device takes its rows again.
        if (in.dim >= 0 && !analysis_.gathers_batch(v) &&
            layout(v).layout != Layout::kReplicate) {
          return ShardOn(in.dim);
        }
        if (const int32_t dim = analysis_.cut_dim(u, v); dim >= 0) return ShardOn(dim);
        return ChunkForShardedOutput(u, v);
      default:
        return absl::nullopt;
    }
  }

  // An elementwise op whose output is batch-sharded reads a replicated
  // operand's rows of that batch unless the operand broadcasts there.
  absl::optional<Place> ChunkForShardedOutput(NodeId u, NodeId v) const {
    const ValueLayout& out = layout(v);
    if (!analysis_.elementwise(v) || out.layout != Layout::kShard) return absl::nullopt;
    const absl::Span<const int64_t> operand = analysis_.shape(u);
    const absl::Span<const int64_t> output = analysis_.shape(v);
    const int64_t at = out.dim - static_cast<int64_t>(output.size() - operand.size());
    if (at < 0 || at >= static_cast<int64_t>(operand.size()) || operand[at] == 1) {
      return absl::nullopt;
    }
    // The device's rows of the output's dim, interleaved as the output's are.
    return ShardOn(static_cast<int32_t>(at), places_[v].interleave);
  }

  bool BroadcastsAlongDim0(NodeId u, NodeId v) const {
    const absl::Span<const int64_t> operand = analysis_.shape(u);
    const absl::Span<const int64_t> output = analysis_.shape(v);
    return operand.size() < output.size() || operand.empty() || operand[0] == 1;
  }

  // SyncBatchNorm's all-reduce of per-channel statistics before v.
  void AddStatisticsSync(NodeId v, const BatchDimAnalysis::StatisticsSync& sync,
                         v1::PlanDataParallelResponse* response) const {
    int64_t bytes = 0;
    if (__builtin_mul_overflow(sync.values, sync.element_bytes, &bytes)) {
      bytes = std::numeric_limits<int64_t>::max();
    }
    const Place from{v1::Placement::PARTIAL, 0, ReduceOp::kSum};
    const Collective collective = CollectiveFor(from, Replicate(), bytes, options_.group_size);
    v1::Redistribution* redistribution = response->add_redistributions();
    redistribution->set_value(std::string(graph_.name(sync.operand)));
    redistribution->set_consumer(std::string(graph_.name(v)));
    from.ToProto(redistribution->mutable_from_placement());
    Replicate().ToProto(redistribution->mutable_to_placement());
    redistribution->set_collective(collective.name);
    redistribution->set_bytes(collective.bytes);
    redistribution->set_statistics(
        absl::StrCat(sync.what, " (", sync.values, " values)"));
    response->set_communication_bytes_per_step(response->communication_bytes_per_step() +
                                               collective.bytes);
  }

  void AddRedistribution(NodeId u, NodeId v, Place to,
                         v1::PlanDataParallelResponse* response) const {
    const Collective collective =
        CollectiveFor(places_[u], to, analysis_.value_bytes(u), options_.group_size);
    // Gathering or cutting scaled values moves them as they are; reducing
    // Partial terms gives the whole value.
    if (places_[u].kind != v1::Placement::PARTIAL) to.scale = places_[u].scale;
    v1::Redistribution* redistribution = response->add_redistributions();
    redistribution->set_value(std::string(graph_.name(u)));
    redistribution->set_consumer(std::string(graph_.name(v)));
    places_[u].ToProto(redistribution->mutable_from_placement());
    to.ToProto(redistribution->mutable_to_placement());
    redistribution->set_collective(collective.name);
    redistribution->set_bytes(collective.bytes);
    response->set_communication_bytes_per_step(response->communication_bytes_per_step() +
                                               collective.bytes);
  }

  const CompactGraph& graph_;
  const v1::PlanDataParallelRequest& request_;
  const CancellationToken& token_;
  DataParallelOptions options_;
  BatchDimAnalysis analysis_;
  ParameterPlacement placement_;
  std::vector<Place> places_;
  absl::flat_hash_set<std::tuple<NodeId, int64_t, int64_t>> redistributed_;
};

}  // namespace

absl::StatusOr<v1::PlanDataParallelResponse> PlanDataParallelPlan(
    const CompactGraph& graph, const v1::PlanDataParallelRequest& request,
    const CancellationToken& token) {
  return PlanBuilder(graph, request, token).Run();
}

}  // namespace partplan

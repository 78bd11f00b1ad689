#include "planner/data_parallel/data_parallel_plan.h"

#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "planner/base/status_util.h"
#include "planner/data_parallel/parameter_placement.h"

namespace partplan {
namespace {

using Place = DataParallelPlacement;

// Whether a value lies the same way under both placements (scale aside).
bool SamePlace(const Place& a, const Place& b) {
  return a.kind == b.kind &&
         (a.kind != Place::kShard || (a.dim == b.dim && a.interleave == b.interleave)) &&
         (a.kind != Place::kPartial || a.reduce == b.reduce);
}

// A key for de-duplicating redistributions of one value (with interleave).
int64_t PlaceKey(const Place& place) {
  return (static_cast<int64_t>(place.kind) << 40) |
         (static_cast<int64_t>(place.reduce) << 32) | static_cast<uint32_t>(place.dim);
}

Place Replicate() { return Place{Place::kReplicate, 0, ReduceOp::kSum}; }
Place ShardOn(int32_t dim, int64_t interleave = 1) {
  Place place{Place::kShard, dim, ReduceOp::kSum};
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
  if (from.kind == Place::kPartial) {
    if (to.kind == Place::kReplicate) return {"all_reduce", share(2, 1)};
    return {"reduce_scatter", share(1, 1)};
  }
  if (from.kind == Place::kShard) {
    if (to.kind == Place::kReplicate) return {"all_gather", share(1, 1)};
    return {"all_to_all", share(1, n)};
  }
  return {"local_chunk", 0};
}

class PlanBuilder {
 public:
  PlanBuilder(const CompactGraph& graph, const DataParallelOptions& options,
              const DeviceList& devices, const CancellationToken& token)
      : graph_(graph), options_(options), devices_(devices), token_(token) {}

  absl::StatusOr<DataParallelPlan> Run() {
    if (devices_.empty()) {
      return absl::InvalidArgumentError("a data-parallel plan needs at least one device");
    }
    // MEMORY_AWARE's budget: the smallest device (the first such).
    int64_t device_memory_bytes = devices_[0].available_memory_bytes;
    const std::string* smallest_device = &devices_[0].name;
    for (const DeviceSpec& device : devices_.devices()) {
      if (device.available_memory_bytes < device_memory_bytes) {
        device_memory_bytes = device.available_memory_bytes;
        smallest_device = &device.name;
      }
    }
    PARTPLAN_ASSIGN_OR_RETURN(analysis_, AnalyzeBatchDims(graph_, options_.batch, token_));
    PARTPLAN_ASSIGN_OR_RETURN(
        placement_, PlaceParameters(graph_, analysis_, options_.style, options_.group_size,
                                    device_memory_bytes, *smallest_device, token_));
    const int32_t n = graph_.num_nodes();
    places_.reserve(n);
    DataParallelPlan plan;
    plan.nodes.resize(n);
    for (NodeId v = 0; v < n; ++v) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(v));
      places_.push_back(PlaceOf(v));
      DescribeNode(v, &plan.nodes[v]);
    }
    for (NodeId v = 0; v < n; ++v) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(v));
      const BatchDimAnalysis::StatisticsSync* sync = analysis_.statistics_sync(v);
      if (sync != nullptr) AddStatisticsSync(v, *sync, &plan);
      for (NodeId u : graph_.inputs(v)) {
        const absl::optional<Place> need = Need(u, v);
        if (!need.has_value() || SamePlace(*need, places_[u])) continue;
        if (!redistributed_.insert({u, PlaceKey(*need), need->interleave}).second) {
          continue;  // already there
        }
        AddRedistribution(u, v, *need, &plan);
      }
    }
    return plan;
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
        return Place{Place::kPartial, 0, value.reduce};
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

  void DescribeNode(NodeId v, DataParallelNode* node) const {
    node->batch_dim = BatchDimOf(layout(v));
    node->placement = places_[v];
    node->ambiguous = analysis_.ambiguous(v);
    const NodeId guess = analysis_.guess_of(v);
    if (guess >= 0 && graph_.op(v) != v1::OUTPUT) node->guessed_at = guess;
    const std::string& why = analysis_.note(v);
    const std::string& placed = placement_.note(v);
    node->note = why.empty() || placed.empty() ? absl::StrCat(why, placed)
                                               : absl::StrCat(why, "; ", placed);
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
      if (placement_.group_of(v) < 0 || SamePlace(places_[v], Replicate())) return Replicate();
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
                         DataParallelPlan* plan) const {
    int64_t bytes = 0;
    if (__builtin_mul_overflow(sync.values, sync.element_bytes, &bytes)) {
      bytes = std::numeric_limits<int64_t>::max();
    }
    const Place from{Place::kPartial, 0, ReduceOp::kSum};
    const Collective collective = CollectiveFor(from, Replicate(), bytes, options_.group_size);
    DataParallelRedistribution& redistribution = plan->redistributions.emplace_back();
    redistribution.value = sync.operand;
    redistribution.consumer = v;
    redistribution.from = from;
    redistribution.to = Replicate();
    redistribution.collective = collective.name;
    redistribution.bytes = collective.bytes;
    redistribution.statistics = absl::StrCat(sync.what, " (", sync.values, " values)");
    plan->communication_bytes_per_step += collective.bytes;
  }

  void AddRedistribution(NodeId u, NodeId v, Place to,
                         DataParallelPlan* plan) const {
    const Collective collective =
        CollectiveFor(places_[u], to, analysis_.value_bytes(u), options_.group_size);
    // Gathering or cutting scaled values moves them as they are; reducing
    // Partial terms gives the whole value.
    if (places_[u].kind != Place::kPartial) to.scale = places_[u].scale;
    DataParallelRedistribution& redistribution = plan->redistributions.emplace_back();
    redistribution.value = u;
    redistribution.consumer = v;
    redistribution.from = places_[u];
    redistribution.to = to;
    redistribution.collective = collective.name;
    redistribution.bytes = collective.bytes;
    plan->communication_bytes_per_step += collective.bytes;
  }

  const CompactGraph& graph_;
  const DataParallelOptions& options_;
  const DeviceList& devices_;
  const CancellationToken& token_;
  BatchDimAnalysis analysis_;
  ParameterPlacement placement_;
  std::vector<Place> places_;
  absl::flat_hash_set<std::tuple<NodeId, int64_t, int64_t>> redistributed_;
};

}  // namespace

absl::StatusOr<DataParallelPlan> PlanDataParallelPlan(const CompactGraph& graph,
                                                      const DataParallelOptions& options,
                                                      const DeviceList& devices,
                                                      const CancellationToken& token) {
  return PlanBuilder(graph, options, devices, token).Run();
}

}  // namespace partplan

#include "planner/data_parallel/parameter_placement.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? kMaxBytes : sum;
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? kMaxBytes : product;
}

// Union-find over node ids, by size with path halving.
class DisjointSets {
 public:
  explicit DisjointSets(int32_t n) : parent_(n), size_(n, 1) {
    std::iota(parent_.begin(), parent_.end(), 0);
  }
  NodeId Find(NodeId v) {
    while (parent_[v] != v) {
      parent_[v] = parent_[parent_[v]];
      v = parent_[v];
    }
    return v;
  }
  void Union(NodeId a, NodeId b) {
    a = Find(a);
    b = Find(b);
    if (a == b) return;
    if (size_[a] < size_[b]) std::swap(a, b);
    parent_[b] = a;
    size_[a] += size_[b];
  }

 private:
  std::vector<NodeId> parent_;
  std::vector<int32_t> size_;
};

bool SameShape(absl::Span<const int64_t> a, absl::Span<const int64_t> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

}  // namespace

int64_t ShardBytes(absl::Span<const int64_t> shape, int64_t element_bytes, int32_t dim,
                   int32_t group_size) {
  int64_t bytes = element_bytes;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t size = static_cast<int32_t>(i) == dim
                             ? (shape[i] + group_size - 1) / std::max<int32_t>(group_size, 1)
                             : shape[i];
    bytes = SaturatingMul(bytes, size);
  }
  return bytes;
}

const std::string& ParameterPlacement::note(NodeId v) const {
  return note_of_.empty() || note_of_[v] < 0 ? no_note_ : group_notes_[note_of_[v]];
}

class ParameterPlacer {
 public:
  ParameterPlacer(const CompactGraph& graph, const BatchDimAnalysis& analysis,
                  DataParallelStyle style, int32_t group_size, int64_t device_memory_bytes,
                  const std::string& smallest_device, const CancellationToken& token)
      : graph_(graph),
        analysis_(analysis),
        style_(style),
        group_size_(group_size),
        budget_(device_memory_bytes),
        smallest_device_(smallest_device),
        token_(token) {}

  absl::StatusOr<ParameterPlacement> Run() {
    PARTPLAN_RETURN_IF_ERROR(FormGroups());
    result_.group_sharded_.assign(groups_.size(), false);
    switch (style_) {
      case DataParallelStyle::kReplicate:
        break;
      case DataParallelStyle::kFullyShard:
        for (size_t g = 0; g < groups_.size(); ++g) {
          if (groups_[g].shardable) {
            result_.group_sharded_[g] = true;
          } else {
            NoteGroup(g, "FULLY_SHARD: replicated: a 0-d tensor cannot be sharded");
          }
        }
        break;
      default:
        PARTPLAN_RETURN_IF_ERROR(ChooseByMemory());
        break;
    }
    return std::move(result_);
  }

 private:
  struct Group {
    std::vector<NodeId> placeholders;
    int64_t full_bytes = 0;     // every placeholder whole
    int64_t sharded_bytes = 0;  // each device's shard of them
    bool shardable = true;      // no 0-d member
    int64_t saving() const { return shardable ? full_bytes - sharded_bytes : 0; }
  };

  bool is_model_state(NodeId v) const { return analysis_.layout(v).layout == Layout::kModelState; }

  // A model-state op is placed with its operands' group when it is
  // elementwise over values of its own shape (an optimizer update).
  bool KeepsGroup(NodeId v) const {
    if (graph_.op(v) == v1::PLACEHOLDER) return true;
    if (!analysis_.elementwise(v)) return false;
    for (NodeId u : graph_.inputs(v)) {
      const Layout layout = analysis_.layout(u).layout;
      if ((layout == Layout::kModelState || layout == Layout::kPartial) &&
          !SameShape(analysis_.shape(u), analysis_.shape(v))) {
        return false;
      }
    }
    return true;
  }

  absl::Status FormGroups() {
    const int32_t n = graph_.num_nodes();
    DisjointSets sets(n);
    std::vector<bool> grouped(n, false);
    for (NodeId v = 0; v < n; ++v) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(v));
      if (!is_model_state(v) || !KeepsGroup(v)) continue;
      grouped[v] = true;
      for (NodeId u : graph_.inputs(v)) {
        if (grouped[u]) sets.Union(u, v);
      }
    }
    result_.group_of_.assign(n, -1);
    std::vector<int32_t> group_of_root(n, -1);
    for (NodeId v = 0; v < n; ++v) {
      if (!grouped[v]) continue;
      int32_t& group = group_of_root[sets.Find(v)];
      if (group < 0) {
        group = static_cast<int32_t>(groups_.size());
        groups_.emplace_back();
      }
      result_.group_of_[v] = group;
      Group& g = groups_[group];
      const absl::Span<const int64_t> shape = analysis_.shape(v);
      if (shape.empty()) g.shardable = false;
      if (graph_.op(v) != v1::PLACEHOLDER) continue;
      g.placeholders.push_back(v);
      g.full_bytes = SaturatingAdd(g.full_bytes, analysis_.value_bytes(v));
      g.sharded_bytes = SaturatingAdd(
          g.sharded_bytes, ShardBytes(shape, analysis_.element_bytes(v), 0, group_size_));
    }
    return absl::OkStatus();
  }

  // Bytes one device holds of node v's value, as the analysis places it.
  int64_t LocalBytes(NodeId v) const {
    int64_t bytes = 0;
    for (int k = 0; k < analysis_.num_elements(v); ++k) {
      const ValueLayout& value = analysis_.element_layout(v, k);
      if (value.layout == Layout::kNotTensor) continue;
      const int32_t dim = value.layout == Layout::kShard ? value.dim : -1;
      bytes = SaturatingAdd(bytes, ShardBytes(analysis_.shape(v, k), analysis_.element_bytes(v, k),
                                              dim, group_size_));
    }
    return bytes;
  }

  // The most bytes of values other than grouped model state alive at once,
  // in graph order. A view or tuple element shares its operand's storage,
  // which lives until the last user of any of them.
  absl::StatusOr<int64_t> PeakOtherBytes() const {
    const int32_t n = graph_.num_nodes();
    std::vector<NodeId> storage(n);
    std::vector<NodeId> last_use(n);
    for (NodeId v = 0; v < n; ++v) {
      const auto inputs = graph_.inputs(v);
      storage[v] = analysis_.aliases_operand(v) && !inputs.empty() ? storage[inputs[0]] : v;
      const auto users = graph_.users(v);
      const NodeId last = users.empty() ? v : users.back();
      last_use[storage[v]] = std::max(storage[v] == v ? last : last_use[storage[v]], last);
    }
    // Storage freed after each node: a counting sort by last use.
    std::vector<int64_t> offsets(n + 1, 0);
    for (NodeId v = 0; v < n; ++v) {
      if (storage[v] == v) ++offsets[last_use[v] + 1];
    }
    for (NodeId v = 0; v < n; ++v) offsets[v + 1] += offsets[v];
    std::vector<NodeId> freed(static_cast<size_t>(offsets[n]));
    std::vector<int64_t> next(offsets.begin(), offsets.end() - 1);
    for (NodeId v = 0; v < n; ++v) {
      if (storage[v] == v) freed[next[last_use[v]]++] = v;
    }
    std::vector<int64_t> bytes(n, 0);
    int64_t live = 0;
    int64_t peak = 0;
    for (NodeId v = 0; v < n; ++v) {
      PARTPLAN_RETURN_IF_ERROR(token_.CheckEvery(v));
      if (storage[v] == v && result_.group_of_[v] < 0) {
        bytes[v] = LocalBytes(v);
        live = SaturatingAdd(live, bytes[v]);
      }
      peak = std::max(peak, live);
      for (int64_t i = offsets[v]; i < offsets[v + 1]; ++i) live -= bytes[freed[i]];
    }
    return peak;
  }

  void NoteGroup(size_t g, const std::string& text) {
    if (result_.note_of_.empty()) result_.note_of_.assign(result_.group_of_.size(), -1);
    result_.group_notes_.resize(groups_.size());
    result_.group_notes_[g] = text;
    for (NodeId v : groups_[g].placeholders) result_.note_of_[v] = static_cast<int32_t>(g);
  }

  absl::Status ChooseByMemory() {
    PARTPLAN_ASSIGN_OR_RETURN(const int64_t peak, PeakOtherBytes());
    int64_t replicated = 0;
    for (const Group& g : groups_) replicated = SaturatingAdd(replicated, g.full_bytes);
    const int64_t all_replicated = SaturatingAdd(peak, replicated);
    const std::string need = absl::StrCat(
        "with every parameter and optimizer state replicated a device needs ", all_replicated,
        " bytes (", replicated, " of model state, ", peak, " of other values at their peak)");
    const std::string device =
        absl::StrCat(budget_, " bytes of the smallest device '", smallest_device_, "'");
    if (all_replicated <= budget_) {
      for (size_t g = 0; g < groups_.size(); ++g) {
        NoteGroup(g, absl::StrCat("MEMORY_AWARE: replicated: ", need, ", within the ", device));
      }
      return absl::OkStatus();
    }
    // Shard the fewest bytes that close the gap: the smallest group that
    // closes it alone, else the largest, and again.
    std::vector<int32_t> order;
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (groups_[g].saving() > 0) order.push_back(static_cast<int32_t>(g));
    }
    std::stable_sort(order.begin(), order.end(), [this](int32_t a, int32_t b) {
      return groups_[a].saving() > groups_[b].saving();
    });
    int64_t gap = all_replicated - budget_;
    size_t first = 0;  // order[first..] are not chosen yet, largest saving first
    while (gap > 0 && first < order.size()) {
      // The last group at or after `first` whose saving still closes the gap.
      const auto closing =
          std::partition_point(order.begin() + first, order.end(),
                               [this, gap](int32_t g) { return groups_[g].saving() >= gap; });
      if (closing != order.begin() + first) {
        const int32_t g = *(closing - 1);
        result_.group_sharded_[g] = true;
        gap -= groups_[g].saving();
        break;
      }
      result_.group_sharded_[order[first]] = true;
      gap -= groups_[order[first]].saving();
      ++first;
    }
    int64_t planned = peak;
    for (size_t g = 0; g < groups_.size(); ++g) {
      planned = SaturatingAdd(
          planned, result_.group_sharded_[g] ? groups_[g].sharded_bytes : groups_[g].full_bytes);
    }
    if (gap > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "MEMORY_AWARE: even with every parameter and optimizer state sharded over ", group_size_,
          " devices a device needs ", planned, " bytes (", planned - peak, " of model state, ",
          peak, " of other values at their peak), above the ", device));
    }
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (result_.group_sharded_[g]) {
        NoteGroup(g, absl::StrCat("MEMORY_AWARE: sharded on dim 0: ", need, ", above the ", device,
                                  "; sharding this group (its parameter and states, ",
                                  groups_[g].full_bytes, " bytes) saves ", groups_[g].saving(),
                                  " bytes per device, and the plan needs ", planned, " bytes"));
      } else {
        NoteGroup(g, absl::StrCat("MEMORY_AWARE: replicated: ", need, ", above the ", device,
                                  "; the groups chosen for sharding bring it to ", planned,
                                  " bytes, so this one stays whole"));
      }
    }
    return absl::OkStatus();
  }

  const CompactGraph& graph_;
  const BatchDimAnalysis& analysis_;
  const DataParallelStyle style_;
  const int32_t group_size_;
  const int64_t budget_;
  const std::string& smallest_device_;
  const CancellationToken& token_;
  std::vector<Group> groups_;
  ParameterPlacement result_;
};

absl::StatusOr<ParameterPlacement> PlaceParameters(const CompactGraph& graph,
                                                   const BatchDimAnalysis& analysis,
                                                   DataParallelStyle style, int32_t group_size,
                                                   int64_t device_memory_bytes,
                                                   const std::string& smallest_device,
                                                   const CancellationToken& token) {
  return ParameterPlacer(graph, analysis, style, group_size, device_memory_bytes, smallest_device,
                         token)
      .Run();
}

}  // namespace partplan

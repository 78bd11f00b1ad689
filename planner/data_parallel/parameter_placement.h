// PlaceParameters: where a data-parallel plan keeps each parameter and
// optimizer state: replicated on every device of the data-parallel axis,
// or sharded on dim 0 across them.
//
//   PARTPLAN_ASSIGN_OR_RETURN(
//       ParameterPlacement placement,
//       PlaceParameters(graph, analysis, options.style, options.group_size,
//                       device_memory_bytes, smallest_device, token));
//   placement.sharded(v);   // model-state node v is Shard(0)
//
// Model state travels in groups: a parameter, its optimizer states and the
// elementwise update arithmetic between them (ops of one shape) share a
// placement, so an update never reshards. Other uses of model state (t(w),
// a view, anything that changes the shape) need it whole: they are
// replicated and all-gather a sharded operand.
//
// Styles:
// - REPLICATE: every group replicated (DDP); gradients stay Partial and are
//   all-reduced where the update reads them.
// - FULLY_SHARD: every group sharded on dim 0 (FSDP-like); a group holding a
//   0-d tensor stays replicated, with a note.
// - MEMORY_AWARE (what upstream's DEFAULT never implemented): replicate
//   everything if it fits the smallest device, else shard just enough
//   groups: the smallest group that closes the remaining gap, else the
//   largest, until it fits. A device is charged its model state (full or
//   1/group_size) plus the peak of the other values alive at once, taking
//   values in graph order, each alive from its node to its last user.
//   Every parameter and state placeholder gets a note saying which and why;
//   FAILED_PRECONDITION when even sharding every group does not fit.
// O(nodes + edges + groups log groups).
#ifndef PARTPLAN_PLANNER_DATA_PARALLEL_PARAMETER_PLACEMENT_H_
#define PARTPLAN_PLANNER_DATA_PARALLEL_PARAMETER_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/data_parallel/batch_dim_analysis.h"
#include "planner/graph/graph.h"

namespace partplan {

// Where a data-parallel plan keeps parameters and optimizer states (the
// styles above).
enum class DataParallelStyle : uint8_t {
  kReplicate,    // REPLICATE
  kFullyShard,   // FULLY_SHARD
  kMemoryAware,  // MEMORY_AWARE
};

class ParameterPlacement {
 public:
  // The model-state group of v, or -1 when v is not placed with a group
  // (not model state, or a use that needs it whole).
  int32_t group_of(NodeId v) const { return group_of_[v]; }
  bool sharded(NodeId v) const { return group_of_[v] >= 0 && group_sharded_[group_of_[v]]; }
  int32_t num_groups() const { return static_cast<int32_t>(group_sharded_.size()); }
  // Why a parameter or state is placed as it is; empty when there is
  // nothing to say.
  const std::string& note(NodeId v) const;

 private:
  friend class ParameterPlacer;
  std::vector<int32_t> group_of_;
  std::vector<bool> group_sharded_;
  // A group's note is shared by its placeholders: note_of_[v] is the group
  // whose note v has, or -1 (one int per node, not a string per parameter).
  std::vector<int32_t> note_of_;
  std::vector<std::string> group_notes_;
  std::string no_note_;
};

// Bytes one device holds of a `shape` tensor of `element_bytes` elements
// sharded along `dim` over `group_size` devices (the largest shard).
int64_t ShardBytes(absl::Span<const int64_t> shape, int64_t element_bytes, int32_t dim,
                   int32_t group_size);

absl::StatusOr<ParameterPlacement> PlaceParameters(const CompactGraph& graph,
                                                   const BatchDimAnalysis& analysis,
                                                   DataParallelStyle style, int32_t group_size,
                                                   int64_t device_memory_bytes,
                                                   const std::string& smallest_device,
                                                   const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_DATA_PARALLEL_PARAMETER_PLACEMENT_H_

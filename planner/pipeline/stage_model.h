// StageModel: a graph seen as a linear pipeline, so that the memory of any
// stage and the bytes crossing any cut cost O(1) to look up.
//
// A pipeline cuts the graph's "items" -- every node except the placeholders
// and the output, in graph order -- into contiguous stages; a stage is a
// range [begin, end) of item positions. Values move as in a linear pipeline
// (fairscale's shard_model, GPipe): the graph inputs enter at the first
// stage, and every value travels from stage to stage, from the item that
// makes it to its last consumer (the graph output counts as a consumer after
// the last stage). Hence:
//   - a value is *live* at cut c (the cut just before item c) when it is made
//     before c (a graph input, or an item below c) and read at or after c;
//     LiveBytes(c) is the sum of their output sizes: what crosses that cut;
//   - stage [b, e) needs StageMemoryBytes(b, e): the total sizes of its items
//     (torch.fx's size_bytes.total_bytes: parameters plus output) plus the
//     values live at b, which it receives (and uses or passes on).
//
//   StageModel model(graph);
//   for (int32_t c = 1; c < model.num_items(); ++c) model.LiveBytes(c);
//   int64_t bytes = model.StageMemoryBytes(0, model.num_items());
//
// Both figures only grow when a stage grows at either end, which the stage
// planners rely on. Growing at the end adds an item's total size. Growing at
// the start by item i adds total(i) and the values whose last reader is i,
// and removes at most output(i), which is not above total(i).
//
// Construction is O(nodes + edges); the model keeps a reference to `graph`.
// Create polls a token through it, as the planners do; the constructor is
// for tests and benchmarks.
#ifndef PARTPLAN_PLANNER_PIPELINE_STAGE_MODEL_H_
#define PARTPLAN_PLANNER_PIPELINE_STAGE_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/base/cancellation.h"
#include "planner/graph/graph.h"

namespace partplan {

class StageModel {
 public:
  explicit StageModel(const CompactGraph& graph);
  // The model of `graph`, or the token's status when it fires first.
  static absl::StatusOr<StageModel> Create(const CompactGraph& graph,
                                           const CancellationToken& token);

  const CompactGraph& graph() const { return graph_; }
  int32_t num_items() const { return static_cast<int32_t>(items_.size()); }
  // The node at item position i.
  NodeId item(int32_t i) const { return items_[i]; }
  // The item position of node v, or -1 for placeholders and the output.
  int32_t position(NodeId v) const { return position_[v]; }

  // Output bytes of the values live at cut c, 0 <= c <= num_items().
  int64_t LiveBytes(int32_t c) const { return live_bytes_[c]; }
  // Memory of the stage of items [begin, end), begin < end.
  int64_t StageMemoryBytes(int32_t begin, int32_t end) const {
    return item_bytes_before_[end] - item_bytes_before_[begin] + live_bytes_[begin];
  }

 private:
  struct Unbuilt {};
  StageModel(const CompactGraph& graph, Unbuilt) : graph_(graph) {}
  absl::Status Build(const CancellationToken& token);

  const CompactGraph& graph_;
  std::vector<NodeId> items_;
  std::vector<int32_t> position_;
  std::vector<int64_t> live_bytes_;         // num_items + 1 entries
  std::vector<int64_t> item_bytes_before_;  // prefix sums of total bytes
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PIPELINE_STAGE_MODEL_H_

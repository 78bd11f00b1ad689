#include "planner/pipeline/stage_model.h"

#include <algorithm>

#include "planner/base/status_util.h"

namespace partplan {

StageModel::StageModel(const CompactGraph& graph) : graph_(graph) {
  // A token that never fires: Build cannot fail.
  Build(CancellationToken()).IgnoreError();
}

absl::StatusOr<StageModel> StageModel::Create(const CompactGraph& graph,
                                              const CancellationToken& token) {
  StageModel model(graph, Unbuilt());
  PARTPLAN_RETURN_IF_ERROR(model.Build(token));
  return model;
}

absl::Status StageModel::Build(const CancellationToken& token) {
  const CompactGraph& graph = graph_;
  position_.assign(graph.num_nodes(), -1);
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(v));
    if (graph.op(v) == v1::PLACEHOLDER || v == graph.output_node()) continue;
    position_[v] = static_cast<int32_t>(items_.size());
    items_.push_back(v);
  }
  const int32_t n = num_items();
  item_bytes_before_.assign(n + 1, 0);
  for (int32_t i = 0; i < n; ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
    item_bytes_before_[i + 1] = item_bytes_before_[i] + graph.total_bytes(items_[i]);
  }
  // A value made at item a (a graph input: before every item) is live at the
  // cuts a+1 .. its last reader's position (the output reads at n); the
  // difference array adds its bytes over that range.
  std::vector<int64_t> delta(n + 2, 0);
  int64_t work = 0;  // nodes and edges seen: a node may have any number of users
  for (NodeId u = 0; u < graph.num_nodes(); ++u) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    if (u == graph.output_node()) continue;
    int32_t last_reader = -1;
    for (NodeId w : graph.users(u)) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      last_reader = std::max(last_reader, w == graph.output_node() ? n : position_[w]);
    }
    const int32_t first_live = position_[u] + 1;  // 0 for a graph input
    if (last_reader < first_live) continue;
    delta[first_live] += graph.output_bytes(u);
    delta[last_reader + 1] -= graph.output_bytes(u);
  }
  live_bytes_.assign(n + 1, 0);
  int64_t live = 0;
  for (int32_t c = 0; c <= n; ++c) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(c));
    live += delta[c];
    live_bytes_[c] = live;
  }
  return absl::OkStatus();
}

}  // namespace partplan

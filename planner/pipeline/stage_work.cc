#include "planner/pipeline/stage_work.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

WorkKind KindOf(const CompactGraph& graph) {
  if (graph.has_latencies()) return WorkKind::kLatency;
  return graph.has_flops() ? WorkKind::kFlops : WorkKind::kParameters;
}

double WorkOf(const CompactGraph& graph, NodeReader& nodes, NodeId v, WorkKind kind) {
  switch (kind) {
    case WorkKind::kLatency:
      return std::max(graph.latency_seconds(v), 0.0);
    case WorkKind::kFlops:
      return graph.flops(v);
    case WorkKind::kParameters:
      return static_cast<double>(nodes.OwnFields(v).parameter_count);
  }
  return 0;
}

}  // namespace

absl::string_view WorkKindName(WorkKind kind) {
  switch (kind) {
    case WorkKind::kLatency:
      return "latency";
    case WorkKind::kFlops:
      return "flops";
    case WorkKind::kParameters:
      return "parameters";
  }
  return "unknown";
}

absl::StatusOr<StageWork> ChooseStageWork(const StageModel& model, const DeviceList& devices,
                                          const CancellationToken& token) {
  const CompactGraph& graph = model.graph();
  StageWork work;
  work.kind = KindOf(graph);
  work.of_item.reserve(model.num_items());
  NodeReader nodes(graph);
  double sum = 0;
  for (int32_t i = 0; i < model.num_items(); ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
    work.of_item.push_back(WorkOf(graph, nodes, model.item(i), work.kind));
    sum += work.of_item.back();
  }
  if (!std::isfinite(sum)) {
    return InvalidFieldError("graph.nodes", absl::StrCat("the nodes' ", WorkKindName(work.kind),
                                                         " add up beyond the largest double"));
  }
  const bool scale = work.kind != WorkKind::kLatency && devices.size() > 0 &&
                     devices.compute_flops_per_second(0) > 0;
  for (int d = 0; d < devices.size(); ++d) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(d));
    const double throughput = devices.compute_flops_per_second(d);
    if (work.kind != WorkKind::kLatency && (throughput > 0) != scale) {
      const int without = scale ? d : 0;
      return InvalidFieldError(
          absl::StrCat("devices.devices[", without, "].compute_flops_per_second"),
          absl::StrCat("BALANCED divides ", WorkKindName(work.kind),
                       " by every device's throughput or by none: give it for all devices or "
                       "for none (devices[",
                       scale ? 0 : d, "] gives one, devices[", without, "] does not)"));
    }
    work.devices.push_back(
        StageDevice{devices[d].name, devices[d].available_memory_bytes, scale ? throughput : 1.0});
  }
  work.in_seconds = work.kind == WorkKind::kLatency || scale;
  return work;
}

}  // namespace partplan

// The PlanDataParallel entry point (declared in entry_points.h).
#include "absl/status/status.h"
#include "google/protobuf/arena.h"
#include "planner/api/entry_points.h"
#include "planner/base/status_util.h"
#include "planner/data_parallel/data_parallel_plan.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph_import.h"
#include "planner/graph/serialized_request.h"

namespace partplan {

absl::Status PlanDataParallel(const v1::PlanDataParallelRequest& request,
                              const GraphSource& graph_source, const InputLimits& limits,
                              const CancellationToken& token,
                              v1::PlanDataParallelResponse* response) {
  // The analysis reads each node's message many times (NodeReader would
  // parse it each time), so a serialised graph is parsed first; its import
  // then reports what is wrong with the graph, as for a parsed request.
  google::protobuf::Arena arena;
  const v1::Graph* parsed = graph_source.parsed();
  if (parsed == nullptr) {
    auto* graph_message = google::protobuf::Arena::CreateMessage<v1::Graph>(&arena);
    ChunkedInputStream bytes(graph_source.serialized());
    if (!graph_message->ParseFromZeroCopyStream(&bytes)) {
      // The import names the node or field that does not parse (it reads
      // the same bytes the same way, so it fails too).
      const absl::Status status = ImportGraph(graph_source, limits, token).status();
      return status.ok() ? absl::InternalError("the graph imports but does not parse") : status;
    }
    parsed = graph_message;
  }
  GraphSource parsed_source(*parsed);
  parsed_source.set_node_count_out(graph_source.node_count_out());
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph, ImportGraph(parsed_source, limits, token));
  // The planner imports the inventory itself; hold it to the server's
  // limits (--max_devices) first.
  PARTPLAN_RETURN_IF_ERROR(ImportDevices(request.devices(), limits).status());
  PARTPLAN_ASSIGN_OR_RETURN(*response, PlanDataParallelPlan(graph, request, token));
  return absl::OkStatus();
}

}  // namespace partplan

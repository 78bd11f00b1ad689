// The PlanDataParallel entry point (declared in entry_points.h): the graph
// parsed and imported, the inventory imported once, the options validated
// against both, the planner, then the response written from its plan.
#include "absl/status/status.h"
#include "google/protobuf/arena.h"
#include "planner/api/entry_points.h"
#include "planner/api/plan_bound.h"
#include "planner/base/status_util.h"
#include "planner/data_parallel/data_parallel_options.h"
#include "planner/data_parallel/data_parallel_plan.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph_import.h"
#include "planner/graph/serialized_request.h"
#include "planner/wire/data_parallel_response.h"

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
  // The inventory, held to the server's limits (--max_devices), is imported
  // once; the options are checked against it and the graph.
  PARTPLAN_ASSIGN_OR_RETURN(const DeviceList devices, ImportDevices(request.devices(), limits));
  PARTPLAN_ASSIGN_OR_RETURN(const DataParallelOptions options,
                            DataParallelOptions::FromRequest(request, graph, devices));
  PARTPLAN_ASSIGN_OR_RETURN(const DataParallelPlan plan,
                            PlanDataParallelPlan(graph, options, devices, token));
  PARTPLAN_RETURN_IF_ERROR(DataParallelResponseFromPlan(graph, plan, token, response));
  response->set_bound(DescribeDataParallelBound(graph, plan));
  return absl::OkStatus();
}

}  // namespace partplan

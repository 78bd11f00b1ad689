#include "server/metrics.h"

#include <string>

namespace partplan {
namespace {

// go-grpc-prometheus labels codes with Go's codes.Code.String(), indexed here
// by grpc::StatusCode value.
constexpr const char* kGoGrpcCodeNames[ServerMetrics::kGrpcCodeCount] = {
    "OK",       "Canceled",        "Unknown",          "InvalidArgument",   "DeadlineExceeded",
    "NotFound", "AlreadyExists",   "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
    "Aborted",  "OutOfRange",      "Unimplemented",    "Internal",          "Unavailable",
    "DataLoss", "Unauthenticated",
};

constexpr const char* kRejectionReasonNames[kRejectionReasonCount] = {
    "queue_full",
    "shutting_down",
};

// Seconds, from a millisecond to the longest planning runs.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
  return *kBuckets;
}

// Powers of ten up to InputLimits' default max_nodes.
const prometheus::Histogram::BucketBoundaries& NodeCountBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      10, 100, 1'000, 10'000, 100'000, 1'000'000, 4'000'000};
  return *kBuckets;
}

}  // namespace

ServerMetrics::ServerMetrics(prometheus::Registry& registry) {
  auto& started = prometheus::BuildCounter()
                      .Name("grpc_server_started_total")
                      .Help("Total number of RPCs started on the server.")
                      .Register(registry);
  auto& handled = prometheus::BuildCounter()
                      .Name("grpc_server_handled_total")
                      .Help(
                          "Total number of RPCs completed on the server, regardless of "
                          "success or failure.")
                      .Register(registry);
  auto& handling_seconds = prometheus::BuildHistogram()
                               .Name("grpc_server_handling_seconds")
                               .Help(
                                   "Histogram of response latency (seconds) of gRPC that had been "
                                   "application-level handled by the server.")
                               .Register(registry);
  auto& planner_seconds = prometheus::BuildHistogram()
                              .Name("partplan_planner_seconds")
                              .Help(
                                  "Time a planner thread spent on one call, in seconds: parsing, "
                                  "planning and serialising, or answering from the plan cache.")
                              .Register(registry);
  for (const PlannerRpcMethod& row : kPlannerRpcs) {
    const PlannerRpc rpc = row.rpc;
    const std::string method(row.name);
    const prometheus::Labels labels = {{"grpc_type", "unary"},
                                       {"grpc_service", std::string(kPlannerServiceName)},
                                       {"grpc_method", method}};
    RpcMetrics& metrics = rpcs_[Index(rpc)];
    metrics.started = &started.Add(labels);
    for (size_t code = 0; code < kGrpcCodeCount; ++code) {
      prometheus::Labels with_code = labels;
      with_code.emplace("grpc_code", kGoGrpcCodeNames[code]);
      metrics.handled[code] = &handled.Add(with_code);
    }
    metrics.handling_seconds = &handling_seconds.Add(labels, LatencyBuckets());
    metrics.planner_seconds = &planner_seconds.Add({{"planner", method}}, LatencyBuckets());
  }

  auto& rejected = prometheus::BuildCounter()
                       .Name("partplan_rejected_calls_total")
                       .Help("Calls refused before planning, by reason.")
                       .Register(registry);
  for (size_t reason = 0; reason < kRejectionReasonCount; ++reason) {
    rejected_[reason] = &rejected.Add({{"reason", kRejectionReasonNames[reason]}});
  }
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("partplan_planner_queue_depth")
                      .Help("Calls waiting for a planner thread.")
                      .Register(registry)
                      .Add({});
  in_flight_ = &prometheus::BuildGauge()
                    .Name("partplan_planner_in_flight")
                    .Help("Calls running on a planner thread.")
                    .Register(registry)
                    .Add({});
  graph_nodes_ = &prometheus::BuildHistogram()
                      .Name("partplan_graph_nodes")
                      .Help("Nodes in the graph of each request.")
                      .Register(registry)
                      .Add({}, NodeCountBuckets());
  auto& cache_lookups = prometheus::BuildCounter()
                            .Name("partplan_plan_cache_lookups_total")
                            .Help("Plan cache lookups, by result (hit or miss).")
                            .Register(registry);
  plan_cache_hits_ = &cache_lookups.Add({{"result", "hit"}});
  plan_cache_misses_ = &cache_lookups.Add({{"result", "miss"}});
  plan_cache_bytes_ = &prometheus::BuildGauge()
                           .Name("partplan_plan_cache_bytes")
                           .Help("Bytes of serialized plans held by the plan cache.")
                           .Register(registry)
                           .Add({});
}

prometheus::Counter& ServerMetrics::handled(PlannerRpc rpc, grpc::StatusCode code) const {
  const size_t index = static_cast<size_t>(code);
  return *rpcs_[Index(rpc)]
              .handled[index < kGrpcCodeCount ? index : size_t{grpc::StatusCode::UNKNOWN}];
}

}  // namespace partplan

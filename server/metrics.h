// ServerMetrics: the Prometheus metrics of partplan_server, registered once
// with every label set pre-created, so that handlers only touch cached
// references (Family::Add locks and hashes; it does not belong on the hot
// path) and rates start at zero instead of appearing with the first error.
//
// gRPC metrics use go-grpc-prometheus's names, labels and code spellings, so
// that its dashboards work unchanged:
//   grpc_server_started_total{grpc_type,grpc_service,grpc_method}
//   grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code}
//   grpc_server_handling_seconds{grpc_type,grpc_service,grpc_method}  (histogram: from the
//     call's arrival to its status, the request's parse and the response's serialisation
//     included, since the service does both on its planner threads)
// partplan's own:
//   partplan_planner_seconds{planner}            a planner thread's time on a call: parse,
//                                                plan, serialise, or a cache lookup (histogram)
//   partplan_planner_queue_depth                 calls waiting for a planner thread
//   partplan_planner_in_flight                   calls running on a planner thread
//   partplan_graph_nodes                         nodes per request graph, of the calls whose
//                                                request was parsed or found in the plan cache
//                                                (histogram)
//   partplan_rejected_calls_total{reason}        calls refused without planning
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   partplan::ServerMetrics metrics(*registry);
//   metrics.rpc(partplan::PlannerRpc::kValidate).started->Increment();
#ifndef PARTPLAN_SERVER_METRICS_H_
#define PARTPLAN_SERVER_METRICS_H_

#include <grpcpp/support/status_code_enum.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>

#include "planner/api/planner_rpcs.h"

namespace partplan {

// Why a call was refused before reaching a planner.
enum class RejectionReason { kQueueFull, kShuttingDown };
inline constexpr size_t kRejectionReasonCount = 2;

class ServerMetrics {
 public:
  // Number of grpc::StatusCode values (OK .. UNAUTHENTICATED).
  static constexpr size_t kGrpcCodeCount = 17;

  // The metrics of one RPC.
  struct RpcMetrics {
    prometheus::Counter* started = nullptr;
    // By grpc::StatusCode value.
    std::array<prometheus::Counter*, kGrpcCodeCount> handled{};
    prometheus::Histogram* handling_seconds = nullptr;
    prometheus::Histogram* planner_seconds = nullptr;
  };

  // Registers every metric with `registry`, which must outlive this object.
  explicit ServerMetrics(prometheus::Registry& registry);

  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  const RpcMetrics& rpc(PlannerRpc rpc) const { return rpcs_[Index(rpc)]; }
  prometheus::Counter& handled(PlannerRpc rpc, grpc::StatusCode code) const;
  prometheus::Counter& rejected(RejectionReason reason) const {
    return *rejected_[static_cast<size_t>(reason)];
  }
  prometheus::Gauge& queue_depth() const { return *queue_depth_; }
  prometheus::Gauge& in_flight() const { return *in_flight_; }
  prometheus::Histogram& graph_nodes() const { return *graph_nodes_; }
  prometheus::Counter& plan_cache_hits() const { return *plan_cache_hits_; }
  prometheus::Counter& plan_cache_misses() const { return *plan_cache_misses_; }
  prometheus::Gauge& plan_cache_bytes() const { return *plan_cache_bytes_; }

 private:
  std::array<RpcMetrics, kPlannerRpcCount> rpcs_;
  std::array<prometheus::Counter*, kRejectionReasonCount> rejected_{};
  prometheus::Gauge* queue_depth_ = nullptr;
  prometheus::Gauge* in_flight_ = nullptr;
  prometheus::Histogram* graph_nodes_ = nullptr;
  prometheus::Counter* plan_cache_hits_ = nullptr;
  prometheus::Counter* plan_cache_misses_ = nullptr;
  prometheus::Gauge* plan_cache_bytes_ = nullptr;
};

}  // namespace partplan

#endif  // PARTPLAN_SERVER_METRICS_H_

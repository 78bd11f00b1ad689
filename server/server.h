// PlannerServer: partplan_server's gRPC server, metrics endpoint and planner
// pool, runnable in-process (tests) as well as from main.
//
//   partplan::ServerOptions options;
//   options.port = 0;           // any free port
//   options.metrics_port = -1;  // no metrics endpoint
//   absl::StatusOr<std::unique_ptr<partplan::PlannerServer>> server =
//       partplan::PlannerServer::Start(options);
//   // ... dial 127.0.0.1:(*server)->port() ...
//   (*server)->Shutdown();      // drains; also done by the destructor
//
// It serves partplan.v1.PartitionPlanner, gRPC health (service "" and
// "readiness") and server reflection (v1alpha); over TLS or mutual TLS when
// options.tls says so (credentials.h), with bearer tokens when options.auth
// says so (auth.h). With a health port, a second, plaintext listener serves
// health (for Kubernetes probes, which cannot speak TLS); reflection there
// needs a token like on the main port, and nothing else is served there.
#ifndef PARTPLAN_SERVER_SERVER_H_
#define PARTPLAN_SERVER_SERVER_H_

#include <grpcpp/grpcpp.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "planner/base/limits.h"
#include "server/auth.h"
#include "server/bounded_thread_pool.h"
#include "server/credentials.h"
#include "server/heap_policy.h"
#include "server/metrics.h"
#include "server/plan_cache.h"
#include "server/planner_backend.h"
#include "server/planner_in_parts_service.h"
#include "server/planner_service.h"

namespace partplan {

// The health-check service name that is SERVING only while the server takes
// work: from the end of Start() until Shutdown() begins. Kubernetes probes
// ask for it (`grpc: {port: 50051, service: readiness}`).
inline constexpr char kReadinessServiceName[] = "readiness";
// The planner service's own name (partplan.v1.PartitionPlanner), which most
// probes ask for, follows readiness too. ("" follows gRPC's default: SERVING
// until Shutdown() begins.)

struct ServerOptions {
  // Address to listen on for gRPC (and metrics); 0.0.0.0 for every IPv4
  // interface, as Kubernetes probes require.
  std::string host = "0.0.0.0";
  // gRPC port; 0 picks a free one (see PlannerServer::port()).
  int port = 50051;
  // Prometheus /metrics port; 0 picks a free one, negative disables it.
  int metrics_port = 9090;
  // Threads running planners; calls beyond them wait in a queue.
  int planner_threads = 4;
  // Calls that may wait for a planner thread before RESOURCE_EXHAUSTED.
  int queue_depth = 64;
  // Largest request accepted, in bytes.
  int max_receive_message_bytes = 256 << 20;
  // How long Shutdown() lets calls in flight finish before cancelling them.
  absl::Duration drain_deadline = absl::Seconds(20);
  // The longest a call may take from its arrival, whatever deadline its
  // client set (or none): a planner still running then stops with
  // DEADLINE_EXCEEDED naming --max_call_seconds. Keeps one call from holding
  // a planner thread for hours (SPARSE_NN merging is quadratic on some
  // graphs).
  absl::Duration max_call_duration = absl::Minutes(5);
  // Input limits of the library backend (ignored with an injected backend).
  InputLimits limits;
  // Bytes of plans kept to answer repeated requests; 0 disables the cache.
  int64_t plan_cache_bytes = 64 << 20;
  // Freed memory each malloc arena keeps for later calls instead of handing
  // it back to the kernel (server/heap_policy.h); 0 leaves glibc's defaults.
  // Process-wide, so main() applies it (RetainFreedHeap) before Start;
  // Start only checks it.
  int64_t retained_heap_bytes = kDefaultRetainedHeapBytes;
  // Connections older than this get a GOAWAY (calls in flight finish), so
  // clients re-resolve and spread over new pods; zero: no limit.
  absl::Duration max_connection_age = absl::ZeroDuration();
  // Plaintext port serving only health, for probes that cannot speak TLS;
  // 0 picks a free one, negative: none. Health is served on `port` anyway.
  int health_port = -1;
  // TLS or mutual TLS on `port`; off by default.
  TlsOptions tls;
  // Bearer-token authentication; off by default.
  AuthOptions auth;
};

// OK, or INVALID_ARGUMENT naming the first option out of range.
absl::Status ValidateServerOptions(const ServerOptions& options);

class PlannerServer {
 public:
  // Starts serving with `backend`, or the planner library when it is null.
  // Fails when an option is invalid or a port cannot be bound.
  static absl::StatusOr<std::unique_ptr<PlannerServer>> Start(
      const ServerOptions& options, std::unique_ptr<PlannerBackend> backend = nullptr);

  // Shutdown().
  ~PlannerServer();

  PlannerServer(const PlannerServer&) = delete;
  PlannerServer& operator=(const PlannerServer&) = delete;

  // The bound gRPC port.
  int port() const { return port_; }
  // The bound metrics port, or -1 when metrics are disabled.
  int metrics_port() const { return metrics_port_; }
  // The bound health-only port, or -1 when there is none.
  int health_port() const { return health_port_; }

  // Drains and stops: readiness (and "") turn NOT_SERVING, new calls are
  // refused, calls in flight get up to drain_deadline to finish and are then
  // cancelled (which fires their tokens), and the planner pool is joined.
  // Thread-safe; later calls wait for the first to complete. Never call it
  // from a signal handler.
  void Shutdown();

  // Blocks until Shutdown() has completed.
  void Wait();

 private:
  PlannerServer(const ServerOptions& options, std::unique_ptr<PlannerBackend> backend,
                std::unique_ptr<TokenAuthenticator> authenticator);

  const ServerOptions options_;
  const std::unique_ptr<PlannerBackend> backend_;
  // Null without token authentication.
  const std::unique_ptr<TokenAuthenticator> authenticator_;
  const std::shared_ptr<prometheus::Registry> registry_;
  ServerMetrics metrics_;
  BoundedThreadPool pool_;
  std::unique_ptr<PlanCache> plan_cache_;  // null when disabled
  PlannerService service_;
  PlannerInPartsService in_parts_service_;  // service_'s RPCs, in parts
  // Declared after what they use, so destroyed before it.
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> health_server_;  // Null without a health port.
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
  int metrics_port_ = -1;
  int health_port_ = -1;

  absl::Mutex shutdown_mu_;
  bool shutdown_started_ ABSL_GUARDED_BY(shutdown_mu_) = false;
  absl::Notification shutdown_done_;
};

}  // namespace partplan

#endif  // PARTPLAN_SERVER_SERVER_H_

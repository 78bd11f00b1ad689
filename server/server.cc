#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <exception>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.pb.h"
#include "server/logging.h"

namespace partplan {
namespace {

// "host:port", with IPv6 hosts bracketed.
std::string HostPort(const std::string& host, int port) {
  if (absl::StrContains(host, ':') && !absl::StartsWith(host, "[")) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace

absl::Status ValidateServerOptions(const ServerOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port out of range: ", options.port));
  }
  if (options.metrics_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port out of range: ", options.metrics_port));
  }
  if (options.planner_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("planner threads must be at least 1, got ", options.planner_threads));
  }
  if (options.queue_depth < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue depth must not be negative, got ", options.queue_depth));
  }
  if (options.max_receive_message_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max receive message size must be positive, got ", options.max_receive_message_bytes));
  }
  if (options.drain_deadline < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("drain deadline must not be negative");
  }
  return options.limits.CheckAndSetup();
}

PlannerServer::PlannerServer(const ServerOptions& options, std::unique_ptr<PlannerBackend> backend)
    : options_(options),
      backend_(std::move(backend)),
      registry_(std::make_shared<prometheus::Registry>()),
      metrics_(*registry_),
      pool_(options.planner_threads, options.queue_depth),
      service_(*backend_, pool_, metrics_) {}

absl::StatusOr<std::unique_ptr<PlannerServer>> PlannerServer::Start(
    const ServerOptions& options, std::unique_ptr<PlannerBackend> backend) {
  if (absl::Status status = ValidateServerOptions(options); !status.ok()) return status;
  if (backend == nullptr) backend = NewLibraryPlannerBackend(options.limits);
  std::unique_ptr<PlannerServer> server(new PlannerServer(options, std::move(backend)));

  if (options.metrics_port >= 0) {
    const std::string address = HostPort(options.host, options.metrics_port);
    try {
      server->exposer_ = std::make_unique<prometheus::Exposer>(address);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
    }
    server->exposer_->RegisterCollectable(server->registry_);
    const std::vector<int> ports = server->exposer_->GetListeningPorts();
    server->metrics_port_ = ports.empty() ? options.metrics_port : ports.front();
  }

  // Both are process-wide switches read by every ServerBuilder; setting them
  // again for a second server is harmless.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // gRPC's health service is built on upb, so grpc.health.v1 is not in the
  // protobuf descriptor pool unless health.pb.cc is linked in; naming one of
  // its messages keeps it linked, so that reflection can describe
  // grpc.health.v1.Health (what grpcurl needs to call Health/Check).
  (void)grpc::health::v1::HealthCheckRequest::descriptor();

  const std::string address = HostPort(options.host, options.port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &server->port_);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  // gRPC sets SO_REUSEPORT by default, so a second server on a taken port
  // would start and silently share its traffic; fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&server->service_);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve gRPC on ", address));
  }
  server->server_->GetHealthCheckService()->SetServingStatus(kReadinessServiceName, true);
  LogInfo("serving", {{"address", HostPort(options.host, server->port_)},
                      {"metrics_port", server->metrics_port_},
                      {"planner_threads", options.planner_threads},
                      {"queue_depth", options.queue_depth}});
  return server;
}

PlannerServer::~PlannerServer() { Shutdown(); }

void PlannerServer::Shutdown() {
  bool first_call;
  {
    absl::MutexLock lock(&shutdown_mu_);
    first_call = !shutdown_started_;
    shutdown_started_ = true;
  }
  if (!first_call) {
    shutdown_done_.WaitForNotification();
    return;
  }
  if (server_ == nullptr) {  // Start() failed before serving.
    pool_.Shutdown();
    shutdown_done_.Notify();
    return;
  }
  LogInfo("draining", {{"drain_deadline_seconds", absl::ToDoubleSeconds(options_.drain_deadline)}});
  // Probes see NOT_SERVING first; HealthCheckServiceInterface::Shutdown also
  // turns "" NOT_SERVING and freezes every status.
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus(kReadinessServiceName, false);
  health->Shutdown();
  // Refuses new calls, waits for those in flight until the deadline, then
  // cancels the rest (their OnCancel fires their planners' tokens) and waits
  // until every call has finished. So when it returns every task the pool
  // accepted has run, and the pool has nothing left to drain.
  server_->Shutdown(absl::ToChronoTime(absl::Now() + options_.drain_deadline));
  pool_.Shutdown();
  LogInfo("stopped");
  shutdown_done_.Notify();
}

void PlannerServer::Wait() { shutdown_done_.WaitForNotification(); }

}  // namespace partplan

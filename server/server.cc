#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <climits>
#include <exception>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.pb.h"
#include "server/logging.h"
#include "planner/api/planner_rpcs.h"

namespace partplan {
namespace {

// gRPC 1.51 inflates a gzip or deflate message whole before it compares its
// size with the receive limit, so a small compressed request could take
// gigabytes. With both algorithms disabled, a compressed call is refused
// with UNIMPLEMENTED when its headers arrive, before its message is read;
// clients send requests uncompressed (every gRPC client does by default).
void RefuseCompressedRequests(grpc::ServerBuilder* builder) {
  builder->SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
  builder->SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
}

// The health-check names that are SERVING only while the server takes work.
std::vector<std::string> ReadyServiceNames() {
  return {kReadinessServiceName, std::string(kPlannerServiceName),
          std::string(kPlannerInPartsServiceName)};
}

// "host:port", with IPv6 hosts bracketed.
std::string HostPort(const std::string& host, int port) {
  if (absl::StrContains(host, ':') && !absl::StartsWith(host, "[")) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

// The server interceptors of every listener: token checks when auth is on.
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
AuthInterceptors(const TokenAuthenticator* authenticator, const AuthOptions& options) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  if (authenticator != nullptr) {
    creators.push_back(NewAuthInterceptorFactory(*authenticator, options.reflection_requires_auth));
  }
  return creators;
}

const char* TlsMode(const TlsOptions& tls) {
  if (!tls.enabled()) return "off";
  return tls.client_ca_path.empty() ? "tls" : "mtls";
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
  if (options.plan_cache_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan cache size must not be negative, got ", options.plan_cache_bytes));
  }
  if (absl::Status heap = CheckRetainedHeapBytes(options.retained_heap_bytes); !heap.ok()) {
    return heap;
  }
  if (options.queue_depth < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue depth must not be negative, got ", options.queue_depth));
  }
  if (options.max_receive_message_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max receive message size must be positive, got ", options.max_receive_message_bytes));
  }
  if (options.max_call_duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max call duration must be positive");
  }
  if (options.drain_deadline < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("drain deadline must not be negative");
  }
  if (options.max_connection_age < absl::ZeroDuration() ||
      options.max_connection_age > absl::Hours(24 * 24)) {
    return absl::InvalidArgumentError("max connection age must be in [0, 24 days]");
  }
  if (options.health_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("health port out of range: ", options.health_port));
  }
  if (options.health_port > 0 &&
      (options.health_port == options.port || options.health_port == options.metrics_port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("health port ", options.health_port, " is also the gRPC or the metrics port"));
  }
  if (absl::Status status = ValidateTlsOptions(options.tls); !status.ok()) return status;
  if (absl::Status status = ValidateAuthOptions(options.auth); !status.ok()) return status;
  return options.limits.CheckAndSetup();
}

PlannerServer::PlannerServer(const ServerOptions& options, std::unique_ptr<PlannerBackend> backend,
                             std::unique_ptr<TokenAuthenticator> authenticator)
    : options_(options),
      backend_(std::move(backend)),
      authenticator_(std::move(authenticator)),
      registry_(std::make_shared<prometheus::Registry>()),
      metrics_(*registry_),
      pool_(options.planner_threads, options.queue_depth),
      plan_cache_(options.plan_cache_bytes > 0
                      ? std::make_unique<PlanCache>(options.plan_cache_bytes)
                      : nullptr),
      service_(*backend_, pool_, metrics_, authenticator_.get(), plan_cache_.get(),
               options.max_call_duration),
      in_parts_service_(service_, options.max_receive_message_bytes) {}

absl::StatusOr<std::unique_ptr<PlannerServer>> PlannerServer::Start(
    const ServerOptions& options, std::unique_ptr<PlannerBackend> backend) {
  if (absl::Status status = ValidateServerOptions(options); !status.ok()) return status;
  if (backend == nullptr) backend = NewLibraryPlannerBackend(options.limits);
  // Broken certificates or token files stop the server here, not at the
  // first call.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      NewServerCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<TokenAuthenticator> authenticator;
  if (options.auth.enabled()) {
    absl::StatusOr<std::unique_ptr<TokenAuthenticator>> loaded =
        TokenAuthenticator::Load(options.auth.tokens_path, options.auth.reload_interval);
    if (!loaded.ok()) return loaded.status();
    authenticator = *std::move(loaded);
  }
  std::unique_ptr<PlannerServer> server(
      new PlannerServer(options, std::move(backend), std::move(authenticator)));

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
  builder.AddListeningPort(address, *credentials, &server->port_);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  RefuseCompressedRequests(&builder);
  // gRPC sets SO_REUSEPORT by default, so a second server on a taken port
  // would start and silently share its traffic; fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (options.max_connection_age > absl::ZeroDuration()) {
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_AGE_MS,
        static_cast<int>(absl::ToInt64Milliseconds(options.max_connection_age)));
    // Calls in flight on an old connection may take as long as they need.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, INT_MAX);
  }
  builder.RegisterService(&server->service_);
  builder.RegisterService(&server->in_parts_service_);
  builder.experimental().SetInterceptorCreators(
      AuthInterceptors(server->authenticator_.get(), options.auth));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve gRPC on ", address));
  }

  if (options.health_port >= 0) {
    // Only the default health service (and reflection, which the global
    // plugin adds everywhere and the interceptors guard) is registered.
    const std::string health_address = HostPort(options.host, options.health_port);
    grpc::ServerBuilder health_builder;
    health_builder.AddListeningPort(health_address, grpc::InsecureServerCredentials(),
                                    &server->health_port_);
    health_builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    RefuseCompressedRequests(&health_builder);
    health_builder.experimental().SetInterceptorCreators(
        AuthInterceptors(server->authenticator_.get(), options.auth));
    server->health_server_ = health_builder.BuildAndStart();
    if (server->health_server_ == nullptr || server->health_port_ == 0) {
      server->health_port_ = -1;
      return absl::UnavailableError(absl::StrCat("cannot serve health on ", health_address));
    }
    for (const std::string& name : ReadyServiceNames()) {
      server->health_server_->GetHealthCheckService()->SetServingStatus(name, true);
    }
  }
  for (const std::string& name : ReadyServiceNames()) {
    server->server_->GetHealthCheckService()->SetServingStatus(name, true);
  }
  LogInfo("serving", {{"address", HostPort(options.host, server->port_)},
                      {"metrics_port", server->metrics_port_},
                      {"health_port", server->health_port_},
                      {"tls", TlsMode(options.tls)},
                      {"auth", options.auth.enabled() ? "tokens" : "off"},
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
  for (grpc::Server* listener : {server_.get(), health_server_.get()}) {
    if (listener == nullptr) continue;
    grpc::HealthCheckServiceInterface* health = listener->GetHealthCheckService();
    for (const std::string& name : ReadyServiceNames()) health->SetServingStatus(name, false);
    health->Shutdown();
  }
  // Refuses new calls, waits for those in flight until the deadline, then
  // cancels the rest (their OnCancel fires their planners' tokens) and waits
  // until every call has finished. So when it returns every task the pool
  // accepted has run, and the pool has nothing left to drain.
  server_->Shutdown(absl::ToChronoTime(absl::Now() + options_.drain_deadline));
  pool_.Shutdown();
  // Probes saw NOT_SERVING during the drain; now the port closes (cancelling
  // any Watch left open).
  if (health_server_ != nullptr) health_server_->Shutdown(std::chrono::system_clock::now());
  LogInfo("stopped");
  shutdown_done_.Notify();
}

void PlannerServer::Wait() { shutdown_done_.WaitForNotification(); }

}  // namespace partplan

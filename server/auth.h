// Optional bearer-token authentication of partplan_server's calls.
//
// Tokens come from a file, one per line (blank lines and lines starting
// with '#' are skipped, surrounding whitespace is trimmed), re-read every
// reload interval so that a rotated Kubernetes secret takes effect without a
// restart. A client sends `authorization: Bearer <token>` metadata. Tokens
// are kept only as SHA-256 digests and compared in constant time.
//
// Where the check runs (gRPC's AuthMetadataProcessor is never called on
// plaintext ports, so it cannot be used here):
//   - partplan.v1.PartitionPlanner: in the handler (PlannerService), before
//     anything is queued, so a rejected call does no planning and is counted
//     and logged like any other;
//   - every other service: in a server interceptor (NewAuthInterceptorFactory)
//     that cancels the call with UNAUTHENTICATED, deny by default;
//   - grpc.health.v1.Health is always open: Kubernetes probes send no
//     metadata. Reflection is open only when reflection_requires_auth is
//     false.
//
//   absl::StatusOr<std::unique_ptr<partplan::TokenAuthenticator>> auth =
//       partplan::TokenAuthenticator::Load("/etc/partplan/auth/tokens", absl::Seconds(60));
//   grpc::Status status = (*auth)->Check(context->client_metadata());
#ifndef PARTPLAN_SERVER_AUTH_H_
#define PARTPLAN_SERVER_AUTH_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace partplan {

struct AuthOptions {
  // File of accepted bearer tokens; empty: no token authentication.
  std::string tokens_path;
  // Whether server reflection needs a token too (health never does).
  bool reflection_requires_auth = true;
  // How often the tokens file is re-read; at least one second.
  absl::Duration reload_interval = absl::Seconds(60);

  bool enabled() const { return !tokens_path.empty(); }
};

// INVALID_ARGUMENT for a reload interval below one second.
absl::Status ValidateAuthOptions(const AuthOptions& options);

using ClientMetadata = std::multimap<grpc::string_ref, grpc::string_ref>;

// The tokens of the file; empty lines and '#' comments skipped.
// INVALID_ARGUMENT when there is none.
absl::StatusOr<std::vector<std::string>> ParseTokens(absl::string_view contents);

class TokenAuthenticator {
 public:
  using Digest = std::array<uint8_t, 32>;  // SHA-256

  // Reads `path` (FAILED_PRECONDITION when it cannot be read or holds no
  // token) and starts re-reading it every `reload_interval`; a zero or
  // infinite interval never re-reads.
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> Load(const std::string& path,
                                                                  absl::Duration reload_interval);

  // Accepts exactly `tokens`; for tests.
  explicit TokenAuthenticator(const std::vector<std::string>& tokens);

  // Stops re-reading.
  ~TokenAuthenticator();

  TokenAuthenticator(const TokenAuthenticator&) = delete;
  TokenAuthenticator& operator=(const TokenAuthenticator&) = delete;

  // OK when the first `authorization` entry is `Bearer <token>` (scheme in
  // any case) with an accepted token; UNAUTHENTICATED otherwise. The message
  // says whether the token was missing, malformed or not accepted, never
  // what it was. Thread-safe.
  grpc::Status Check(const ClientMetadata& metadata) const;

  // Re-reads the file now. On an unreadable file or one without tokens the
  // accepted tokens stay as they were and the error is returned.
  absl::Status Reload();

  int token_count() const;

 private:
  TokenAuthenticator(std::string path, std::vector<Digest> digests);
  void ReloadEvery(absl::Duration interval);

  const std::string path_;  // Empty for a fixed token list.
  mutable absl::Mutex mu_;
  std::vector<Digest> digests_ ABSL_GUARDED_BY(mu_);
  std::string contents_ ABSL_GUARDED_BY(mu_);  // Of the last file read.
  absl::Notification stop_;
  std::thread reloader_;
};

// Whether `method` ("/package.Service/Method") is served without a token:
// health always, reflection when `reflection_requires_auth` is false.
bool IsOpenMethod(absl::string_view method, bool reflection_requires_auth);

// Whether `method` belongs to partplan.v1.PartitionPlanner, whose handler
// checks tokens itself.
bool IsPlannerMethod(absl::string_view method);

// Server interceptors that cancel, with UNAUTHENTICATED, every call without
// an accepted token to a method neither open nor a planner method.
// `authenticator` must outlive the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewAuthInterceptorFactory(
    const TokenAuthenticator& authenticator, bool reflection_requires_auth);

}  // namespace partplan

#endif  // PARTPLAN_SERVER_AUTH_H_

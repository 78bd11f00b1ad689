#include "server/auth.h"

#include <grpc/grpc.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/logging.h"

namespace partplan {
namespace {

constexpr absl::string_view kHealthPrefix = "/grpc.health.v1.Health/";
constexpr absl::string_view kReflectionPrefix = "/grpc.reflection.";
constexpr absl::string_view kPlannerPrefix = "/partplan.v1.PartitionPlanner/";

TokenAuthenticator::Digest Sha256(absl::string_view data) {
  TokenAuthenticator::Digest digest{};
  unsigned int size = 0;
  // Fails only when OpenSSL cannot allocate memory; a made-up digest could
  // match a stored one, so give up instead.
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1 ||
      size != digest.size()) {
    std::abort();
  }
  return digest;
}

std::vector<TokenAuthenticator::Digest> Digests(const std::vector<std::string>& tokens) {
  std::vector<TokenAuthenticator::Digest> digests;
  digests.reserve(tokens.size());
  for (const std::string& token : tokens) digests.push_back(Sha256(token));
  return digests;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream contents;
  if (!file || !(contents << file.rdbuf())) {
    return absl::FailedPreconditionError(
        absl::StrCat("--auth_tokens_file '", path, "' cannot be read"));
  }
  return contents.str();
}

// Every digest is compared, whatever matched before, and each comparison
// takes the same time: how long a check takes says nothing about the token.
bool Accepted(const TokenAuthenticator::Digest& presented,
              const std::vector<TokenAuthenticator::Digest>& accepted) {
  int matches = 0;
  for (const TokenAuthenticator::Digest& digest : accepted) {
    matches |= CRYPTO_memcmp(presented.data(), digest.data(), digest.size()) == 0;
  }
  return matches != 0;
}

grpc::Status Unauthenticated(absl::string_view why) {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      absl::StrCat(why, "; send metadata 'authorization: Bearer <token>'"));
}

class AuthInterceptor final : public grpc::experimental::Interceptor {
 public:
  AuthInterceptor(const TokenAuthenticator& authenticator, grpc::experimental::ServerRpcInfo* info)
      : authenticator_(authenticator), info_(info) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      const grpc::Status status = authenticator_.Check(*methods->GetRecvInitialMetadata());
      if (!status.ok()) {
        LogInfo("unauthenticated call", {{"method", info_->method()}});
        // Ends the call at once with this status; the handler then sees a
        // cancelled call (its reads fail) and its answer is dropped.
        grpc_call_cancel_with_status(info_->server_context()->c_call(),
                                     static_cast<grpc_status_code>(status.error_code()),
                                     status.error_message().c_str(), nullptr);
      }
    }
    methods->Proceed();
  }

 private:
  const TokenAuthenticator& authenticator_;
  grpc::experimental::ServerRpcInfo* const info_;
};

class AuthInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  AuthInterceptorFactory(const TokenAuthenticator& authenticator, bool reflection_requires_auth)
      : authenticator_(authenticator), reflection_requires_auth_(reflection_requires_auth) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    const absl::string_view method = info->method() == nullptr ? "" : info->method();
    if (IsOpenMethod(method, reflection_requires_auth_) || IsPlannerMethod(method)) {
      return nullptr;  // No interceptor for this call.
    }
    return new AuthInterceptor(authenticator_, info);
  }

 private:
  const TokenAuthenticator& authenticator_;
  const bool reflection_requires_auth_;
};

}  // namespace

absl::Status ValidateAuthOptions(const AuthOptions& options) {
  if (options.reload_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("credentials reload interval must be at least 1 second, got ",
                     absl::FormatDuration(options.reload_interval)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ParseTokens(absl::string_view contents) {
  std::vector<std::string> tokens;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    tokens.emplace_back(line);
  }
  if (tokens.empty()) return absl::InvalidArgumentError("no token (one token per line)");
  return tokens;
}

TokenAuthenticator::TokenAuthenticator(const std::vector<std::string>& tokens)
    : digests_(Digests(tokens)) {}

TokenAuthenticator::TokenAuthenticator(std::string path, std::vector<Digest> digests)
    : path_(std::move(path)), digests_(std::move(digests)) {}

absl::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::Load(
    const std::string& path, absl::Duration reload_interval) {
  absl::StatusOr<std::string> contents = ReadFile(path);
  if (!contents.ok()) return contents.status();
  absl::StatusOr<std::vector<std::string>> tokens = ParseTokens(*contents);
  if (!tokens.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--auth_tokens_file '", path, "': ", tokens.status().message()));
  }
  std::unique_ptr<TokenAuthenticator> authenticator(new TokenAuthenticator(path, Digests(*tokens)));
  {
    absl::MutexLock lock(&authenticator->mu_);
    authenticator->contents_ = *std::move(contents);
  }
  if (reload_interval > absl::ZeroDuration() && reload_interval != absl::InfiniteDuration()) {
    TokenAuthenticator* raw = authenticator.get();
    authenticator->reloader_ =
        std::thread([raw, reload_interval] { raw->ReloadEvery(reload_interval); });
  }
  return authenticator;
}

TokenAuthenticator::~TokenAuthenticator() {
  stop_.Notify();
  if (reloader_.joinable()) reloader_.join();
}

void TokenAuthenticator::ReloadEvery(absl::Duration interval) {
  while (!stop_.WaitForNotificationWithTimeout(interval)) {
    if (absl::Status status = Reload(); !status.ok()) {
      LogError("keeping the previous auth tokens", {{"error", status.message()}});
    }
  }
}

absl::Status TokenAuthenticator::Reload() {
  if (path_.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> contents = ReadFile(path_);
  if (!contents.ok()) return contents.status();
  {
    absl::MutexLock lock(&mu_);
    if (*contents == contents_) return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> tokens = ParseTokens(*contents);
  if (!tokens.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--auth_tokens_file '", path_, "': ", tokens.status().message()));
  }
  std::vector<Digest> digests = Digests(*tokens);
  absl::MutexLock lock(&mu_);
  digests_ = std::move(digests);
  contents_ = *std::move(contents);
  LogInfo("auth tokens reloaded", {{"tokens", static_cast<int64_t>(digests_.size())}});
  return absl::OkStatus();
}

int TokenAuthenticator::token_count() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int>(digests_.size());
}

grpc::Status TokenAuthenticator::Check(const ClientMetadata& metadata) const {
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return Unauthenticated("missing bearer token");
  absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    return Unauthenticated("authorization metadata is not 'Bearer <token>'");
  }
  const Digest presented = Sha256(absl::StripAsciiWhitespace(value.substr(kScheme.size())));
  absl::ReaderMutexLock lock(&mu_);
  if (!Accepted(presented, digests_)) return Unauthenticated("invalid bearer token");
  return grpc::Status::OK;
}

bool IsOpenMethod(absl::string_view method, bool reflection_requires_auth) {
  if (absl::StartsWith(method, kHealthPrefix)) return true;
  return !reflection_requires_auth && absl::StartsWith(method, kReflectionPrefix);
}

bool IsPlannerMethod(absl::string_view method) { return absl::StartsWith(method, kPlannerPrefix); }

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewAuthInterceptorFactory(
    const TokenAuthenticator& authenticator, bool reflection_requires_auth) {
  return std::make_unique<AuthInterceptorFactory>(authenticator, reflection_requires_auth);
}

}  // namespace partplan

// Bearer-token authentication: the token file and its checks, then an
// in-process server with tokens, alone and over TLS (the matrix a reviewer
// tries with grpcurl): missing and wrong tokens are refused before any
// planning, health stays open, reflection follows its flag, and a rotated
// token file applies without a restart.
#include "server/auth.h"

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.grpc.pb.h"
#include "server/server.h"
#include "tests/server/test_util.h"
#include "tests/server/tls_test_util.h"

namespace partplan {
namespace {

constexpr char kToken[] = "s3cret-token-0123456789abcdef";
constexpr char kOtherToken[] = "another-token-0123456789abcdef";

// Metadata as the server sees it; `storage` owns the strings.
ClientMetadata Metadata(const std::vector<std::pair<std::string, std::string>>& storage) {
  ClientMetadata metadata;
  for (const auto& [key, value] : storage) metadata.emplace(key, value);
  return metadata;
}

grpc::StatusCode CheckCode(const TokenAuthenticator& authenticator,
                           const std::vector<std::pair<std::string, std::string>>& storage) {
  return authenticator.Check(Metadata(storage)).error_code();
}

TEST(ParseTokensTest, OneTokenPerLineSkippingBlanksAndComments) {
  absl::StatusOr<std::vector<std::string>> tokens =
      ParseTokens("# scheduler\n  alpha  \n\n\tbeta\r\n# old: gamma\n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_FALSE(ParseTokens("").ok());
  EXPECT_FALSE(ParseTokens("# only a comment\n\n").ok());
}

TEST(TokenAuthenticatorTest, AcceptsOnlyListedBearerTokens) {
  const TokenAuthenticator authenticator({kToken, "second"});
  using grpc::StatusCode;
  EXPECT_EQ(CheckCode(authenticator, {{"authorization", std::string("Bearer ") + kToken}}),
            StatusCode::OK);
  EXPECT_EQ(CheckCode(authenticator, {{"authorization", "bearer second"}}), StatusCode::OK);
  EXPECT_EQ(CheckCode(authenticator, {{"authorization", "BEARER second "}}), StatusCode::OK);

  EXPECT_EQ(CheckCode(authenticator, {}), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CheckCode(authenticator, {{"x-request-id", "1"}}), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CheckCode(authenticator, {{"authorization", kToken}}), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CheckCode(authenticator, {{"authorization", "Bearer "}}), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CheckCode(authenticator, {{"authorization", "Basic c2Vjb25k"}}),
            StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CheckCode(authenticator, {{"authorization", std::string("Bearer ") + kOtherToken}}),
            StatusCode::UNAUTHENTICATED);
  // Prefixes and extensions of a token are other tokens.
  EXPECT_EQ(CheckCode(authenticator, {{"authorization", "Bearer secon"}}),
            StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CheckCode(authenticator, {{"authorization", "Bearer second2"}}),
            StatusCode::UNAUTHENTICATED);
}

TEST(TokenAuthenticatorTest, MessagesNeverRepeatTheToken) {
  const TokenAuthenticator authenticator({kToken});
  const grpc::Status status =
      authenticator.Check(Metadata({{"authorization", std::string("Bearer ") + kOtherToken}}));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(status.error_message().find(kOtherToken), std::string::npos) << status.error_message();
}

TEST(TokenAuthenticatorTest, LoadFailsOnMissingOrEmptyFiles) {
  const std::string dir = FreshTestDir("load");
  EXPECT_EQ(TokenAuthenticator::Load(dir + "/missing", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(WriteTestFile(dir + "/empty", "# nothing yet\n").ok());
  EXPECT_EQ(TokenAuthenticator::Load(dir + "/empty", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(TokenAuthenticatorTest, ReloadKeepsTheOldTokensWhenTheNewFileIsBad) {
  const std::string path = FreshTestDir("reload") + "/tokens";
  ASSERT_TRUE(WriteTestFile(path, std::string(kToken) + "\n").ok());
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> authenticator =
      TokenAuthenticator::Load(path, absl::ZeroDuration());
  ASSERT_TRUE(authenticator.ok()) << authenticator.status();
  const std::vector<std::pair<std::string, std::string>> old_token = {
      {"authorization", std::string("Bearer ") + kToken}};
  const std::vector<std::pair<std::string, std::string>> new_token = {
      {"authorization", std::string("Bearer ") + kOtherToken}};

  ASSERT_TRUE(WriteTestFile(path, "\n").ok());
  EXPECT_FALSE((*authenticator)->Reload().ok());
  EXPECT_EQ(CheckCode(**authenticator, old_token), grpc::StatusCode::OK);

  ASSERT_TRUE(WriteTestFile(path, std::string(kOtherToken) + "\n").ok());
  EXPECT_TRUE((*authenticator)->Reload().ok());
  EXPECT_EQ(CheckCode(**authenticator, new_token), grpc::StatusCode::OK);
  EXPECT_EQ(CheckCode(**authenticator, old_token), grpc::StatusCode::UNAUTHENTICATED);
}

TEST(OpenMethodsTest, HealthAlwaysReflectionByFlag) {
  EXPECT_TRUE(IsOpenMethod("/grpc.health.v1.Health/Check", true));
  EXPECT_TRUE(IsOpenMethod("/grpc.health.v1.Health/Watch", true));
  EXPECT_FALSE(
      IsOpenMethod("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", true));
  EXPECT_TRUE(
      IsOpenMethod("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", false));
  EXPECT_FALSE(IsOpenMethod("/partplan.v1.PartitionPlanner/Validate", false));
  EXPECT_FALSE(IsOpenMethod("/grpc.health.v1.HealthX/Check", false));
  EXPECT_TRUE(IsPlannerMethod("/partplan.v1.PartitionPlanner/Validate"));
  EXPECT_FALSE(IsPlannerMethod("/partplan.v1.PartitionPlannerX/Validate"));
}

// A server with a tokens file (and optionally TLS), whose backend counts
// the calls that reach it.
class AuthServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    tokens_path_ = dir_ + "/tokens";
    ASSERT_TRUE(WriteTestFile(tokens_path_, std::string("# test\n") + kToken + "\n").ok());
  }

  ServerOptions Options() {
    ServerOptions options = TestServerOptions();
    options.auth.tokens_path = tokens_path_;
    return options;
  }

  std::unique_ptr<PlannerServer> Start(const ServerOptions& options) {
    return StartTestServer(std::make_unique<FakePlannerBackend>([this](const CancellationToken&) {
                             planned_.Increment();
                             return absl::OkStatus();
                           }),
                           options);
  }

  std::string dir_;
  std::string tokens_path_;
  EventCounter planned_;
};

TEST_F(AuthServerTest, MissingAndWrongTokensAreRefusedBeforePlanning) {
  std::unique_ptr<PlannerServer> server = Start(Options());
  ASSERT_NE(server, nullptr);
  std::shared_ptr<grpc::Channel> channel = ConnectPlaintext(server->port());

  const grpc::Status missing = CallValidate(channel);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED) << missing.error_message();
  const grpc::Status wrong = CallValidate(channel, kOtherToken);
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong.error_message();
  EXPECT_EQ(planned_.count(), 0);

  const grpc::Status right = CallValidate(channel, kToken);
  EXPECT_TRUE(right.ok()) << right.error_message();
  EXPECT_EQ(planned_.count(), 1);
}

// PartitionPlannerInParts answers the same RPCs, so it takes the same tokens.
TEST_F(AuthServerTest, CallsInPartsNeedATokenToo) {
  std::unique_ptr<PlannerServer> server = Start(Options());
  ASSERT_NE(server, nullptr);
  auto stub = v1::PartitionPlannerInParts::NewStub(ConnectPlaintext(server->port()));
  for (const std::string& token : {std::string(), std::string(kOtherToken), std::string(kToken)}) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kTestTimeout));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    auto stream = stub->Call(&context);
    v1::MessagePart part;
    part.set_method("Validate");
    stream->Write(part);  // false once the server has refused the call
    stream->WritesDone();
    while (stream->Read(&part)) {
    }
    const grpc::Status status = stream->Finish();
    if (token == kToken) {
      // Through to the planner, which finds the empty graph wanting.
      EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << token;
    }
  }
  EXPECT_EQ(planned_.count(), 1);
}

TEST_F(AuthServerTest, RefusalsAreCountedAsUnauthenticated) {
  ServerOptions options = Options();
  options.metrics_port = 0;
  std::unique_ptr<PlannerServer> server = Start(options);
  ASSERT_NE(server, nullptr);
  EXPECT_FALSE(CallValidate(ConnectPlaintext(server->port())).ok());
  EXPECT_TRUE(
      WaitForSample(server->metrics_port(),
                    "grpc_server_handled_total{grpc_code=\"Unauthenticated\","
                    "grpc_method=\"Validate\",grpc_service=\"partplan.v1.PartitionPlanner\","
                    "grpc_type=\"unary\"}",
                    1));
}

TEST_F(AuthServerTest, HealthIsOpenWithoutToken) {
  std::unique_ptr<PlannerServer> server = Start(Options());
  ASSERT_NE(server, nullptr);
  std::shared_ptr<grpc::Channel> channel = ConnectPlaintext(server->port());
  for (const std::string service : {"", kReadinessServiceName}) {
    bool serving = false;
    const grpc::Status status = CheckHealth(channel, service, &serving);
    EXPECT_TRUE(status.ok()) << service << ": " << status.error_message();
    EXPECT_TRUE(serving) << service;
  }
}

TEST_F(AuthServerTest, ReflectionNeedsATokenByDefault) {
  std::unique_ptr<PlannerServer> server = Start(Options());
  ASSERT_NE(server, nullptr);
  std::shared_ptr<grpc::Channel> channel = ConnectPlaintext(server->port());
  EXPECT_EQ(ListServicesByReflection(channel).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListServicesByReflection(channel, kOtherToken).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status status = ListServicesByReflection(channel, kToken);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(AuthServerTest, ReflectionCanBeLeftOpen) {
  ServerOptions options = Options();
  options.auth.reflection_requires_auth = false;
  std::unique_ptr<PlannerServer> server = Start(options);
  ASSERT_NE(server, nullptr);
  std::shared_ptr<grpc::Channel> channel = ConnectPlaintext(server->port());
  const grpc::Status status = ListServicesByReflection(channel);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(CallValidate(channel).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthServerTest, WithoutTokensFileEverythingIsOpen) {
  std::unique_ptr<PlannerServer> server = Start(TestServerOptions());
  ASSERT_NE(server, nullptr);
  std::shared_ptr<grpc::Channel> channel = ConnectPlaintext(server->port());
  EXPECT_TRUE(CallValidate(channel).ok());
  EXPECT_TRUE(ListServicesByReflection(channel).ok());
}

TEST_F(AuthServerTest, HealthPortGuardsReflectionToo) {
  ServerOptions options = Options();
  options.health_port = 0;
  std::unique_ptr<PlannerServer> server = Start(options);
  ASSERT_NE(server, nullptr);
  std::shared_ptr<grpc::Channel> health = ConnectPlaintext(server->health_port());
  bool serving = false;
  EXPECT_TRUE(CheckHealth(health, kReadinessServiceName, &serving).ok());
  EXPECT_TRUE(serving);
  EXPECT_EQ(ListServicesByReflection(health).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthServerTest, RotatedTokensFileAppliesWithoutRestart) {
  ServerOptions options = Options();
  options.auth.reload_interval = absl::Seconds(1);
  std::unique_ptr<PlannerServer> server = Start(options);
  ASSERT_NE(server, nullptr);
  std::shared_ptr<grpc::Channel> channel = ConnectPlaintext(server->port());
  ASSERT_TRUE(CallValidate(channel, kToken).ok());

  ASSERT_TRUE(WriteTestFile(tokens_path_, std::string(kOtherToken) + "\n").ok());
  const absl::Time give_up = absl::Now() + kTestTimeout;
  while (!CallValidate(channel, kOtherToken).ok() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(CallValidate(channel, kOtherToken).ok());
  EXPECT_EQ(CallValidate(channel, kToken).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthServerTest, StartFailsWithoutUsableTokens) {
  ServerOptions options = Options();
  options.auth.tokens_path = dir_ + "/missing";
  EXPECT_EQ(PlannerServer::Start(options, std::make_unique<FakePlannerBackend>()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// The full matrix over mutual TLS: the transport and the token are both
// needed.
TEST_F(AuthServerTest, TokensOverMutualTls) {
  for (const char* ca : {"ca"}) ASSERT_TRUE(MakeCertificate("ca", dir_, ca).ok());
  ASSERT_TRUE(MakeCertificate("server", dir_, "server", "ca").ok());
  ASSERT_TRUE(MakeCertificate("client", dir_, "client", "ca").ok());
  ServerOptions options = Options();
  options.tls.cert_path = dir_ + "/server.crt";
  options.tls.key_path = dir_ + "/server.key";
  options.tls.client_ca_path = dir_ + "/ca.crt";
  std::unique_ptr<PlannerServer> server = Start(options);
  ASSERT_NE(server, nullptr);

  std::shared_ptr<grpc::Channel> mtls =
      ConnectTls(server->port(),
                 TlsCredentials(ReadTestFile(dir_ + "/ca.crt"), ReadTestFile(dir_ + "/client.crt"),
                                ReadTestFile(dir_ + "/client.key")));
  EXPECT_TRUE(CallValidate(mtls, kToken).ok());
  EXPECT_EQ(CallValidate(mtls).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallValidate(mtls, kOtherToken).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  bool serving = false;
  EXPECT_TRUE(CheckHealth(mtls, kReadinessServiceName, &serving).ok());
  EXPECT_EQ(CallValidate(ConnectPlaintext(server->port()), kToken).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  std::shared_ptr<grpc::Channel> no_client_cert =
      ConnectTls(server->port(), TlsCredentials(ReadTestFile(dir_ + "/ca.crt")));
  EXPECT_EQ(CallValidate(no_client_cert, kToken).error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace partplan

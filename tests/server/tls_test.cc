// TLS and mutual TLS of an in-process server, with certificates made by
// openssl in $TEST_TMPDIR: plaintext and unverified clients are refused, a
// rotated certificate is served without a restart, probes keep a plaintext
// health port, and broken files stop the server at startup.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/credentials.h"
#include "server/server.h"
#include "tests/server/test_util.h"
#include "tests/server/tls_test_util.h"

namespace partplan {
namespace {

// Certificates of one test: two CAs, a server certificate from each, and
// client certificates from each.
class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    for (const char* ca : {"ca1", "ca2"}) ASSERT_TRUE(MakeCertificate("ca", dir_, ca).ok());
    ASSERT_TRUE(MakeCertificate("server", dir_, "server1", "ca1").ok());
    ASSERT_TRUE(MakeCertificate("server", dir_, "server2", "ca2").ok());
    ASSERT_TRUE(MakeCertificate("client", dir_, "client1", "ca1").ok());
    ASSERT_TRUE(MakeCertificate("client", dir_, "client2", "ca2").ok());
  }

  std::string File(const std::string& name) { return ReadTestFile(dir_ + "/" + name); }

  // Credentials trusting `ca`, presenting `client` (e.g. "client1") if set.
  std::shared_ptr<grpc::ChannelCredentials> Client(const std::string& ca,
                                                   const std::string& client = "") {
    if (client.empty()) return TlsCredentials(File(ca + ".crt"));
    return TlsCredentials(File(ca + ".crt"), File(client + ".crt"), File(client + ".key"));
  }

  // Server options with `server` ("server1") as identity, clients verified
  // against `client_ca` ("ca1") when set.
  ServerOptions ServerTls(const std::string& server, const std::string& client_ca = "") {
    ServerOptions options = TestServerOptions();
    options.tls.cert_path = dir_ + "/" + server + ".crt";
    options.tls.key_path = dir_ + "/" + server + ".key";
    if (!client_ca.empty()) options.tls.client_ca_path = dir_ + "/" + client_ca + ".crt";
    return options;
  }

  std::string dir_;
};

TEST_F(TlsTest, ServesTlsClientsAndRefusesPlaintext) {
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(), ServerTls("server1"));
  ASSERT_NE(server, nullptr);

  EXPECT_TRUE(CallValidate(ConnectTls(server->port(), Client("ca1"))).ok());
  EXPECT_EQ(CallValidate(ConnectPlaintext(server->port())).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // A client that does not trust the server's CA does not talk to it.
  EXPECT_EQ(CallValidate(ConnectTls(server->port(), Client("ca2"))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, MutualTlsRefusesClientsWithoutAVerifiedCertificate) {
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(), ServerTls("server1", "ca1"));
  ASSERT_NE(server, nullptr);

  EXPECT_TRUE(CallValidate(ConnectTls(server->port(), Client("ca1", "client1"))).ok());
  EXPECT_EQ(CallValidate(ConnectTls(server->port(), Client("ca1"))).error_code(),
            grpc::StatusCode::UNAVAILABLE)
      << "a client without a certificate";
  EXPECT_EQ(CallValidate(ConnectTls(server->port(), Client("ca1", "client2"))).error_code(),
            grpc::StatusCode::UNAVAILABLE)
      << "a client certificate from another CA";
  EXPECT_EQ(CallValidate(ConnectPlaintext(server->port())).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

// Kubernetes rotates a mounted secret by switching the volume's ..data
// symlink; new connections must get the new certificate and CA without a
// restart.
TEST_F(TlsTest, RotatedCertificateAndClientCaApplyWithoutRestart) {
  SecretVolume secret(dir_ + "/secret");
  ASSERT_TRUE(secret
                  .Publish({{"tls.crt", File("server1.crt")},
                            {"tls.key", File("server1.key")},
                            {"ca.crt", File("ca1.crt")}})
                  .ok());
  ServerOptions options = TestServerOptions();
  options.tls.cert_path = secret.path("tls.crt");
  options.tls.key_path = secret.path("tls.key");
  options.tls.client_ca_path = secret.path("ca.crt");
  options.tls.reload_interval = absl::Seconds(1);
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(), options);
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(CallValidate(ConnectTls(server->port(), Client("ca1", "client1"))).ok());
  ASSERT_FALSE(CallValidate(ConnectTls(server->port(), Client("ca2", "client2"))).ok());

  ASSERT_TRUE(secret
                  .Publish({{"tls.crt", File("server2.crt")},
                            {"tls.key", File("server2.key")},
                            {"ca.crt", File("ca2.crt")}})
                  .ok());
  const absl::Time give_up = absl::Now() + kTestTimeout;
  grpc::Status status;
  do {
    absl::SleepFor(absl::Milliseconds(200));
    status = CallValidate(ConnectTls(server->port(), Client("ca2", "client2")));
  } while (!status.ok() && absl::Now() < give_up);
  EXPECT_TRUE(status.ok()) << "the rotated certificate was never served: "
                           << status.error_message();
  EXPECT_EQ(CallValidate(ConnectTls(server->port(), Client("ca1", "client1"))).error_code(),
            grpc::StatusCode::UNAVAILABLE)
      << "the old CA and client certificate still work";
}

// Kubernetes gRPC probes speak plaintext: with TLS on, they use the health
// port, which serves nothing else.
TEST_F(TlsTest, HealthPortServesPlaintextHealthOnly) {
  ServerOptions options = ServerTls("server1", "ca1");
  options.health_port = 0;
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(), options);
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->health_port(), 0);

  std::shared_ptr<grpc::Channel> health = ConnectPlaintext(server->health_port());
  for (const std::string service : {"", kReadinessServiceName}) {
    bool serving = false;
    const grpc::Status status = CheckHealth(health, service, &serving);
    EXPECT_TRUE(status.ok()) << service << ": " << status.error_message();
    EXPECT_TRUE(serving) << service;
  }
  EXPECT_EQ(CallValidate(health).error_code(), grpc::StatusCode::UNIMPLEMENTED);

  server->Shutdown();
  bool serving = true;
  EXPECT_FALSE(CheckHealth(health, kReadinessServiceName, &serving).ok() && serving);
}

TEST_F(TlsTest, NoHealthPortByDefault) {
  std::unique_ptr<PlannerServer> server = StartTestServer(std::make_unique<FakePlannerBackend>());
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->health_port(), -1);
}

TEST_F(TlsTest, BrokenFilesStopTheServerAtStartup) {
  struct Case {
    const char* what;
    std::string cert, key, client_ca;
    absl::StatusCode code;
  };
  const std::string d = dir_ + "/";
  const Case cases[] = {
      {"key of another certificate", d + "server1.crt", d + "server2.key", "",
       absl::StatusCode::kFailedPrecondition},
      {"missing certificate", d + "missing.crt", d + "server1.key", "",
       absl::StatusCode::kFailedPrecondition},
      {"certificate is a key", d + "server1.key", d + "server1.key", "",
       absl::StatusCode::kFailedPrecondition},
      {"client CA is not a certificate", d + "server1.crt", d + "server1.key", d + "ca1.key",
       absl::StatusCode::kFailedPrecondition},
      {"certificate without key", d + "server1.crt", "", "", absl::StatusCode::kInvalidArgument},
      {"client CA without TLS", "", "", d + "ca1.crt", absl::StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    ServerOptions options = TestServerOptions();
    options.tls.cert_path = c.cert;
    options.tls.key_path = c.key;
    options.tls.client_ca_path = c.client_ca;
    const absl::StatusOr<std::unique_ptr<PlannerServer>> server =
        PlannerServer::Start(options, std::make_unique<FakePlannerBackend>());
    EXPECT_EQ(server.status().code(), c.code) << c.what << ": " << server.status();
  }
}

TEST(TlsOptionsTest, ReloadIntervalOfAtLeastOneSecond) {
  partplan::TlsOptions options;
  options.reload_interval = absl::Milliseconds(500);
  EXPECT_EQ(ValidateTlsOptions(options).code(), absl::StatusCode::kInvalidArgument);
  options.reload_interval = absl::Seconds(1);
  EXPECT_TRUE(ValidateTlsOptions(options).ok());
}

}  // namespace
}  // namespace partplan

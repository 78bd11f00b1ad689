// The partplan CLI's --tls_* and --token* flags against a real in-process
// server with mutual TLS and bearer tokens: what a user types, parsed by the
// CLI's own flag parser and run through RunCli.
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "client/cli/cli.h"
#include "client/cli/flags.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/server/test_util.h"
#include "tests/server/tls_test_util.h"

namespace partplan {
namespace {

constexpr char kToken[] = "cli-token-0123456789abcdef";

class CliSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    for (const auto& [kind, name, ca] :
         std::vector<std::tuple<std::string, std::string, std::string>>{
             {"ca", "ca", ""},
             {"server", "server", "ca"},
             {"client", "client", "ca"},
             {"ca", "other_ca", ""},
             {"client", "other_client", "other_ca"}}) {
      ASSERT_TRUE(MakeCertificate(kind, dir_, name, ca).ok());
    }
    ASSERT_TRUE(WriteTestFile(Path("tokens"), absl::StrCat(kToken, "\n")).ok());
    ASSERT_TRUE(WriteTestFile(Path("token"), absl::StrCat(kToken, "\n")).ok());
    ASSERT_TRUE(WriteTestFile(Path("wrong_token"), "not-the-token\n").ok());
    ASSERT_TRUE(WriteTestFile(Path("validate.json"), "{}\n").ok());

    ServerOptions options = TestServerOptions();
    options.tls.cert_path = Path("server.crt");
    options.tls.key_path = Path("server.key");
    options.tls.client_ca_path = Path("ca.crt");
    options.auth.tokens_path = Path("tokens");
    server_ = StartTestServer(std::make_unique<FakePlannerBackend>(), options);
    ASSERT_NE(server_, nullptr);
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Runs `partplan call Validate --request=... <flags>` against the server;
  // the exit code, with stderr in `err_`.
  int Run(const std::vector<std::string>& flags) {
    absl::FlagSaver saver;
    std::vector<std::string> args = {"call", "Validate", "--request=" + Path("validate.json"),
                                     absl::StrCat("--target=127.0.0.1:", server_->port()),
                                     "--deadline=10s"};
    args.insert(args.end(), flags.begin(), flags.end());
    absl::StatusOr<cli::CommandLine> command_line = cli::ParseCommandLine(args);
    if (!command_line.ok()) {
      err_ = std::string(command_line.status().message());
      return cli::kBadInputExitCode;
    }
    absl::StatusOr<cli::CliOptions> options = cli::CliOptionsFromFlags();
    if (!options.ok()) {
      err_ = std::string(options.status().message());
      return cli::kBadInputExitCode;
    }
    std::istringstream in;
    std::ostringstream out, err;
    cli::CliEnvironment environment;
    environment.in = &in;
    environment.out = &out;
    environment.err = &err;
    const int code = cli::RunCli(command_line->positional, *options, environment);
    err_ = err.str();
    return code;
  }

  // The flags of a client trusting the server, with `client` as identity.
  std::vector<std::string> Tls(const std::string& client = "client") const {
    return {"--tls_ca=" + Path("ca.crt"), "--tls_cert=" + Path(client + ".crt"),
            "--tls_key=" + Path(client + ".key"), "--tls_server_name=localhost"};
  }

  static std::vector<std::string> With(std::vector<std::string> flags,
                                       const std::vector<std::string>& more) {
    flags.insert(flags.end(), more.begin(), more.end());
    return flags;
  }

  std::string dir_;
  std::unique_ptr<PlannerServer> server_;
  std::string err_;
};

constexpr int kUnavailable = 14;
constexpr int kUnauthenticated = 16;

TEST_F(CliSecurityTest, MutualTlsAndATokenFileSucceed) {
  EXPECT_EQ(Run(With(Tls(), {"--token_file=" + Path("token")})), 0) << err_;
  EXPECT_EQ(Run(With(Tls(), {std::string("--token=") + kToken})), 0) << err_;
}

TEST_F(CliSecurityTest, MissingOrWrongTokensGetUnauthenticated) {
  EXPECT_EQ(Run(Tls()), kUnauthenticated) << err_;
  EXPECT_NE(err_.find("UNAUTHENTICATED"), std::string::npos) << err_;
  EXPECT_EQ(Run(With(Tls(), {"--token_file=" + Path("wrong_token")})), kUnauthenticated) << err_;
}

TEST_F(CliSecurityTest, TransportWithoutTheRightCertificatesIsUnavailable) {
  const std::vector<std::string> token = {"--token_file=" + Path("token")};
  EXPECT_EQ(Run(token), kUnavailable) << "plaintext: " << err_;
  EXPECT_EQ(Run(With({"--tls_ca=" + Path("ca.crt"), "--tls_server_name=localhost"}, token)),
            kUnavailable)
      << "no client certificate: " << err_;
  EXPECT_EQ(Run(With(Tls("other_client"), token)), kUnavailable)
      << "client certificate of another CA: " << err_;
  EXPECT_EQ(Run(With({"--tls_ca=" + Path("other_ca.crt"), "--tls_cert=" + Path("client.crt"),
                      "--tls_key=" + Path("client.key"), "--tls_server_name=localhost"},
                     token)),
            kUnavailable)
      << "server not trusted: " << err_;
}

TEST_F(CliSecurityTest, InconsistentFlagsAreBadInput) {
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {"--tls_cert=" + Path("client.crt")},
           {"--tls_key=" + Path("client.key")},
           {"--tls_ca=" + Path("missing.crt")},
           {"--tls_server_name=localhost"},
           {std::string("--token=") + kToken, "--token_file=" + Path("token")},
           {"--token_file=" + Path("missing")},
       }) {
    EXPECT_EQ(Run(flags), cli::kBadInputExitCode) << flags.front();
  }
}

}  // namespace
}  // namespace partplan

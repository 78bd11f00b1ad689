// The TLS, auth and health-port flags of partplan_server, as a container
// sets them through PARTPLAN_* variables.
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gtest/gtest.h"
#include "server/flags.h"

namespace partplan {
namespace {

std::function<const char*(const char*)> Environment(
    const std::map<std::string, std::string>& variables) {
  return [variables](const char* name) -> const char* {
    const auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
}

TEST(SecurityFlagsTest, OffByDefault) {
  absl::FlagSaver saver;
  absl::StatusOr<ServerOptions> options = ServerOptionsFromFlags();
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->tls.enabled());
  EXPECT_FALSE(options->auth.enabled());
  EXPECT_TRUE(options->auth.reflection_requires_auth);
  EXPECT_EQ(options->health_port, -1);
  EXPECT_EQ(options->tls.reload_interval, absl::Seconds(60));
}

TEST(SecurityFlagsTest, FromTheEnvironment) {
  absl::FlagSaver saver;
  ASSERT_TRUE(ApplyEnvironmentOverrides(
                  Environment({{"PARTPLAN_TLS_CERT", "/etc/partplan/tls/tls.crt"},
                               {"PARTPLAN_TLS_KEY", "/etc/partplan/tls/tls.key"},
                               {"PARTPLAN_TLS_CLIENT_CA", "/etc/partplan/tls/ca.crt"},
                               {"PARTPLAN_AUTH_TOKENS_FILE", "/etc/partplan/auth/tokens"},
                               {"PARTPLAN_REFLECTION_REQUIRES_AUTH", "false"},
                               {"PARTPLAN_CREDENTIALS_RELOAD_SECONDS", "30"},
                               {"PARTPLAN_HEALTH_PORT", "8081"},
                               {"PARTPLAN_MAX_CONNECTION_AGE_SECONDS", "300"}}))
                  .ok());
  absl::StatusOr<ServerOptions> options = ServerOptionsFromFlags();
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->tls.cert_path, "/etc/partplan/tls/tls.crt");
  EXPECT_EQ(options->tls.key_path, "/etc/partplan/tls/tls.key");
  EXPECT_EQ(options->tls.client_ca_path, "/etc/partplan/tls/ca.crt");
  EXPECT_EQ(options->tls.reload_interval, absl::Seconds(30));
  EXPECT_EQ(options->auth.tokens_path, "/etc/partplan/auth/tokens");
  EXPECT_FALSE(options->auth.reflection_requires_auth);
  EXPECT_EQ(options->auth.reload_interval, absl::Seconds(30));
  EXPECT_EQ(options->health_port, 8081);
  EXPECT_EQ(options->max_connection_age, absl::Seconds(300));
}

TEST(SecurityFlagsTest, InconsistentValuesAreRejected) {
  for (const auto& values : std::vector<std::map<std::string, std::string>>{
           {{"tls_cert", "/a.crt"}},
           {{"tls_key", "/a.key"}},
           {{"tls_client_ca", "/ca.crt"}},
           {{"credentials_reload_seconds", "0"}},
           {{"health_port", "50051"}},
           {{"health_port", "9090"}},
           {{"health_port", "70000"}},
           {{"max_connection_age_seconds", "-1"}},
       }) {
    absl::FlagSaver saver;
    for (const auto& [name, value] : values) {
      std::string error;
      ASSERT_TRUE(absl::FindCommandLineFlag(name)->ParseFrom(value, &error)) << name << error;
    }
    EXPECT_EQ(ServerOptionsFromFlags().status().code(), absl::StatusCode::kInvalidArgument)
        << values.begin()->first << "=" << values.begin()->second;
  }
}

}  // namespace
}  // namespace partplan

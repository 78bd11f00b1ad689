// --max_connection_age_seconds: old connections are closed with a GOAWAY so
// that clients re-resolve and reach new pods, without failing calls in
// flight.
#include <grpcpp/grpcpp.h>

#include <memory>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/server/test_util.h"
#include "tests/server/tls_test_util.h"

namespace partplan {
namespace {

TEST(ConnectionAgeTest, OldConnectionsCloseAndCallsInFlightFinish) {
  absl::Notification release;
  EventCounter started;
  ServerOptions options = TestServerOptions();
  options.max_connection_age = absl::Seconds(1);
  std::unique_ptr<PlannerServer> server =
      StartTestServer(std::make_unique<FakePlannerBackend>(BlockUntil(release, started)), options);
  ASSERT_NE(server, nullptr);

  std::shared_ptr<grpc::Channel> channel = ConnectPlaintext(server->port());
  auto stub = v1::PartitionPlanner::NewStub(channel);
  std::unique_ptr<PendingValidate> call = StartValidate(*stub);
  ASSERT_TRUE(started.WaitFor(1));
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);

  // The server asks the client to go away after about a second; the client
  // stops using the connection for new calls (the channel leaves READY).
  const absl::Time give_up = absl::Now() + kTestTimeout;
  while (channel->GetState(false) == GRPC_CHANNEL_READY && absl::Now() < give_up) {
    channel->WaitForStateChange(GRPC_CHANNEL_READY, absl::ToChronoTime(give_up));
  }
  EXPECT_NE(channel->GetState(false), GRPC_CHANNEL_READY);

  // The call that was running on the old connection still succeeds.
  release.Notify();
  ASSERT_TRUE(WaitForCall(*call));
  EXPECT_TRUE(call->status.ok()) << call->status.error_message();
  // And new calls reconnect.
  EXPECT_TRUE(CallValidate(channel).ok());
}

TEST(ConnectionAgeTest, NoLimitByDefault) {
  EXPECT_EQ(TestServerOptions().max_connection_age, absl::ZeroDuration());
}

}  // namespace
}  // namespace partplan

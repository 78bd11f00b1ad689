// The plan cache on its own (keys, LRU eviction, byte bound) and in the
// server (a repeated request is answered without planning, and counted).
#include "server/plan_cache.h"

#include <atomic>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

using ::testing::HasSubstr;

v1::ValidateResponse Response(int nodes) {
  v1::ValidateResponse response;
  response.set_node_count(nodes);
  return response;
}

v1::PartitionGraphRequest Request(const std::string& graph_name) {
  v1::PartitionGraphRequest request;
  request.mutable_graph()->set_name(graph_name);
  return request;
}

TEST(PlanCacheTest, KeysDifferByRpcAndRequest) {
  const std::string key = PlanCache::Key("PartitionGraph", Request("a"));
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(key, PlanCache::Key("PartitionGraph", Request("a")));
  EXPECT_NE(key, PlanCache::Key("PartitionGraph", Request("b")));
  EXPECT_NE(key, PlanCache::Key("Plan", Request("a")));
}

TEST(PlanCacheTest, ReturnsWhatWasInserted) {
  PlanCache cache(1 << 20);
  v1::ValidateResponse found;
  EXPECT_FALSE(cache.Lookup("k", &found));
  cache.Insert("k", Response(7));
  ASSERT_TRUE(cache.Lookup("k", &found));
  EXPECT_EQ(found.node_count(), 7);
  EXPECT_GT(cache.bytes(), 0);
}

TEST(PlanCacheTest, EvictsTheLeastRecentlyUsedBeyondItsBytes) {
  // Each entry: a 1-byte key and a 2-byte response.
  PlanCache cache(6);
  cache.Insert("a", Response(1));
  cache.Insert("b", Response(2));
  v1::ValidateResponse found;
  ASSERT_TRUE(cache.Lookup("a", &found));  // a is now the most recent
  cache.Insert("c", Response(3));          // 9 bytes > 6: b goes
  EXPECT_TRUE(cache.Lookup("a", &found));
  EXPECT_FALSE(cache.Lookup("b", &found));
  EXPECT_TRUE(cache.Lookup("c", &found));
  EXPECT_EQ(cache.bytes(), 6);
}

TEST(PlanCacheTest, NeverHoldsAResponseLargerThanItself) {
  PlanCache cache(2);
  cache.Insert("a", Response(1));
  v1::ValidateResponse found;
  EXPECT_FALSE(cache.Lookup("a", &found));
  EXPECT_EQ(cache.bytes(), 0);
}

TEST(PlanCacheServerTest, RepeatedRequestIsAnsweredWithoutPlanning) {
  std::atomic<int> planned{0};
  auto backend = std::make_unique<FakePlannerBackend>([&planned](const CancellationToken&) {
    ++planned;
    return absl::OkStatus();
  });
  backend->canned<v1::PartitionGraphResponse>().mutable_plan()->mutable_summary()->set_planner(
      "partitioner/size_based");
  ServerOptions options = TestServerOptions();
  options.metrics_port = 0;
  std::unique_ptr<PlannerServer> server = StartTestServer(std::move(backend), options);
  auto stub = NewPlannerStub(*server);
  for (const char* name : {"g", "g", "other", "g"}) {
    grpc::ClientContext context;
    v1::PartitionGraphResponse response;
    ASSERT_TRUE(stub->PartitionGraph(&context, Request(name), &response).ok());
    EXPECT_EQ(response.plan().summary().planner(), "partitioner/size_based");
  }
  EXPECT_EQ(planned.load(), 2);  // "g" once, "other" once
  absl::StatusOr<std::string> metrics = HttpGet(server->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics, HasSubstr("partplan_plan_cache_lookups_total{result=\"hit\"} 2"));
  EXPECT_THAT(*metrics, HasSubstr("partplan_plan_cache_lookups_total{result=\"miss\"} 2"));
}

TEST(PlanCacheServerTest, DisabledWithZeroBytes) {
  std::atomic<int> planned{0};
  auto backend = std::make_unique<FakePlannerBackend>([&planned](const CancellationToken&) {
    ++planned;
    return absl::OkStatus();
  });
  ServerOptions options = TestServerOptions();
  options.plan_cache_bytes = 0;
  std::unique_ptr<PlannerServer> server = StartTestServer(std::move(backend), options);
  auto stub = NewPlannerStub(*server);
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext context;
    v1::PartitionGraphResponse response;
    ASSERT_TRUE(stub->PartitionGraph(&context, Request("g"), &response).ok());
  }
  EXPECT_EQ(planned.load(), 2);
}

}  // namespace
}  // namespace partplan

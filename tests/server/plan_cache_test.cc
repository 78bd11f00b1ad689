// The plan cache on its own (keys, LRU eviction, byte bound) and in the
// server (a repeated request is answered without planning, and counted).
#include "server/plan_cache.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

using ::testing::HasSubstr;

// A buffer of `bytes`, in one slice per chunk of `chunk` bytes.
grpc::ByteBuffer Buffer(const std::string& bytes, size_t chunk = 1 << 20) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    slices.emplace_back(bytes.substr(at, chunk));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Bytes(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  EXPECT_TRUE(buffer.TrySingleSlice(&slice).ok() || buffer.DumpToSingleSlice(&slice).ok());
  return std::string(reinterpret_cast<const char*>(slice.begin()), slice.size());
}

PlanCache::Entry Entry(const std::string& response, int nodes = 3, int devices = 2) {
  return {Buffer(response), nodes, devices};
}

// A request with a graph of 3 (empty) nodes, which the fake backend never
// reads.
v1::PartitionGraphRequest Request(const std::string& graph_name) {
  v1::PartitionGraphRequest request;
  request.mutable_graph()->set_name(graph_name);
  for (int i = 0; i < 3; ++i) request.mutable_graph()->add_nodes();
  return request;
}

TEST(PlanCacheTest, KeysDifferByRpcAndRequestBytes) {
  const std::string a = Request("a").SerializeAsString();
  const std::optional<std::string> key = PlanCache::Key("PartitionGraph", Buffer(a));
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->size(), PlanCache::kKeyBytes);
  EXPECT_EQ(key, PlanCache::Key("PartitionGraph", Buffer(a)));
  EXPECT_NE(key, PlanCache::Key("PartitionGraph", Buffer(Request("b").SerializeAsString())));
  EXPECT_NE(key, PlanCache::Key("Plan", Buffer(a)));
  // The name and the bytes are separated: moving a byte across is another key.
  EXPECT_NE(PlanCache::Key("Pla", Buffer("n" + a)), PlanCache::Key("Plan", Buffer(a)));
}

TEST(PlanCacheTest, KeyDependsOnTheBytesNotOnHowTheyAreSliced) {
  std::string large(100000, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 7919 % 251);
  const std::optional<std::string> whole = PlanCache::Key("Plan", Buffer(large));
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole, PlanCache::Key("Plan", Buffer(large, 4096)));
  EXPECT_EQ(whole, PlanCache::Key("Plan", Buffer(large, 999)));
  std::string changed = large;
  changed[large.size() - 1] ^= 1;
  EXPECT_NE(whole, PlanCache::Key("Plan", Buffer(changed, 4096)));
}

TEST(PlanCacheTest, NoKeyAndNoEntryWithoutABuffer) {
  // A call without a message has no buffer; it must not share the key of
  // an empty request.
  EXPECT_FALSE(PlanCache::Key("Plan", grpc::ByteBuffer()).has_value());
  EXPECT_TRUE(PlanCache::Key("Plan", Buffer("")).has_value());
  PlanCache cache(1 << 20);
  cache.Insert("k", {grpc::ByteBuffer(), 1, 1});
  PlanCache::Entry found;
  EXPECT_FALSE(cache.Lookup("k", &found));
  EXPECT_EQ(cache.bytes(), 0);
}

TEST(PlanCacheTest, ReturnsWhatWasInserted) {
  PlanCache cache(1 << 20);
  PlanCache::Entry found;
  EXPECT_FALSE(cache.Lookup("k", &found));
  cache.Insert("k", Entry("response", 7, 4));
  ASSERT_TRUE(cache.Lookup("k", &found));
  EXPECT_EQ(Bytes(found.response), "response");
  EXPECT_EQ(found.nodes, 7);
  EXPECT_EQ(found.devices, 4);
  EXPECT_EQ(cache.bytes(), 1 + 8);
}

TEST(PlanCacheTest, EvictsTheLeastRecentlyUsedBeyondItsBytes) {
  // Each entry: a 1-byte key and a 2-byte response.
  PlanCache cache(6);
  cache.Insert("a", Entry("r1"));
  cache.Insert("b", Entry("r2"));
  PlanCache::Entry found;
  ASSERT_TRUE(cache.Lookup("a", &found));  // a is now the most recent
  cache.Insert("c", Entry("r3"));          // 9 bytes > 6: b goes
  EXPECT_TRUE(cache.Lookup("a", &found));
  EXPECT_FALSE(cache.Lookup("b", &found));
  EXPECT_TRUE(cache.Lookup("c", &found));
  EXPECT_EQ(Bytes(found.response), "r3");
  EXPECT_EQ(cache.bytes(), 6);
}

TEST(PlanCacheTest, NeverHoldsAResponseLargerThanItself) {
  PlanCache cache(2);
  cache.Insert("a", Entry("r1"));
  PlanCache::Entry found;
  EXPECT_FALSE(cache.Lookup("a", &found));
  EXPECT_EQ(cache.bytes(), 0);
}

// Calls on many planner threads look up, insert and evict at once, and the
// bytes of a response stay shared by the cache and by the calls it answered
// after it has evicted them: every hit must read its own key's bytes whole.
TEST(PlanCacheTest, ConcurrentHitsInsertsAndEvictionsKeepEachResponseWhole) {
  constexpr int kKeys = 6;
  constexpr int kThreads = 8;
  constexpr int kCallsPerThread = 3000;
  std::vector<std::string> responses;
  for (int k = 0; k < kKeys; ++k)
    responses.push_back(std::string(3000 + k, static_cast<char>('a' + k)));
  // Room for about three of the six responses: most inserts evict.
  PlanCache cache(3 * 3010);
  std::atomic<int> hits{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCallsPerThread; ++i) {
        // Each key is asked for twice in a row, so a thread that runs alone
        // (a loaded machine may run them one after another) hits on the second
        // ask; cycling through six keys in a three-entry LRU would never hit.
        const int k = ((i / 2) * 7 + t) % kKeys;
        const std::string key(1, static_cast<char>('0' + k));
        PlanCache::Entry found;
        if (cache.Lookup(key, &found)) {
          ++hits;
          if (Bytes(found.response) != responses[k] || found.nodes != k) ++wrong;
        } else {
          cache.Insert(key, {Buffer(responses[k], 1000), k, 1});
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_GT(hits.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(cache.bytes(), 3 * 3010);
}

TEST(PlanCacheTest, TheFirstAnswerOfAKeyStays) {
  PlanCache cache(1 << 20);
  cache.Insert("k", Entry("first"));
  cache.Insert("k", Entry("second"));
  PlanCache::Entry found;
  ASSERT_TRUE(cache.Lookup("k", &found));
  EXPECT_EQ(Bytes(found.response), "first");
  EXPECT_EQ(cache.bytes(), 1 + 5);
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
  // A hit is not parsed, but counts the size of the graph it answers.
  EXPECT_THAT(*metrics, HasSubstr("partplan_graph_nodes_count 4"));
  EXPECT_THAT(*metrics, HasSubstr("partplan_graph_nodes_sum 12"));
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

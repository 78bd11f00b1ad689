// Determinism: the same request gets a byte-identical response across runs,
// planner pool sizes and processes, for every planner.
//
// Requests: every golden fixture and example request, as the fuzzers' seed
// corpus makes them for each RPC (tests/fuzz/corpus.h: all Partitioner
// modes and saturate_host, split_module, auto_shard, create_graph,
// data-parallel), plus synthetic graphs large enough for hash tables to
// grow (a 20k-node residual stack, a recommendation model).
//
// Each is answered by
//   A: an in-process server with one planner thread, twice;
//   B: an in-process server with four planner threads, eight calls at a time;
//   C: the partplan_server binary in another process -- other addresses
//      (ASLR), so abseil's per-process hash seed and pointer values differ:
//      any ordering taken from a hash table or a pointer shows up here.
// The plan cache is off, so every answer is planned. Answers are compared
// as bytes after clearing summary.planner_seconds (wall time, the one field
// allowed to differ); failures must match in code, message and field path.
#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/api/entry_points.h"
#include "server/server.h"
#include "tests/bench/synthetic_graphs.h"
#include "tests/fuzz/corpus.h"
#include "tests/fuzz/fuzz_harness.h"
#include "tests/reliability/reliability_util.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

struct Case {
  std::string label;
  PlannerRpc rpc;
  std::string request;
};

std::unique_ptr<google::protobuf::Message> NewResponse(PlannerRpc rpc) {
  return std::unique_ptr<google::protobuf::Message>(
      PlannerRpcOf(rpc).response_prototype().New());
}

// What is compared: the response without wall times, or the failure.
std::string Normalized(PlannerRpc rpc, const RawReply& reply) {
  if (!reply.status.ok()) {
    return absl::StrCat("status ", reply.status.error_code(), ": ", reply.status.error_message(),
                        " [", absl::StrJoin(FieldViolations(reply.status), ","), "]");
  }
  std::unique_ptr<google::protobuf::Message> response = NewResponse(rpc);
  if (!response->ParseFromString(reply.response)) return "unparsable response";
  fuzz::ClearWallTimes(response.get());
  return fuzz::Serialize(*response);
}

// The planner a response names (summary.planner), if any.
std::string PlannerOf(PlannerRpc rpc, const std::string& response_bytes) {
  if (rpc == PlannerRpc::kPartitionGraph) {
    v1::PartitionGraphResponse response;
    response.ParseFromString(response_bytes);
    return response.plan().summary().planner();
  }
  if (rpc == PlannerRpc::kPlan) {
    v1::PlanResponse response;
    response.ParseFromString(response_bytes);
    return response.plan().summary().planner();
  }
  if (rpc == PlannerRpc::kShardGraph) {
    v1::ShardGraphResponse response;
    response.ParseFromString(response_bytes);
    return response.summary().planner();
  }
  return std::string(RpcName(rpc));
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const PlannerRpcMethod& row : kPlannerRpcs) {
    const PlannerRpc rpc = row.rpc;
    const std::vector<std::string> seeds = fuzz::SeedRequests(rpc);
    for (size_t i = 0; i < seeds.size(); ++i) {
      cases.push_back({absl::StrCat(RpcName(rpc), "#", i), rpc, seeds[i]});
    }
  }
  // Larger graphs, for every partitioner mode that takes them.
  for (const auto mode : {v1::PartitionerConfig::SIZE_BASED, v1::PartitionerConfig::KL_BASED}) {
    v1::PartitionGraphRequest request = ResidualStackRequest(20000, 8);
    request.mutable_config()->set_mode(mode);
    request.mutable_config()->set_saturate_host(mode == v1::PartitionerConfig::KL_BASED);
    cases.push_back({absl::StrCat("residual_stack_", v1::PartitionerConfig::Mode_Name(mode)),
                     PlannerRpc::kPartitionGraph, request.SerializeAsString()});
  }
  {
    v1::PartitionGraphRequest request;
    *request.mutable_graph() = RecommendationModel(20000, 16, 1 << 20);
    *request.mutable_devices() = EqualDevices(request.graph(), 16, 4);
    request.mutable_config()->set_mode(v1::PartitionerConfig::SPARSE_NN);
    request.mutable_config()->set_saturate_host(true);
    cases.push_back({"recommendation_sparse_nn", PlannerRpc::kPartitionGraph,
                     request.SerializeAsString()});
    // Its SIZE_BASED assignment, split and planned AOT.
    request.mutable_config()->set_mode(v1::PartitionerConfig::SIZE_BASED);
    request.mutable_config()->set_saturate_host(false);
    CancellationToken token;
    v1::PartitionGraphResponse plan;
    if (PartitionGraph(request, InputLimits(), token, &plan).ok()) {
      v1::SplitGraphRequest split;
      *split.mutable_graph() = request.graph();
      *split.mutable_assignments() = plan.plan().assignments();
      cases.push_back({"recommendation_split", PlannerRpc::kSplitGraph, split.SerializeAsString()});
      v1::PartitionGraphRequest aot = request;
      aot.mutable_config()->set_mode(v1::PartitionerConfig::AOT_BASED);
      *aot.mutable_config()->mutable_node_partitions() = plan.plan().assignments();
      for (const v1::Partition& partition : plan.plan().partitions()) {
        v1::PartitionDevices* devices = aot.mutable_config()->add_partition_devices();
        devices->set_partition(partition.id());
        *devices->mutable_logical_device_ids() = partition.logical_device_ids();
      }
      cases.push_back({"recommendation_aot", PlannerRpc::kPartitionGraph, aot.SerializeAsString()});
    }
  }
  {
    v1::ShardGraphRequest request;
    *request.mutable_graph() = ResidualStack(20000);
    *request.mutable_devices() = EqualDevices(request.graph(), 8, 4);
    request.mutable_config()->set_mode(v1::ShardConfig::BALANCED);
    request.mutable_config()->set_shard_count(8);
    cases.push_back({"residual_stack_balanced", PlannerRpc::kShardGraph,
                     request.SerializeAsString()});
  }
  return cases;
}

ServerOptions Options(int planner_threads) {
  ServerOptions options = TestServerOptions();
  options.planner_threads = planner_threads;
  options.queue_depth = 64;
  options.plan_cache_bytes = 0;
  return options;
}

// Answers of `cases`, one call at a time.
std::vector<std::string> AnswerInTurn(int port, const std::vector<Case>& cases,
                                      std::map<std::string, int>* ok_by_planner = nullptr) {
  const std::shared_ptr<grpc::Channel> channel = LoopbackChannel(port);
  std::vector<std::string> answers;
  for (const Case& c : cases) {
    const RawReply reply = CallRaw(channel, c.rpc, c.request, absl::Seconds(120));
    answers.push_back(Normalized(c.rpc, reply));
    if (ok_by_planner != nullptr && reply.status.ok()) {
      ++(*ok_by_planner)[PlannerOf(c.rpc, reply.response)];
    }
  }
  return answers;
}

// Answers of `cases`, eight calls in flight at a time.
std::vector<std::string> AnswerConcurrently(int port, const std::vector<Case>& cases) {
  const std::shared_ptr<grpc::Channel> channel = LoopbackChannel(port);
  std::vector<std::string> answers(cases.size());
  for (size_t begin = 0; begin < cases.size(); begin += 8) {
    std::vector<std::unique_ptr<PendingRawCall>> calls;
    for (size_t i = begin; i < std::min(cases.size(), begin + 8); ++i) {
      calls.push_back(std::make_unique<PendingRawCall>(channel, cases[i].rpc, cases[i].request,
                                                       absl::Seconds(120)));
    }
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_TRUE(calls[i]->Wait(absl::Seconds(180)));
      answers[begin + i] = Normalized(cases[begin + i].rpc, calls[i]->reply());
    }
  }
  return answers;
}

void ExpectSameAnswers(const std::vector<Case>& cases, const std::vector<std::string>& expected,
                       const std::vector<std::string>& actual, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size());
  int differing = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (expected[i] != actual[i] && ++differing <= 5) {
      ADD_FAILURE() << cases[i].label << " answered differently " << what << " ("
                    << expected[i].size() << " vs " << actual[i].size() << " bytes)";
    }
  }
  EXPECT_EQ(differing, 0) << what;
}

TEST(DeterminismTest, SameRequestSameBytesAcrossRunsPoolSizesAndProcesses) {
  const std::vector<Case> cases = Cases();
  ASSERT_GT(cases.size(), 500u);

  std::map<std::string, int> ok_by_planner;
  std::vector<std::string> a1, a2, b, c;
  {
    std::unique_ptr<PlannerServer> server = StartTestServer(nullptr, Options(1));
    ASSERT_NE(server, nullptr);
    a1 = AnswerInTurn(server->port(), cases, &ok_by_planner);
    a2 = AnswerInTurn(server->port(), cases);
  }
  {
    std::unique_ptr<PlannerServer> server = StartTestServer(nullptr, Options(4));
    ASSERT_NE(server, nullptr);
    b = AnswerConcurrently(server->port(), cases);
  }
  {
    absl::StatusOr<std::unique_ptr<ServerProcess>> process =
        ServerProcess::Start({"--planner_threads=2", "--plan_cache_bytes=0"});
    ASSERT_TRUE(process.ok()) << process.status();
    c = AnswerInTurn((*process)->port(), cases);
  }
  ExpectSameAnswers(cases, a1, a2, "on a second run");
  ExpectSameAnswers(cases, a1, b, "with four planner threads and calls in parallel");
  ExpectSameAnswers(cases, a1, c, "by another server process");

  // Every planner answered some of them (so was compared).
  std::vector<std::string> seen;
  for (const auto& [planner, count] : ok_by_planner) seen.push_back(absl::StrCat(planner, " ", count));
  std::printf("%zu requests; OK answers by planner: %s\n", cases.size(),
              absl::StrJoin(seen, ", ").c_str());
  for (const std::string planner :
       {"partitioner/size_based", "partitioner/sparse_nn", "partitioner/cost_aware",
        "partitioner/kl_based", "partitioner/aot_based", "shard/fairscale", "SplitGraph",
        "BuildPipelineGraph", "PlanDataParallel", "Validate"}) {
    EXPECT_GT(ok_by_planner[planner], 0) << planner << " was never compared";
  }
  bool balanced = false;
  for (const auto& [planner, count] : ok_by_planner) {
    balanced |= planner.rfind("shard/balanced", 0) == 0;
  }
  EXPECT_TRUE(balanced) << "shard/balanced was never compared";
}

}  // namespace
}  // namespace partplan

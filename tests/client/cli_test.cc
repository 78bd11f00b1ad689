// End-to-end tests of RunCli against an in-process fake PartitionPlanner:
// requests built from flags and files reach the server intact, with the
// deadline and request id; responses and errors print as documented; exit
// codes follow the gRPC status, or 2 for bad local input.
#include "client/cli/cli.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/error_details.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.grpc.pb.h"

namespace partplan {
namespace cli {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kGraphFile[] = "client/examples/graph_mlp.json";

// Answers from the request alone and remembers what it was sent.
class FakePlanner final : public v1::PartitionPlanner::Service {
 public:
  struct Call {
    std::string method;
    std::string request_id;
    absl::Duration time_left;
    v1::PartitionGraphRequest partition_graph;
    v1::PlanRequest plan;
    v1::ValidateRequest validate;
  };

  grpc::Status PartitionGraph(grpc::ServerContext* context,
                              const v1::PartitionGraphRequest* request,
                              v1::PartitionGraphResponse* response) override {
    Call& call = Record(context, "PartitionGraph");
    call.partition_graph = *request;
    // One partition per device, holding all its memory.
    v1::PartitionPlan* plan = response->mutable_plan();
    for (const v1::Device& device : request->devices().devices()) {
      v1::Partition* partition = plan->add_partitions();
      partition->set_id(device.logical_id());
      partition->add_nodes(request->graph().nodes(0).name());
      partition->set_memory_bytes(device.available_memory_bytes());
      partition->add_logical_device_ids(device.logical_id());
    }
    plan->mutable_summary()->set_planner("fake");
    plan->mutable_summary()->set_partition_count(plan->partitions_size());
    return grpc::Status::OK;
  }

  grpc::Status Plan(grpc::ServerContext* context,
                    const v1::PlanRequest* request,
                    v1::PlanResponse* response) override {
    Call& call = Record(context, "Plan");
    call.plan = *request;
    response->mutable_plan()->mutable_summary()->set_planner(
        v1::PartitionerConfig::Mode_Name(request->partitioner().mode()));
    return grpc::Status::OK;
  }

  grpc::Status Validate(grpc::ServerContext* context,
                        const v1::ValidateRequest* request,
                        v1::ValidateResponse* response) override {
    Call& call = Record(context, "Validate");
    call.validate = *request;
    if (request->graph().nodes_size() == 0) {
      google::rpc::BadRequest bad_request;
      google::rpc::BadRequest::FieldViolation* violation =
          bad_request.add_field_violations();
      violation->set_field("graph.nodes");
      violation->set_description("a graph needs an output node");
      google::rpc::Status rich_status;
      rich_status.set_code(grpc::StatusCode::INVALID_ARGUMENT);
      rich_status.set_message("graph.nodes: a graph needs an output node");
      rich_status.add_details()->PackFrom(bad_request);
      grpc::Status status;
      grpc::SetErrorDetails(rich_status, &status);
      return status;
    }
    response->set_node_count(request->graph().nodes_size());
    response->set_device_count(request->devices().devices_size());
    return grpc::Status::OK;
  }

  // Runs until the client gives up.
  grpc::Status SplitGraph(grpc::ServerContext* context,
                          const v1::SplitGraphRequest* request,
                          v1::SplitGraphResponse* response) override {
    Record(context, "SplitGraph");
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (!context->IsCancelled() && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    return grpc::Status(grpc::StatusCode::INTERNAL, "client did not give up");
  }

  std::vector<Call> calls() const {
    absl::MutexLock lock(&mutex_);
    return calls_;
  }

 private:
  Call& Record(grpc::ServerContext* context, const std::string& method) {
    absl::MutexLock lock(&mutex_);
    Call& call = calls_.emplace_back();
    call.method = method;
    const auto request_id = context->client_metadata().find("x-request-id");
    if (request_id != context->client_metadata().end()) {
      call.request_id.assign(request_id->second.data(),
                             request_id->second.size());
    }
    call.time_left = absl::FromChrono(context->deadline()) - absl::Now();
    return call;
  }

  mutable absl::Mutex mutex_;
  std::vector<Call> calls_;
};

class RunCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&planner_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    environment_.in = &in_;
    environment_.out = &out_;
    environment_.err = &err_;
    environment_.connect = [this](const ConnectionOptions& options) {
      grpc::ChannelArguments arguments;
      arguments.SetMaxReceiveMessageSize(options.max_message_bytes);
      return server_->InProcessChannel(arguments);
    };
  }

  void TearDown() override { server_->Shutdown(); }

  int Run(const std::vector<std::string>& args) {
    return RunCli(args, options_, environment_);
  }

  FakePlanner planner_;
  std::unique_ptr<grpc::Server> server_;
  std::istringstream in_;
  std::ostringstream out_;
  std::ostringstream err_;
  CliEnvironment environment_;
  CliOptions options_;
};

TEST_F(RunCliTest, CallSendsTheRequestFileWithDeadlineAndRequestId) {
  options_.request_path = "client/examples/validate.json";
  options_.connection.request_id = "req-42";
  options_.connection.deadline = absl::Seconds(20);

  ASSERT_EQ(Run({"call", "Validate"}), 0) << err_.str();
  EXPECT_THAT(err_.str(), IsEmpty());
  EXPECT_THAT(out_.str(), HasSubstr("\"nodeCount\": 12"));
  EXPECT_THAT(out_.str(), HasSubstr("\"deviceCount\": 3"));

  const std::vector<FakePlanner::Call> calls = planner_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].method, "Validate");
  EXPECT_EQ(calls[0].request_id, "req-42");
  EXPECT_GT(calls[0].time_left, absl::Seconds(15));
  // gRPC rounds the timeout it sends up, so a little over 20 s may arrive.
  EXPECT_LT(calls[0].time_left, absl::Seconds(21));
  EXPECT_EQ(calls[0].validate.graph().name(), "mlp");
}

TEST_F(RunCliTest, CallAcceptsGrpcurlMethodNamesAndStdin) {
  options_.request_path = "-";
  in_.str(R"({"graph": {"nodes": [{"name": "x", "op": "PLACEHOLDER"}]}})");
  ASSERT_EQ(Run({"call", "partplan.v1.PartitionPlanner/Validate"}), 0)
      << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"nodeCount\": 1"));
}

TEST_F(RunCliTest, PartitionBuildsTheRequestFromFlagsAndPrintsATable) {
  options_.graph_path = kGraphFile;
  options_.planner.device_memory = "8MiB,8MiB,4MiB";
  options_.planner.mode = "kl_based";
  options_.planner.saturate_host = true;
  options_.output = OutputFormat::kTable;

  ASSERT_EQ(Run({"partition"}), 0) << err_.str();
  const std::vector<FakePlanner::Call> calls = planner_.calls();
  ASSERT_EQ(calls.size(), 1u);
  const v1::PartitionGraphRequest& request = calls[0].partition_graph;
  EXPECT_EQ(request.graph().nodes_size(), 12);
  ASSERT_EQ(request.devices().devices_size(), 3);
  EXPECT_EQ(request.devices().devices(2).name(), "gpu2");
  EXPECT_EQ(request.devices().devices(2).logical_id(), 2);
  EXPECT_EQ(request.devices().devices(2).available_memory_bytes(), 4 << 20);
  EXPECT_EQ(request.config().mode(), v1::PartitionerConfig::KL_BASED);
  EXPECT_TRUE(request.config().saturate_host());

  EXPECT_THAT(out_.str(), HasSubstr("Partitions\n"));
  EXPECT_THAT(out_.str(), HasSubstr("  2   1      4.0 MiB  2        -\n"));
  EXPECT_THAT(out_.str(), HasSubstr("  planner                  fake\n"));
}

TEST_F(RunCliTest, PlanRunsThePartitionerFromFlags) {
  options_.graph_path = kGraphFile;
  options_.planner.device_count = 2;
  options_.planner.device_memory = "16GiB";
  options_.planner.mode = "COST_AWARE";

  ASSERT_EQ(Run({"plan"}), 0) << err_.str();
  const std::vector<FakePlanner::Call> calls = planner_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].method, "Plan");
  EXPECT_EQ(calls[0].plan.devices().devices_size(), 2);
  EXPECT_EQ(calls[0].plan.partitioner().mode(),
            v1::PartitionerConfig::COST_AWARE);
  // Plan responses without the table format print as JSON.
  EXPECT_THAT(out_.str(), HasSubstr("\"planner\": \"COST_AWARE\""));
}

TEST_F(RunCliTest, ServerErrorsExitWithTheirCodeAndListFieldViolations) {
  options_.graph_path = "-";
  in_.str("{}");
  EXPECT_EQ(Run({"validate"}), 3);  // INVALID_ARGUMENT
  EXPECT_EQ(err_.str(),
            "error: INVALID_ARGUMENT: graph.nodes: a graph needs an output "
            "node\n"
            "  field graph.nodes: a graph needs an output node\n");
  EXPECT_THAT(out_.str(), IsEmpty());
}

TEST_F(RunCliTest, DeadlineStopsTheCall) {
  options_.request_path = "client/examples/split_graph.json";
  options_.connection.deadline = absl::Milliseconds(100);
  EXPECT_EQ(Run({"call", "SplitGraph"}), 4);  // DEADLINE_EXCEEDED
  EXPECT_THAT(err_.str(), HasSubstr("error: DEADLINE_EXCEEDED"));
}

TEST_F(RunCliTest, UnreachableServerIsUnavailable) {
  environment_.connect = ConnectToPlanner;
  options_.connection.target = "unix:/nonexistent/partplan.sock";
  options_.request_path = "client/examples/validate.json";
  EXPECT_EQ(Run({"call", "Validate"}), 14);  // UNAVAILABLE
  EXPECT_THAT(err_.str(), HasSubstr("error: UNAVAILABLE"));
}

TEST_F(RunCliTest, BadLocalInputExitsTwoWithoutCalling) {
  struct BadInput {
    std::vector<std::string> args;
    std::string request_path;
    std::string graph_path;
    std::string device_memory;
    std::string expected_error;
  };
  const BadInput cases[] = {
      {{}, "", "", "", "error: no subcommand given"},
      {{"partitoin"}, "", "", "", "error: unknown subcommand 'partitoin'"},
      {{"call"}, "", "", "", "call: expected one method name"},
      {{"call", "Nope"}, "x.json", "", "", "unknown method 'Nope'"},
      {{"call", "Validate"}, "", "", "", "--request is required"},
      {{"call", "Validate"},
       "missing.json",
       "",
       "",
       "--request: cannot read 'missing.json'"},
      {{"partition"}, "", "", "8GiB", "--graph is required"},
      {{"partition", "extra"},
       "",
       kGraphFile,
       "8GiB",
       "unexpected argument 'extra'"},
      {{"partition"}, "", kGraphFile, "", "--device_memory is required"},
      {{"plan"}, "", kGraphFile, "12XB", "invalid byte size '12XB'"},
      {{"validate"},
       "",
       "client/examples/validate.json",
       "",
       "not a valid JSON partplan.v1.Graph"},
  };
  for (const BadInput& c : cases) {
    options_.request_path = c.request_path;
    options_.graph_path = c.graph_path;
    options_.planner.device_memory = c.device_memory;
    err_.str("");
    EXPECT_EQ(Run(c.args), kBadInputExitCode) << c.expected_error;
    EXPECT_THAT(err_.str(), HasSubstr(c.expected_error));
  }
  EXPECT_THAT(planner_.calls(), IsEmpty());
  EXPECT_THAT(out_.str(), IsEmpty());
}

TEST_F(RunCliTest, CallPlannerRejectsMessagesOfOtherTypes) {
  const google::protobuf::MethodDescriptor* validate =
      *FindPlannerMethod("Validate");
  v1::PlanRequest wrong_request;
  v1::ValidateResponse response;
  const grpc::Status status =
      CallPlanner(environment_.connect(options_.connection), *validate,
                  wrong_request, options_.connection, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("takes partplan.v1.ValidateRequest"));
  EXPECT_THAT(planner_.calls(), IsEmpty());
}

// `report` reads a saved response (and the request), calls nothing, and
// prints the report page, or the DOT graph with --output=dot.
TEST_F(RunCliTest, ReportPrintsASavedResponseWithoutCalling) {
  in_.str(R"({"plan": {"partitions": [{"outputs": ["relu1"], "children": [1]},
                                      {"id": 1, "inputs": ["relu1"], "parents": [0]}]}})");
  options_.response_path = "-";
  options_.request_path = "client/examples/partition_graph.json";
  ASSERT_EQ(Run({"report", "PartitionGraph"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(out_.str(), HasSubstr("{\"rpc\":\"PartitionGraph\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"request\":{\"graph\""));

  out_.str("");
  in_.clear();
  in_.str(R"({"plan": {"partitions": [{"outputs": ["relu1"], "children": [1]},
                                      {"id": 1, "inputs": ["relu1"], "parents": [0]}]}})");
  options_.output = OutputFormat::kDot;
  ASSERT_EQ(Run({"report", "PartitionGraph"}), 0) << err_.str();
  // relu1's output, from the request's graph.
  EXPECT_THAT(out_.str(), HasSubstr("p0 -> p1 [label=\"128.0 KiB\"];"));
  EXPECT_TRUE(planner_.calls().empty());

  options_.response_path.clear();
  EXPECT_EQ(Run({"report", "PartitionGraph"}), kBadInputExitCode);
  EXPECT_THAT(err_.str(), HasSubstr("--response is required"));
  EXPECT_EQ(Run({"report"}), kBadInputExitCode);
}

TEST(SubcommandHelpTest, ListsEverySubcommand) {
  const std::string help = SubcommandHelp();
  for (const char* subcommand : {"call", "partition", "plan", "validate", "load", "report"}) {
    EXPECT_THAT(help, HasSubstr(absl::StrCat("partplan ", subcommand, " ")));
  }
}

}  // namespace
}  // namespace cli
}  // namespace partplan

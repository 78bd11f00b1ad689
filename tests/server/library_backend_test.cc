// The server with its production backend, the planner library: a tiny graph
// validates and partitions; an invalid one gets INVALID_ARGUMENT naming the
// field; a plan of megabytes (PartitionGraph's, Plan's or ShardGraph's),
// sent as many slices, arrives as the library made it.
#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/error_details.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "planner/wire/plan_with_names.h"
#include "server/server.h"
#include "tests/planner/plan_summary.h"
#include "tests/planner/test_graphs.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

// x -> fc -> output, as in graph.proto's example.
constexpr char kTinyGraph[] = R"pb(
  nodes {
    name: "x"
    op: PLACEHOLDER
    target: "x"
    outputs {
      shape: [ 4, 16 ]
      dtype: "torch.float32"
    }
  }
  nodes {
    name: "fc"
    op: CALL_MODULE
    target: "fc"
    module_type: "torch.nn.Linear"
    args { node: "x" }
    parameter_count: 272
    size_bytes { total_bytes: 1344 output_bytes: 256 }
  }
  nodes {
    name: "output"
    op: OUTPUT
    target: "output"
    args { node: "fc" }
  }
)pb";

constexpr char kTwoDevices[] = R"pb(
  devices { name: "gpu0" available_memory_bytes: 1000000 logical_id: 0 }
  devices { name: "gpu1" available_memory_bytes: 1000000 logical_id: 1 }
)pb";

template <typename Message>
Message Parse(const std::string& text) {
  Message message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

class LibraryBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartTestServer(/*backend=*/nullptr);
    ASSERT_NE(server_, nullptr);
    stub_ = NewPlannerStub(*server_);
  }

  std::unique_ptr<PlannerServer> server_;
  std::unique_ptr<v1::PartitionPlanner::Stub> stub_;
};

TEST_F(LibraryBackendTest, ValidateCountsATinyGraph) {
  v1::ValidateRequest request;
  *request.mutable_graph() = Parse<v1::Graph>(kTinyGraph);
  *request.mutable_devices() = Parse<v1::DeviceInventory>(kTwoDevices);

  grpc::ClientContext context;
  v1::ValidateResponse response;
  const grpc::Status status = stub_->Validate(&context, request, &response);

  ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  EXPECT_EQ(response.node_count(), 3);
  EXPECT_EQ(response.edge_count(), 2);
  EXPECT_EQ(response.device_count(), 2);
}

TEST_F(LibraryBackendTest, ValidateNamesTheBadFieldInBadRequest) {
  v1::ValidateRequest request;
  *request.mutable_graph() = Parse<v1::Graph>(kTinyGraph);
  request.mutable_graph()->mutable_nodes(1)->mutable_args(0)->set_node("nowhere");

  grpc::ClientContext context;
  v1::ValidateResponse response;
  const grpc::Status status = stub_->Validate(&context, request, &response);

  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  google::rpc::Status details;
  ASSERT_TRUE(grpc::ExtractErrorDetails(status, &details).ok());
  ASSERT_EQ(details.details_size(), 1);
  google::rpc::BadRequest bad_request;
  ASSERT_TRUE(details.details(0).UnpackTo(&bad_request));
  ASSERT_EQ(bad_request.field_violations_size(), 1);
  EXPECT_EQ(bad_request.field_violations(0).field(), "graph.nodes[1].args[0]");
}

TEST_F(LibraryBackendTest, PartitionGraphPlansATinyGraph) {
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = Parse<v1::Graph>(kTinyGraph);
  *request.mutable_devices() = Parse<v1::DeviceInventory>(kTwoDevices);

  grpc::ClientContext context;
  v1::PartitionGraphResponse response;
  const grpc::Status status = stub_->PartitionGraph(&context, request, &response);

  ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  ASSERT_EQ(response.plan().assignments_size(), 1);  // The one call_* node.
  EXPECT_EQ(response.plan().assignments(0).node(), "fc");
  EXPECT_GE(response.plan().partitions_size(), 1);
}

// A chain of 20,000 nodes with names of 80 characters, on 4 devices of
// 0.8 MB: its plan by name is 3.4 MB of names, each listed twice, over
// three pieces of kResponsePieceBytes and under gRPC's default 4 MiB limit
// on what the client receives.
v1::PartitionGraphRequest LargePlanRequest() {
  constexpr int kNodes = 20000;
  TestGraph graph;
  graph.Placeholder("x", 10);
  std::string previous = "x";
  for (int i = 0; i < kNodes; ++i) {
    std::string name = absl::StrCat("layer", i, "_");
    name.resize(80, 'a');
    graph.Op(name, {previous}, 100, 10);
    previous = name;
  }
  graph.Output({previous});
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = graph.Build();
  for (int d = 0; d < 4; ++d) {
    v1::Device* device = request.mutable_devices()->add_devices();
    device->set_name(absl::StrCat("gpu", d));
    device->set_logical_id(d);
    device->set_available_memory_bytes(kNodes * 40);
  }
  return request;
}

// Expects `served` to be `planned` but for the planner's own timing.
template <typename Response>
void ExpectSamePlan(Response served, Response planned) {
  ASSERT_GT(planned.ByteSizeLong(), 3 * kResponsePieceBytes);
  SummaryOf(planned)->set_planner_seconds(SummaryOf(served)->planner_seconds());
  EXPECT_EQ(served.SerializeAsString(), planned.SerializeAsString());
}

// A plan by name of several megabytes is written in pieces of
// kResponsePieceBytes, each sent as a slice of its own: the client gets the
// plan the library makes, whole and in order.
TEST_F(LibraryBackendTest, PartitionGraphSendsALargePlanWhole) {
  const v1::PartitionGraphRequest request = LargePlanRequest();
  grpc::ClientContext context;
  v1::PartitionGraphResponse served;
  const grpc::Status status = stub_->PartitionGraph(&context, request, &served);
  ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();

  absl::StatusOr<v1::PartitionGraphResponse> planned =
      PartitionGraph(request, InputLimits(), CancellationToken());
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_EQ(served.plan().partitions_size(), 3);  // 2.2 MB of nodes on devices of 0.8 MB
  ExpectSamePlan(served, *planned);
}

// Plan is written by name the same way, whichever planner made the plan.
TEST_F(LibraryBackendTest, PlanSendsALargePlanWhole) {
  const v1::PartitionGraphRequest partition_request = LargePlanRequest();
  v1::PlanRequest partitioner;
  *partitioner.mutable_graph() = partition_request.graph();
  *partitioner.mutable_devices() = partition_request.devices();
  partitioner.mutable_partitioner()->set_mode(v1::PartitionerConfig::SIZE_BASED);
  v1::PlanRequest shard = partitioner;
  shard.mutable_shard()->set_mode(v1::ShardConfig::BALANCED);
  shard.mutable_shard()->set_shard_count(4);
  for (const v1::PlanRequest& request : {partitioner, shard}) {
    SCOPED_TRACE(request.has_shard() ? "shard" : "partitioner");
    grpc::ClientContext context;
    v1::PlanResponse served;
    const grpc::Status status = stub_->Plan(&context, request, &served);
    ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();

    absl::StatusOr<v1::PlanResponse> planned = Plan(request, InputLimits(), CancellationToken());
    ASSERT_TRUE(planned.ok()) << planned.status();
    EXPECT_GE(served.plan().partitions_size(), 3);
    ExpectSamePlan(served, *planned);
  }
}

// ShardGraph too.
TEST_F(LibraryBackendTest, ShardGraphSendsALargePlanWhole) {
  const v1::PartitionGraphRequest partition_request = LargePlanRequest();
  v1::ShardGraphRequest request;
  *request.mutable_graph() = partition_request.graph();
  *request.mutable_devices() = partition_request.devices();
  request.mutable_config()->set_mode(v1::ShardConfig::BALANCED);
  request.mutable_config()->set_shard_count(4);
  grpc::ClientContext context;
  v1::ShardGraphResponse served;
  const grpc::Status status = stub_->ShardGraph(&context, request, &served);
  ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();

  absl::StatusOr<v1::ShardGraphResponse> planned =
      ShardGraph(request, InputLimits(), CancellationToken());
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_EQ(served.shards_size(), 4);
  ExpectSamePlan(served, *planned);
}

}  // namespace
}  // namespace partplan

// Tests of what the CLI prints: plan tables, JSON, and failed calls with
// google.rpc.BadRequest details.
#include "client/cli/output.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/error_details.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace cli {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// A plan of the MLP example on three 8 MiB devices.
v1::PartitionGraphResponse CannedResponse() {
  v1::PartitionGraphResponse response;
  const bool parsed = google::protobuf::TextFormat::ParseFromString(
      R"pb(
        plan {
          partitions {
            id: 0
            nodes: [ "x", "fc1", "relu1" ]
            memory_bytes: 4591616
            logical_device_ids: 0
            children: 1
            latency_seconds: 0.0015
          }
          partitions {
            id: 1
            nodes: [ "relu1", "fc2", "relu2", "add" ]
            memory_bytes: 4853760
            logical_device_ids: [ 1, 2 ]
            parents: 0
            latency_seconds: 0.00025
          }
          device_usage {
            logical_id: 0
            name: "gpu0"
            used_bytes: 4591616
            available_bytes: 8388608
            partitions: 0
          }
          device_usage {
            logical_id: 1
            name: "gpu1"
            used_bytes: 4853760
            available_bytes: 8388608
            partitions: 1
          }
          device_usage {
            logical_id: 2
            name: "gpu2"
            used_bytes: 0
            available_bytes: 8388608
          }
          summary {
            planner: "partitioner/size_based"
            node_count: 12
            op_node_count: 10
            partition_count: 2
            devices_used: 2
            graph_total_bytes: 15895848
            max_partition_bytes: 4853760
            cross_partition_bytes: 131072
            critical_path_latency_seconds: 0.002
            planner_seconds: 0.00035
          }
        }
      )pb",
      &response);
  EXPECT_TRUE(parsed);
  return response;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n');
}

TEST(FormatPlanTableTest, ShowsPartitionsDevicesAndSummary) {
  const std::string table = FormatPlanTable(CannedResponse().plan());
  const std::vector<std::string> lines = Lines(table);
  // Partitions: id, node count, memory, devices, latency.
  EXPECT_THAT(lines, Contains("Partitions"));
  EXPECT_THAT(lines, Contains("  ID  NODES  MEMORY   DEVICES  LATENCY"));
  EXPECT_THAT(lines, Contains("  0   3      4.4 MiB  0        1.5ms"));
  EXPECT_THAT(lines, Contains("  1   4      4.6 MiB  1,2      250us"));
  // Device usage, in inventory order, idle devices included.
  EXPECT_THAT(lines, Contains("Devices"));
  EXPECT_THAT(lines,
              Contains("  ID  NAME  USED     AVAILABLE  USE  PARTITIONS"));
  EXPECT_THAT(lines, Contains("  0   gpu0  4.4 MiB  8.0 MiB    55%  0"));
  EXPECT_THAT(lines, Contains("  2   gpu2  0 B      8.0 MiB    0%   -"));
  // Summary figures.
  EXPECT_THAT(lines, Contains("Summary"));
  EXPECT_THAT(lines,
              Contains("  planner                  partitioner/size_based"));
  EXPECT_THAT(lines, Contains("  partitions               2"));
  EXPECT_THAT(lines, Contains("  devices used             2 of 3"));
  EXPECT_THAT(lines, Contains("  critical path latency    2ms"));
  EXPECT_THAT(lines, Contains("  planner time             350us"));
}

TEST(FormatPlanTableTest, ShowsMissingLatenciesAsDashes) {
  v1::PartitionGraphResponse response = CannedResponse();
  response.mutable_plan()->mutable_partitions(0)->set_latency_seconds(0);
  response.mutable_plan()->mutable_summary()->set_critical_path_latency_seconds(
      0);
  const std::vector<std::string> lines =
      Lines(FormatPlanTable(response.plan()));
  EXPECT_THAT(lines, Contains("  0   3      4.4 MiB  0        -"));
  EXPECT_THAT(lines, Contains("  critical path latency    -"));
}

// The JSON written from a response's bytes is what the message would print.
TEST(WriteResponseJsonTest, WritesWhatFormatResponsePrints) {
  const v1::PartitionGraphResponse response = CannedResponse();
  const std::string serialized = response.SerializeAsString();
  grpc::Slice slice(serialized);
  const grpc::ByteBuffer bytes(&slice, 1);
  std::ostringstream out;
  ASSERT_TRUE(WriteResponseJson(bytes, *v1::PartitionGraphResponse::descriptor(), &out).ok());
  EXPECT_EQ(out.str(), FormatResponse(response, OutputFormat::kJson));

  grpc::Slice junk(std::string("\x0a\x10short"));
  std::ostringstream ignored;
  EXPECT_EQ(WriteResponseJson(grpc::ByteBuffer(&junk, 1),
                              *v1::PartitionGraphResponse::descriptor(), &ignored)
                .code(),
            absl::StatusCode::kInternal);
}

TEST(FormatPlanTableTest, SaysTheBoundAndListsTheNotesAfterTheSummary) {
  v1::PartitionGraphResponse response = CannedResponse();
  EXPECT_THAT(Lines(FormatPlanTable(response.plan())), Not(Contains("Notes")));
  response.mutable_plan()->mutable_summary()->add_notes("KL_BASED had nothing to minimise.");
  response.mutable_plan()->mutable_summary()->set_bound("Partition 1 takes longest.");
  const std::vector<std::string> lines = Lines(FormatPlanTable(response.plan()));
  EXPECT_THAT(lines, Contains("Notes"));
  EXPECT_THAT(lines, Contains("  - KL_BASED had nothing to minimise."));
  EXPECT_THAT(lines, Contains("Bound"));
  EXPECT_THAT(lines, Contains("  Partition 1 takes longest."));
}

TEST(FormatPlanTableTest, CountsNodesGivenByIndex) {
  v1::PartitionGraphResponse response = CannedResponse();
  v1::Partition& partition = *response.mutable_plan()->mutable_partitions(0);
  partition.clear_nodes();
  for (int i : {0, 1, 2, 5, 6}) partition.add_node_indices(i);
  const std::vector<std::string> lines = Lines(FormatPlanTable(response.plan()));
  EXPECT_THAT(lines, Contains("  0   5      4.4 MiB  0        1.5ms"));
}

TEST(FormatResponseTest, TableForResponsesWithAPlan) {
  const v1::PartitionGraphResponse partition = CannedResponse();
  EXPECT_EQ(FormatResponse(partition, OutputFormat::kTable),
            FormatPlanTable(partition.plan()));

  v1::PlanResponse plan;
  *plan.mutable_plan() = partition.plan();
  EXPECT_EQ(FormatResponse(plan, OutputFormat::kTable),
            FormatPlanTable(plan.plan()));
}

TEST(FormatResponseTest, JsonForOtherResponsesAndOnRequest) {
  v1::ValidateResponse validate;
  validate.set_node_count(12);
  validate.set_graph_total_bytes(15895848);
  const std::string json = FormatResponse(validate, OutputFormat::kTable);
  EXPECT_THAT(json, HasSubstr("\"nodeCount\": 12"));
  EXPECT_THAT(json, HasSubstr("\"graphTotalBytes\": \"15895848\""));

  const std::string plan_json =
      FormatResponse(CannedResponse(), OutputFormat::kJson);
  EXPECT_THAT(plan_json, HasSubstr("\"planner\": \"partitioner/size_based\""));
  EXPECT_THAT(plan_json, Not(HasSubstr("Partitions")));
}

TEST(ParseOutputFormatTest, JsonOrTable) {
  EXPECT_EQ(*ParseOutputFormat("json"), OutputFormat::kJson);
  EXPECT_EQ(*ParseOutputFormat("TABLE"), OutputFormat::kTable);
  absl::StatusOr<OutputFormat> bad = ParseOutputFormat("yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("--output: unknown format 'yaml'"));
}

TEST(FormatRpcErrorTest, ListsBadRequestFieldViolations) {
  google::rpc::BadRequest bad_request;
  google::rpc::BadRequest::FieldViolation* unknown_node =
      bad_request.add_field_violations();
  unknown_node->set_field("graph.nodes[3].args[0]");
  unknown_node->set_description("refers to unknown node 'y'");
  google::rpc::BadRequest::FieldViolation* no_devices =
      bad_request.add_field_violations();
  no_devices->set_field("devices.devices");
  no_devices->set_description("must not be empty");
  google::rpc::Status rich_status;
  rich_status.set_code(grpc::StatusCode::INVALID_ARGUMENT);
  rich_status.set_message("invalid request: 2 problems");
  rich_status.add_details()->PackFrom(bad_request);
  grpc::Status status;
  ASSERT_TRUE(grpc::SetErrorDetails(rich_status, &status).ok());

  EXPECT_EQ(FormatRpcError(status),
            "error: INVALID_ARGUMENT: invalid request: 2 problems\n"
            "  field graph.nodes[3].args[0]: refers to unknown node 'y'\n"
            "  field devices.devices: must not be empty\n");
}

TEST(FormatRpcErrorTest, PlainStatusHasOneLine) {
  EXPECT_EQ(FormatRpcError(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                        "node 'fc1' fits no device")),
            "error: FAILED_PRECONDITION: node 'fc1' fits no device\n");
  EXPECT_EQ(
      FormatRpcError(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "")),
      "error: DEADLINE_EXCEEDED\n");
}

TEST(FormatRpcErrorTest, DescribesOtherDetails) {
  google::rpc::Status rich_status;
  rich_status.set_code(grpc::StatusCode::RESOURCE_EXHAUSTED);
  rich_status.set_message("planner queue full");
  google::protobuf::Any* unknown = rich_status.add_details();
  unknown->set_type_url("type.googleapis.com/google.rpc.RetryInfo");
  unknown->set_value("\x0a\x02\x08\x01");
  v1::ValidateResponse known;
  known.set_node_count(3);
  rich_status.add_details()->PackFrom(known);
  grpc::Status status;
  ASSERT_TRUE(grpc::SetErrorDetails(rich_status, &status).ok());

  EXPECT_EQ(FormatRpcError(status),
            "error: RESOURCE_EXHAUSTED: planner queue full\n"
            "  google.rpc.RetryInfo (4 bytes)\n"
            "  partplan.v1.ValidateResponse: node_count: 3\n");
}

}  // namespace
}  // namespace cli
}  // namespace partplan

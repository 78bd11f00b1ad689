#include "planner/api/planner_rpcs.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/api/entry_points.h"
#include "planner/api/planner_request.h"
#include "planner/graph/serialized_request.h"

namespace partplan {
namespace {

const google::protobuf::ServiceDescriptor& Service() {
  return *v1::ValidateRequest::descriptor()->file()->FindServiceByName("PartitionPlanner");
}

// The table in planner_rpcs.h matches the service in the .proto, in order.
TEST(PlannerRpcsTest, MatchesTheServiceDescriptor) {
  const google::protobuf::ServiceDescriptor* service = &Service();
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->full_name(), std::string(kPlannerServiceName));
  ASSERT_EQ(service->method_count(), static_cast<int>(kPlannerRpcCount));
  for (size_t i = 0; i < kPlannerRpcCount; ++i) {
    EXPECT_EQ(Index(kPlannerRpcs[i].rpc), i);
    EXPECT_EQ(std::string(RpcName(kPlannerRpcs[i].rpc)),
              service->method(static_cast<int>(i))->name());
  }
}

// Each row's messages are its method's, and every request has the graph
// that ReadPlannerRequest leaves as bytes.
TEST(PlannerRpcsTest, RowsCarryTheMethodsMessages) {
  for (const PlannerRpcMethod& row : kPlannerRpcs) {
    SCOPED_TRACE(row.name);
    const google::protobuf::MethodDescriptor* method =
        Service().FindMethodByName(std::string(row.name));
    ASSERT_NE(method, nullptr);
    EXPECT_EQ(row.request_prototype().GetDescriptor(), method->input_type());
    EXPECT_EQ(row.response_prototype().GetDescriptor(), method->output_type());
    const google::protobuf::FieldDescriptor* graph =
        method->input_type()->FindFieldByName("graph");
    ASSERT_NE(graph, nullptr);
    EXPECT_EQ(graph->message_type(), v1::Graph::descriptor());
    EXPECT_FALSE(graph->is_repeated());
  }
  EXPECT_FALSE(PlannerRpcOf(PlannerRpc::kValidate).cacheable);
  EXPECT_TRUE(PlannerRpcOf(PlannerRpc::kPlan).cacheable);
}

// The example request of an RPC (client/examples/<snake_case>.json), parsed.
template <typename Request>
Request ExampleRequest(const std::string& file) {
  std::ifstream in("client/examples/" + file);
  std::stringstream json;
  json << in.rdbuf();
  Request request;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json.str(), &request).ok()) << file;
  return request;
}

// What a row answers for `request` sent as bytes, as the server reads it.
std::string RowAnswer(PlannerRpc rpc, const google::protobuf::Message& request) {
  const std::string bytes = request.SerializeAsString();
  const ChunkedBytes chunked(bytes);
  google::protobuf::Arena arena;
  absl::StatusOr<PlannerRequest> read = ReadPlannerRequest(PlannerRpcOf(rpc), &chunked, &arena);
  EXPECT_TRUE(read.ok()) << read.status();
  if (!read.ok()) return "";
  EXPECT_EQ(read->graph().parsed(), nullptr) << "the graph should stay serialised";
  const CancellationToken token(absl::InfiniteFuture());
  absl::Cord answer;
  const absl::Status status = PlannerRpcOf(rpc).answer(read->message(), read->graph(),
                                                       InputLimits(), token, &arena, &answer);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_GT(read->CountNodes(), 0);
  return std::string(answer);
}

// Clears every `planner_seconds` in `message`: the time planning took, which
// two runs of the same plan do not share.
void ClearPlannerSeconds(google::protobuf::Message* message) {
  const google::protobuf::Reflection& reflection = *message->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection.ListFields(*message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->name() == "planner_seconds") {
      reflection.ClearField(message, field);
    } else if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection.FieldSize(*message, field); ++i) {
          ClearPlannerSeconds(reflection.MutableRepeatedMessage(message, field, i));
        }
      } else {
        ClearPlannerSeconds(reflection.MutableMessage(message, field));
      }
    }
  }
}

// Every row answers the bytes of the response its typed entry point fills
// (entry_points.h), however it writes them: a plan by name written from the
// graph's names is the same plan.
template <typename Request, typename Response>
void ExpectRowAnswersAsTheEntryPoint(PlannerRpc rpc, const std::string& example,
                                     absl::StatusOr<Response> (*entry_point)(
                                         const Request&, const InputLimits&,
                                         const CancellationToken&)) {
  SCOPED_TRACE(RpcName(rpc));
  const Request request = ExampleRequest<Request>(example);
  const CancellationToken token(absl::InfiniteFuture());
  absl::StatusOr<Response> expected = entry_point(request, InputLimits(), token);
  ASSERT_TRUE(expected.ok()) << expected.status();
  Response answered;
  ASSERT_TRUE(answered.ParseFromString(RowAnswer(rpc, request)));
  ClearPlannerSeconds(&answered);
  ClearPlannerSeconds(&*expected);
  EXPECT_EQ(answered.SerializeAsString(), expected->SerializeAsString());
}

TEST(PlannerRpcsTest, EveryRowAnswersAsItsEntryPoint) {
  ExpectRowAnswersAsTheEntryPoint<v1::PartitionGraphRequest, v1::PartitionGraphResponse>(
      PlannerRpc::kPartitionGraph, "partition_graph.json", &PartitionGraph);
  ExpectRowAnswersAsTheEntryPoint<v1::SplitGraphRequest, v1::SplitGraphResponse>(
      PlannerRpc::kSplitGraph, "split_graph.json", &SplitGraph);
  ExpectRowAnswersAsTheEntryPoint<v1::ShardGraphRequest, v1::ShardGraphResponse>(
      PlannerRpc::kShardGraph, "shard_graph.json", &ShardGraph);
  ExpectRowAnswersAsTheEntryPoint<v1::BuildPipelineGraphRequest, v1::BuildPipelineGraphResponse>(
      PlannerRpc::kBuildPipelineGraph, "build_pipeline_graph.json", &BuildPipelineGraph);
  ExpectRowAnswersAsTheEntryPoint<v1::PlanDataParallelRequest, v1::PlanDataParallelResponse>(
      PlannerRpc::kPlanDataParallel, "plan_data_parallel.json", &PlanDataParallel);
  ExpectRowAnswersAsTheEntryPoint<v1::PlanRequest, v1::PlanResponse>(PlannerRpc::kPlan,
                                                                      "plan.json", &Plan);
  ExpectRowAnswersAsTheEntryPoint<v1::ValidateRequest, v1::ValidateResponse>(
      PlannerRpc::kValidate, "validate.json", &Validate);
}

// A request that does not parse names the field and the message it should
// have been; a call without a message says so.
TEST(PlannerRpcsTest, ReadingABadRequestNamesTheField) {
  google::protobuf::Arena arena;
  const std::string truncated = "\x0a\x05\x0a";  // graph: 5 bytes announced, 1 given
  const ChunkedBytes bytes(truncated);
  const absl::StatusOr<PlannerRequest> bad =
      ReadPlannerRequest(PlannerRpcOf(PlannerRpc::kValidate), &bytes, &arena);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("/partplan.v1.PartitionPlanner/Validate"),
            absl::string_view::npos)
      << bad.status();

  const absl::StatusOr<PlannerRequest> none =
      ReadPlannerRequest(PlannerRpcOf(PlannerRpc::kPlan), nullptr, &arena);
  ASSERT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("expected a partplan.v1.PlanRequest"),
            absl::string_view::npos)
      << none.status();
}

}  // namespace
}  // namespace partplan

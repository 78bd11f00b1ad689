// PartitionGraphSerialized, PlanSerialized and ShardGraphSerialized, and the
// plan by name they write from a plan by node index
// (SerializeResponseWithNames): byte for byte protobuf's serialisation of
// the response PartitionGraph, Plan or ShardGraph fills, with names and with
// indices, over every partitioner fixture (for PartitionGraph and Plan),
// every auto_shard fixture with both shard planners (for ShardGraph and
// Plan) and plans whose varints take more than one byte.
#include "planner/wire/plan_with_names.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "planner/graph/serialized_request.h"
#include "tests/planner/fixture_files.h"
#include "tests/planner/plan_summary.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

// Expects `bytes` to be `message` serialised, but for the planner's own
// timing, which each call took for itself.
template <typename Response>
void ExpectSerializationOf(Response message, const absl::Cord& pieces) {
  const std::string bytes(pieces);
  Response parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes)) << "the bytes do not parse";
  SummaryOf(message)->set_planner_seconds(SummaryOf(parsed)->planner_seconds());
  EXPECT_EQ(bytes, message.SerializeAsString());
}

// An RPC whose plan the server sends as bytes: the entry point that fills
// the message, and the one that writes its bytes.
template <typename Request, typename Response>
struct SerializedRpc {
  absl::Status (*message)(const Request&, const GraphSource&, const InputLimits&,
                          const CancellationToken&, Response*);
  absl::Status (*serialized)(const Request&, const GraphSource&, const InputLimits&,
                             const CancellationToken&, absl::Cord*);
};
constexpr SerializedRpc<v1::PartitionGraphRequest, v1::PartitionGraphResponse> kPartitionGraph{
    &PartitionGraph, &PartitionGraphSerialized};
constexpr SerializedRpc<v1::PlanRequest, v1::PlanResponse> kPlan{&Plan, &PlanSerialized};
constexpr SerializedRpc<v1::ShardGraphRequest, v1::ShardGraphResponse> kShardGraph{
    &ShardGraph, &ShardGraphSerialized};

// Expects the RPC's bytes for `request`, with the graph parsed and read from
// its bytes as the server reads it, to be the serialisation of the message
// the RPC fills, both ways of naming nodes. Returns whether the request
// planned.
template <typename Request, typename Response>
bool ExpectSameBytesAsTheMessage(const SerializedRpc<Request, Response>& rpc, Request request) {
  bool planned = false;
  for (const v1::NodeReferences references :
       {v1::NODE_REFERENCES_NAMES, v1::NODE_REFERENCES_INDICES}) {
    SCOPED_TRACE(v1::NodeReferences_Name(references));
    request.set_node_references(references);
    Response message;
    const absl::Status message_status =
        rpc.message(request, request.graph(), InputLimits(), CancellationToken(), &message);
    absl::Cord bytes;
    EXPECT_EQ(rpc.serialized(request, request.graph(), InputLimits(), CancellationToken(), &bytes),
              message_status);
    const std::string request_bytes = request.SerializeAsString();
    Request fields;
    const std::optional<ChunkedBytes> graph_bytes = ParseAllButGraph(request_bytes, &fields);
    if (!graph_bytes.has_value()) {
      ADD_FAILURE() << "the request does not split";
      return false;
    }
    absl::Cord bytes_from_bytes;
    EXPECT_EQ(rpc.serialized(fields, GraphSource::Serialized(*graph_bytes), InputLimits(),
                             CancellationToken(), &bytes_from_bytes),
              message_status);
    if (!message_status.ok()) continue;
    planned = true;
    ExpectSerializationOf(message, bytes);
    ExpectSerializationOf(message, bytes_from_bytes);
  }
  return planned;
}

bool ExpectSameBytesAsTheMessage(const v1::PartitionGraphRequest& request) {
  return ExpectSameBytesAsTheMessage(kPartitionGraph, request);
}

// Whether partplan plans the fixture's request: torch.fx raised no error
// and placed every partition (where it left one on no device, partplan
// refuses the plan).
bool PartplanPlans(const std::string& path) {
  const auto fixture = LoadJsonFixture<google::protobuf::Struct>(path);
  if (fixture.fields().contains("expectedError")) return false;
  const auto& expected = fixture.fields().at("expected").struct_value().fields();
  if (!expected.contains("partitions")) return true;
  for (const google::protobuf::Value& partition : expected.at("partitions").list_value().values()) {
    const auto& fields = partition.struct_value().fields();
    if (!fields.contains("logicalDeviceIds") ||
        fields.at("logicalDeviceIds").list_value().values().empty()) {
      return false;
    }
  }
  return true;
}

class PlanWithNamesFixtureTest : public ::testing::TestWithParam<std::string> {};
TEST_P(PlanWithNamesFixtureTest, SerializesAsTheMessageWould) {
  // Those partplan refuses fail alike both ways; the others plan, and their
  // bytes are compared.
  EXPECT_EQ(ExpectSameBytesAsTheMessage(LoadFixtureRequest<v1::PartitionGraphRequest>(GetParam())),
            PartplanPlans(GetParam()));
}
TEST_P(PlanWithNamesFixtureTest, PlanSerializesAsTheMessageWould) {
  const auto partition_request = LoadFixtureRequest<v1::PartitionGraphRequest>(GetParam());
  v1::PlanRequest request;
  *request.mutable_graph() = partition_request.graph();
  *request.mutable_devices() = partition_request.devices();
  *request.mutable_partitioner() = partition_request.config();
  EXPECT_EQ(ExpectSameBytesAsTheMessage(kPlan, request), PartplanPlans(GetParam()));
}
INSTANTIATE_TEST_SUITE_P(Fixtures, PlanWithNamesFixtureTest,
                         ::testing::ValuesIn(FixturePathsUnder(PartitionerFixtureDirs())),
                         FixturePathCaseName);

// ShardGraph, and Plan with a shard planner (whose shards become
// partitions, placed on the devices), are written by name alike, with
// either planner.
class PlanWithNamesShardFixtureTest : public ::testing::TestWithParam<std::string> {};
TEST_P(PlanWithNamesShardFixtureTest, SerializesAsTheMessageWould) {
  const auto fixture_request = LoadFixtureRequest<v1::ShardGraphRequest>(GetParam());
  for (const v1::ShardConfig::Mode mode : {v1::ShardConfig::FAIRSCALE, v1::ShardConfig::BALANCED}) {
    SCOPED_TRACE(v1::ShardConfig::Mode_Name(mode));
    v1::ShardGraphRequest shard_request = fixture_request;
    shard_request.mutable_config()->set_mode(mode);
    *shard_request.mutable_devices() = RoomyDevices(shard_request.config().shard_count());
    EXPECT_TRUE(ExpectSameBytesAsTheMessage(kShardGraph, shard_request));
    v1::PlanRequest request;
    *request.mutable_graph() = shard_request.graph();
    *request.mutable_shard() = shard_request.config();
    *request.mutable_devices() = shard_request.devices();
    EXPECT_TRUE(ExpectSameBytesAsTheMessage(kPlan, request));
  }
}
INSTANTIATE_TEST_SUITE_P(Fixtures, PlanWithNamesShardFixtureTest,
                         ::testing::ValuesIn(FixturePaths("tests/fixtures/pipeline/auto_shard")),
                         FixtureCaseName);

// A chain of `length` nodes with names of `name_length` characters, each
// node alone in its partition: partition ids and assignments past 127,
// and names past 127 bytes, take varints of two bytes.
v1::PartitionGraphRequest ManySmallPartitions(int length, int name_length) {
  TestGraph graph;
  graph.Placeholder("x", 1);
  std::string previous = "x";
  for (int i = 0; i < length; ++i) {
    std::string name = absl::StrCat("n", i, "_");
    name.resize(std::max<size_t>(name.size(), name_length), 'a');
    graph.Op(name, {previous}, 100, 50);
    previous = name;
  }
  graph.Output({previous});
  v1::PartitionGraphRequest request;
  *request.mutable_graph() = graph.Build();
  for (int d = 0; d < length; ++d) {
    v1::Device* device = request.mutable_devices()->add_devices();
    device->set_name(absl::StrCat("gpu", d));
    device->set_logical_id(d);
    device->set_available_memory_bytes(200);  // one node and its input each
  }
  request.mutable_config()->set_mode(v1::PartitionerConfig::SIZE_BASED);
  return request;
}

// The same graph and devices in BALANCED stages, one a device.
v1::ShardGraphRequest AsShardRequest(const v1::PartitionGraphRequest& partition_request) {
  v1::ShardGraphRequest request;
  *request.mutable_graph() = partition_request.graph();
  *request.mutable_devices() = partition_request.devices();
  request.mutable_config()->set_mode(v1::ShardConfig::BALANCED);
  request.mutable_config()->set_shard_count(partition_request.devices().devices_size());
  return request;
}

TEST(PlanWithNamesTest, WritesLongVarintsAsProtobufDoes) {
  for (const int name_length : {1, 130, 20000}) {
    SCOPED_TRACE(name_length);
    const v1::PartitionGraphRequest request = ManySmallPartitions(300, name_length);
    const absl::StatusOr<v1::PartitionGraphResponse> plan =
        PartitionGraph(request, InputLimits(), CancellationToken());
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->plan().summary().partition_count(), 300);  // ids past 127
    EXPECT_TRUE(ExpectSameBytesAsTheMessage(request));
    const v1::ShardGraphRequest shard_request = AsShardRequest(request);
    const absl::StatusOr<v1::ShardGraphResponse> shards =
        ShardGraph(shard_request, InputLimits(), CancellationToken());
    ASSERT_TRUE(shards.ok()) << shards.status();
    ASSERT_EQ(shards->shards_size(), 300);
    EXPECT_TRUE(ExpectSameBytesAsTheMessage(kShardGraph, shard_request));
  }
}

// The response is written in pieces: a name stays within one, other fields
// may straddle any number of them. Every piece size, from nothing up, gives
// the same bytes.
TEST(PlanWithNamesTest, WritesTheSameBytesInPiecesOfAnySize) {
  v1::PartitionGraphRequest request = ManySmallPartitions(300, 130);
  request.set_node_references(v1::NODE_REFERENCES_NAMES);
  const absl::StatusOr<v1::PartitionGraphResponse> by_name =
      PartitionGraph(request, InputLimits(), CancellationToken());
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  request.set_node_references(v1::NODE_REFERENCES_INDICES);
  const absl::StatusOr<v1::PartitionGraphResponse> by_index =
      PartitionGraph(request, InputLimits(), CancellationToken());
  ASSERT_TRUE(by_index.ok()) << by_index.status();
  const absl::StatusOr<CompactGraph> graph =
      ImportGraph(request.graph(), InputLimits(), CancellationToken());
  ASSERT_TRUE(graph.ok()) << graph.status();
  v1::ShardGraphRequest shard_request = AsShardRequest(request);
  shard_request.set_node_references(v1::NODE_REFERENCES_INDICES);
  const absl::StatusOr<v1::ShardGraphResponse> shards_by_index =
      ShardGraph(shard_request, InputLimits(), CancellationToken());
  ASSERT_TRUE(shards_by_index.ok()) << shards_by_index.status();
  shard_request.set_node_references(v1::NODE_REFERENCES_NAMES);
  const absl::StatusOr<v1::ShardGraphResponse> shards_by_name =
      ShardGraph(shard_request, InputLimits(), CancellationToken());
  ASSERT_TRUE(shards_by_name.ok()) << shards_by_name.status();
  for (const size_t piece_bytes : {0, 1, 2, 3, 7, 64, 1000, 100000}) {
    SCOPED_TRACE(piece_bytes);
    v1::PartitionGraphResponse taken = *by_index;
    absl::Cord bytes("left from before");
    ASSERT_TRUE(SerializeResponseWithNames(*graph, &taken, &bytes, piece_bytes).ok());
    ExpectSerializationOf(*by_name, bytes);
    v1::ShardGraphResponse shards_taken = *shards_by_index;
    ASSERT_TRUE(SerializeResponseWithNames(*graph, &shards_taken, &bytes, piece_bytes).ok());
    ExpectSerializationOf(*shards_by_name, bytes);
  }
}

// A response of 12 MB goes to gRPC as pieces of at most
// kResponsePieceBytes, which the Cord keeps as they are (rather than copying
// them into small blocks of its own): all but the last are over half full.
TEST(PlanWithNamesTest, LargeResponsesAreInPieces) {
  const v1::PartitionGraphRequest request = ManySmallPartitions(300, 20000);
  absl::Cord bytes;
  ASSERT_TRUE(
      PartitionGraphSerialized(request, request.graph(), InputLimits(), CancellationToken(), &bytes)
          .ok());
  ASSERT_GT(bytes.size(), 11 * kResponsePieceBytes);
  std::vector<size_t> pieces;
  for (const absl::string_view piece : bytes.Chunks()) pieces.push_back(piece.size());
  ASSERT_GE(pieces.size(), 12);
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_LE(pieces[i], kResponsePieceBytes) << i;
    if (i + 1 < pieces.size()) {
      EXPECT_GT(pieces[i], kResponsePieceBytes / 2) << i;
    }
  }
}

TEST(PlanWithNamesTest, ErrorsAreThoseOfPartitionGraph) {
  v1::PartitionGraphRequest request = ManySmallPartitions(3, 4);
  request.mutable_devices()->mutable_devices(0)->set_available_memory_bytes(-1);
  EXPECT_FALSE(ExpectSameBytesAsTheMessage(request));
  request = ManySmallPartitions(3, 4);
  request.set_node_references(static_cast<v1::NodeReferences>(9));
  absl::Cord bytes;
  const absl::Status status = PartitionGraphSerialized(request, request.graph(), InputLimits(),
                                                       CancellationToken(), &bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

// Plan's and ShardGraph's errors, as they come from the message's path:
// the shard planner's (Plan's names its options `shard`), the partitioner's
// through Plan (`partitioner`), a bad inventory, and a bad node_references.
TEST(PlanWithNamesTest, ErrorsAreThoseOfPlanAndShardGraph) {
  const v1::PartitionGraphRequest chain = ManySmallPartitions(3, 4);
  v1::ShardGraphRequest shard = AsShardRequest(chain);
  shard.mutable_config()->set_shard_count(0);
  EXPECT_FALSE(ExpectSameBytesAsTheMessage(kShardGraph, shard));
  shard.mutable_config()->set_shard_count(4);  // a stage more than devices
  EXPECT_FALSE(ExpectSameBytesAsTheMessage(kShardGraph, shard));
  v1::PlanRequest plan;
  *plan.mutable_graph() = shard.graph();
  *plan.mutable_devices() = shard.devices();
  *plan.mutable_shard() = shard.config();
  plan.mutable_shard()->set_shard_count(0);
  EXPECT_FALSE(ExpectSameBytesAsTheMessage(kPlan, plan));
  *plan.mutable_partitioner() = chain.config();
  plan.mutable_devices()->mutable_devices(0)->set_available_memory_bytes(-1);
  EXPECT_FALSE(ExpectSameBytesAsTheMessage(kPlan, plan));
  *plan.mutable_devices() = chain.devices();
  plan.mutable_partitioner()->set_mode(static_cast<v1::PartitionerConfig::Mode>(99));
  EXPECT_FALSE(ExpectSameBytesAsTheMessage(kPlan, plan));

  const auto bad_references = [](auto request) {
    request.set_node_references(static_cast<v1::NodeReferences>(9));
    return request;
  };
  absl::Cord bytes;
  const v1::PlanRequest bad_plan = bad_references(plan);
  EXPECT_EQ(PlanSerialized(bad_plan, bad_plan.graph(), InputLimits(), CancellationToken(), &bytes),
            Plan(bad_plan, InputLimits(), CancellationToken()).status());
  const v1::ShardGraphRequest bad_shard = bad_references(AsShardRequest(chain));
  EXPECT_EQ(ShardGraphSerialized(bad_shard, bad_shard.graph(), InputLimits(), CancellationToken(),
                                 &bytes),
            ShardGraph(bad_shard, InputLimits(), CancellationToken()).status());
  EXPECT_EQ(ShardGraph(bad_shard, InputLimits(), CancellationToken()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace partplan

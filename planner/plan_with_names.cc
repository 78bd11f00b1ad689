#include "planner/plan_with_names.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/io/coded_stream.h"

namespace partplan {
namespace {

using google::protobuf::io::CodedOutputStream;

enum WireType : uint8_t { kVarint = 0, kLengthDelimited = 2 };

// A field's tag: every field written here is numbered below 16, so its tag
// is one byte.
constexpr uint8_t Tag(int field, WireType type) { return static_cast<uint8_t>(field << 3 | type); }
static_assert(v1::PartitionGraphResponse::kPlanFieldNumber < 16 &&
                  v1::PartitionPlan::kAssignmentsFieldNumber < 16 &&
                  v1::PartitionPlan::kPartitionsFieldNumber < 16 &&
                  v1::NodePartition::kNodeFieldNumber < 16 &&
                  v1::NodePartition::kPartitionFieldNumber < 16 &&
                  v1::Partition::kIdFieldNumber < 16 && v1::Partition::kNodesFieldNumber < 16,
              "one-byte tags");
// Protobuf writes a message's fields in number order; the writer below
// relies on that order.
static_assert(v1::PartitionPlan::kAssignmentsFieldNumber < v1::PartitionPlan::kPartitionsFieldNumber &&
                  v1::PartitionPlan::kPartitionsFieldNumber < v1::PartitionPlan::kDagFieldNumber &&
                  v1::PartitionPlan::kPartitionsFieldNumber <
                      v1::PartitionPlan::kDeviceUsageFieldNumber &&
                  v1::PartitionPlan::kPartitionsFieldNumber <
                      v1::PartitionPlan::kSummaryFieldNumber &&
                  v1::Partition::kIdFieldNumber < v1::Partition::kNodesFieldNumber &&
                  v1::NodePartition::kNodeFieldNumber < v1::NodePartition::kPartitionFieldNumber,
              "field order");

constexpr uint8_t kPlanTag = Tag(v1::PartitionGraphResponse::kPlanFieldNumber, kLengthDelimited);
constexpr uint8_t kAssignmentTag =
    Tag(v1::PartitionPlan::kAssignmentsFieldNumber, kLengthDelimited);
constexpr uint8_t kPartitionTag = Tag(v1::PartitionPlan::kPartitionsFieldNumber, kLengthDelimited);
constexpr uint8_t kNodeNameTag = Tag(v1::NodePartition::kNodeFieldNumber, kLengthDelimited);
constexpr uint8_t kNodePartitionTag = Tag(v1::NodePartition::kPartitionFieldNumber, kVarint);
constexpr uint8_t kPartitionNodeTag = Tag(v1::Partition::kNodesFieldNumber, kLengthDelimited);

// The bytes of a length-delimited field whose payload is `payload` bytes.
size_t FieldSize(size_t payload) {
  return 1 + CodedOutputStream::VarintSize32(static_cast<uint32_t>(payload)) + payload;
}

// The payload of NodePartition{node: name, partition} (protobuf leaves a
// partition of 0 out).
size_t AssignmentSize(absl::string_view name, int32_t partition) {
  return FieldSize(name.size()) +
         (partition != 0 ? 1 + CodedOutputStream::VarintSize32SignExtended(partition) : 0);
}

// Writes forward from `next`; the caller sized the buffer exactly.
class WireWriter {
 public:
  explicit WireWriter(char* next) : next_(reinterpret_cast<uint8_t*>(next)) {}

  void Byte(uint8_t byte) { *next_++ = byte; }
  void Varint(uint32_t value) { next_ = CodedOutputStream::WriteVarint32ToArray(value, next_); }
  void SignedVarint(int32_t value) {
    next_ = CodedOutputStream::WriteVarint32SignExtendedToArray(value, next_);
  }
  void Bytes(absl::string_view bytes) {
    std::memcpy(next_, bytes.data(), bytes.size());
    next_ += bytes.size();
  }
  // A length-delimited field: tag, length, then `payload` (or, with only a
  // length, what the caller writes next).
  void Field(uint8_t tag, absl::string_view payload) {
    FieldHeader(tag, payload.size());
    Bytes(payload);
  }
  void FieldHeader(uint8_t tag, size_t length) {
    Byte(tag);
    Varint(static_cast<uint32_t>(length));
  }

  const char* position() const { return reinterpret_cast<const char*>(next_); }

 private:
  uint8_t* next_;
};

absl::Status TooLargeError(size_t bytes) {
  return absl::InternalError(absl::StrCat("cannot serialise the response: it is ", bytes,
                                          " bytes, over protobuf's limit of 2 GiB on a message"));
}

// One partition as protobuf serialises it without its node indices, split
// where its node names go: after the id, the only field numbered before
// them.
struct PartitionBytes {
  std::string before_nodes;  // the id field, or nothing for id 0
  std::string after_nodes;   // inputs, outputs, memory, devices, ...
  std::vector<NodeId> nodes;
  size_t payload = 0;  // the partition's length with its node names
};

}  // namespace

absl::Status SerializeWithinLimit(const google::protobuf::Message& response, std::string* bytes) {
  if (!response.SerializeToString(bytes)) {
    return TooLargeError(response.ByteSizeLong());
  }
  return absl::OkStatus();
}

absl::Status SerializeResponseWithNames(const CompactGraph& graph,
                                        v1::PartitionGraphResponse* by_index, std::string* bytes) {
  v1::PartitionPlan& plan = *by_index->mutable_plan();

  // The assignments: one per node in a partition, in graph order.
  google::protobuf::RepeatedField<int32_t> partition_of;
  partition_of.Swap(plan.mutable_partition_by_node_index());
  size_t assignments_size = 0;
  for (NodeId v = 0; v < partition_of.size(); ++v) {
    if (partition_of[v] < 0) continue;
    assignments_size += FieldSize(AssignmentSize(graph.name(v), partition_of[v]));
  }

  // The partitions.
  std::vector<PartitionBytes> partitions(plan.partitions_size());
  size_t partitions_size = 0;
  for (int p = 0; p < plan.partitions_size(); ++p) {
    v1::Partition& partition = *plan.mutable_partitions(p);
    PartitionBytes& out = partitions[p];
    out.nodes.assign(partition.node_indices().begin(), partition.node_indices().end());
    partition.clear_node_indices();
    std::string serialized = partition.SerializeAsString();
    const size_t id_size =
        partition.id() != 0 ? 1 + CodedOutputStream::VarintSize32SignExtended(partition.id()) : 0;
    out.before_nodes = serialized.substr(0, id_size);
    out.after_nodes = serialized.substr(id_size);
    out.payload = serialized.size();
    for (NodeId v : out.nodes) out.payload += FieldSize(graph.name(v).size());
    partitions_size += FieldSize(out.payload);
  }

  // The plan's other fields (the DAG, the devices, the summary), all
  // numbered after the partitions, then the response's other fields, all
  // after the plan.
  plan.clear_assignments();
  plan.clear_partitions();
  const std::string plan_rest = plan.SerializeAsString();
  const size_t plan_size = assignments_size + partitions_size + plan_rest.size();
  by_index->clear_plan();
  const std::string response_rest = by_index->SerializeAsString();
  const size_t response_size = FieldSize(plan_size) + response_rest.size();
  // Every length written below is then within 32 bits.
  if (response_size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return TooLargeError(response_size);
  }

  bytes->resize(response_size);
  WireWriter out(bytes->data());
  out.FieldHeader(kPlanTag, plan_size);
  for (NodeId v = 0; v < partition_of.size(); ++v) {
    const int32_t partition = partition_of[v];
    if (partition < 0) continue;
    const absl::string_view name = graph.name(v);
    out.FieldHeader(kAssignmentTag, AssignmentSize(name, partition));
    out.Field(kNodeNameTag, name);
    if (partition != 0) {
      out.Byte(kNodePartitionTag);
      out.SignedVarint(partition);
    }
  }
  for (const PartitionBytes& partition : partitions) {
    out.FieldHeader(kPartitionTag, partition.payload);
    out.Bytes(partition.before_nodes);
    for (NodeId v : partition.nodes) out.Field(kPartitionNodeTag, graph.name(v));
    out.Bytes(partition.after_nodes);
  }
  out.Bytes(plan_rest);
  out.Bytes(response_rest);
  return absl::OkStatus();
}

}  // namespace partplan

#include "planner/wire/plan_with_names.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/io/coded_stream.h"
#include "planner/wire/wire_writer.h"

namespace partplan {
namespace {

using google::protobuf::io::CodedOutputStream;

// Every field written here is numbered below 16, so its tag is one byte.
static_assert(v1::PartitionGraphResponse::kPlanFieldNumber < 16 &&
                  v1::PlanResponse::kPlanFieldNumber < 16 &&
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

// Both responses that carry a plan hold it in the same field, and a
// ShardGraphResponse is laid out as a plan is (assignments, then shards as
// partitions, each with its node names after its id, then the rest), so
// that one writer serves all three.
static_assert(static_cast<int>(v1::PartitionGraphResponse::kPlanFieldNumber) ==
                  static_cast<int>(v1::PlanResponse::kPlanFieldNumber),
              "one plan field");
static_assert(static_cast<int>(v1::ShardGraphResponse::kAssignmentsFieldNumber) ==
                      static_cast<int>(v1::PartitionPlan::kAssignmentsFieldNumber) &&
                  static_cast<int>(v1::ShardGraphResponse::kShardsFieldNumber) ==
                      static_cast<int>(v1::PartitionPlan::kPartitionsFieldNumber) &&
                  v1::ShardGraphResponse::kShardsFieldNumber <
                      v1::ShardGraphResponse::kSummaryFieldNumber &&
                  v1::ShardGraphResponse::kShardsFieldNumber <
                      v1::ShardGraphResponse::kShardByNodeIndexFieldNumber &&
                  static_cast<int>(v1::Shard::kIdFieldNumber) ==
                      static_cast<int>(v1::Partition::kIdFieldNumber) &&
                  static_cast<int>(v1::Shard::kNodesFieldNumber) ==
                      static_cast<int>(v1::Partition::kNodesFieldNumber),
              "shards laid out as a plan's partitions");
constexpr uint8_t kPlanTag = Tag(v1::PartitionGraphResponse::kPlanFieldNumber, kLengthDelimited);
constexpr uint8_t kAssignmentTag =
    Tag(v1::PartitionPlan::kAssignmentsFieldNumber, kLengthDelimited);
constexpr uint8_t kPartitionTag = Tag(v1::PartitionPlan::kPartitionsFieldNumber, kLengthDelimited);
constexpr uint8_t kNodeNameTag = Tag(v1::NodePartition::kNodeFieldNumber, kLengthDelimited);
constexpr uint8_t kNodePartitionTag = Tag(v1::NodePartition::kPartitionFieldNumber, kVarint);
constexpr uint8_t kPartitionNodeTag = Tag(v1::Partition::kNodesFieldNumber, kLengthDelimited);

// The payload of NodePartition{node: name, partition} (protobuf leaves a
// partition of 0 out).
size_t AssignmentSize(absl::string_view name, int32_t partition) {
  return FieldSize(name.size()) +
         (partition != 0 ? 1 + CodedOutputStream::VarintSize32SignExtended(partition) : 0);
}

// One part of a plan (a Partition or a Shard) as protobuf serialises it
// without its node indices, split where its node names go: after the id,
// the only field numbered before them.
struct PartBytes {
  std::string before_nodes;  // the id field, or nothing for id 0
  std::string after_nodes;   // inputs, outputs, memory, devices, ...
  std::vector<NodeId> nodes;
  size_t payload = 0;  // the part's length with its node names
};

// The fields of a plan by name (a PartitionPlan or a ShardGraphResponse)
// made from the plan by node index: the assignment of each node in a part,
// in graph order; the parts, each with its nodes' names; then the plan's
// other fields, all numbered after those.
class PlanBody {
 public:
  // Takes `*partition_of` (the plan's part of every node by index, -1 for
  // none) and each of `*parts`' node indices out of `*plan`, which is left
  // holding neither, and serialises the rest of it.
  template <typename Plan, typename Part>
  PlanBody(const CompactGraph& graph, Plan* plan,
           google::protobuf::RepeatedField<int32_t>* partition_of,
           google::protobuf::RepeatedPtrField<Part>* parts)
      : graph_(graph) {
    partition_of_.Swap(partition_of);
    for (NodeId v = 0; v < partition_of_.size(); ++v) {
      if (partition_of_[v] < 0) continue;
      size_ += FieldSize(AssignmentSize(graph.name(v), partition_of_[v]));
    }
    parts_.resize(parts->size());
    for (int p = 0; p < parts->size(); ++p) {
      Part& part = *parts->Mutable(p);
      PartBytes& out = parts_[p];
      out.nodes.assign(part.node_indices().begin(), part.node_indices().end());
      part.clear_node_indices();
      std::string serialized = part.SerializeAsString();
      const size_t id_size =
          part.id() != 0 ? 1 + CodedOutputStream::VarintSize32SignExtended(part.id()) : 0;
      out.before_nodes = serialized.substr(0, id_size);
      out.after_nodes = serialized.substr(id_size);
      out.payload = serialized.size();
      for (NodeId v : out.nodes) out.payload += FieldSize(graph.name(v).size());
      size_ += FieldSize(out.payload);
    }
    parts->Clear();
    plan->clear_assignments();
    rest_ = plan->SerializeAsString();
    size_ += rest_.size();
  }

  // Its bytes.
  size_t size() const { return size_; }

  void Write(WireWriter& out) const {
    // A large graph's names are out of cache by the time its plan is
    // written, and a part's nodes need not follow graph order: each name is
    // prefetched a few names before it is copied.
    constexpr int kNameAhead = 16;
    const auto prefetch_name = [this](NodeId v) { __builtin_prefetch(graph_.name(v).data()); };
    for (NodeId v = 0; v < partition_of_.size(); ++v) {
      if (v + kNameAhead < partition_of_.size()) prefetch_name(v + kNameAhead);
      const int32_t partition = partition_of_[v];
      if (partition < 0) continue;
      const absl::string_view name = graph_.name(v);
      const size_t assignment_size = AssignmentSize(name, partition);
      out.Reserve(FieldSize(assignment_size));
      out.FieldHeader(kAssignmentTag, assignment_size);
      out.Field(kNodeNameTag, name);
      if (partition != 0) {
        out.Byte(kNodePartitionTag);
        out.SignedVarint(partition);
      }
    }
    for (const PartBytes& part : parts_) {
      out.Reserve(FieldHeaderSize(part.payload) + part.before_nodes.size());
      out.FieldHeader(kPartitionTag, part.payload);
      out.Copy(part.before_nodes);
      const std::vector<NodeId>& nodes = part.nodes;
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (i + kNameAhead < nodes.size()) prefetch_name(nodes[i + kNameAhead]);
        const absl::string_view name = graph_.name(nodes[i]);
        out.Reserve(FieldSize(name.size()));
        out.Field(kPartitionNodeTag, name);
      }
      out.Append(part.after_nodes);
    }
    out.Append(rest_);
  }

 private:
  const CompactGraph& graph_;
  google::protobuf::RepeatedField<int32_t> partition_of_;
  std::vector<PartBytes> parts_;
  std::string rest_;
  size_t size_ = 0;
};

// SerializeResponseWithNames for either response holding a plan
// (PartitionGraphResponse, PlanResponse): the plan's field, then the
// response's other fields, all numbered after it.
template <typename Response>
absl::Status WriteResponseWithNames(const CompactGraph& graph, Response* by_index,
                                    absl::Cord* bytes, size_t piece_bytes) {
  v1::PartitionPlan& plan = *by_index->mutable_plan();
  const PlanBody body(graph, &plan, plan.mutable_partition_by_node_index(),
                      plan.mutable_partitions());
  by_index->clear_plan();
  const std::string response_rest = by_index->SerializeAsString();
  return WriteResponseBytes(FieldSize(body.size()) + response_rest.size(), piece_bytes, bytes,
                            [&](WireWriter& out) {
                              out.Reserve(FieldHeaderSize(body.size()));
                              out.FieldHeader(kPlanTag, body.size());
                              body.Write(out);
                              out.Append(response_rest);
                            });
}

}  // namespace

absl::Status SerializeWithinLimit(const google::protobuf::Message& response, absl::Cord* bytes) {
  std::string serialized;
  if (!response.SerializeToString(&serialized)) {
    return ResponseTooLargeError(response.ByteSizeLong());
  }
  *bytes = absl::Cord(std::move(serialized));
  return absl::OkStatus();
}

absl::Status SerializeResponseWithNames(const CompactGraph& graph,
                                        v1::PartitionGraphResponse* by_index, absl::Cord* bytes,
                                        size_t piece_bytes) {
  return WriteResponseWithNames(graph, by_index, bytes, piece_bytes);
}

absl::Status SerializeResponseWithNames(const CompactGraph& graph, v1::PlanResponse* by_index,
                                        absl::Cord* bytes, size_t piece_bytes) {
  return WriteResponseWithNames(graph, by_index, bytes, piece_bytes);
}

absl::Status SerializeResponseWithNames(const CompactGraph& graph, v1::ShardGraphResponse* by_index,
                                        absl::Cord* bytes, size_t piece_bytes) {
  const PlanBody body(graph, by_index, by_index->mutable_shard_by_node_index(),
                      by_index->mutable_shards());
  return WriteResponseBytes(body.size(), piece_bytes, bytes,
                            [&body](WireWriter& out) { body.Write(out); });
}

}  // namespace partplan

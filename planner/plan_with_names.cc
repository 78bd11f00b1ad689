#include "planner/plan_with_names.h"

#include <algorithm>
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

// Both responses that carry a plan hold it in the same field, so that one
// writer serves both.
static_assert(static_cast<int>(v1::PartitionGraphResponse::kPlanFieldNumber) ==
                  static_cast<int>(v1::PlanResponse::kPlanFieldNumber),
              "one plan field");
constexpr uint8_t kPlanTag = Tag(v1::PartitionGraphResponse::kPlanFieldNumber, kLengthDelimited);
constexpr uint8_t kAssignmentTag =
    Tag(v1::PartitionPlan::kAssignmentsFieldNumber, kLengthDelimited);
constexpr uint8_t kPartitionTag = Tag(v1::PartitionPlan::kPartitionsFieldNumber, kLengthDelimited);
constexpr uint8_t kNodeNameTag = Tag(v1::NodePartition::kNodeFieldNumber, kLengthDelimited);
constexpr uint8_t kNodePartitionTag = Tag(v1::NodePartition::kPartitionFieldNumber, kVarint);
constexpr uint8_t kPartitionNodeTag = Tag(v1::Partition::kNodesFieldNumber, kLengthDelimited);

// The bytes of a length-delimited field's tag and length, and of the whole
// field, whose payload is `payload` bytes.
size_t FieldHeaderSize(size_t payload) {
  return 1 + CodedOutputStream::VarintSize32(static_cast<uint32_t>(payload));
}
size_t FieldSize(size_t payload) { return FieldHeaderSize(payload) + payload; }

// The payload of NodePartition{node: name, partition} (protobuf leaves a
// partition of 0 out).
size_t AssignmentSize(absl::string_view name, int32_t partition) {
  return FieldSize(name.size()) +
         (partition != 0 ? 1 + CodedOutputStream::VarintSize32SignExtended(partition) : 0);
}

// Writes `size` bytes into pieces of about `piece_bytes` each, appended to
// a Cord. The fields written after a Reserve are whole within one piece (a
// piece ends early rather than split them, or is as large as they are);
// Append writes bytes of any length across pieces. Finish says whether
// exactly `size` bytes were written.
//
// Why pieces: one block of the whole response (34 MB at 10^6 nodes, above
// glibc's largest mmap threshold) is mapped and page-faulted afresh on every
// call, where pieces of 1 MiB reuse memory the allocator holds; gRPC sends a
// buffer of slices as it sends one.
class WireWriter {
 public:
  WireWriter(size_t size, size_t piece_bytes, absl::Cord* out)
      : size_(size), piece_bytes_(piece_bytes), out_(out) {
    out_->Clear();
  }

  // Hands the last piece to the Cord; false unless `size` bytes were
  // written in all.
  bool Finish() {
    Flush();
    return flushed_ == size_;
  }

  // Makes room for `bytes` more in the current piece; the writes below
  // stay within it.
  void Reserve(size_t bytes) {
    if (static_cast<size_t>(end_ - next_) >= bytes) return;
    Flush();
    const size_t unwritten = size_ > flushed_ ? size_ - flushed_ : 0;
    const size_t size = std::max(bytes, std::min(piece_bytes_, unwritten));
    piece_.resize(size);
    next_ = reinterpret_cast<uint8_t*>(piece_.data());
    end_ = next_ + size;
  }

  void Byte(uint8_t byte) { *next_++ = byte; }
  void Varint(uint32_t value) { next_ = CodedOutputStream::WriteVarint32ToArray(value, next_); }
  void SignedVarint(int32_t value) {
    next_ = CodedOutputStream::WriteVarint32SignExtendedToArray(value, next_);
  }
  void Copy(absl::string_view bytes) {
    std::memcpy(next_, bytes.data(), bytes.size());
    next_ += bytes.size();
  }
  // A length-delimited field: tag, length, then `payload` (or, with only a
  // length, what the caller writes next).
  void Field(uint8_t tag, absl::string_view payload) {
    FieldHeader(tag, payload.size());
    Copy(payload);
  }
  void FieldHeader(uint8_t tag, size_t length) {
    Byte(tag);
    Varint(static_cast<uint32_t>(length));
  }

  // `bytes` of any length, split across pieces as they fill.
  void Append(absl::string_view bytes) {
    while (!bytes.empty()) {
      Reserve(1);
      const size_t part = std::min(bytes.size(), static_cast<size_t>(end_ - next_));
      Copy(bytes.substr(0, part));
      bytes.remove_prefix(part);
    }
  }

 private:
  // Hands the piece written so far to the Cord (which keeps it uncopied).
  void Flush() {
    const size_t written = piece_.size() - static_cast<size_t>(end_ - next_);
    if (written == 0) return;
    piece_.resize(written);
    flushed_ += written;
    out_->Append(std::move(piece_));
    piece_ = std::string();
    next_ = end_ = nullptr;
  }

  const size_t size_;
  size_t flushed_ = 0;  // bytes in the Cord
  const size_t piece_bytes_;
  absl::Cord* out_;
  std::string piece_;
  uint8_t* next_ = nullptr;
  uint8_t* end_ = nullptr;
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

// SerializeResponseWithNames for either response holding a plan
// (PartitionGraphResponse, PlanResponse).
template <typename Response>
absl::Status WriteResponseWithNames(const CompactGraph& graph, Response* by_index,
                                    absl::Cord* bytes, size_t piece_bytes) {
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

  // A large graph's names are out of cache by the time its plan is written,
  // and a partition's nodes need not follow graph order: each name is
  // prefetched a few names before it is copied.
  constexpr int kNameAhead = 16;
  const auto prefetch_name = [&graph](NodeId v) { __builtin_prefetch(graph.name(v).data()); };

  WireWriter out(response_size, piece_bytes, bytes);
  out.Reserve(FieldHeaderSize(plan_size));
  out.FieldHeader(kPlanTag, plan_size);
  for (NodeId v = 0; v < partition_of.size(); ++v) {
    if (v + kNameAhead < partition_of.size()) prefetch_name(v + kNameAhead);
    const int32_t partition = partition_of[v];
    if (partition < 0) continue;
    const absl::string_view name = graph.name(v);
    const size_t assignment_size = AssignmentSize(name, partition);
    out.Reserve(FieldSize(assignment_size));
    out.FieldHeader(kAssignmentTag, assignment_size);
    out.Field(kNodeNameTag, name);
    if (partition != 0) {
      out.Byte(kNodePartitionTag);
      out.SignedVarint(partition);
    }
  }
  for (const PartitionBytes& partition : partitions) {
    out.Reserve(FieldHeaderSize(partition.payload) + partition.before_nodes.size());
    out.FieldHeader(kPartitionTag, partition.payload);
    out.Copy(partition.before_nodes);
    const std::vector<NodeId>& nodes = partition.nodes;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (i + kNameAhead < nodes.size()) prefetch_name(nodes[i + kNameAhead]);
      const absl::string_view name = graph.name(nodes[i]);
      out.Reserve(FieldSize(name.size()));
      out.Field(kPartitionNodeTag, name);
    }
    out.Append(partition.after_nodes);
  }
  out.Append(plan_rest);
  out.Append(response_rest);
  if (!out.Finish()) {
    return absl::InternalError(absl::StrCat("the plan by name was sized at ", response_size,
                                            " bytes and written as ", bytes->size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SerializeWithinLimit(const google::protobuf::Message& response, absl::Cord* bytes) {
  std::string serialized;
  if (!response.SerializeToString(&serialized)) {
    return TooLargeError(response.ByteSizeLong());
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

}  // namespace partplan

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

// Writes `size` bytes with `write(WireWriter&)`, after checking that every
// length in them fits 32 bits.
template <typename Write>
absl::Status WriteResponse(size_t size, size_t piece_bytes, absl::Cord* bytes, Write write) {
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) return TooLargeError(size);
  WireWriter out(size, piece_bytes, bytes);
  write(out);
  if (!out.Finish()) {
    return absl::InternalError(absl::StrCat("the plan by name was sized at ", size,
                                            " bytes and written as ", bytes->size()));
  }
  return absl::OkStatus();
}

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
  return WriteResponse(FieldSize(body.size()) + response_rest.size(), piece_bytes, bytes,
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

absl::Status SerializeResponseWithNames(const CompactGraph& graph, v1::ShardGraphResponse* by_index,
                                        absl::Cord* bytes, size_t piece_bytes) {
  const PlanBody body(graph, by_index, by_index->mutable_shard_by_node_index(),
                      by_index->mutable_shards());
  return WriteResponse(body.size(), piece_bytes, bytes,
                       [&body](WireWriter& out) { body.Write(out); });
}

}  // namespace partplan

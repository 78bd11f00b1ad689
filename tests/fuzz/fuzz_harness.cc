#include "tests/fuzz/fuzz_harness.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/reflection.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"
#include "planner/graph/graph_import.h"
#include "planner/wire/parse_failure.h"
#include "planner/wire/plan_with_names.h"

#ifdef PARTPLAN_LIBFUZZER
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);
#endif

namespace partplan::fuzz {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Calls `visit(message, field)` for every set field of `message` and its
// set submessages, depth first.
template <typename Visit>
void ForEachSetField(const Message& message, const Visit& visit) {
  const Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    visit(message, field);
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        ForEachSetField(reflection->GetRepeatedMessage(message, field, i), visit);
      }
    } else {
      ForEachSetField(reflection->GetMessage(message, field), visit);
    }
  }
}

// A field of a (sub)message to edit: one element of a repeated field, or
// the field itself (index -1).
struct Slot {
  Message* message;
  const FieldDescriptor* field;
  int index;
};

// Every field of `message` and its set submessages, set or not (an unset
// field can be set), and every element of the repeated ones; and every
// string value, to reuse as names.
void CollectSlots(Message* message, int depth, std::vector<Slot>* slots,
                  std::vector<std::string>* strings) {
  const Reflection* reflection = message->GetReflection();
  const google::protobuf::Descriptor* descriptor = message->GetDescriptor();
  for (int f = 0; f < descriptor->field_count(); ++f) {
    const FieldDescriptor* field = descriptor->field(f);
    if (field->is_repeated()) {
      const int size = reflection->FieldSize(*message, field);
      slots->push_back({message, field, -1});
      for (int i = 0; i < size; ++i) {
        slots->push_back({message, field, i});
        if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && depth < 8) {
          CollectSlots(reflection->MutableRepeatedMessage(message, field, i), depth + 1, slots,
                       strings);
        } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
          strings->push_back(reflection->GetRepeatedString(*message, field, i));
        }
      }
    } else {
      slots->push_back({message, field, -1});
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        if (reflection->HasField(*message, field) && depth < 8) {
          CollectSlots(reflection->MutableMessage(message, field), depth + 1, slots, strings);
        }
      } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING &&
                 reflection->HasField(*message, field)) {
        strings->push_back(reflection->GetString(*message, field));
      }
    }
  }
}

template <typename T>
T Pick(std::mt19937_64& random, std::initializer_list<T> values) {
  return *(values.begin() + random() % values.size());
}

int64_t EdgeInteger(std::mt19937_64& random, int64_t current) {
  switch (random() % 4) {
    case 0:
      return Pick<int64_t>(random, {0, 1, -1, 2, 128, 129, 4096, int64_t{1} << 31,
                                    int64_t{1} << 32, int64_t{1} << 62,
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min(),
                                    std::numeric_limits<int32_t>::max(),
                                    std::numeric_limits<int32_t>::min()});
    case 1:  // a step either way, wrapping (two's complement, no overflow)
      return static_cast<int64_t>(static_cast<uint64_t>(current) + random() % 5 - 2);
    case 2:
      return static_cast<int64_t>(static_cast<uint64_t>(current) << 1);
    default:
      return static_cast<int64_t>(random() % 64);
  }
}

double EdgeDouble(std::mt19937_64& random, double current) {
  return Pick<double>(random, {0.0, -0.0, 1.0, -1.0, 1e-300, 1e300, current * 10,
                               std::numeric_limits<double>::quiet_NaN(),
                               std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::max(),
                               std::numeric_limits<double>::denorm_min()});
}

std::string EdgeString(std::mt19937_64& random, const std::vector<std::string>& strings,
                       const std::string& current) {
  switch (random() % 6) {
    case 0:
    case 1:
    case 2:
      if (!strings.empty()) return strings[random() % strings.size()];
      return current;
    case 3:
      return "";
    case 4:
      return current.substr(0, current.size() / 2);
    default:
      return current + Pick<const char*>(random, {".0", "_1", ".", "x", "submod_0", "getitem",
                                                   "Embedding", "torch.float32"});
  }
}

// Sets a scalar slot (or, for a message slot, clears it).
void EditScalar(const Slot& slot, std::mt19937_64& random,
                const std::vector<std::string>& strings) {
  Message* m = slot.message;
  const Reflection* r = m->GetReflection();
  const FieldDescriptor* f = slot.field;
  const bool repeated = slot.index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      const int64_t v = EdgeInteger(random, repeated ? r->GetRepeatedInt32(*m, f, slot.index)
                                                     : r->GetInt32(*m, f));
      const int32_t value = static_cast<int32_t>(v);
      repeated ? r->SetRepeatedInt32(m, f, slot.index, value) : r->SetInt32(m, f, value);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      const int64_t value = EdgeInteger(random, repeated ? r->GetRepeatedInt64(*m, f, slot.index)
                                                         : r->GetInt64(*m, f));
      repeated ? r->SetRepeatedInt64(m, f, slot.index, value) : r->SetInt64(m, f, value);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      const uint32_t value = static_cast<uint32_t>(EdgeInteger(
          random, repeated ? r->GetRepeatedUInt32(*m, f, slot.index) : r->GetUInt32(*m, f)));
      repeated ? r->SetRepeatedUInt32(m, f, slot.index, value) : r->SetUInt32(m, f, value);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      const uint64_t value = static_cast<uint64_t>(EdgeInteger(
          random, static_cast<int64_t>(repeated ? r->GetRepeatedUInt64(*m, f, slot.index)
                                                : r->GetUInt64(*m, f))));
      repeated ? r->SetRepeatedUInt64(m, f, slot.index, value) : r->SetUInt64(m, f, value);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      const double value = EdgeDouble(random, repeated ? r->GetRepeatedDouble(*m, f, slot.index)
                                                       : r->GetDouble(*m, f));
      repeated ? r->SetRepeatedDouble(m, f, slot.index, value) : r->SetDouble(m, f, value);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const float value = static_cast<float>(EdgeDouble(random, 0));
      repeated ? r->SetRepeatedFloat(m, f, slot.index, value) : r->SetFloat(m, f, value);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      const bool value = !(repeated ? r->GetRepeatedBool(*m, f, slot.index) : r->GetBool(*m, f));
      repeated ? r->SetRepeatedBool(m, f, slot.index, value) : r->SetBool(m, f, value);
      break;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      // Known values mostly; sometimes one no enum has (proto3 keeps it).
      const int count = f->enum_type()->value_count();
      const int value = random() % 4 == 0
                            ? static_cast<int>(random() % 9) - 2 + count
                            : f->enum_type()->value(static_cast<int>(random() % count))->number();
      repeated ? r->SetRepeatedEnumValue(m, f, slot.index, value) : r->SetEnumValue(m, f, value);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string current =
          repeated ? r->GetRepeatedString(*m, f, slot.index) : r->GetString(*m, f);
      std::string value = EdgeString(random, strings, current);
      repeated ? r->SetRepeatedString(m, f, slot.index, std::move(value))
               : r->SetString(m, f, std::move(value));
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      if (!repeated) {
        if (r->HasField(*m, f)) {
          r->ClearField(m, f);
        } else {
          r->MutableMessage(m, f);  // set, empty
        }
      }
      break;
  }
}

// Deletes, duplicates, swaps or adds elements of a repeated slot.
void EditRepeated(const Slot& slot, std::mt19937_64& random) {
  Message* m = slot.message;
  const Reflection* r = m->GetReflection();
  const FieldDescriptor* f = slot.field;
  const int size = r->FieldSize(*m, f);
  const int op = static_cast<int>(random() % 4);
  if (size > 0 && op == 0) {  // delete one
    const int i = static_cast<int>(random() % size);
    for (int j = i; j + 1 < size; ++j) r->SwapElements(m, f, j, j + 1);
    r->RemoveLast(m, f);
  } else if (size > 1 && op == 1) {  // swap two
    r->SwapElements(m, f, static_cast<int>(random() % size), static_cast<int>(random() % size));
  } else if (size > 0 && op == 2 && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    // Duplicate one right after itself.
    const int i = static_cast<int>(random() % size);
    r->AddMessage(m, f)->CopyFrom(r->GetRepeatedMessage(*m, f, i));
    for (int j = size; j > i + 1; --j) r->SwapElements(m, f, j, j - 1);
  } else {  // add a default element at the end
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        r->AddInt32(m, f, static_cast<int32_t>(random() % 8));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        r->AddInt64(m, f, static_cast<int64_t>(random() % 8));
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        r->AddString(m, f, "x");
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE:
        if (size > 0) {
          r->AddMessage(m, f)->CopyFrom(r->GetRepeatedMessage(*m, f, random() % size));
        } else {
          r->AddMessage(m, f);
        }
        break;
      default:
        break;
    }
  }
}

}  // namespace

InputLimits FuzzLimits() {
  InputLimits limits;
  limits.max_nodes = 20000;
  limits.max_values_per_node = 20000;
  limits.max_values = 200000;
  limits.max_devices = 1024;
  return limits;
}

void FailWith(absl::string_view rpc, const std::string& what) {
  std::fprintf(stderr, "==partplan fuzz finding== %.*s: %s\n", static_cast<int>(rpc.size()),
               rpc.data(), what.c_str());
  std::fflush(stderr);
  std::abort();
}

void CheckStatusContract(const absl::Status& status, absl::string_view rpc) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kFailedPrecondition:
      return;
    case absl::StatusCode::kInvalidArgument: {
      const absl::optional<std::string> field = InvalidFieldPath(status);
      if (!field.has_value() || field->empty()) {
        FailWith(rpc, "INVALID_ARGUMENT without a field path: " + status.ToString());
      }
      if (!absl::StartsWith(status.message(), *field + ": ")) {
        FailWith(rpc, "INVALID_ARGUMENT whose message does not start with its field: " +
                          status.ToString());
      }
      return;
    }
    default:
      FailWith(rpc, "a code the planners must not answer with: " + status.ToString());
  }
}

// A plan by node index (NODE_REFERENCES_INDICES) names only nodes and
// partitions (or shards) that exist: `group_of_node` has one entry a node,
// each -1 or a group, and every group's node_indices are nodes.
template <typename Group>
void CheckNodeIndices(const google::protobuf::RepeatedField<int32_t>& group_of_node,
                      const google::protobuf::RepeatedPtrField<Group>& groups,
                      const v1::PlanSummary& summary, absl::string_view rpc) {
  if (!group_of_node.empty() && group_of_node.size() != summary.node_count()) {
    FailWith(rpc, absl::StrCat("a partition by node index for ", group_of_node.size(), " nodes of ",
                               summary.node_count()));
  }
  for (const int32_t group : group_of_node) {
    if (group < -1 || group >= groups.size()) {
      FailWith(rpc, absl::StrCat("a node in partition ", group, " of ", groups.size()));
    }
  }
  for (const Group& group : groups) {
    for (const int32_t node : group.node_indices()) {
      if (node < 0 || node >= summary.node_count()) {
        FailWith(rpc, absl::StrCat("node index ", node, " of ", summary.node_count(), " nodes"));
      }
    }
  }
}

void CheckParseFailure(const google::protobuf::Descriptor& type, absl::string_view bytes,
                       absl::string_view rpc) {
  const absl::Status status = ParseFailure(type, ChunkedBytes(bytes));
  const absl::optional<std::string> field = InvalidFieldPath(status);
  if (status.code() != absl::StatusCode::kInvalidArgument || !field.has_value()) {
    FailWith(rpc, "bytes that do not parse got no field violation: " + status.ToString());
  }
  if (!field->empty() && !absl::StartsWith(status.message(), *field + ": ")) {
    FailWith(rpc, "a parse failure whose message does not start with its field: " +
                      status.ToString());
  }
}

void CheckResponseContract(const google::protobuf::Message& response, absl::string_view rpc) {
  const v1::PartitionPlan* plan = nullptr;
  if (const auto* r = dynamic_cast<const v1::PartitionGraphResponse*>(&response)) plan = &r->plan();
  if (const auto* r = dynamic_cast<const v1::PlanResponse*>(&response)) plan = &r->plan();
  if (plan != nullptr) {
    CheckNodeIndices(plan->partition_by_node_index(), plan->partitions(), plan->summary(), rpc);
  }
  if (const auto* r = dynamic_cast<const v1::ShardGraphResponse*>(&response)) {
    CheckNodeIndices(r->shard_by_node_index(), r->shards(), r->summary(), rpc);
  }
  ForEachSetField(response, [rpc](const Message& message, const FieldDescriptor* field) {
    const Reflection* r = message.GetReflection();
    const std::string& name = field->name();
    const int count = field->is_repeated() ? r->FieldSize(message, field) : 1;
    for (int i = 0; i < count; ++i) {
      const std::string where =
          absl::StrCat(message.GetDescriptor()->name(), ".", name,
                       field->is_repeated() ? absl::StrCat("[", i, "]") : "");
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_INT64 &&
          absl::StrContains(name, "bytes")) {
        const int64_t value =
            field->is_repeated() ? r->GetRepeatedInt64(message, field, i) : r->GetInt64(message, field);
        if (value < 0) FailWith(rpc, absl::StrCat(where, " is negative: ", value));
      }
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
        const double value = field->is_repeated() ? r->GetRepeatedDouble(message, field, i)
                                                  : r->GetDouble(message, field);
        if (!std::isfinite(value)) FailWith(rpc, absl::StrCat(where, " is not finite: ", value));
        if ((absl::StrContains(name, "seconds") || name == "cost") && value < 0) {
          FailWith(rpc, absl::StrCat(where, " is negative: ", value));
        }
      }
    }
  });
}

void ClearWallTimes(google::protobuf::Message* message) {
  const Reflection* r = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->name() == "planner_seconds") {
      r->ClearField(message, field);
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*message, field); ++i) {
          ClearWallTimes(r->MutableRepeatedMessage(message, field, i));
        }
      } else {
        ClearWallTimes(r->MutableMessage(message, field));
      }
    }
  }
}

namespace {

// CheckServedAsSerialized for the RPC `rpc` whose bytes `serialized` writes.
template <typename Request, typename Response>
void CheckSerializedRpc(absl::string_view rpc,
                        absl::Status (*serialized)(const Request&, const GraphSource&,
                                                   const InputLimits&, const CancellationToken&,
                                                   absl::Cord*),
                        const Request& request, const GraphSource& graph,
                        const absl::Status& status, const std::string& response_bytes) {
  const std::string name = absl::StrCat(rpc, "Serialized");
  absl::Cord served;
  const absl::Status served_status =
      serialized(request, graph, FuzzLimits(), CancellationToken(), &served);
  if (served_status != status) {
    FailWith(rpc, absl::StrCat(name, " gave ", served_status.ToString(), " against ",
                               status.ToString()));
  }
  if (!status.ok()) return;
  Response response;
  if (!response.ParseFromString(std::string(served))) {
    FailWith(rpc, name + "'s bytes do not parse");
  }
  ClearWallTimes(&response);
  if (Serialize(response) != response_bytes) {
    FailWith(rpc, absl::StrCat(name, "'s response differs from ", rpc, "'s"));
  }
  if (request.node_references() != v1::NODE_REFERENCES_NAMES) return;
  // The same plan by name written in pieces of a few bytes: a fuzzed
  // response is far under the 1 MiB pieces the server writes, so this is
  // where field headers and blobs cross pieces (names and assignments are
  // kept whole, in a larger piece if need be).
  Request by_index_request = request;
  by_index_request.set_node_references(v1::NODE_REFERENCES_INDICES);
  absl::Cord by_index_bytes;
  Response by_index;
  absl::StatusOr<CompactGraph> imported = ImportGraph(graph, FuzzLimits(), CancellationToken());
  const absl::Status by_index_status =
      serialized(by_index_request, graph, FuzzLimits(), CancellationToken(), &by_index_bytes);
  if (!by_index_status.ok() || !imported.ok() ||
      !by_index.ParseFromString(std::string(by_index_bytes))) {
    FailWith(rpc, absl::StrCat("the plan by index (", by_index_status.ToString(),
                               ") or the graph's import (", imported.status().ToString(),
                               ") failed where the plan by name did not"));
  }
  const size_t piece_bytes = 1 + response_bytes.size() % 61;
  absl::Cord in_pieces;
  const absl::Status pieces_status =
      SerializeResponseWithNames(*imported, &by_index, &in_pieces, piece_bytes);
  Response from_pieces;
  if (!pieces_status.ok() || !from_pieces.ParseFromString(std::string(in_pieces))) {
    FailWith(rpc, absl::StrCat("the plan by name in pieces of ", piece_bytes,
                               " bytes does not parse: ", pieces_status.ToString()));
  }
  ClearWallTimes(&from_pieces);
  if (Serialize(from_pieces) != response_bytes) {
    FailWith(rpc, absl::StrCat("the plan by name in pieces of ", piece_bytes,
                               " bytes differs from ", rpc, "'s"));
  }
}

}  // namespace

void CheckServedAsSerialized(const v1::PartitionGraphRequest& request, const GraphSource& graph,
                             const absl::Status& status, const std::string& response_bytes) {
  CheckSerializedRpc<v1::PartitionGraphRequest, v1::PartitionGraphResponse>(
      "PartitionGraph", &PartitionGraphSerialized, request, graph, status, response_bytes);
}

void CheckServedAsSerialized(const v1::PlanRequest& request, const GraphSource& graph,
                             const absl::Status& status, const std::string& response_bytes) {
  CheckSerializedRpc<v1::PlanRequest, v1::PlanResponse>("Plan", &PlanSerialized, request, graph,
                                                        status, response_bytes);
}

void CheckServedAsSerialized(const v1::SplitGraphRequest& request, const GraphSource& graph,
                             const absl::Status& status, const std::string& response_bytes) {
  constexpr absl::string_view kRpc = "SplitGraph";
  absl::Cord served;
  const absl::Status served_status =
      SplitGraphSerialized(request, graph, FuzzLimits(), CancellationToken(), &served);
  if (served_status != status) {
    FailWith(kRpc, absl::StrCat("SplitGraphSerialized gave ", served_status.ToString(), " against ",
                                status.ToString()));
  }
  if (!status.ok()) return;
  // SplitGraph's message is built from the split, these bytes written from
  // it: they must be protobuf's own serialisation of that message.
  const std::string bytes(served);
  v1::SplitGraphResponse response;
  if (!response.ParseFromString(bytes) || Serialize(response) != bytes) {
    FailWith(kRpc, "SplitGraphSerialized's bytes are not protobuf's serialisation of a response");
  }
  if (bytes != response_bytes) {
    FailWith(kRpc, "SplitGraphSerialized's response differs from SplitGraph's");
  }
}

void CheckServedAsSerialized(const v1::ShardGraphRequest& request, const GraphSource& graph,
                             const absl::Status& status, const std::string& response_bytes) {
  CheckSerializedRpc<v1::ShardGraphRequest, v1::ShardGraphResponse>(
      "ShardGraph", &ShardGraphSerialized, request, graph, status, response_bytes);
}

std::string Serialize(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

bool MutateMessage(google::protobuf::Message* message, std::mt19937_64& random) {
  const int edits = 1 + static_cast<int>(random() % 3);
  bool edited = false;
  for (int e = 0; e < edits; ++e) {
    std::vector<Slot> slots;
    std::vector<std::string> strings;
    CollectSlots(message, 0, &slots, &strings);
    if (slots.empty()) break;
    const Slot& slot = slots[random() % slots.size()];
    if (slot.field->is_repeated() && slot.index < 0) {
      EditRepeated(slot, random);
    } else {
      EditScalar(slot, random, strings);
    }
    edited = true;
  }
  return edited;
}

size_t CustomMutate(const FuzzTarget& target, uint8_t* data, size_t size, size_t max_size,
                    unsigned int seed) {
  std::mt19937_64 random(seed);
#ifdef PARTPLAN_LIBFUZZER
  if (random() % 4 != 0) {
    std::string bytes(reinterpret_cast<const char*>(data), size);
    if (target.mutate(&bytes, random) && bytes.size() <= max_size) {
      std::memcpy(data, bytes.data(), bytes.size());
      return bytes.size();
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
#else
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (!target.mutate(&bytes, random) || bytes.size() > max_size) return size;
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
#endif
}

}  // namespace partplan::fuzz

// The fuzzers of partplan: each takes the bytes libFuzzer gives as a
// serialised request of one RPC, reads it as the server does (its graph
// imported from the bytes) and parsed whole, runs the planner library's
// entry point both ways, and aborts (a finding) when the two answers differ
// or an answer breaks the contract entry_points.h states:
//   - the code is OK, INVALID_ARGUMENT or FAILED_PRECONDITION (never
//     INTERNAL, UNKNOWN, CANCELLED, ...);
//   - INVALID_ARGUMENT names the field (a BadRequest path) and its message
//     starts with it;
//   - a response holds no negative byte count, and no NaN, infinite or
//     negative time;
//   - the same request gives the same response bytes again (with
//     summary.planner_seconds, wall time, cleared);
//   - PartitionGraph, Plan and ShardGraph as the server answers them
//     (PartitionGraphSerialized, PlanSerialized, ShardGraphSerialized, which
//     write a plan by name without a message) give the same status and
//     response on a second call, and so does the plan by index with its
//     names written in pieces of a few bytes (the server's are 1 MiB, more
//     than a fuzzed response).
// Crashes, leaks, undefined behaviour and timeouts are findings too: the
// fuzz build adds ASan and UBSan (.bazelrc, --config=fuzz).
//
// A fuzzer's source is one line:
//
//   PARTPLAN_FUZZ_TARGET(PartitionGraph)
//
// Built with --config=fuzz it is a libFuzzer binary whose custom mutator
// edits the request as a message half the time (see MutateRequest). Built
// normally (gcc) it replays the files and directories it is given, and
// tests/fuzz's regression tests run every target over the seed corpus, some
// mutations of it and the inputs saved under tests/fuzz/regressions/.
#ifndef PARTPLAN_TESTS_FUZZ_FUZZ_HARNESS_H_
#define PARTPLAN_TESTS_FUZZ_FUZZ_HARNESS_H_

#include <google/protobuf/message.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/api/entry_points.h"
#include "planner/base/cancellation.h"
#include "planner/base/limits.h"
#include "planner/graph/serialized_request.h"
#include "planner/api/planner_rpcs.h"

namespace partplan::fuzz {

// The limits the fuzzers run with: small enough that no input of the size
// libFuzzer makes runs for long, as a server's limits would keep it.
InputLimits FuzzLimits();

// Prints the finding and aborts.
[[noreturn]] void FailWith(absl::string_view rpc, const std::string& what);

// Aborts when `status` breaks the contract above.
void CheckStatusContract(const absl::Status& status, absl::string_view rpc);

// Aborts when `response` holds a negative *bytes* field, a non-finite
// double, a negative time (a *seconds* field or `cost`), or, in a plan by
// node index, an index of no node or partition.
void CheckResponseContract(const google::protobuf::Message& response, absl::string_view rpc);

// Clears every planner_seconds field (wall time) in `message`.
void ClearWallTimes(google::protobuf::Message* message);

// Deterministic serialisation.
std::string Serialize(const google::protobuf::Message& message);

// Edits `message` in place at random as a message: a field set to an edge
// value (0, -1, the extremes, NaN, infinities), to a name found elsewhere
// in the message (so node references move), or to an unknown enum value; a
// repeated element deleted, duplicated, swapped or added. False when it
// found nothing to edit.
bool MutateMessage(google::protobuf::Message* message, std::mt19937_64& random);

// Runs `entry` on `request` and `graph`, checks the contract, and returns
// the status and (its wall times cleared) the response's bytes.
template <typename Request, typename Response>
absl::Status RunChecked(absl::Status (*entry)(const Request&, const GraphSource&,
                                              const InputLimits&, const CancellationToken&,
                                              Response*),
                        const Request& request, const GraphSource& graph, absl::string_view rpc,
                        std::string* response_bytes) {
  CancellationToken token;
  Response response;
  const absl::Status status = entry(request, graph, FuzzLimits(), token, &response);
  CheckStatusContract(status, rpc);
  if (status.ok()) {
    CheckResponseContract(response, rpc);
    ClearWallTimes(&response);
    *response_bytes = Serialize(response);
  }
  return status;
}

// Aborts unless PartitionGraphSerialized (PlanSerialized,
// ShardGraphSerialized) on `request` and
// `graph` gives `status`, and when OK, bytes that parse to the response
// `response_bytes` holds (serialised by Serialize, wall times cleared); and,
// for a plan by name, unless SerializeResponseWithNames in pieces of 1 to 61
// bytes gives that response too.
void CheckServedAsSerialized(const v1::PartitionGraphRequest& request, const GraphSource& graph,
                             const absl::Status& status, const std::string& response_bytes);
void CheckServedAsSerialized(const v1::PlanRequest& request, const GraphSource& graph,
                             const absl::Status& status, const std::string& response_bytes);
void CheckServedAsSerialized(const v1::ShardGraphRequest& request, const GraphSource& graph,
                             const absl::Status& status, const std::string& response_bytes);
// For SplitGraph, whose message is SplitGraphSerialized's bytes parsed:
// aborts unless those bytes give `status` and are protobuf's serialisation
// of the response `response_bytes` holds.
void CheckServedAsSerialized(const v1::SplitGraphRequest& request, const GraphSource& graph,
                             const absl::Status& status, const std::string& response_bytes);

// What the server answers bytes that do not parse as the request with
// (ParseFailure) must be INVALID_ARGUMENT carrying a field path, the message
// starting with it when it is not the request itself ("").
void CheckParseFailure(const google::protobuf::Descriptor& type, absl::string_view bytes,
                       absl::string_view rpc);

// One fuzzer: the request run both ways the server may run it, its graph
// imported from the bytes (the request's other fields parsed) and parsed
// whole, each checked; the two must give the same answer, and the same
// again on a second run. Bytes that do not parse whole but split get
// INVALID_ARGUMENT from the import of their graph, as the server answers.
template <typename Request, typename Response>
int RunOne(const uint8_t* data, size_t size,
           absl::Status (*entry)(const Request&, const GraphSource&, const InputLimits&,
                                 const CancellationToken&, Response*),
           absl::string_view rpc) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  Request rest;
  const std::optional<ChunkedBytes> graph_bytes = ParseAllButGraph(bytes, &rest);
  Request request;
  const bool parses = request.ParseFromArray(data, static_cast<int>(size));
  if (!parses) CheckParseFailure(*Request::descriptor(), bytes, rpc);
  if (!parses && !graph_bytes.has_value()) return -1;  // not a request

  std::string from_bytes, from_bytes_again, from_parse;
  if (graph_bytes.has_value()) {
    const GraphSource graph = GraphSource::Serialized(*graph_bytes);
    const absl::Status status = RunChecked(entry, rest, graph, rpc, &from_bytes);
    if constexpr (std::is_same_v<Request, v1::PartitionGraphRequest> ||
                  std::is_same_v<Request, v1::PlanRequest> ||
                  std::is_same_v<Request, v1::ShardGraphRequest> ||
                  std::is_same_v<Request, v1::SplitGraphRequest>) {
      CheckServedAsSerialized(rest, graph, status, from_bytes);
    }
    if (!parses) {
      if (status.code() != absl::StatusCode::kInvalidArgument) {
        FailWith(rpc, "a graph that does not parse was not INVALID_ARGUMENT: " + status.ToString());
      }
      return 0;
    }
    const absl::Status again = RunChecked(entry, rest, graph, rpc, &from_bytes_again);
    if (again != status || from_bytes_again != from_bytes) {
      FailWith(rpc, "the same request gave two different answers from its bytes");
    }
    const absl::Status parsed_status =
        RunChecked(entry, request, request.graph(), rpc, &from_parse);
    if (parsed_status != status || from_parse != from_bytes) {
      FailWith(rpc, "the graph's bytes and its parse gave different answers: " + status.ToString() +
                        " against " + parsed_status.ToString());
    }
    return 0;
  }
  // A graph in pieces (protobuf merges them): the server parses it whole.
  const absl::Status status = RunChecked(entry, request, request.graph(), rpc, &from_parse);
  const absl::Status again = RunChecked(entry, request, request.graph(), rpc, &from_bytes_again);
  if (again != status || from_bytes_again != from_parse) {
    FailWith(rpc, "the same request gave two different answers");
  }
  return 0;
}

// What PARTPLAN_FUZZ_TARGET defines for the replay and regression mains.
struct FuzzTarget {
  PlannerRpc rpc;
  int (*run)(const uint8_t* data, size_t size);
  // Parses `bytes` as the request, edits it (MutateMessage) and
  // re-serialises it; false when it does not parse or nothing changed.
  bool (*mutate)(std::string* bytes, std::mt19937_64& random);
};
const FuzzTarget& Target();

template <typename Request>
bool MutateAs(std::string* bytes, std::mt19937_64& random) {
  Request request;
  if (!request.ParseFromString(*bytes) || !MutateMessage(&request, random)) return false;
  *bytes = Serialize(request);
  return true;
}

// libFuzzer's custom mutator for `target`: a message edit three times in
// four, else (or when the edit fails or grows too large) libFuzzer's own
// byte-level mutation.
size_t CustomMutate(const FuzzTarget& target, uint8_t* data, size_t size, size_t max_size,
                    unsigned int seed);

}  // namespace partplan::fuzz

#ifdef PARTPLAN_LIBFUZZER
#define PARTPLAN_FUZZ_CUSTOM_MUTATOR_                                                       \
  extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,  \
                                            unsigned int seed) {                          \
    return ::partplan::fuzz::CustomMutate(::partplan::fuzz::Target(), data, size, max_size, \
                                          seed);                                          \
  }
#else
#define PARTPLAN_FUZZ_CUSTOM_MUTATOR_
#endif

// Defines the fuzzer of RPC `Name` (PartitionGraph, SplitGraph, ...).
#define PARTPLAN_FUZZ_TARGET(Name)                                                        \
  namespace partplan::fuzz {                                                              \
  const FuzzTarget& Target() {                                                            \
    static const FuzzTarget target = {                                                    \
        PlannerRpc::k##Name,                                                              \
        [](const uint8_t* data, size_t size) {                                            \
          return RunOne<v1::Name##Request, v1::Name##Response>(data, size, &::partplan::Name, \
                                                               #Name);                    \
        },                                                                                \
        &MutateAs<v1::Name##Request>};                                                    \
    return target;                                                                        \
  }                                                                                       \
  }                                                                                       \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {               \
    return ::partplan::fuzz::Target().run(data, size);                                    \
  }                                                                                       \
  PARTPLAN_FUZZ_CUSTOM_MUTATOR_

#endif  // PARTPLAN_TESTS_FUZZ_FUZZ_HARNESS_H_

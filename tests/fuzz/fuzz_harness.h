// The fuzzers of partplan: each takes the bytes libFuzzer gives as a
// serialised request of one RPC, parses it as the server does, runs the
// planner library's entry point, and aborts (a finding) when the answer
// breaks the contract entry_points.h states:
//   - the code is OK, INVALID_ARGUMENT or FAILED_PRECONDITION (never
//     INTERNAL, UNKNOWN, CANCELLED, ...);
//   - INVALID_ARGUMENT names the field (a BadRequest path) and its message
//     starts with it;
//   - a response holds no negative byte count, and no NaN, infinite or
//     negative time;
//   - the same request gives the same response bytes again (with
//     summary.planner_seconds, wall time, cleared).
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
#include <random>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "partplan/v1/planner_service.pb.h"
#include "planner/cancellation.h"
#include "planner/entry_points.h"
#include "planner/limits.h"
#include "server/planner_rpc.h"

namespace partplan::fuzz {

// The limits the fuzzers run with: small enough that no input of the size
// libFuzzer makes runs for long, as a server's limits would keep it.
InputLimits FuzzLimits();

// Prints the finding and aborts.
[[noreturn]] void FailWith(absl::string_view rpc, const std::string& what);

// Aborts when `status` breaks the contract above.
void CheckStatusContract(const absl::Status& status, absl::string_view rpc);

// Aborts when `response` holds a negative *bytes* field, a non-finite
// double, or a negative time (a *seconds* field or `cost`).
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

// One fuzzer: parse, run, check.
template <typename Request, typename Response>
int RunOne(const uint8_t* data, size_t size,
           absl::Status (*entry)(const Request&, const InputLimits&, const CancellationToken&,
                                 Response*),
           absl::string_view rpc) {
  Request request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return -1;  // not a request
  const InputLimits limits = FuzzLimits();
  CancellationToken token;
  Response response;
  const absl::Status status = entry(request, limits, token, &response);
  CheckStatusContract(status, rpc);
  if (!status.ok()) return 0;
  CheckResponseContract(response, rpc);
  Response again;
  CancellationToken token_again;
  const absl::Status status_again = entry(request, limits, token_again, &again);
  if (!status_again.ok()) {
    FailWith(rpc, "the same request failed the second time: " + status_again.ToString());
  }
  ClearWallTimes(&response);
  ClearWallTimes(&again);
  if (Serialize(response) != Serialize(again)) {
    FailWith(rpc, "the same request gave two different responses");
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

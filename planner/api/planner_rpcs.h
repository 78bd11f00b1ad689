// The PartitionPlanner RPCs in one table: for each, its name, its request and
// response messages, and the entry point that answers it with the response's
// bytes. Everything per-RPC outside the library follows from this table: the
// server registers a handler per row and indexes its metrics and log lines by
// row, and test backends answer any row. Adding an RPC is the .proto, the
// planner, a row here (with its PlannerRpc) and its tests.
//
//   for (const PlannerRpcMethod& rpc : kPlannerRpcs) Register(rpc.name, ...);
//
//   const PlannerRpcMethod& rpc = PlannerRpcOf(PlannerRpc::kValidate);
//   PARTPLAN_ASSIGN_OR_RETURN(PlannerRequest request, ReadPlannerRequest(rpc, bytes, &arena));
//   absl::Cord response;
//   PARTPLAN_RETURN_IF_ERROR(
//       rpc.answer(request.message(), request.graph(), limits, token, &arena, &response));
//
// tests/planner/planner_rpcs_test.cc checks the rows against the service's
// descriptor (names, order, message types), so a new RPC in the .proto cannot
// be left out here.
#ifndef PARTPLAN_PLANNER_API_PLANNER_RPCS_H_
#define PARTPLAN_PLANNER_API_PLANNER_RPCS_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/message.h"
#include "planner/api/entry_points.h"
#include "planner/base/cancellation.h"
#include "planner/base/limits.h"
#include "planner/graph/graph_import.h"
#include "planner/wire/plan_with_names.h"

namespace partplan {

// The full name of the service, as gRPC and its metrics spell it.
inline constexpr absl::string_view kPlannerServiceName = "partplan.v1.PartitionPlanner";

// The rows of kPlannerRpcs, in the order of the .proto file.
enum class PlannerRpc {
  kPartitionGraph,
  kSplitGraph,
  kShardGraph,
  kBuildPipelineGraph,
  kPlanDataParallel,
  kPlan,
  kValidate,
  kPlanTraining,
  kParallelize,
};

// Answers `request` (of the row's request type; its graph, when serialised,
// as `graph`) with the response's serialised bytes in `*response_bytes`. A
// response built as a message lives on `arena`, which the caller frees after
// the call has been answered.
using AnswerFunction = absl::Status (*)(const google::protobuf::Message& request,
                                        const GraphSource& graph, const InputLimits& limits,
                                        const CancellationToken& token,
                                        google::protobuf::Arena* arena,
                                        absl::Cord* response_bytes);

struct PlannerRpcMethod {
  PlannerRpc rpc;
  absl::string_view name;  // the method name, e.g. "Validate"
  const google::protobuf::Message& (*request_prototype)();
  const google::protobuf::Message& (*response_prototype)();
  AnswerFunction answer;
  // Whether a plan cache may answer the RPC from the bytes of an earlier
  // answer: not Validate, which is cheaper than a cache lookup.
  bool cacheable;
};

namespace planner_rpcs_internal {

template <typename Message>
const google::protobuf::Message& Prototype() {
  return Message::default_instance();
}

// A row for an entry point that fills a response message (entry_points.h).
template <typename Request, typename Response,
          absl::Status (*kEntryPoint)(const Request&, const GraphSource&, const InputLimits&,
                                      const CancellationToken&, Response*)>
absl::Status AnswerByMessage(const google::protobuf::Message& request, const GraphSource& graph,
                             const InputLimits& limits, const CancellationToken& token,
                             google::protobuf::Arena* arena, absl::Cord* response_bytes) {
  auto* response = google::protobuf::Arena::CreateMessage<Response>(arena);
  if (absl::Status status =
          kEntryPoint(static_cast<const Request&>(request), graph, limits, token, response);
      !status.ok()) {
    return status;
  }
  return SerializeWithinLimit(*response, response_bytes);
}

// A row for an entry point that writes the response's bytes itself
// (the *Serialized entry points of entry_points.h).
template <typename Request,
          absl::Status (*kEntryPoint)(const Request&, const GraphSource&, const InputLimits&,
                                      const CancellationToken&, absl::Cord*)>
absl::Status AnswerByBytes(const google::protobuf::Message& request, const GraphSource& graph,
                           const InputLimits& limits, const CancellationToken& token,
                           google::protobuf::Arena* /*arena*/, absl::Cord* response_bytes) {
  return kEntryPoint(static_cast<const Request&>(request), graph, limits, token, response_bytes);
}

template <typename Request, typename Response,
          absl::Status (*kEntryPoint)(const Request&, const GraphSource&, const InputLimits&,
                                      const CancellationToken&, Response*)>
constexpr PlannerRpcMethod RowByMessage(PlannerRpc rpc, absl::string_view name, bool cacheable) {
  return {rpc,
          name,
          &Prototype<Request>,
          &Prototype<Response>,
          &AnswerByMessage<Request, Response, kEntryPoint>,
          cacheable};
}

template <typename Request, typename Response,
          absl::Status (*kEntryPoint)(const Request&, const GraphSource&, const InputLimits&,
                                      const CancellationToken&, absl::Cord*)>
constexpr PlannerRpcMethod RowByBytes(PlannerRpc rpc, absl::string_view name, bool cacheable) {
  return {rpc, name, &Prototype<Request>, &Prototype<Response>,
          &AnswerByBytes<Request, kEntryPoint>, cacheable};
}

}  // namespace planner_rpcs_internal

// The table. Rows whose entry point writes bytes answer a plan by name from
// the graph's names without building a message per node (plan_with_names.h).
inline constexpr PlannerRpcMethod kPlannerRpcs[] = {
    planner_rpcs_internal::RowByBytes<v1::PartitionGraphRequest, v1::PartitionGraphResponse,
                                      &PartitionGraphSerialized>(PlannerRpc::kPartitionGraph,
                                                                 "PartitionGraph", true),
    planner_rpcs_internal::RowByBytes<v1::SplitGraphRequest, v1::SplitGraphResponse,
                                      &SplitGraphSerialized>(PlannerRpc::kSplitGraph,
                                                             "SplitGraph", true),
    planner_rpcs_internal::RowByBytes<v1::ShardGraphRequest, v1::ShardGraphResponse,
                                      &ShardGraphSerialized>(PlannerRpc::kShardGraph,
                                                             "ShardGraph", true),
    planner_rpcs_internal::RowByMessage<v1::BuildPipelineGraphRequest,
                                        v1::BuildPipelineGraphResponse, &BuildPipelineGraph>(
        PlannerRpc::kBuildPipelineGraph, "BuildPipelineGraph", true),
    planner_rpcs_internal::RowByMessage<v1::PlanDataParallelRequest, v1::PlanDataParallelResponse,
                                        &PlanDataParallel>(PlannerRpc::kPlanDataParallel,
                                                           "PlanDataParallel", true),
    planner_rpcs_internal::RowByBytes<v1::PlanRequest, v1::PlanResponse, &PlanSerialized>(
        PlannerRpc::kPlan, "Plan", true),
    planner_rpcs_internal::RowByMessage<v1::ValidateRequest, v1::ValidateResponse, &Validate>(
        PlannerRpc::kValidate, "Validate", false),
    planner_rpcs_internal::RowByMessage<v1::PlanTrainingRequest, v1::PlanTrainingResponse,
                                        &PlanTraining>(PlannerRpc::kPlanTraining,
                                                       "PlanTraining", true),
    planner_rpcs_internal::RowByMessage<v1::ParallelizeRequest, v1::ParallelizeResponse,
                                        &Parallelize>(PlannerRpc::kParallelize, "Parallelize",
                                                      true),
};

inline constexpr size_t kPlannerRpcCount = sizeof(kPlannerRpcs) / sizeof(kPlannerRpcs[0]);

constexpr size_t Index(PlannerRpc rpc) { return static_cast<size_t>(rpc); }

constexpr const PlannerRpcMethod& PlannerRpcOf(PlannerRpc rpc) { return kPlannerRpcs[Index(rpc)]; }

// The method name, e.g. "Validate".
constexpr absl::string_view RpcName(PlannerRpc rpc) { return PlannerRpcOf(rpc).name; }

// The method name in snake_case, e.g. "plan_data_parallel", as the clients,
// the example requests (client/examples/<name>.json) and the fuzzers spell it.
inline std::string SnakeCaseName(PlannerRpc rpc) {
  std::string name;
  for (const char c : RpcName(rpc)) {
    if (c >= 'A' && c <= 'Z' && !name.empty()) name.push_back('_');
    name.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  return name;
}

namespace planner_rpcs_internal {
constexpr bool RowsInEnumOrder() {
  for (size_t i = 0; i < kPlannerRpcCount; ++i) {
    if (Index(kPlannerRpcs[i].rpc) != i) return false;
  }
  return true;
}
static_assert(RowsInEnumOrder(), "kPlannerRpcs[i].rpc must be PlannerRpc(i)");
}  // namespace planner_rpcs_internal

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_API_PLANNER_RPCS_H_

// PlannerRpc names the RPCs of partplan.v1.PartitionPlanner, so that the
// per-RPC tables of the server (metrics, log lines) are arrays indexed by
// RPC instead of maps keyed by strings:
//
//   std::array<Counter*, kPlannerRpcCount> started;
//   started[Index(PlannerRpc::kValidate)]->Increment();
//   spdlog::info("{}", RpcName(PlannerRpc::kValidate));   // "Validate"
//
// tests/server/planner_rpc_test.cc checks the names against the service
// descriptor, so a new RPC in the .proto cannot be forgotten here.
#ifndef PARTPLAN_SERVER_PLANNER_RPC_H_
#define PARTPLAN_SERVER_PLANNER_RPC_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace partplan {

// The full name of the service, as gRPC and its metrics spell it.
inline constexpr absl::string_view kPlannerServiceName = "partplan.v1.PartitionPlanner";

// In the order of the .proto file.
enum class PlannerRpc {
  kPartitionGraph,
  kSplitGraph,
  kShardGraph,
  kBuildPipelineGraph,
  kPlanDataParallel,
  kPlan,
  kValidate,
};

inline constexpr size_t kPlannerRpcCount = 7;

inline constexpr PlannerRpc kAllPlannerRpcs[kPlannerRpcCount] = {
    PlannerRpc::kPartitionGraph,     PlannerRpc::kSplitGraph,       PlannerRpc::kShardGraph,
    PlannerRpc::kBuildPipelineGraph, PlannerRpc::kPlanDataParallel, PlannerRpc::kPlan,
    PlannerRpc::kValidate,
};

constexpr size_t Index(PlannerRpc rpc) { return static_cast<size_t>(rpc); }

// The method name, e.g. "PartitionGraph".
constexpr absl::string_view RpcName(PlannerRpc rpc) {
  constexpr absl::string_view kNames[kPlannerRpcCount] = {
      "PartitionGraph",   "SplitGraph", "ShardGraph", "BuildPipelineGraph",
      "PlanDataParallel", "Plan",       "Validate",
  };
  return kNames[Index(rpc)];
}

}  // namespace partplan

#endif  // PARTPLAN_SERVER_PLANNER_RPC_H_

// BatchDimAnalysis's accessors, BatchDimOptions' checks and AnalyzeBatchDims,
// which runs BatchDimAnalyzer (batch_dim_analyzer.h) once its inputs hold.
#include "planner/data_parallel/batch_dim_analysis.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"
#include "planner/data_parallel/batch_dim_analyzer.h"

namespace partplan {

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "sum";
}

const char* InputRoleName(InputRole role) {
  switch (role) {
    case InputRole::kParameter:
      return "PARAMETER";
    case InputRole::kOptimizerState:
      return "OPTIMIZER_STATE";
    case InputRole::kActivation:
      return "ACTIVATION";
    case InputRole::kUnspecified:
      break;
  }
  return "ROLE_UNSPECIFIED";
}

absl::Status BatchDimOptions::CheckAndSetup(const CompactGraph& graph) {
  if (input_batch_dim < 0) {
    return InvalidFieldError("input_batch_dim",
                             absl::StrCat("must not be negative, got ", input_batch_dim));
  }
  if (roles.size() > static_cast<size_t>(graph.num_nodes())) {
    return InvalidFieldError(
        "roles", absl::StrCat(roles.size(), " roles for a graph of ", graph.num_nodes(), " nodes"));
  }
  roles.resize(graph.num_nodes(), InputRole::kUnspecified);
  return absl::OkStatus();
}

absl::Span<const int64_t> BatchDimAnalysis::shape(NodeId v, int k) const {
  const TensorInfo& info = tensors_[element_offsets_[v] + k];
  return absl::MakeConstSpan(shape_pool_.data() + info.shape_offset,
                             static_cast<size_t>(info.rank));
}

int64_t BatchDimAnalysis::value_bytes(NodeId v) const {
  // Saturating: shapes given with explicit sizes are not bounded by import.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  for (int k = 0; k < num_elements(v); ++k) {
    int64_t bytes = element_bytes(v, k);
    for (int64_t size : shape(v, k)) {
      if (__builtin_mul_overflow(bytes, size, &bytes)) bytes = kMax;
    }
    if (__builtin_add_overflow(total, bytes, &total)) total = kMax;
  }
  return total;
}

int32_t BatchDimAnalysis::cut_dim(NodeId u, NodeId v) const {
  auto it = cuts_.find(CutKey(u, v));
  return it == cuts_.end() ? -1 : it->second;
}

const std::string& BatchDimAnalysis::note(NodeId v) const {
  auto it = notes_.find(v);
  return it == notes_.end() ? no_note_ : it->second;
}

absl::StatusOr<BatchDimAnalysis> AnalyzeBatchDims(const CompactGraph& graph,
                                                  const BatchDimOptions& options,
                                                  const CancellationToken& token) {
  if (options.roles.size() != static_cast<size_t>(graph.num_nodes())) {
    return absl::InvalidArgumentError("BatchDimOptions::CheckAndSetup was not called");
  }
  if (graph.parsed() == nullptr) {
    return absl::InternalError(
        "AnalyzeBatchDims needs a graph imported from a parsed v1::Graph "
        "(the PlanDataParallel entry point parses a serialised one)");
  }
  return BatchDimAnalyzer(graph, options, token).Run();
}

}  // namespace partplan

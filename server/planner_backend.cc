#include "server/planner_backend.h"

#include "planner/api/entry_points.h"
#include "planner/wire/plan_with_names.h"

namespace partplan {

namespace {

// The default of the backend's *Serialized methods: the message `plan`
// fills, serialised.
template <typename Request, typename Response>
absl::Status SerializeWhatItFills(PlannerBackend& backend,
                                  absl::Status (PlannerBackend::*plan)(const Request&,
                                                                       const GraphSource&,
                                                                       const CancellationToken&,
                                                                       Response*),
                                  const Request& request, const GraphSource& graph,
                                  const CancellationToken& token, absl::Cord* response_bytes) {
  Response response;
  if (absl::Status status = (backend.*plan)(request, graph, token, &response); !status.ok()) {
    return status;
  }
  return SerializeWithinLimit(response, response_bytes);
}

}  // namespace

absl::Status PlannerBackend::PartitionGraphSerialized(const v1::PartitionGraphRequest& request,
                                                      const GraphSource& graph,
                                                      const CancellationToken& token,
                                                      absl::Cord* response_bytes) {
  return SerializeWhatItFills(*this, &PlannerBackend::PartitionGraph, request, graph, token,
                              response_bytes);
}

absl::Status PlannerBackend::SplitGraphSerialized(const v1::SplitGraphRequest& request,
                                                  const GraphSource& graph,
                                                  const CancellationToken& token,
                                                  absl::Cord* response_bytes) {
  return SerializeWhatItFills(*this, &PlannerBackend::SplitGraph, request, graph, token,
                              response_bytes);
}

absl::Status PlannerBackend::ShardGraphSerialized(const v1::ShardGraphRequest& request,
                                                  const GraphSource& graph,
                                                  const CancellationToken& token,
                                                  absl::Cord* response_bytes) {
  return SerializeWhatItFills(*this, &PlannerBackend::ShardGraph, request, graph, token,
                              response_bytes);
}

absl::Status PlannerBackend::PlanSerialized(const v1::PlanRequest& request,
                                            const GraphSource& graph,
                                            const CancellationToken& token,
                                            absl::Cord* response_bytes) {
  return SerializeWhatItFills(*this, &PlannerBackend::Plan, request, graph, token, response_bytes);
}

namespace {

class LibraryPlannerBackend final : public PlannerBackend {
 public:
  explicit LibraryPlannerBackend(const InputLimits& limits) : limits_(limits) {}

  absl::Status PartitionGraph(const v1::PartitionGraphRequest& request, const GraphSource& graph,
                              const CancellationToken& token,
                              v1::PartitionGraphResponse* response) override {
    return partplan::PartitionGraph(request, graph, limits_, token, response);
  }
  absl::Status PartitionGraphSerialized(const v1::PartitionGraphRequest& request,
                                        const GraphSource& graph, const CancellationToken& token,
                                        absl::Cord* response_bytes) override {
    return partplan::PartitionGraphSerialized(request, graph, limits_, token, response_bytes);
  }
  absl::Status SplitGraph(const v1::SplitGraphRequest& request, const GraphSource& graph,
                          const CancellationToken& token,
                          v1::SplitGraphResponse* response) override {
    return partplan::SplitGraph(request, graph, limits_, token, response);
  }
  absl::Status SplitGraphSerialized(const v1::SplitGraphRequest& request, const GraphSource& graph,
                                    const CancellationToken& token,
                                    absl::Cord* response_bytes) override {
    return partplan::SplitGraphSerialized(request, graph, limits_, token, response_bytes);
  }
  absl::Status ShardGraph(const v1::ShardGraphRequest& request, const GraphSource& graph,
                          const CancellationToken& token,
                          v1::ShardGraphResponse* response) override {
    return partplan::ShardGraph(request, graph, limits_, token, response);
  }
  absl::Status ShardGraphSerialized(const v1::ShardGraphRequest& request, const GraphSource& graph,
                                    const CancellationToken& token,
                                    absl::Cord* response_bytes) override {
    return partplan::ShardGraphSerialized(request, graph, limits_, token, response_bytes);
  }
  absl::Status BuildPipelineGraph(const v1::BuildPipelineGraphRequest& request,
                                  const GraphSource& graph, const CancellationToken& token,
                                  v1::BuildPipelineGraphResponse* response) override {
    return partplan::BuildPipelineGraph(request, graph, limits_, token, response);
  }
  absl::Status PlanDataParallel(const v1::PlanDataParallelRequest& request,
                                const GraphSource& graph, const CancellationToken& token,
                                v1::PlanDataParallelResponse* response) override {
    return partplan::PlanDataParallel(request, graph, limits_, token, response);
  }
  absl::Status Plan(const v1::PlanRequest& request, const GraphSource& graph,
                    const CancellationToken& token, v1::PlanResponse* response) override {
    return partplan::Plan(request, graph, limits_, token, response);
  }
  absl::Status PlanSerialized(const v1::PlanRequest& request, const GraphSource& graph,
                              const CancellationToken& token, absl::Cord* response_bytes) override {
    return partplan::PlanSerialized(request, graph, limits_, token, response_bytes);
  }
  absl::Status Validate(const v1::ValidateRequest& request, const GraphSource& graph,
                        const CancellationToken& token, v1::ValidateResponse* response) override {
    return partplan::Validate(request, graph, limits_, token, response);
  }

 private:
  const InputLimits limits_;
};

}  // namespace

std::unique_ptr<PlannerBackend> NewLibraryPlannerBackend(const InputLimits& limits) {
  return std::make_unique<LibraryPlannerBackend>(limits);
}

}  // namespace partplan

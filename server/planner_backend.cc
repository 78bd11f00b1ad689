#include "server/planner_backend.h"

namespace partplan {
namespace {

class LibraryPlannerBackend final : public PlannerBackend {
 public:
  explicit LibraryPlannerBackend(const InputLimits& limits) : limits_(limits) {}

  absl::Status Answer(const PlannerRpcMethod& rpc, const PlannerRequest& request,
                      const CancellationToken& token, google::protobuf::Arena* arena,
                      absl::Cord* response_bytes) override {
    return rpc.answer(request.message(), request.graph(), limits_, token, arena, response_bytes);
  }

 private:
  const InputLimits limits_;
};

}  // namespace

std::unique_ptr<PlannerBackend> NewLibraryPlannerBackend(const InputLimits& limits) {
  return std::make_unique<LibraryPlannerBackend>(limits);
}

}  // namespace partplan

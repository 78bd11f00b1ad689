#include "planner/wire/pipeline_graph_response.h"

#include "absl/strings/string_view.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

void WriteValue(const PipelineValue& value, v1::PipelineInput* input) {
  if (value.kind == PipelineValue::Kind::kForwardInput) {
    input->set_forward_input(value.index);
  } else if (value.kind == PipelineValue::Kind::kModuleOutput) {
    v1::PipelineOutputRef* ref = input->mutable_module_output();
    ref->set_module(value.index);
    if (value.is_element()) ref->set_output_index(value.output_index);
  }
}

}  // namespace

absl::Status PipelineGraphResponseFromPlan(const CompactGraph& graph,
                                           const PipelineGraph& pipeline,
                                           absl::Span<const PipelineWorker> workers,
                                           const CancellationToken& token,
                                           v1::BuildPipelineGraphResponse* response) {
  response->Clear();
  int64_t work = 0;
  const int32_t modules = static_cast<int32_t>(pipeline.modules.size());
  response->mutable_modules()->Reserve(modules);
  for (int32_t m = 0; m < modules; ++m) {
    const PipelineModuleCall& module = pipeline.modules[m];
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(++work));
    v1::PipelineModule* entry = response->add_modules();
    const absl::string_view name = graph.name(module.node);
    entry->set_node(name.data(), name.size());
    const absl::string_view target = pipeline.targets[m];
    entry->set_target(target.data(), target.size());
    const absl::string_view worker = workers[module.worker].worker;
    entry->set_worker(worker.data(), worker.size());
    for (int32_t i = module.inputs_begin; i < module.inputs_end; ++i) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(++work));
      WriteValue(pipeline.module_inputs[i], entry->add_inputs());
    }
    entry->set_output_count(module.output_count);
  }
  for (const PipelineValue& value : pipeline.outputs) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(++work));
    WriteValue(value, response->add_outputs());
  }
  return absl::OkStatus();
}

}  // namespace partplan

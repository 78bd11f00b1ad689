#include "planner/wire/training_plan_response.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

v1::TimelineOp::Kind KindOf(PipelineOpKind kind) {
  switch (kind) {
    case PipelineOpKind::kForward:
      return v1::TimelineOp::FORWARD;
    case PipelineOpKind::kBackward:
      return v1::TimelineOp::BACKWARD;
    case PipelineOpKind::kWeight:
      return v1::TimelineOp::WEIGHT;
  }
  return v1::TimelineOp::FORWARD;
}

double At(const std::vector<double>& values, size_t i) {
  return i < values.size() ? values[i] : 0.0;
}

// The plan with inner cut `k` at item `at` instead, evaluated.
absl::Status WriteMove(const TrainingProblem& problem, const TrainingStagesEvaluator& evaluator,
                       const TrainingStagePlan& plan, int k, int at,
                       const CancellationToken& token, v1::CutMove* move) {
  std::vector<int> cuts = plan.cuts;
  // Neither stage beside the cut may end up empty.
  if (at <= cuts[k - 1] || at >= cuts[k + 1]) {
    move->set_possible(false);
    return absl::OkStatus();
  }
  cuts[k] = at;
  if (!CutsMeetPins(problem.chain, problem.options.search.schedule.stages(), cuts)) {
    move->set_possible(false);
    return absl::OkStatus();
  }
  PARTPLAN_ASSIGN_OR_RETURN(const TrainingStagePlan moved,
                            evaluator.Evaluate(cuts, plan.recompute, token));
  const ScheduleOptions& schedule = problem.options.search.schedule;
  const int before = schedule.DeviceOf(k - 1);
  const int after = schedule.DeviceOf(k);
  bool fits = true;
  for (size_t d = 0; d < moved.memory.size() && d < problem.devices.size(); ++d) {
    fits = fits && moved.memory[d].peak_bytes <= problem.devices[d].memory_bytes;
  }
  move->set_possible(true);
  move->set_step_seconds(moved.step_seconds);
  move->set_peak_bytes(std::max(moved.memory.at(before).peak_bytes,
                                moved.memory.at(after).peak_bytes));
  move->set_fits(fits);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> TimelineOpsWritten(
    const std::vector<std::vector<PipelineOp>>& timeline, int64_t limit,
    const CancellationToken& token) {
  std::vector<int64_t> count(timeline.size());
  int64_t total = 0;
  for (size_t d = 0; d < timeline.size(); ++d) {
    count[d] = static_cast<int64_t>(timeline[d].size());
    total += count[d];
  }
  if (total <= limit) return count;
  std::fill(count.begin(), count.end(), 0);
  // The next op of each device: (start, device), least first.
  using Next = std::pair<double, int>;
  std::priority_queue<Next, std::vector<Next>, std::greater<Next>> next;
  for (size_t d = 0; d < timeline.size(); ++d) {
    if (!timeline[d].empty()) next.emplace(timeline[d][0].start, static_cast<int>(d));
  }
  for (int64_t taken = 0; taken < limit && !next.empty(); ++taken) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(taken));
    const int d = next.top().second;
    next.pop();
    const size_t i = static_cast<size_t>(++count[d]);
    if (i < timeline[d].size()) next.emplace(timeline[d][i].start, d);
  }
  return count;
}

absl::Status TrainingPlanResponseFromPlan(const CompactGraph& graph, const DeviceList& devices,
                                          const TrainingProblem& problem,
                                          const TrainingStagePlan& plan,
                                          const CancellationToken& token,
                                          v1::PlanTrainingResponse* response) {
  response->Clear();
  v1::TrainingPlan* out = response->mutable_plan();
  const ScheduleOptions& schedule = problem.options.search.schedule;
  const TrainingChain& chain = problem.chain;
  const int stages = schedule.stages();
  const int p = schedule.devices;
  const int n = static_cast<int>(chain.items.size());
  if (static_cast<int>(plan.cuts.size()) != stages + 1 || plan.cuts.front() != 0 ||
      plan.cuts.back() != n || static_cast<int>(plan.recompute.size()) != stages ||
      static_cast<int>(plan.memory.size()) != p || devices.size() != p) {
    return absl::InternalError("the training plan does not match its problem");
  }
  const auto node_name = [&](int item) {
    const absl::string_view name = graph.name(problem.item_nodes[item]);
    return std::string(name.data(), name.size());
  };

  out->mutable_stage_by_item()->Reserve(n);
  for (int k = 0; k < stages; ++k) {
    const int begin = plan.cuts[k];
    const int end = plan.cuts[k + 1];
    if (begin >= end) return absl::InternalError("the training plan has an empty stage");
    v1::TrainingStage* stage = out->add_stages();
    stage->set_stage(k);
    stage->set_device(devices[schedule.DeviceOf(k)].name);
    stage->set_first_node(node_name(begin));
    stage->set_last_node(node_name(end - 1));
    stage->set_node_count(end - begin);
    stage->set_recompute(plan.recompute[k]);
    stage->set_forward_seconds(At(plan.costs.forward, k));
    stage->set_backward_seconds(At(plan.costs.backward, k));
    stage->set_weight_seconds(At(plan.costs.weight, k));
    if (k + 1 < stages) {
      stage->set_output_bytes(chain.live_bytes[end]);
      stage->set_transfer_seconds(At(plan.costs.transfer, k));
    }
    if (static_cast<size_t>(k) < plan.timeline.peak_in_flight.size()) {
      stage->set_peak_in_flight(plan.timeline.peak_in_flight[k]);
    }
    for (int i = begin; i < end; ++i) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(i));
      out->add_stage_by_item(k);
    }
    // The search's own figures: a storage two of the stage's nodes save
    // counts once, and tied parameters once per stage.
    stage->set_parameters(plan.footprints[k].parameters);
    stage->set_saved_activation_bytes(plan.footprints[k].saved_activation_bytes);
  }

  double idle = 0;
  for (int d = 0; d < p; ++d) {
    const DeviceMemory& memory = plan.memory[d];
    v1::DeviceReport* report = out->add_devices();
    report->set_device(devices[d].name);
    v1::StageMemory* written = report->mutable_memory();
    written->set_weights(memory.weights);
    written->set_gradients(memory.gradients);
    written->set_optimizer(memory.optimizer);
    written->set_activations(memory.activations);
    written->set_transient(memory.transient);
    written->set_peak(memory.peak_bytes);
    written->set_available(static_cast<double>(devices[d].available_memory_bytes));
    const double bubble = At(plan.timeline.bubble_fraction, d);
    report->set_bubble_fraction(bubble);
    idle += bubble;
  }

  out->set_step_seconds(plan.step_seconds);
  const double samples = static_cast<double>(schedule.micro_batches) *
                         problem.options.micro_batch_size *
                         problem.options.search.memory.data_parallel;
  out->set_samples_per_second(plan.step_seconds > 0 ? samples / plan.step_seconds : 0.0);
  out->set_bubble_fraction(p > 0 ? idle / p : 0.0);

  const std::vector<std::vector<PipelineOp>>& timeline = plan.timeline.devices;
  PARTPLAN_ASSIGN_OR_RETURN(const std::vector<int64_t> written_ops,
                            TimelineOpsWritten(timeline, kMaxTimelineOps, token));
  int64_t step_ops = 0;
  for (const std::vector<PipelineOp>& ops : timeline) step_ops += static_cast<int64_t>(ops.size());
  out->set_timeline_truncated(step_ops > kMaxTimelineOps);
  out->mutable_timeline()->Reserve(static_cast<int>(std::min(step_ops, kMaxTimelineOps)));
  int64_t ops = 0;
  for (int d = 0; d < static_cast<int>(timeline.size()); ++d) {
    for (int64_t i = 0; i < written_ops[d]; ++i) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(ops++));
      const PipelineOp& op = timeline[d][i];
      v1::TimelineOp* written = out->add_timeline();
      written->set_device(d);
      written->set_kind(KindOf(op.kind));
      written->set_stage(op.stage);
      written->set_micro_batch(op.micro_batch);
      written->set_start_seconds(op.start);
      written->set_end_seconds(op.end);
    }
  }

  // Each move evaluates the plan with the tables built once: the stages'
  // costs, then the step's ops simulated.
  const bool moves = int64_t{2} * (stages - 1) * (stages + step_ops) <= kMaxCutMoveWork;
  out->set_cut_moves_omitted(!moves);
  std::unique_ptr<TrainingStagesEvaluator> evaluator;
  if (moves && stages > 1) {
    PARTPLAN_ASSIGN_OR_RETURN(evaluator,
                              TrainingStagesEvaluator::Create(problem.options.search, problem.chain,
                                                              problem.devices, token));
  }
  for (int k = 1; k < stages; ++k) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(k));
    const int at = plan.cuts[k];
    v1::CutReport* cut = out->add_cuts();
    cut->set_before_node(node_name(at));
    cut->set_crossing_bytes(chain.live_bytes[at]);
    if (!moves) continue;
    PARTPLAN_RETURN_IF_ERROR(token.Check());
    PARTPLAN_RETURN_IF_ERROR(
        WriteMove(problem, *evaluator, plan, k, at - 1, token, cut->mutable_earlier()));
    PARTPLAN_RETURN_IF_ERROR(
        WriteMove(problem, *evaluator, plan, k, at + 1, token, cut->mutable_later()));
  }

  out->set_crossing_bytes(plan.crossing_bytes);
  out->set_proven_optimal(plan.proven_optimal);
  out->set_lower_bound_seconds(plan.lower_bound);
  out->set_search_nodes(plan.search_nodes);
  out->set_estimated_saved_bytes_nodes(problem.estimated_saved_bytes_nodes);
  for (const double seconds : plan.tied_allreduce_seconds) out->add_tied_allreduce_seconds(seconds);
  return absl::OkStatus();
}

}  // namespace partplan

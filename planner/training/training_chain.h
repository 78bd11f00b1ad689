// The edge of the training planner: a PlanTraining request's graph, devices
// and TrainingConfig validated once into what the stage search takes
// (stage_search.h): the chain of items with their training costs, the
// pipeline's devices, the search's options.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const TrainingProblem problem,
//       TrainingProblemFromRequest(graph, devices, request.config(), token));
//   PARTPLAN_ASSIGN_OR_RETURN(const TrainingStagePlan plan,
//       PlanTrainingStages(problem.options.search, problem.chain, problem.devices, token));
//
// Items are StageModel's (pipeline/stage_model.h): every node but the
// placeholders and the output, in graph order; live_bytes[c] is
// StageModel::LiveBytes(c), what crosses the cut before item c.
//
// Work and speeds. The forward's kind of work is chosen once for the whole
// graph, as ChooseStageWork (pipeline/stage_work.h) chooses it for BALANCED:
// latencies (max(compute, memory) seconds) when any node has one, every
// device of speed 1; else FLOPs when any node has some, else parameter
// counts as a proxy, divided by each device's compute_flops_per_second
// (all devices give one or none; with none, speed 1 and costs in units of
// work). Nodes without the chosen figure count 0. A node's NodeTraining
// gives its backward in seconds or FLOPs; one in the other unit than the
// forward's is converted by the devices' compute_flops_per_second, which
// must then be one figure shared by every device (INVALID_ARGUMENT naming
// the node's field otherwise). A node without NodeTraining has input
// gradient = weight gradient = forward, and saves its output_bytes (counted
// in estimated_saved_bytes_nodes), but a get_attr, whose output is a
// parameter the model states count already, saves nothing.
//
// Every fault is INVALID_ARGUMENT naming the request's field: `config.<field>`
// for the options, `config.pins[i].node` for a pin on an unknown node, a
// placeholder or the output (or a node pinned twice), `devices.devices` for
// an empty inventory or fewer devices x chunks than nodes to place, and the
// caps below (`config.micro_batches` for B and P v B;
// `config.chunks_per_device`, or `devices.devices` with one chunk, for the
// stages).
#ifndef PARTPLAN_PLANNER_TRAINING_TRAINING_CHAIN_H_
#define PARTPLAN_PLANNER_TRAINING_TRAINING_CHAIN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "partplan/v1/training.pb.h"
#include "planner/base/cancellation.h"
#include "planner/graph/devices.h"
#include "planner/graph/graph.h"
#include "planner/pipeline/stage_model.h"
#include "planner/training/stage_search.h"

namespace partplan {

// Bounds on one PlanTraining call, past what pipelines are run with, so that
// one request cannot hold the server's memory or a planner thread for
// minutes. They are properties of the training model, not of the graph or
// the inventory, so they are constants here and not flags of InputLimits
// (planner/base/limits.h), which bound what every RPC imports.
//
// Micro-batches per step: Megatron-LM and DeepSpeed runs use tens to a few
// thousand (gradient accumulation). INVALID_ARGUMENT on
// `config.micro_batches`.
inline constexpr int kMaxTrainingMicroBatches = 4096;
// Virtual stages P x v (devices x chunks_per_device): pipelines run with at
// most some tens of devices and a few chunks each. The stage search's bound
// costs O(P n log n) and the cut reports 2 (P v - 1) evaluations of the plan,
// so P v is what makes them large. INVALID_ARGUMENT on
// `config.chunks_per_device` when v > 1, else on `devices.devices` (the
// pipeline is every device of the inventory).
inline constexpr int kMaxTrainingStages = 1024;
// Stages x micro-batches, P v B: each simulation of the step runs 2 or 3
// ops per stage and micro-batch, and a timeline holds them (24 bytes an op,
// the search and the evaluations keeping a few), so this bounds every
// simulation to 3M ops and a timeline to 75 MB, where the two caps above
// alone would allow 12.6M ops (ScheduleOptions::kMaxScheduledOps allows
// 2^26). 64 devices x 4 chunks x B = 4,096 is within it. INVALID_ARGUMENT on
// `config.micro_batches`.
inline constexpr int64_t kMaxTrainingStageMicroBatches = int64_t{1} << 20;
// Ops written in TrainingPlan.timeline: 65,536 ops are about 2 MB of
// protobuf (8 MB of JSON). A step with more (P v B x 2, x 3 under ZB-H1)
// has the ops that start first written, and `timeline_truncated` set; the
// step's figures are the whole step's all the same.
inline constexpr int64_t kMaxTimelineOps = 65536;
// Work of the cut reports' moves: each move evaluates the plan with tables
// built once (TrainingStagesEvaluator), O(P v) for the stages' costs and
// O(P v B) for the simulation, so all of them take 2 (P v - 1) (P v + ops of
// the step). Above this bound the cuts are listed without their moves and
// `cut_moves_omitted` is set.
inline constexpr int64_t kMaxCutMoveWork = int64_t{1} << 24;

// A TrainingConfig validated: the search's options and what only the
// report reads.
struct TrainingOptions {
  StageSearchOptions search;
  int micro_batch_size = 1;  // samples per micro-batch
};

// The domain's schedule and ZeRO stage of the wire's kinds (UNSPECIFIED:
// 1F1B); INVALID_ARGUMENT naming `field` for a value the enum lacks.
absl::StatusOr<PipelineSchedule> PipelineScheduleOf(v1::PipelineScheduleKind kind,
                                                    absl::string_view field);
absl::StatusOr<ZeroStage> ZeroStageOf(v1::ZeroStageKind kind, absl::string_view field);

// The config's options for a pipeline of `devices` devices. Defaults as the
// proto says: 1F1B, 1 chunk, micro-batch size 1, data-parallel degree 1,
// mixed-precision Adam (2, 2 and 12 bytes per parameter), no ZeRO,
// RECOMPUTE_AUTO, activations kept until W, StageSearchOptions' search bound.
absl::StatusOr<TrainingOptions> TrainingOptionsFromConfig(const v1::TrainingConfig& config,
                                                          int devices);

// Each device in inventory (pipeline) order: memory = available_memory_bytes,
// speed 1, link to the next device (d to d + 1 mod P) from the inventory's
// link between them, else its transfer rate; 0 (and a single device's link
// to itself) is free: infinity. Speeds are set by TrainingChainFromGraph.
std::vector<TrainingDevice> TrainingDevicesFrom(const DeviceList& devices);

struct TrainingChainFromGraphResult {
  TrainingChain chain;
  // The node of each item (StageModel::item).
  std::vector<NodeId> item_nodes;
  // Items whose saved bytes are their output_bytes (no NodeTraining).
  int32_t estimated_saved_bytes_nodes = 0;
  // Whether costs / speeds are seconds (else units of work).
  bool in_seconds = false;
};

// The chain of `model`'s graph; sets `*devices`' speeds (one TrainingDevice
// per device of `inventory`, from TrainingDevicesFrom). `pins` are the
// config's.
absl::StatusOr<TrainingChainFromGraphResult> TrainingChainFromGraph(
    const StageModel& model, const DeviceList& inventory,
    const google::protobuf::RepeatedPtrField<v1::NodePin>& pins,
    std::vector<TrainingDevice>* devices, const CancellationToken& token);

// Everything the search and the report need, from one request.
struct TrainingProblem {
  TrainingOptions options;
  TrainingChain chain;
  std::vector<TrainingDevice> devices;
  std::vector<NodeId> item_nodes;
  int32_t estimated_saved_bytes_nodes = 0;
  bool in_seconds = false;
};

// The options, then the chain and devices; checks that there are devices
// and at least one item per stage (P x v).
absl::StatusOr<TrainingProblem> TrainingProblemFromRequest(const CompactGraph& graph,
                                                           const DeviceList& devices,
                                                           const v1::TrainingConfig& config,
                                                           const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_TRAINING_TRAINING_CHAIN_H_

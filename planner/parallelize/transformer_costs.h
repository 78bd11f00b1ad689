// The cost model of parallelize.proto for one configuration: a transformer's
// layers as the training planner's chain (stage_search.h), one item for the
// embedding, one per layer and one for the head, with each item's forward,
// backward and weight-gradient seconds per micro-batch, its saved
// activations, parameters and working set, and the bytes crossing each cut.
//
//   ParallelCandidate candidate;          // t, p, d, b, schedule, ZeRO, ...
//   PipelineRankLinks links = ...;        // per pipeline rank, from the
//   cluster TransformerChain chain = BuildTransformerChain(model, options,
//   candidate, links); PlanTrainingStages(search_options, chain.chain, devices,
//   token);
//
// Costs are seconds on the reference rank (rank 0): its device type and its
// groups' links. Other ranks get a speed, the reference's layer time over
// theirs, so a slower device type or a slower link is a slower device to the
// training planner.
#ifndef PARTPLAN_PLANNER_PARALLELIZE_TRANSFORMER_COSTS_H_
#define PARTPLAN_PLANNER_PARALLELIZE_TRANSFORMER_COSTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "planner/parallelize/parallelize_problem.h"
#include "planner/training/stage_search.h"

namespace partplan {

// Saved-activation bytes a graph measured, per sequence, at t = 1 and
// without recompute (graph_costs.h), used in place of the formulas.
struct MeasuredActivations {
  double embedding = 0;
  std::vector<double> layers;  // one per layer
  double head = 0;
};

struct ParallelCandidate {
  int tensor = 1;    // t
  int pipeline = 1;  // p
  int data = 1;      // d
  int micro_batch_size = 1;
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int chunks = 1;  // v
  ZeroStage zero = ZeroStage::kNone;
  LayerRecomputeMode recompute = LayerRecomputeMode::kNone;
  // Always t > 1: it moves the bytes plain tensor parallelism moves and
  // holds a t-th of the activations it would not divide.
  bool sequence_parallel() const { return tensor > 1; }
};

// A configuration in a few words: "t=8 p=4 d=32 b=1, interleaved 1F1B v=2,
// ZeRO-1, selective recompute".
std::string DescribeConfig(const ParallelCandidate& candidate);

// What one pipeline rank's devices give the model (infinity where no bytes
// move: t = 1, d = 1, p = 1).
struct RankLinks {
  double peak_flops = 0;               // the slowest device of the rank's groups
  double memory_bytes = 0;             // the smallest
  double tensor_bytes_per_second = 0;  // the slowest link of a tensor group
  double data_bytes_per_second = 0;    // the slowest link of a data-parallel ring
  double next_bytes_per_second = 0;    // to rank r + 1 (the last to the first)
};

// One item's seconds per micro-batch, split by what spends them.
struct ItemTime {
  double compute = 0;  // kernels, recompute included
  double tensor = 0;   // tensor-parallel collectives
  double zero = 0;     // ZeRO-2 and -3 exchanges
  double total() const { return compute + tensor + zero; }
};

struct TransformerChain {
  TrainingChain chain;
  // Per item, forward + backward + weight gradient, split.
  std::vector<ItemTime> item_times;
  // Each rank's speed: the reference's layer seconds (forward + backward +
  // weight) over its own.
  std::vector<double> rank_speed;
  // For a graph model: each item's node (NodeId).
  std::vector<int32_t> item_nodes;
};

// Forward + backward + weight seconds per micro-batch of the embedding, of
// one layer and of the head, on `links`.
struct TransformerItemTimes {
  ItemTime embedding, layer, head;
  // Of which the forwards.
  double embedding_forward = 0, layer_forward = 0, head_forward = 0;
};
TransformerItemTimes ItemTimesOn(const TransformerModel& model, const ParallelizeOptions& options,
                                 const ParallelCandidate& candidate, const RankLinks& links);

// Parameters (elements) of one layer on one device: the norms whole, the
// rest a t-th.
double LayerDeviceParameters(const TransformerModel& model, int tensor);

// The gradient exchange after the step of a rank holding `parameters`
// (elements, this device's share): all-reduce without ZeRO, reduce-scatter
// and all-gather with ZeRO-1, the all-gather with ZeRO-2, none with ZeRO-3
// (it exchanged per micro-batch). Seconds, none of it hidden.
double DataParallelSeconds(const ParallelizeOptions& options, const ParallelCandidate& candidate,
                           double parameters, double data_bytes_per_second);

// ZeRO-2's gradient reduce-scatter of each micro-batch, and ZeRO-3's also
// twice a weight all-gather, of `parameters` (elements) over d devices at
// `rate` bytes per second; 0 for ZeRO-0 and -1.
double ZeroMicroBatchSeconds(const ParallelizeOptions& options, const ParallelCandidate& candidate,
                             double parameters, double rate);

// The bytes layer `layer` saves on one device per micro-batch, as the chain
// gives it (measured, when `measured` is not null, else by the formulas).
double LayerSavedBytes(const TransformerModel& model, const ParallelCandidate& candidate,
                       const MeasuredActivations* measured, int layer);

// The chain of `candidate` (costs on links[0]); links has p entries. With
// `measured` (else null), a layer keeps its measured bytes x b / t (less the
// scores' 5 a s^2 b / t, down to its input's 2 s b h / t, with selective
// recompute; its input with full), the embedding and the head theirs x b / t.
TransformerChain BuildTransformerChain(const TransformerModel& model,
                                       const ParallelizeOptions& options,
                                       const ParallelCandidate& candidate,
                                       const std::vector<RankLinks>& links,
                                       const MeasuredActivations* measured = nullptr);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PARALLELIZE_TRANSFORMER_COSTS_H_

// The edge of the parallelize planner: a ParallelizeRequest's transformer,
// cluster and options validated once into the domain types the search takes
// (parallel_search.h), with the request's graph imported beforehand.
// parallelize.proto states the cost model.
//
//   PARTPLAN_ASSIGN_OR_RETURN(const ParallelizeProblem problem,
//                             ParallelizeProblemFromRequest(request, &graph_or_null));
//   problem.cluster.free;   // the devices tensor groups are cut from
//
// Every fault is INVALID_ARGUMENT naming the request's field, e.g.
// `transformer.attention_heads` or `cluster.busy_devices[2]`.
#ifndef PARTPLAN_PLANNER_PARALLELIZE_PARALLELIZE_PROBLEM_H_
#define PARTPLAN_PLANNER_PARALLELIZE_PARALLELIZE_PROBLEM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "partplan/v1/parallelize.pb.h"
#include "planner/graph/graph.h"
#include "planner/training/device_memory.h"
#include "planner/training/schedule.h"

namespace partplan {

// Caps, so that one request cannot hold a planner thread for minutes: the
// largest clusters trained on have some tens of thousands of devices and
// models some hundreds of layers.
inline constexpr int kMaxParallelizeDevices = 65536;
inline constexpr int kMaxParallelizeLayers = 4096;
inline constexpr int kMaxParallelizeConfigurations = 100000;

// Sizes as doubles: products such as s b h^2 overflow 64-bit integers long
// before they overflow doubles, and the model only ever divides them.
struct TransformerModel {
  int layers = 1;                // l
  double hidden = 1;             // h
  double heads = 1;              // a
  double sequence = 1;           // s
  double vocabulary = 1;         // V
  double ffn = 4;                // f
  double experts = 1;            // E
  double experts_per_token = 1;  // k

  // Parameters (elements) of one layer, of the word embedding (V h), of the
  // position embedding (s h), of the final norm (2 h); and of the whole
  // model (the head shares the word embedding).
  double LayerParameters() const;
  double WordEmbeddingParameters() const { return vocabulary * hidden; }
  double PositionEmbeddingParameters() const { return sequence * hidden; }
  double FinalNormParameters() const { return 2 * hidden; }
  double TotalParameters() const;
  // The forward's FLOPs of one sequence: a layer's matrix products (the
  // projections and the MLP) and its attention scores, and the logits.
  double LayerGemmFlopsPerSequence() const;
  double LayerAttentionFlopsPerSequence() const;
  double LogitFlopsPerSequence() const { return 2 * sequence * hidden * vocabulary; }
  // A training step's model FLOPs per sequence: 3x the forward, no
  // recompute (Narayanan et al., SC'21: 72 s l h^2 (1 + s/6h + V/12lh)
  // for a dense model with f = 4h).
  double ModelFlopsPerSequence() const;
};

struct DeviceType {
  std::string name;
  double memory_bytes = 0;
  double peak_flops = 0;
  double intra_host_bytes_per_second = 0;
  double inter_host_bytes_per_second = 0;
};

// The cluster's free devices in order: hosts in order, each host's devices
// in order, busy ones left out.
struct ClusterDevice {
  int host = 0;
  int index = 0;  // within its host
  int type = 0;   // into ParallelizeCluster::types
};

struct ParallelizeCluster {
  std::vector<DeviceType> types;
  std::vector<int> host_type;         // per host
  std::vector<int> devices_per_host;  // per host, busy ones included
  std::vector<ClusterDevice> free;
  // Name of a device, "<host>:<index>".
  static std::string Name(const ClusterDevice& device);
};

enum class LayerRecomputeMode { kNone, kSelective, kFull };

struct ParallelizeOptions {
  int global_batch = 1;
  ModelStateBytes state_bytes{2, 2, 12};
  double compute_efficiency = 0.6;
  double data_parallel_overlap = 0;
  double collective_latency_seconds = 0;
  bool tensor_parallel_across_hosts = false;
  std::vector<PipelineSchedule> schedules;  // distinct, non-empty
  int max_chunks_per_device = 4;
  std::vector<ZeroStage> zero_stages;         // distinct, non-empty
  std::vector<LayerRecomputeMode> recompute;  // distinct, non-empty
  int max_configurations = 10;
  bool all_configurations = false;
  int64_t max_search_nodes = int64_t{1} << 12;
  // Degrees and micro-batch size fixed by the request; 0: searched.
  int tensor = 0;
  int pipeline = 0;
  int data = 0;
  int micro_batch_size = 0;
};

struct ParallelizeProblem {
  // The model: a transformer summary, or a graph of `graph_batch_size`
  // samples, or both.
  TransformerModel model;
  const CompactGraph* graph = nullptr;
  int graph_batch_size = 1;
  // With both a summary and a graph, the summary is the model and the graph
  // gives its saved-activation bytes.
  bool has_transformer = true;
  ParallelizeCluster cluster;
  ParallelizeOptions options;
};

// `graph` is the request's graph imported (null when it has none); it must
// outlive the problem.
absl::StatusOr<ParallelizeProblem> ParallelizeProblemFromRequest(
    const v1::ParallelizeRequest& request, const CompactGraph* graph);

// The wire's names of the domain's choices.
v1::PipelineScheduleKind ScheduleKindOf(PipelineSchedule schedule);
v1::ZeroStageKind ZeroStageKindOf(ZeroStage zero);
v1::LayerRecompute LayerRecomputeOf(LayerRecomputeMode mode);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_PARALLELIZE_PARALLELIZE_PROBLEM_H_

// The GPT runs Megatron-LM published (Narayanan et al., SC'21, Table 1; the
// Megatron-LM README of April 2021): each model, the devices and batch it
// ran with, the tensor and pipeline degrees it used and the throughput it
// reached, on DGX A100 hosts: 8 A100 80 GB per host (312 TFLOP/s bf16 peak),
// NVLink/NVSwitch at 300 GB/s each way per device, 8 HDR InfiniBand
// adapters a host (200 Gb/s, 25 GB/s, per device). Sequence length 2048,
// vocabulary 51,200, activation recompute on.
#ifndef PARTPLAN_TESTS_PLANNER_PARALLELIZE_MEGATRON_RUNS_H_
#define PARTPLAN_TESTS_PLANNER_PARALLELIZE_MEGATRON_RUNS_H_

#include "partplan/v1/parallelize.pb.h"

namespace partplan {

struct MegatronRun {
  const char* name;
  int heads, hidden, layers;
  int tensor, pipeline, gpus, batch;
  double teraflops_per_gpu;  // with recompute's FLOPs (96 B s l h^2 ...)
};

inline constexpr MegatronRun kMegatronRuns[] = {
    {"1.7B", 24, 2304, 24, 1, 1, 32, 512, 137},
    {"3.6B", 32, 3072, 30, 2, 1, 64, 512, 138},
    {"7.5B", 32, 4096, 36, 4, 1, 128, 512, 142},
    {"18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135},
    {"39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138},
    {"76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140},
    {"145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148},
    {"310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155},
    {"529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163},
    {"1008B", 160, 25600, 128, 8, 64, 3072, 3072, 163},
};

inline v1::ParallelizeRequest MegatronRequest(const MegatronRun& run) {
  v1::ParallelizeRequest request;
  v1::TransformerSummary* model = request.mutable_transformer();
  model->set_layers(run.layers);
  model->set_hidden_size(run.hidden);
  model->set_attention_heads(run.heads);
  model->set_sequence_length(2048);
  model->set_vocabulary_size(51200);
  v1::HostGroup* hosts = request.mutable_cluster()->add_host_groups();
  hosts->set_hosts(run.gpus / 8);
  hosts->set_devices_per_host(8);
  hosts->mutable_accelerator()->set_name("A100-SXM4-80GB");
  hosts->mutable_accelerator()->set_memory_bytes(80.0 * (1 << 30));
  hosts->mutable_accelerator()->set_peak_flops_per_second(312e12);
  hosts->set_intra_host_bytes_per_second(300e9);
  hosts->set_inter_host_bytes_per_second(25e9);
  request.mutable_options()->set_global_batch_size(run.batch);
  return request;
}

}  // namespace partplan

#endif  // PARTPLAN_TESTS_PLANNER_PARALLELIZE_MEGATRON_RUNS_H_

#include "planner/parallelize/transformer_costs.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace partplan {
namespace {

// Activations and the tensors collectives move: 2 bytes an element (fp16 /
// bf16), as Korthikanti et al.'s formulas assume.
constexpr double kActivationBytes = 2;
// Token ids the first stage reads: int64.
constexpr double kTokenBytes = 8;

// A ring all-reduce of `bytes` over n devices, at `rate` bytes per second
// each way: 2 (n - 1)/n of the bytes cross each link, in 2 (n - 1) steps of
// `latency` seconds each.
double AllReduceSeconds(double bytes, int n, double rate, double latency) {
  if (n <= 1 || std::isinf(rate)) return 0;
  return 2.0 * (n - 1) / n * bytes / rate + 2.0 * (n - 1) * latency;
}

// An all-gather or a reduce-scatter: half an all-reduce.
double GatherSeconds(double bytes, int n, double rate, double latency) {
  return AllReduceSeconds(bytes, n, rate, latency) / 2;
}

// A layer's saved activations per micro-batch of b sequences, all of them
// (Korthikanti et al., 2022, section 4, t = 1): the attention block
// 11 sbh + 5 a s^2 b, the MLP 3 sbh + 4 sbf per expert a token visits
// (19 sbh for a dense MLP with f = 4h), the two norms' inputs 4 sbh.
double LayerActivationBytes(const TransformerModel& m, double b) {
  const double sbh = m.sequence * b * m.hidden;
  const double mlp = (2 * sbh + 4 * m.sequence * b * m.ffn) * m.experts_per_token + sbh;
  return 11 * sbh + 5 * m.heads * m.sequence * m.sequence * b + mlp + 4 * sbh;
}

struct LayerMemory {
  double saved = 0;      // kept from the forward to the backward
  double transient = 0;  // the backward's own working set
};

// Sequence parallelism (every t > 1 here) divides all of it by t.
LayerMemory LayerMemoryOf(const TransformerModel& m, const ParallelCandidate& c) {
  const double b = c.micro_batch_size, t = c.tensor;
  const double all = LayerActivationBytes(m, b);
  const double scores = 5 * m.heads * m.sequence * m.sequence * b;
  // The largest gradient the backward holds besides: that of the MLP's
  // inner activation, or of the attention scores.
  const double gradient = kActivationBytes * std::max(m.sequence * b * m.ffn * m.experts_per_token,
                                                      m.heads * m.sequence * m.sequence * b);
  LayerMemory memory;
  switch (c.recompute) {
    case LayerRecomputeMode::kNone:
      memory.saved = all / t;
      memory.transient = gradient / t;
      break;
    case LayerRecomputeMode::kSelective:
      memory.saved = (all - scores) / t;
      memory.transient = (gradient + scores) / t;
      break;
    case LayerRecomputeMode::kFull:
      memory.saved = kActivationBytes * m.sequence * b * m.hidden / t;
      memory.transient = (gradient + all) / t;
      break;
  }
  return memory;
}

struct ItemCosts {
  ItemTime forward, backward, weight;
  ItemTime Sum() const {
    return {forward.compute + backward.compute + weight.compute,
            forward.tensor + backward.tensor + weight.tensor,
            forward.zero + backward.zero + weight.zero};
  }
};

ItemCosts LayerCosts(const TransformerModel& m, const ParallelizeOptions& options,
                     const ParallelCandidate& c, const RankLinks& links) {
  const double b = c.micro_batch_size, t = c.tensor;
  const double per_flop = 1.0 / (options.compute_efficiency * links.peak_flops * t);
  const double gemm = b * m.LayerGemmFlopsPerSequence() * per_flop;
  const double attention = b * m.LayerAttentionFlopsPerSequence() * per_flop;
  const double activation = kActivationBytes * m.sequence * b * m.hidden;
  const double two_all_reduces =
      2 * AllReduceSeconds(activation, c.tensor, links.tensor_bytes_per_second,
                           options.collective_latency_seconds);
  ItemCosts costs;
  costs.forward.compute = gemm + attention;
  costs.forward.tensor = two_all_reduces;
  costs.backward.compute = gemm + 2 * attention;
  costs.backward.tensor = two_all_reduces;
  costs.weight.compute = gemm;
  if (c.recompute == LayerRecomputeMode::kSelective) {
    costs.backward.compute += attention;
  } else if (c.recompute == LayerRecomputeMode::kFull) {
    costs.backward.compute += costs.forward.compute;
    costs.backward.tensor += costs.forward.tensor;
  }
  const double zero = ZeroMicroBatchSeconds(options, c, LayerDeviceParameters(m, c.tensor),
                                            links.data_bytes_per_second);
  costs.weight.zero = zero;
  return costs;
}

// The embedding: a vocabulary-parallel lookup, its partial sums
// all-reduced.
ItemCosts EmbeddingCosts(const TransformerModel& m, const ParallelizeOptions& options,
                         const ParallelCandidate& c, const RankLinks& links) {
  const double activation = kActivationBytes * m.sequence * c.micro_batch_size * m.hidden;
  ItemCosts costs;
  costs.forward.tensor = AllReduceSeconds(activation, c.tensor, links.tensor_bytes_per_second,
                                          options.collective_latency_seconds);
  costs.weight.zero = ZeroMicroBatchSeconds(
      options, c, m.WordEmbeddingParameters() / c.tensor + m.PositionEmbeddingParameters(),
      links.data_bytes_per_second);
  return costs;
}

// The head: the final norm, the logits against the (tied) word embedding
// and the loss; the input's gradient all-reduced.
ItemCosts HeadCosts(const TransformerModel& m, const ParallelizeOptions& options,
                    const ParallelCandidate& c, const RankLinks& links) {
  const double b = c.micro_batch_size;
  const double per_flop = 1.0 / (options.compute_efficiency * links.peak_flops * c.tensor);
  const double activation = kActivationBytes * m.sequence * b * m.hidden;
  const double logits = b * m.LogitFlopsPerSequence() * per_flop;
  ItemCosts costs;
  costs.forward.compute = logits;
  costs.backward.compute = logits;
  costs.backward.tensor = AllReduceSeconds(activation, c.tensor, links.tensor_bytes_per_second,
                                           options.collective_latency_seconds);
  costs.weight.compute = logits;
  costs.weight.zero = ZeroMicroBatchSeconds(
      options, c, m.WordEmbeddingParameters() / c.tensor + m.FinalNormParameters(),
      links.data_bytes_per_second);
  return costs;
}

void AddItem(const ItemCosts& costs, double saved, double transient, double parameters,
             TransformerChain* out) {
  TrainingItem item;
  item.forward = costs.forward.total();
  item.backward_input = costs.backward.total();
  item.backward_weight = costs.weight.total();
  item.saved_activation_bytes = static_cast<int64_t>(std::ceil(saved));
  item.transient_bytes = static_cast<int64_t>(std::ceil(transient));
  item.parameters = static_cast<int64_t>(std::ceil(parameters));
  out->chain.items.push_back(item);
  out->item_times.push_back(costs.Sum());
}

std::string ScheduleName(const ParallelCandidate& c) {
  switch (c.schedule) {
    case PipelineSchedule::kGpipe:
      return "GPipe";
    case PipelineSchedule::k1F1B:
      return "1F1B";
    case PipelineSchedule::kInterleaved1F1B:
      return absl::StrCat("interleaved 1F1B v=", c.chunks);
    case PipelineSchedule::kZeroBubbleH1:
      return "ZB-H1";
  }
  return "1F1B";
}

}  // namespace

// ZeRO-2 reduce-scatters each micro-batch's gradients (it keeps no whole
// gradient to accumulate into); ZeRO-3 also all-gathers the weights before
// the forward and again before the backward.
double ZeroMicroBatchSeconds(const ParallelizeOptions& options, const ParallelCandidate& c,
                             double parameters, double rate) {
  if (c.zero == ZeroStage::kGradients) {
    return GatherSeconds(parameters * options.state_bytes.gradients, c.data, rate,
                         options.collective_latency_seconds);
  }
  if (c.zero == ZeroStage::kParameters) {
    return GatherSeconds(parameters * options.state_bytes.gradients, c.data, rate,
                         options.collective_latency_seconds) +
           2 * GatherSeconds(parameters * options.state_bytes.weights, c.data, rate,
                             options.collective_latency_seconds);
  }
  return 0;
}

double LayerDeviceParameters(const TransformerModel& m, int t) {
  const double norms = 4 * m.hidden;
  return (m.LayerParameters() - norms) / t + norms;
}

TransformerItemTimes ItemTimesOn(const TransformerModel& model, const ParallelizeOptions& options,
                                 const ParallelCandidate& candidate, const RankLinks& links) {
  const ItemCosts embedding = EmbeddingCosts(model, options, candidate, links);
  const ItemCosts layer = LayerCosts(model, options, candidate, links);
  const ItemCosts head = HeadCosts(model, options, candidate, links);
  return {embedding.Sum(),           layer.Sum(),           head.Sum(),
          embedding.forward.total(), layer.forward.total(), head.forward.total()};
}

double DataParallelSeconds(const ParallelizeOptions& options, const ParallelCandidate& c,
                           double parameters, double rate) {
  const ModelStateBytes& bytes = options.state_bytes;
  switch (c.zero) {
    case ZeroStage::kNone:
      return AllReduceSeconds(parameters * bytes.gradients, c.data, rate,
                              options.collective_latency_seconds);
    case ZeroStage::kOptimizer:
      return GatherSeconds(parameters * bytes.gradients, c.data, rate,
                           options.collective_latency_seconds) +
             GatherSeconds(parameters * bytes.weights, c.data, rate,
                           options.collective_latency_seconds);
    case ZeroStage::kGradients:
      return GatherSeconds(parameters * bytes.weights, c.data, rate,
                           options.collective_latency_seconds);
    case ZeroStage::kParameters:
      return 0;
  }
  return 0;
}

double LayerSavedBytes(const TransformerModel& m, const ParallelCandidate& c,
                       const MeasuredActivations* measured, int layer) {
  if (measured == nullptr) return LayerMemoryOf(m, c).saved;
  const double b = c.micro_batch_size, t = c.tensor;
  const double all = measured->layers[layer] * b;
  const double scores = 5 * m.heads * m.sequence * m.sequence * b;
  const double input = kActivationBytes * m.sequence * b * m.hidden;
  switch (c.recompute) {
    case LayerRecomputeMode::kNone:
      return all / t;
    case LayerRecomputeMode::kSelective:
      return std::max(all - scores, input) / t;
    case LayerRecomputeMode::kFull:
      return input / t;
  }
  return all / t;
}

TransformerChain BuildTransformerChain(const TransformerModel& m, const ParallelizeOptions& options,
                                       const ParallelCandidate& c,
                                       const std::vector<RankLinks>& links,
                                       const MeasuredActivations* measured) {
  TransformerChain out;
  const RankLinks& reference = links[0];
  const double b = c.micro_batch_size, t = c.tensor;
  const double sbh = m.sequence * b * m.hidden;

  // The embedding saves its dropout mask, a byte an element.
  AddItem(EmbeddingCosts(m, options, c, reference),
          measured != nullptr ? measured->embedding * b / t : sbh / t, 0,
          m.PositionEmbeddingParameters(), &out);
  const ItemCosts layer = LayerCosts(m, options, c, reference);
  const LayerMemory layer_memory = LayerMemoryOf(m, c);
  const double layer_parameters = LayerDeviceParameters(m, c.tensor);
  for (int i = 0; i < m.layers; ++i) {
    AddItem(layer, LayerSavedBytes(m, c, measured, i), layer_memory.transient, layer_parameters,
            &out);
  }
  // The head saves 4 sbh (1 + V/h) / t (Korthikanti et al.); the logits'
  // fp32 gradient is its working set.
  AddItem(
      HeadCosts(m, options, c, reference),
      measured != nullptr ? measured->head * b / t : 4 * sbh * (1 + m.vocabulary / m.hidden) / t,
      4 * m.sequence * b * m.vocabulary / t, m.FinalNormParameters(), &out);

  const int n = static_cast<int>(out.chain.items.size());
  const double activation = kActivationBytes * sbh;
  out.chain.live_bytes.assign(n + 1, static_cast<int64_t>(std::ceil(activation / t)));
  out.chain.live_bytes[0] = static_cast<int64_t>(kTokenBytes * m.sequence * b);
  out.chain.live_bytes[n] = 0;
  out.chain.placement.assign(n, StagePlacement::kAny);
  out.chain.placement[0] = StagePlacement::kFirst;
  out.chain.placement[n - 1] = StagePlacement::kLast;
  TiedParameters tied;
  tied.items = {0, n - 1};
  tied.parameters = static_cast<int64_t>(std::ceil(m.WordEmbeddingParameters() / t));
  out.chain.tied.push_back(tied);

  const double reference_seconds = layer.Sum().total();
  for (const RankLinks& rank : links) {
    const double seconds = LayerCosts(m, options, c, rank).Sum().total();
    out.rank_speed.push_back(seconds > 0 ? reference_seconds / seconds : 1.0);
  }
  return out;
}

std::string DescribeConfig(const ParallelCandidate& c) {
  std::string text =
      absl::StrCat("t=", c.tensor, " p=", c.pipeline, " d=", c.data, " b=", c.micro_batch_size);
  if (c.pipeline > 1) absl::StrAppend(&text, ", ", ScheduleName(c));
  if (c.data > 1 && c.zero != ZeroStage::kNone) {
    absl::StrAppend(&text, ", ZeRO-", static_cast<int>(c.zero));
  }
  if (c.recompute == LayerRecomputeMode::kSelective)
    absl::StrAppend(&text, ", selective recompute");
  if (c.recompute == LayerRecomputeMode::kFull) absl::StrAppend(&text, ", full recompute");
  return text;
}

}  // namespace partplan

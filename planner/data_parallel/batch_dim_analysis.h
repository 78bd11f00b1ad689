// AnalyzeBatchDims: where the batch dimension of an aten graph's activation
// inputs goes, node by node: torch 2.1's `_spmd` BatchDimAnalyzer, with its
// ambiguity fixed.
//
//   BatchDimOptions options;
//   options.roles = ...;               // per node: InputRole::kParameter, ...
//   options.input_batch_dim = 0;
//   PARTPLAN_RETURN_IF_ERROR(options.CheckAndSetup(graph));
//   PARTPLAN_ASSIGN_OR_RETURN(BatchDimAnalysis analysis,
//                             AnalyzeBatchDims(graph, options, token));
//   analysis.layout(v).layout == Layout::kShard;  analysis.layout(v).dim;
//
// Rules, in graph order (one pass, O(nodes + argument values + ranks)):
// - Activation placeholders are sharded on `input_batch_dim`; the first one
//   (an explicit ACTIVATION before an unspecified one) seeds the batch size.
//   An explicit ACTIVATION without that dim or of another batch size is
//   INVALID_ARGUMENT; an unspecified placeholder that does not fit is taken
//   as a replicated input, with a note.
// - Parameters and optimizer states, and nodes computed from them with no
//   batch-sharded operand (an optimizer update, even one reading a Partial
//   gradient), are model state: the data-parallel style places them.
// - View-like ops follow their dimension maps (dim_maps.h); where a view
//   merges, splits or repeats the batch dim the node gets a note, and the
//   batch size follows (it is tracked per value, not globally). Where the
//   batch sits inside a merged dim is tracked too, so that splitting
//   [S*B, H] back into [S, B, H] finds it on dim 1, not on the outer piece
//   (upstream's mistake); a batch merged inside another dim interleaves
//   the devices' rows, which the note says.
// - Ops with a rule (op_rules.h) map their operands' batch dims through it:
//   a batch dim that survives is the output's; a contracted one makes the
//   output Partial (sum, or avg for a mean or under a mean loss), or, for a
//   full reduction to a scalar, a local scalar that stays sharded
//   (upstream's rule); reductions that do not decompose (var, argmax,
//   median, kthvalue, mode, a select of one sample, ...) need the whole
//   batch and give a replicated result. A summed local scalar divided by a multiple of the batch size
//   (`sum / B`, as make_fx bakes x.shape[0], or `sum * (1 / B)`) is a
//   mean. In the backward through a gathered batch (replicated), a product
//   with or quotient by a constant that looks made from the batch size
//   (k / (B - d), k in {1, 2}, d in {0, 1}: var's and std's backward) is
//   flagged: a device's program bakes its own share there.
// - Ops that reorder or mix values along some dims (flip, roll, sort,
//   argsort, topk, cumsum & co, rot90, softmax, gather / scatter / index_*
//   along `dim`, index.Tensor, tril / triu over the last two dims): a
//   batch dim among those dims needs the whole batch (its operands are
//   gathered, the result replicated); rot90 moves the batch to the other
//   dim when it does not reverse it. A replicated
//   result that holds the whole batch row for row (a flip or sort over it,
//   not a topk or gather) keeps that dim, and ops on samples read it as
//   sharded there (each device cuts its rows again).
// - Training-mode batch norm normalises by the whole batch's statistics:
//   it is planned as SyncBatchNorm, which all-reduces per-channel sums and
//   sums of squares (the backward: sums of the gradient and of its product
//   with the centred input), so its output stays sharded and save_mean /
//   save_invstd are the batch's, replicated (`statistics_sync`). With the
//   batch on the channel dim it needs the whole batch instead.
// - A replicated value an op reads per sample beside a batch-sharded one
//   (a loss's target or gather's index made inside the step, or held in a
//   buffer; op_rules.h `per_sample_args`) lines up with it dim for dim:
//   each device cuts its rows of it (`cut_dim`, a local_chunk in the plan).
// - Other ops: the output dim whose size is the batch size. Only views and
//   pointwise ops broadcast by rule; for them the dim a batch operand lands
//   on when broadcast settles it, and only a non-batch dim of the batch
//   size (in an operand or the output) that leaves it open flags the node.
//   An op without a dimension rule is always flagged ambiguous with a note,
//   even with a single dim of the batch size (tril over the batch or a
//   kthvalue along it keeps that size but mixes the samples) or with none
//   (then taken as a sum over the batch: Partial, or a local scalar); the
//   dim a batch operand lands on when broadcast (else upstream's first
//   match) is the guess. Every node computed from a guess carries it
//   (`guess_of`).
// - Local scalars combine as the sum or average of the devices' values
//   only through ops linear in them (ones_like, views, sums of alike ones,
//   products with or quotients by other values); any other op of them (a
//   local sum divided by another, sqrt of a loss) is flagged ambiguous. So
//   is a sum of a scaled gradient with one already reduced to the whole
//   batch's (`scaled` below), which is neither, and an in-place op that
//   gives its self another layout (a div_ that scales a gradient) while the
//   self is read after it: those readers carry the guess.
// - No batch-sharded operand: Replicate; Partial operands stay Partial
//   through linear ops and are reduced before any other. But a new tensor
//   (a factory such as zeros, or a view that broadcasts, of model state
//   too: a class token expanded over the batch) with a dim of the batch
//   size is sharded on it, as a per-device program makes it (the
//   size match of upstream, which the backward of a mean over the batch
//   needs); with several such dims it is ambiguous, unless it is a factory
//   of uniform values (zeros, full: a causal mask [S, S] with S == B),
//   which is replicated (right whichever dim is the batch). An op without
//   a rule and without inputs (arange) is a guess. A node with no inputs
//   and no such dim is replicated.
// An op node must give its output shapes (graph.proto `outputs`) unless it
// is view-like or a getitem, whose shapes are derived (and checked when
// given), or a tuple whose getitems give its elements' shapes (make_fx
// leaves tuples without metadata). Shapes that do not fit the op (a view of
// another element count, operands that do not broadcast, mm of mismatched
// matrices) are INVALID_ARGUMENT naming the node.
#ifndef PARTPLAN_PLANNER_DATA_PARALLEL_BATCH_DIM_ANALYSIS_H_
#define PARTPLAN_PLANNER_DATA_PARALLEL_BATCH_DIM_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "planner/base/cancellation.h"
#include "planner/data_parallel/op_rules.h"
#include "planner/graph/graph.h"

namespace partplan {

// How a value lies over the data-parallel devices.
enum class Layout : uint8_t {
  kNotTensor,    // None, a non-tensor, the OUTPUT node
  kModelState,   // a parameter or optimizer state, or computed from them alone
  kReplicate,    // the whole value on every device
  kShard,        // split along `dim`, its batch dim
  kLocalScalar,  // a full reduction over the batch that each device keeps
                 // for itself; `dim` is the reduced operand's batch dim
  kPartial,      // each device holds a term; `reduce` combines them
};

// How the devices' values combine into the whole one.
enum class ReduceOp : uint8_t { kSum, kAvg, kMax, kMin };

// "sum", "avg", "max", "min".
const char* ReduceOpName(ReduceOp op);

struct ValueLayout {
  Layout layout = Layout::kNotTensor;
  // kShard, kLocalScalar: the batch dim. kReplicate: the dim holding the
  // whole batch, row for row, in a value an op made from a gathered batch
  // (a flip over it); ops on samples read each device's rows of it
  // (local_chunk) as if it were sharded there. -1 for other replicated
  // values.
  int32_t dim = -1;
  int64_t batch_size = 0;  // kShard, kLocalScalar, kReplicate with a dim: its size
  // kShard, kLocalScalar: a view may merge other dims with the batch into
  // its dim: that many elements lie outside the batch and inside it, so the
  // dim holds batch_size / (batch_outer * batch_inner) samples. With
  // batch_outer > 1 each device's rows interleave instead of forming a
  // contiguous block.
  int64_t batch_outer = 1;
  int64_t batch_inner = 1;
  ReduceOp reduce = ReduceOp::kSum;  // kPartial, kLocalScalar
  // Derived from a per-device mean over the batch (a mean loss and its
  // backward): each device's value is scaled by 1/(its share of the batch),
  // so the Partial terms made from it average rather than add.
  bool local_mean = false;
  // kShard, kLocalScalar, kReplicate: each device's values are B / b times
  // the whole value's (b of the B samples on the device: N times for N
  // devices splitting evenly). The backward of a mean loss is so from where
  // it divides by the number of samples, which each device takes as its own
  // (a loss backward op under reduction=mean, `expand(g) / (B x k)`, or
  // `ones_like(loss) / B` for a loss written `sum / B`; a product with
  // 1 / (B x k) counts as the division); ops keep it, a
  // contraction turns it into a Partial average, and a gather of such
  // shards is replicated with it.
  bool scaled = false;

  bool operator==(const ValueLayout& other) const {
    return layout == other.layout && dim == other.dim && batch_size == other.batch_size &&
           batch_outer == other.batch_outer && batch_inner == other.batch_inner &&
           reduce == other.reduce && local_mean == other.local_mean && scaled == other.scaled;
  }
};

// What a placeholder holds (the request's PlaceholderRole).
enum class InputRole : uint8_t {
  kUnspecified,  // not given: an activation if it has the batch dim
  kParameter,
  kOptimizerState,
  kActivation,
};

// "PARAMETER", "OPTIMIZER_STATE", ..., as the request names the role.
const char* InputRoleName(InputRole role);

struct BatchDimOptions {
  // The role of every placeholder, indexed by node id (kUnspecified, an
  // activation, for the rest); CheckAndSetup sizes it to the graph.
  std::vector<InputRole> roles;
  // The batch dim of the activation inputs.
  int32_t input_batch_dim = 0;

  // INVALID_ARGUMENT (field `input_batch_dim`) for a negative batch dim, or
  // (field `roles`) for more roles than nodes.
  absl::Status CheckAndSetup(const CompactGraph& graph);
};

// The key of operand u of node v in BatchDimAnalysis's cuts.
inline int64_t CutKey(NodeId u, NodeId v) {
  return (static_cast<int64_t>(v) << 32) | static_cast<uint32_t>(u);
}

class BatchDimAnalysis {
 public:
  int32_t num_nodes() const { return static_cast<int32_t>(element_offsets_.size()) - 1; }

  // The node's value; for a tuple, its first element (getitem nodes carry
  // each element).
  const ValueLayout& layout(NodeId v) const { return elements_[element_offsets_[v]]; }
  int num_elements(NodeId v) const {
    return static_cast<int>(element_offsets_[v + 1] - element_offsets_[v]);
  }
  const ValueLayout& element_layout(NodeId v, int k) const {
    return elements_[element_offsets_[v] + k];
  }
  // Shape and element size of the node's value (element k of a tuple);
  // empty shape and 0 bytes for a non-tensor.
  absl::Span<const int64_t> shape(NodeId v, int k = 0) const;
  int64_t element_bytes(NodeId v, int k = 0) const {
    return tensors_[element_offsets_[v] + k].element_bytes;
  }
  // Elements x element size of the node's value (all elements of a tuple).
  int64_t value_bytes(NodeId v) const;

  // Set when the batch dim could not be told from a same-sized dim.
  bool ambiguous(NodeId v) const { return ambiguous_[v]; }
  // The ambiguous node whose guess v's layout rests on: v itself when
  // ambiguous, else the guess of its first operand (in input order) that
  // has one, else -1. A guess is never taken as known downstream.
  NodeId guess_of(NodeId v) const { return guess_of_[v]; }

  // Training-mode batch norm (and its backward) planned as SyncBatchNorm:
  // the devices all-reduce per-channel statistics of `operand` (`values`
  // numbers of `element_bytes` each) so that each normalises its rows by
  // the whole batch's statistics.
  struct StatisticsSync {
    NodeId operand = -1;
    int64_t values = 0;
    int64_t element_bytes = 0;
    std::string what;  // which statistics
  };
  // The sync node v needs, or null.
  const StatisticsSync* statistics_sync(NodeId v) const {
    auto it = syncs_.find(v);
    return it == syncs_.end() ? nullptr : &it->second;
  }
  // A replicated operand u (not a gathered batch) that op v reads per
  // sample beside a batch-sharded one (OpRule::per_sample_args: a loss's
  // input and target, gather's self and index): the dim of u whose rows
  // each device takes (local_chunk), its batch dim; -1 when u is not cut.
  int32_t cut_dim(NodeId u, NodeId v) const;

  // Why: for ambiguous nodes, batch-dim merges, splits and repeats, full
  // reductions and inputs taken as replicated. Empty for the rest.
  const std::string& note(NodeId v) const;

  // The op is linear in its Partial operands, which therefore stay Partial.
  bool keeps_partial_operands(NodeId v) const { return keeps_partial_[v]; }
  // The op needs its batch-sharded operands whole (all-gathered): a select
  // of one sample, a reduction over the batch that does not decompose.
  bool gathers_batch(NodeId v) const { return gathers_batch_[v]; }
  // The op is elementwise (pointwise or *_like): model state computed by it
  // can keep its operands' sharding.
  bool elementwise(NodeId v) const { return elementwise_[v]; }
  // The node allocates nothing: a view of operand 0's storage (view-like ops
  // but repeat) or an element of a tuple (getitem).
  bool aliases_operand(NodeId v) const { return aliases_[v]; }
  // The node is a getitem picking an element of a tuple, which it takes as
  // it lies.
  bool selects_element(NodeId v) const { return selects_element_[v]; }

  // The batch size of the activation inputs.
  int64_t batch_size() const { return batch_size_; }

 private:
  friend class BatchDimAnalyzer;

  struct TensorInfo {
    int64_t shape_offset = 0;
    int32_t rank = 0;
    int64_t element_bytes = 0;
  };

  std::vector<int64_t> element_offsets_;  // num_nodes + 1 entries
  std::vector<ValueLayout> elements_;
  std::vector<TensorInfo> tensors_;  // parallel to elements_
  std::vector<int64_t> shape_pool_;
  std::vector<bool> ambiguous_;
  std::vector<NodeId> guess_of_;
  absl::flat_hash_map<NodeId, StatisticsSync> syncs_;
  absl::flat_hash_map<int64_t, int32_t> cuts_;  // CutKey(u, v) -> dim
  std::vector<bool> keeps_partial_;
  std::vector<bool> gathers_batch_;
  std::vector<bool> elementwise_;
  std::vector<bool> aliases_;
  std::vector<bool> selects_element_;
  std::vector<bool> elements_by_schema_;  // elements listed by schema index (from getitems)
  absl::flat_hash_map<NodeId, std::string> notes_;
  std::string no_note_;
  int64_t batch_size_ = 0;
};

absl::StatusOr<BatchDimAnalysis> AnalyzeBatchDims(const CompactGraph& graph,
                                                  const BatchDimOptions& options,
                                                  const CancellationToken& token);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_DATA_PARALLEL_BATCH_DIM_ANALYSIS_H_

// BatchDimAnalyzer: the one pass over a graph behind AnalyzeBatchDims
// (batch_dim_analysis.h, which states the rules), private to its target.
// The class is one object holding the result as it grows; its members are
// defined in one file per idea, named beside each group below.
//
//   BatchDimAnalyzer analyzer(graph, options, token);  // options set up
//   PARTPLAN_ASSIGN_OR_RETURN(BatchDimAnalysis analysis, analyzer.Run());
//
// Only AnalyzeBatchDims makes one; it checks that the graph was imported
// from a parsed v1::Graph, whose node messages the pass reads.
#ifndef PARTPLAN_PLANNER_DATA_PARALLEL_BATCH_DIM_ANALYZER_H_
#define PARTPLAN_PLANNER_DATA_PARALLEL_BATCH_DIM_ANALYZER_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "partplan/v1/graph.pb.h"
#include "planner/base/cancellation.h"
#include "planner/data_parallel/batch_dim_analysis.h"
#include "planner/data_parallel/dim_maps.h"
#include "planner/data_parallel/node_args.h"
#include "planner/data_parallel/op_rules.h"
#include "planner/graph/graph.h"

namespace partplan {
namespace batch_dim_internal {

inline std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

inline bool HasNoElements(absl::Span<const int64_t> shape) {
  return std::find(shape.begin(), shape.end(), 0) != shape.end();
}

inline std::string NodeField(NodeId v) { return absl::StrCat("graph.nodes[", v, "]"); }

// What an op does with one batch-sharded operand's batch dim.
struct DimFate {
  enum Kind { kMapped, kContracted, kGathered, kNoRule } kind = kNoRule;
  // kMapped: the output dim. kGathered: the output dim holding the whole
  // batch, row for row with the op's batch operands (a flip or sort over
  // it), or -1 when none does (a reduction over it, a select of a sample).
  int32_t dim = -1;
};

inline DimFate Mapped(int32_t dim) { return DimFate{DimFate::kMapped, dim}; }
inline DimFate Contracted() { return DimFate{DimFate::kContracted, -1}; }
inline DimFate Gathered(int32_t whole = -1) { return DimFate{DimFate::kGathered, whole}; }
inline DimFate NoRule() { return DimFate{}; }

// Broadcasting (right-aligned): where operand dim `dim` of an operand of
// shape `operand` lands in `output`, if it keeps its size there.
inline DimFate Broadcast(absl::Span<const int64_t> operand, int32_t dim,
                         absl::Span<const int64_t> output) {
  const int64_t at =
      dim + static_cast<int64_t>(output.size()) - static_cast<int64_t>(operand.size());
  if (at < 0 || at >= static_cast<int64_t>(output.size()) || output[at] != operand[dim]) {
    return NoRule();
  }
  return Mapped(static_cast<int32_t>(at));
}

// Whether `operand` broadcasts to `output`: right-aligned, each dim equal
// or 1.
inline bool BroadcastsTo(absl::Span<const int64_t> operand, absl::Span<const int64_t> output) {
  if (operand.size() > output.size()) return false;
  const size_t offset = output.size() - operand.size();
  for (size_t j = 0; j < operand.size(); ++j) {
    if (operand[j] != 1 && operand[j] != output[offset + j]) return false;
  }
  return true;
}

// Same position (left-aligned): the dim stays if the output keeps it.
inline DimFate SamePosition(absl::Span<const int64_t> operand, int32_t dim,
                            absl::Span<const int64_t> output) {
  if (dim < static_cast<int32_t>(output.size()) && output[dim] == operand[dim]) {
    return Mapped(dim);
  }
  return Contracted();
}

}  // namespace batch_dim_internal

// One pass over the graph in order; batch_dim_analysis.h states the rules.
class BatchDimAnalyzer {
 public:
  BatchDimAnalyzer(const CompactGraph& graph, const BatchDimOptions& options,
                   const CancellationToken& token)
      : graph_(graph), options_(options), token_(token) {}

  absl::StatusOr<BatchDimAnalysis> Run();

 private:
  using DimFate = batch_dim_internal::DimFate;

  // Tensor operands of the op being analysed, with their layouts.
  struct Operands {
    bool any_model = false;
    bool any_partial = false;
    bool local_mean = false;
    bool scaled = false;  // some operand is ValueLayout::scaled
    absl::InlinedVector<NodeId, 4> sharded;        // kShard operands, in input order
    absl::InlinedVector<NodeId, 2> local_scalars;  // kLocalScalar operands
    bool has_batch() const { return !sharded.empty() || !local_scalars.empty(); }
  };

  // The graph is imported from a parsed one (AnalyzeBatchDims checks).
  const v1::Node& proto(NodeId v) const { return graph_.parsed()->nodes(v); }
  const ValueLayout& layout(NodeId u) const { return result_.layout(u); }
  absl::Span<const int64_t> shape(NodeId u) const { return result_.shape(u); }
  bool is_tensor(NodeId u) const { return layout(u).layout != Layout::kNotTensor; }

  // The pass, the result's elements, notes and guesses, placeholders (batch_dim_analyzer.cc).
  void AddElement(const ValueLayout& value, absl::Span<const int64_t> shape,
                  int64_t element_bytes);
  int64_t GivenElementBytes(NodeId v, int k) const;
  void AddGivenElements(NodeId v, Layout kind);
  void Note(NodeId v, std::string text);
  void CarryGuess(NodeId v);
  bool FitsBatchDim(NodeId v) const;
  absl::Status FindSeed();
  absl::Status CheckActivation(NodeId v) const;
  absl::Status AnalyzePlaceholder(NodeId v);
  void Guess(NodeId v, absl::string_view why);

  // Op nodes, tuples and getitems, per-sample cuts, shape checks (batch_dim_ops.cc).
  Operands ClassifyOperands(NodeId v) const;
  const OpRule& RuleOf(NodeId v) const;
  absl::Status AnalyzeOp(NodeId v);
  NodeId PerSampleArg(const NodeArgs& args, int position) const;
  void CutPerSampleOperands(NodeId v, const OpRule& rule, const NodeArgs& args);
  absl::Status AnalyzeTupleOfGetItems(NodeId v, const OpRule& rule, const NodeArgs& args,
                                      const Operands& operands);
  int ElementIndex(const OpRule& rule, const NodeArgs& args, int k) const;
  int ListedIndex(const OpRule& rule, const NodeArgs& args, int index, int listed) const;
  absl::Status AnalyzeGetItem(NodeId v, const NodeArgs& args);
  absl::Status ShapeMismatch(NodeId v, const NodeArgs& args, absl::string_view what) const;
  absl::Status CheckOperandShapes(NodeId v, const OpRule& rule, const NodeArgs& args,
                                  absl::Span<const int64_t> output) const;
  absl::Status CheckMatmulShapes(NodeId v, const OpRule& rule, const NodeArgs& args,
                                 absl::Span<const int64_t> output) const;

  // View-like ops (batch_dim_views.cc).
  absl::Status AnalyzeView(NodeId v, const OpRule& rule, const NodeArgs& args,
                           const Operands& operands);
  absl::optional<ValueLayout> FollowBatch(NodeId v, const DimMap& map, const ValueLayout& in,
                                          absl::Span<const int64_t> input_shape);
  void NoteViewOfBatch(NodeId v, const DimSource& source, absl::Span<const int32_t> pieces,
                       const ValueLayout& in, const ValueLayout& out, int64_t dim_size,
                       bool straddles);

  // The layout of one output element (batch_dim_layout.cc).
  absl::StatusOr<ValueLayout> ElementLayout(NodeId v, const OpRule& rule, const NodeArgs& args,
                                            const Operands& operands, int element,
                                            absl::Span<const int64_t> output);
  absl::StatusOr<bool> Training(const OpRule& rule, const NodeArgs& args) const;
  absl::StatusOr<ValueLayout> UnscaledLayout(NodeId v, const OpRule& rule, const NodeArgs& args,
                                             const Operands& operands, int element,
                                             absl::Span<const int64_t> output);
  void SyncStatistics(NodeId v, const OpRule& rule, const NodeArgs& args);
  ValueLayout NewBatchDim(NodeId v, ValueLayout value, absl::Span<const int32_t> dims,
                          absl::Span<const int64_t> output);
  ValueLayout Sharded(ValueLayout value, int32_t dim, absl::Span<const int64_t> output,
                      const ValueLayout* from = nullptr) const;
  ValueLayout LocalScalar(const Operands& operands, ReduceOp reduce) const;
  absl::StatusOr<ValueLayout> Contraction(const OpRule& rule, const NodeArgs& args,
                                          const Operands& operands,
                                          absl::Span<const int64_t> output);
  ValueLayout WithoutBatch(NodeId v, const OpRule& rule, const NodeArgs& args,
                           const Operands& operands, absl::Span<const int64_t> output,
                           ValueLayout value);
  absl::optional<ReduceOp> LinearPartialReduce(NodeId v, const OpRule& rule,
                                               const NodeArgs& args) const;

  // Means and scales, and the flags where no placement states the values (batch_dim_scale.cc).
  void FlagInPlaceChange(NodeId v, const NodeArgs& args);
  void FlagMixedScale(NodeId v);
  absl::StatusOr<ValueLayout> WithScale(const OpRule& rule, const NodeArgs& args,
                                        const Operands& operands, ValueLayout value) const;
  absl::StatusOr<bool> DividesByOwnSamples(const OpRule& rule, const NodeArgs& args,
                                           const ValueLayout& value) const;
  static int64_t Divisor(const OpRule& rule, const NodeArgs& args);
  static double Constant(const NodeArgs::Arg& arg);
  void FlagBatchSizedConstant(NodeId v, const OpRule& rule, const NodeArgs& args,
                              const Operands& operands);
  bool BroadcastWithoutBatch(NodeId d) const;
  void FlagNonlinearInLocalScalars(NodeId v, const OpRule& rule, const NodeArgs& args,
                                   const Operands& operands);
  void MeanBySize(NodeId v, const OpRule& rule, const NodeArgs& args, ValueLayout* value);

  // Where a dimension rule sends an operand's batch dim (batch_dim_fate.cc).
  absl::StatusOr<DimFate> FateOfBatchDim(const OpRule& rule, const NodeArgs& args, int element,
                                         NodeId u, absl::Span<const int64_t> output);
  absl::StatusOr<bool> MixesBatchDim(const OpRule& rule, const NodeArgs& args, NodeId u,
                                     size_t rank, int32_t b) const;
  absl::StatusOr<DimFate> Rot90Fate(const NodeArgs& args, NodeId u, absl::Span<const int64_t> in,
                                    int32_t b) const;
  absl::StatusOr<DimFate> ReductionFate(const OpRule& rule, const NodeArgs& args, NodeId u,
                                        absl::Span<const int64_t> in, int32_t b) const;
  absl::StatusOr<DimFate> AlongDimFate(const OpRule& rule, const NodeArgs& args, NodeId u,
                                       absl::Span<const int64_t> in, int32_t b,
                                       absl::Span<const int64_t> output) const;
  absl::StatusOr<DimFate> IndexDimBackwardFate(const OpRule& rule, const NodeArgs& args, NodeId u,
                                               absl::Span<const int64_t> in, int32_t b,
                                               absl::Span<const int64_t> output) const;
  absl::StatusOr<int32_t> DimArgument(const OpRule& rule, const NodeArgs& args, size_t rank) const;

  // Ops without a dimension rule: the batch dim by size (batch_dim_by_size.cc).
  void NoteRuleSettled(NodeId v, absl::Span<const int64_t> output, int32_t dim);
  int64_t BatchSizeSeen(NodeId v) const;
  static bool Broadcasts(const OpRule& rule);
  absl::StatusOr<ValueLayout> Generic(NodeId v, const Operands& operands,
                                      absl::Span<const int64_t> output, bool broadcasts);

  const CompactGraph& graph_;
  const BatchDimOptions& options_;
  const CancellationToken& token_;
  const OpRuleTable rules_;
  const OpRule no_rule_;
  BatchDimAnalysis result_;
  NodeId seed_ = -1;
  int64_t batch_size_ = 0;
  bool concatenates_batch_ = false;  // set by FateOfBatchDim for cat along the batch
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_DATA_PARALLEL_BATCH_DIM_ANALYZER_H_

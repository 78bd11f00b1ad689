// The batch dim of ops without a dimension rule, told by size: an output
// dim of the batch size, settled by where a batch operand lands when
// broadcast, else a guess (flagged ambiguous with a note).
#include "planner/data_parallel/batch_dim_analyzer.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {

using batch_dim_internal::ShapeString;
using batch_dim_internal::DimFate;
using batch_dim_internal::Broadcast;
using batch_dim_internal::BroadcastsTo;

void BatchDimAnalyzer::NoteRuleSettled(NodeId v, absl::Span<const int64_t> output, int32_t dim) {
  const int64_t batch = BatchSizeSeen(v);
  absl::InlinedVector<int32_t, 4> same;
  for (size_t d = 0; d < output.size(); ++d) {
    if (output[d] == batch && static_cast<int32_t>(d) != dim) {
      same.push_back(static_cast<int32_t>(d));
    }
  }
  if (same.empty()) return;
  Note(v, absl::StrCat("output dims ", ShapeString(Dims(same.begin(), same.end())),
                       " have the batch size ", batch,
                       " but are not the batch dim: the op's "
                       "dimension rule ",
                       dim >= 0 ? absl::StrCat("puts the batch on dim ", dim)
                                : std::string("contracts the batch dim")));
}

// The batch size of the node's first batch operand.
int64_t BatchDimAnalyzer::BatchSizeSeen(NodeId v) const {
  for (NodeId u : graph_.inputs(v)) {
    const Layout kind = layout(u).layout;
    if (kind == Layout::kShard || kind == Layout::kLocalScalar) return layout(u).batch_size;
  }
  return batch_size_;
}

// Whether the op's output dims line up with its operands' by
// broadcasting, as a rule: views and pointwise ops. For any other op the
// dim a batch operand would land on when broadcast is a guess.
bool BatchDimAnalyzer::Broadcasts(const OpRule& rule) {
  return rule.family == OpFamily::kView || rule.family == OpFamily::kPointwise ||
         rule.family == OpFamily::kFactoryLike;
}

absl::StatusOr<ValueLayout> BatchDimAnalyzer::Generic(NodeId v, const Operands& operands,
                                                      absl::Span<const int64_t> output,
                                                      bool broadcasts) {
  absl::InlinedVector<int64_t, 2> sizes;
  auto add_size = [&sizes](int64_t size) {
    if (std::find(sizes.begin(), sizes.end(), size) == sizes.end()) sizes.push_back(size);
  };
  for (NodeId u : operands.sharded) add_size(layout(u).batch_size);
  for (NodeId u : operands.local_scalars) add_size(layout(u).batch_size);
  auto is_batch_size = [&sizes](int64_t size) {
    return std::find(sizes.begin(), sizes.end(), size) != sizes.end();
  };
  absl::InlinedVector<int32_t, 4> candidates;
  for (size_t d = 0; d < output.size(); ++d) {
    if (is_batch_size(output[d])) candidates.push_back(static_cast<int32_t>(d));
  }
  ValueLayout value;
  value.local_mean = operands.local_mean;
  if (candidates.empty()) {
    if (output.empty()) {
      ValueLayout scalar = LocalScalar(operands, ReduceOp::kSum);
      Note(v,
           "full reduction over the batch: each device keeps its own value (upstream's "
           "rule)");
      if (!broadcasts) {
        Guess(v, "the op has no dimension rule, so that it sums over the batch is a guess "
                 "(a median, a quantile or a sort of the batch does not decompose)");
      }
      return scalar;
    }
    value.layout = Layout::kPartial;
    value.reduce = operands.local_mean ? ReduceOp::kAvg : ReduceOp::kSum;
    if (!broadcasts) {
      Guess(v, absl::StrCat("no output dim has the batch size ", sizes.front(),
                            ": taken as a sum over the batch (Partial), but the op has no "
                            "dimension rule, so that is a guess (an op that selects, sorts "
                            "or ranks along the batch does not decompose)"));
    }
    return value;
  }
  // A non-batch dim of the batch size in an operand could be where a
  // candidate comes from.
  std::string lookalike;
  for (NodeId u : graph_.inputs(v)) {
    if (!is_tensor(u) || !lookalike.empty()) continue;
    const absl::Span<const int64_t> in = shape(u);
    for (size_t j = 0; j < in.size(); ++j) {
      const bool is_batch_dim =
          layout(u).layout == Layout::kShard && layout(u).dim == static_cast<int32_t>(j);
      if (!is_batch_dim && is_batch_size(in[j])) {
        lookalike = absl::StrCat("operand '", proto(u).name(), "' has a non-batch dim ", j,
                                 " of that size");
        break;
      }
    }
  }
  // Evidence from the operands: where a batch dim lands when broadcast,
  // and where a full reduction had its batch dim (its expand restores it).
  int32_t aligned = -1;
  const ValueLayout* aligned_from = nullptr;
  std::string because;
  for (NodeId u : operands.sharded) {
    if (!BroadcastsTo(shape(u), output)) continue;
    const DimFate fate = Broadcast(shape(u), layout(u).dim, output);
    if (fate.kind == DimFate::kMapped) {
      aligned = fate.dim;
      aligned_from = &layout(u);
      because = absl::StrCat("operand '", proto(u).name(),
                             "''s batch dim lands there when "
                             "broadcast");
      break;
    }
  }
  for (size_t i = 0; aligned < 0 && i < operands.local_scalars.size(); ++i) {
    const ValueLayout& scalar = layout(operands.local_scalars[i]);
    if (scalar.dim >= 0 && scalar.dim < static_cast<int32_t>(output.size()) &&
        output[scalar.dim] == scalar.batch_size) {
      aligned = scalar.dim;
      aligned_from = &scalar;
      because = absl::StrCat("it is where '", proto(operands.local_scalars[i]).name(),
                             "' reduced its batch dim");
    }
  }
  const std::string candidates_text =
      absl::StrCat("output dims ", ShapeString(Dims(candidates.begin(), candidates.end())),
                   " have the batch size ", sizes.front());
  int32_t dim = candidates.front();
  if (aligned >= 0 && broadcasts) {
    dim = aligned;
    if (candidates.size() > 1 || !lookalike.empty()) {
      Note(v, absl::StrCat(candidates_text, "; took dim ", dim, ": ", because));
    }
  } else if (aligned >= 0 && (candidates.size() > 1 || !lookalike.empty())) {
    // An op without a dimension rule may move the batch anywhere (rot90
    // of a [B, B] tensor moves it to dim 1): where it would land if the
    // op broadcast is the best guess, not a fact.
    dim = aligned;
    result_.ambiguous_[v] = true;
    Note(v, absl::StrCat("ambiguous: ", candidates_text,
                         lookalike.empty() ? "" : absl::StrCat(", and ", lookalike),
                         "; the op has no dimension rule, so dim ", dim,
                         " is a guess: ", because, " if the op kept dims in place"));
  } else if (aligned >= 0 || (candidates.size() == 1 && lookalike.empty() && !broadcasts)) {
    dim = aligned >= 0 ? aligned : dim;
    if (!broadcasts) {
      // One dim of the batch size, but no rule says the op keeps each
      // sample's values in its own row: tril / triu, a kthvalue or a
      // cummax over it would mix them.
      Guess(v, absl::StrCat("output dim ", dim, " is the only one of the batch size ",
                            sizes.front(),
                            ", but the op has no dimension rule, so that it is the batch "
                            "(with each sample's values in its own row, independent of the "
                            "other samples) is a guess"));
    }
  } else if (candidates.size() > 1 || !lookalike.empty()) {
    result_.ambiguous_[v] = true;
    Note(v, absl::StrCat("ambiguous: ",
                         candidates.size() > 1 ? candidates_text
                                               : absl::StrCat("output dim ", dim,
                                                              " has the batch "
                                                              "size ",
                                                              sizes.front()),
                         lookalike.empty() ? "" : absl::StrCat(", and ", lookalike),
                         "; no dimension rule or operand tells which is the batch, so dim ", dim,
                         " (the first) was taken"));
  }
  return Sharded(value, dim, output, aligned_from);
}

}  // namespace partplan

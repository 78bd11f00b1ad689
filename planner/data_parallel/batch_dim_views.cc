// View-like ops in the batch-dim analysis: where a view (dim_maps.h) puts
// the batch of its input when it merges, splits or repeats the batch's dim,
// and the notes that say so.
#include "planner/data_parallel/batch_dim_analyzer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/base/status_util.h"

namespace partplan {

using batch_dim_internal::ShapeString;
using batch_dim_internal::NodeField;

absl::Status BatchDimAnalyzer::AnalyzeView(NodeId v, const OpRule& rule, const NodeArgs& args,
                                           const Operands& operands) {
  const NodeArgs::Arg self = args.Get(0, "self");
  const NodeId input = args.NodeAt(self);
  if (input < 0 || !is_tensor(input)) return args.Error(self, "self must be a tensor");
  PARTPLAN_ASSIGN_OR_RETURN(const DimMap map, DimMapOfNode(rule.view_op, args, shape(input)));
  const v1::Node& node = proto(v);
  int64_t element_bytes = result_.element_bytes(input);
  if (node.outputs_size() > 0) {
    const auto given = node.outputs(0).shape();
    if (!std::equal(given.begin(), given.end(), map.output_shape.begin(),
                    map.output_shape.end())) {
      return InvalidFieldError(
          absl::StrCat(NodeField(v), ".outputs[0].shape"),
          absl::StrCat(args.Describe(), ": the output shape ", ShapeString(given), " is not the ",
                       ShapeString(map.output_shape), " that a ", ShapeString(shape(input)),
                       " input and the op's arguments give"));
    }
    element_bytes = GivenElementBytes(v, 0);
  }
  result_.aliases_[v] = rule.view_op != ViewOp::kRepeat;
  const ValueLayout& in = layout(input);
  ValueLayout value;
  if (in.layout == Layout::kShard) {
    absl::optional<ValueLayout> followed = FollowBatch(v, map, in, shape(input));
    if (followed.has_value()) {
      value = *followed;
    } else {
      PARTPLAN_ASSIGN_OR_RETURN(value, Generic(v, operands, map.output_shape, /*broadcasts=*/true));
    }
  } else if (in.layout == Layout::kReplicate && in.dim >= 0) {
    // A view of a gathered batch is replicated too; it still holds the
    // whole batch where the view puts it (if it keeps it whole).
    absl::optional<ValueLayout> followed = FollowBatch(v, map, in, shape(input));
    value = in;
    value.dim = -1;
    value.batch_size = 0;
    if (followed.has_value() && followed->batch_outer == 1 && followed->batch_inner == 1 &&
        followed->batch_size == in.batch_size) {
      value.dim = followed->dim;
      value.batch_size = followed->batch_size;
    }
  } else if (in.layout == Layout::kLocalScalar) {
    PARTPLAN_ASSIGN_OR_RETURN(value, Generic(v, operands, map.output_shape, /*broadcasts=*/true));
  } else {
    // Views move data without combining it: Partial, replicated and
    // model-state values stay what they are, unless the view broadcasts a
    // new dim of the batch size (e.g. the backward of a mean over the
    // batch), which a per-device program makes per device.
    absl::InlinedVector<int32_t, 4> new_batch_dims;
    for (size_t d = 0; d < map.dims.size(); ++d) {
      if (map.dims[d].input_dims.empty() && map.output_shape[d] == batch_size_) {
        new_batch_dims.push_back(static_cast<int32_t>(d));
      }
    }
    // Model state too: a class token expanded over the batch
    // (expand(cls, [B, 1, H])) is made per device for its own samples.
    if (!new_batch_dims.empty()) {
      value = NewBatchDim(v, in, new_batch_dims, map.output_shape);
    } else {
      value = in;
      result_.keeps_partial_[v] = in.layout == Layout::kPartial;
    }
  }
  PARTPLAN_ASSIGN_OR_RETURN(value, WithScale(rule, args, operands, value));
  AddElement(value, map.output_shape, element_bytes);
  return absl::OkStatus();
}

// Where a view takes the batch of a sharded input, or none when the view
// drops it. The batch may share its dim with others that a view merged
// into it (`batch_outer` elements outside it, `batch_inner` inside); a
// view that splits the dim again puts the batch on the piece holding
// exactly those samples, which is not always the outermost piece
// (attention's [S*B, H] -> [S, B, H]).
absl::optional<ValueLayout> BatchDimAnalyzer::FollowBatch(NodeId v, const DimMap& map,
                                                          const ValueLayout& in,
                                                          absl::Span<const int64_t> input_shape) {
  absl::InlinedVector<int32_t, 4> pieces;  // output dims made from the batch's input dim
  for (size_t d = 0; d < map.dims.size(); ++d) {
    const auto& inputs = map.dims[d].input_dims;
    if (std::find(inputs.begin(), inputs.end(), in.dim) != inputs.end()) {
      pieces.push_back(static_cast<int32_t>(d));
    }
  }
  if (pieces.empty()) return absl::nullopt;
  const DimSource& source = map.dims[pieces.front()];
  const int64_t dim_size = input_shape[in.dim];
  int64_t merged = 0;  // elements sharing the batch's dim
  if (__builtin_mul_overflow(in.batch_outer, in.batch_inner, &merged)) merged = 0;
  const int64_t samples = merged > 0 && dim_size > 0 ? dim_size / merged : 0;
  // Elements outside and inside the batch across the merged group.
  int64_t outer = in.batch_outer * std::max<int64_t>(source.repeat, 1);
  int64_t inner = in.batch_inner;
  bool before = true;
  for (int32_t input_dim : source.input_dims) {
    if (input_dim == in.dim) {
      before = false;
    } else if (__builtin_mul_overflow(before ? outer : inner, input_shape[input_dim],
                                      before ? &outer : &inner)) {
      return absl::nullopt;
    }
  }
  ValueLayout value = in;
  value.dim = pieces.front();
  value.batch_outer = 1;
  value.batch_inner = 1;
  bool straddles = samples > 0;
  bool start_found = false;
  int64_t covered = 1;  // elements of the pieces before this one
  for (int32_t d : pieces) {
    const int64_t size = map.output_shape[d];
    int64_t next = 0;
    if (samples == 0 || __builtin_mul_overflow(covered, size, &next)) break;
    if (covered <= outer && outer % covered == 0 && next % (outer * samples) == 0) {
      // This piece holds the whole batch, with outer / covered elements
      // outside it.
      value.dim = d;
      value.batch_outer = outer / covered;
      value.batch_inner = next / (outer * samples);
      straddles = false;
      break;
    }
    if (next > outer && !start_found) {
      start_found = true;
      value.dim = d;  // where the batch starts, if no piece holds it whole
      value.batch_outer = std::max<int64_t>(outer / covered, 1);
    }
    covered = next;
  }
  value.batch_size = map.output_shape[value.dim];
  NoteViewOfBatch(v, source, pieces, in, value, dim_size, straddles);
  return value;
}

void BatchDimAnalyzer::NoteViewOfBatch(NodeId v, const DimSource& source,
                                       absl::Span<const int32_t> pieces, const ValueLayout& in,
                                       const ValueLayout& out, int64_t dim_size, bool straddles) {
  if (source.input_dims.size() > 1) {
    Note(v, absl::StrCat("merges the batch dim (input dim ", in.dim, ", size ", dim_size,
                         ") with input dims [", absl::StrJoin(source.input_dims, ", "),
                         "] into dim ", pieces.front(), " of size ", out.batch_size,
                         ": the batch size is now ", out.batch_size));
  }
  if (pieces.size() > 1) {
    Note(v, absl::StrCat("splits input dim ", in.dim, " (size ", dim_size, ") over dims [",
                         absl::StrJoin(pieces, ", "), "]; the batch is dim ", out.dim,
                         " of size ", out.batch_size));
  }
  if (straddles) {
    Note(v, absl::StrCat("the split cuts through the batch itself; took dim ", out.dim,
                         ", where it starts"));
  }
  if (source.repeat > 1) {
    Note(v, absl::StrCat("repeats the batch dim ", source.repeat,
                         " times: each device repeats its own rows, which is not a "
                         "contiguous block of the result"));
  }
  if (out.batch_outer > 1 && in.batch_outer == 1 && source.repeat <= 1) {
    Note(v, absl::StrCat("the batch is not the outermost of the dims merged into dim ", out.dim,
                         " (", out.batch_outer,
                         " elements outside it), so each device's rows interleave in the "
                         "result instead of forming a contiguous block"));
  }
}

}  // namespace partplan

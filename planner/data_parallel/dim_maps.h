// Dimension maps of the view-like aten ops: for each output dimension, the
// input dimensions it is made of. A C++ rendering of the DimSpec rules of
// torch.distributed._tensor.ops.view_ops (torch 2.1), which the batch
// dimension analysis follows to see where an input's batch dim goes, and
// whether a view splits or merges it.
//
//   PARTPLAN_ASSIGN_OR_RETURN(DimMap map, ViewDimMap({4, 6, 8}, {24, 8}));
//   map.dims[0].input_dims      // {0, 1}: dims 0 and 1 merged into dim 0
//   map.output_shape            // {24, 8}
//
//   PARTPLAN_ASSIGN_OR_RETURN(DimMap map, ViewDimMap({24, 8}, {4, -1, 8}));
//   map.dims[0]                 // input_dims {0}, split_count 2, split_index 0
//
// The functions take the input's shape and the op's arguments already read
// (see ViewOpOf and the batch-dimension analysis for the schemas), and
// return INVALID_ARGUMENT, without a field, when the arguments do not fit
// the shape (e.g. a view to a different element count); callers add the
// field. Every function is O(input rank + output rank).
#ifndef PARTPLAN_PLANNER_DATA_PARALLEL_DIM_MAPS_H_
#define PARTPLAN_PLANNER_DATA_PARALLEL_DIM_MAPS_H_

#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "planner/data_parallel/node_args.h"

namespace partplan {

// Where one output dimension comes from.
struct DimSource {
  // Input dimensions flattened into this one, outermost first. The groups a
  // view or flatten merges or splits leave out input dims of size 1, which
  // carry nothing. Empty for a new dimension: a size-1 dim, a broadcast of a
  // size-1 dim, or a repeat of nothing.
  absl::InlinedVector<int32_t, 2> input_dims;
  // When those input dims were split over several output dims (a view such
  // as [24] -> [4, 6]): how many non-singleton output dims share them, and
  // which one this is, outermost first.
  int32_t split_count = 1;
  int32_t split_index = 0;
  // How many times the input was tiled along this dim (repeat), else 1.
  int64_t repeat = 1;

  bool operator==(const DimSource& other) const {
    return input_dims == other.input_dims && split_count == other.split_count &&
           split_index == other.split_index && repeat == other.repeat;
  }
};

struct DimMap {
  std::vector<DimSource> dims;  // one per output dimension
  Dims output_shape;

  // The first output dimension made from `input_dim`, or -1 when the op drops it.
  int32_t OutputDimOf(int32_t input_dim) const;
};

// The view-like ops (and their aten overloads):
enum class ViewOp {
  kSqueeze,      // squeeze.default(self): every size-1 dim
  kSqueezeDim,   // squeeze.dim(self, int dim)
  kSqueezeDims,  // squeeze.dims(self, int[] dim)
  kUnsqueeze,    // unsqueeze.default(self, int dim)
  kView,         // view.default / _unsafe_view.default / reshape.default(self, size),
                 // _reshape_alias.default(self, size, stride)
  kFlatten,      // flatten.using_ints(self, start_dim=0, end_dim=-1)
  kExpand,       // expand.default(self, size, implicit=False)
  kPermute,      // permute.default(self, dims)
  kRepeat,       // repeat.default(self, repeats)
  kTranspose,    // transpose.int(self, dim0, dim1)
  kT,            // t.default(self)
};

// The view op of an aten target such as `aten.view.default` (a leading
// `torch.ops.` is allowed), if it is one.
absl::optional<ViewOp> ViewOpOf(absl::string_view target);

// `dim` in [-rank, rank) made non-negative; INVALID_ARGUMENT when outside.
absl::StatusOr<int32_t> NormalizeDim(int64_t dim, int64_t rank);

// squeeze: dims of size 1 among `dims` (all dims when absent) are removed.
absl::StatusOr<DimMap> SqueezeDimMap(absl::Span<const int64_t> input_shape,
                                     absl::optional<absl::Span<const int64_t>> dims);
// unsqueeze: a size-1 dim inserted at `dim` (in [-rank-1, rank]).
absl::StatusOr<DimMap> UnsqueezeDimMap(absl::Span<const int64_t> input_shape, int64_t dim);
// view, _unsafe_view, reshape, _reshape_alias: `size` may hold one -1.
absl::StatusOr<DimMap> ViewDimMap(absl::Span<const int64_t> input_shape,
                                  absl::Span<const int64_t> size);
// flatten: dims start_dim..end_dim merged into one.
absl::StatusOr<DimMap> FlattenDimMap(absl::Span<const int64_t> input_shape, int64_t start_dim,
                                     int64_t end_dim);
// expand: size-1 dims broadcast, new leading dims; -1 keeps a dim.
absl::StatusOr<DimMap> ExpandDimMap(absl::Span<const int64_t> input_shape,
                                    absl::Span<const int64_t> size);
// permute: output dim i is input dim dims[i].
absl::StatusOr<DimMap> PermuteDimMap(absl::Span<const int64_t> input_shape,
                                     absl::Span<const int64_t> dims);
// repeat: dim i tiled repeats[i] times; extra leading repeats add new dims.
absl::StatusOr<DimMap> RepeatDimMap(absl::Span<const int64_t> input_shape,
                                    absl::Span<const int64_t> repeats);
// transpose: dims dim0 and dim1 swapped.
absl::StatusOr<DimMap> TransposeDimMap(absl::Span<const int64_t> input_shape, int64_t dim0,
                                       int64_t dim1);
// t: transpose of a matrix; vectors and scalars unchanged.
absl::StatusOr<DimMap> TDimMap(absl::Span<const int64_t> input_shape);

// Reads the op's arguments from `args` (input at position 0) and returns
// its map, with errors on the offending argument's field.
absl::StatusOr<DimMap> DimMapOfNode(ViewOp op, const NodeArgs& args,
                                    absl::Span<const int64_t> input_shape);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_DATA_PARALLEL_DIM_MAPS_H_

#include "planner/data_parallel/dim_maps.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status Invalid(absl::string_view message) { return absl::InvalidArgumentError(message); }

// The element count of `shape`, or an error when it overflows.
absl::StatusOr<int64_t> ElementCount(absl::Span<const int64_t> shape) {
  int64_t count = 1;
  for (int64_t size : shape) {
    if (__builtin_mul_overflow(count, size, &count)) {
      return Invalid(
          absl::StrCat("the element count of ", ShapeString(shape), " overflows 64 bits"));
    }
  }
  return count;
}

DimSource FromInput(int32_t input_dim) {
  DimSource source;
  source.input_dims.push_back(input_dim);
  return source;
}

// Output dim i is input dim order[i].
DimMap Reordered(absl::Span<const int64_t> input_shape, absl::Span<const int32_t> order) {
  DimMap map;
  for (int32_t input_dim : order) {
    map.dims.push_back(FromInput(input_dim));
    map.output_shape.push_back(input_shape[input_dim]);
  }
  return map;
}

absl::InlinedVector<int32_t, 6> IdentityOrder(size_t rank) {
  absl::InlinedVector<int32_t, 6> order(rank);
  for (size_t i = 0; i < rank; ++i) order[i] = static_cast<int32_t>(i);
  return order;
}

// view_groups' output for one group: input dims `from` (sizes > 1 kept)
// split over output sizes `to`.
void AppendGroup(absl::Span<const int64_t> input_shape, absl::Span<const int32_t> from,
                 absl::Span<const int64_t> to, DimMap* map) {
  DimSource flattened;
  for (int32_t input_dim : from) {
    if (input_shape[input_dim] > 1) flattened.input_dims.push_back(input_dim);
  }
  const int32_t pieces = static_cast<int32_t>(
      std::count_if(to.begin(), to.end(), [](int64_t size) { return size != 1; }));
  int32_t piece = 0;
  for (int64_t size : to) {
    map->output_shape.push_back(size);
    if (to.size() == 1) {
      map->dims.push_back(flattened);
    } else if (size == 1) {
      map->dims.push_back(DimSource{});
    } else {
      DimSource source = flattened;
      source.split_count = pieces;
      source.split_index = piece++;
      map->dims.push_back(std::move(source));
    }
  }
}

// The sizes a view asks for, with its -1 resolved.
absl::StatusOr<Dims> ResolveViewSize(absl::Span<const int64_t> input_shape,
                                     absl::Span<const int64_t> size, int64_t element_count) {
  Dims resolved(size.begin(), size.end());
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == -1) {
      if (inferred >= 0) return Invalid("only one dimension can be inferred (-1)");
      inferred = static_cast<int>(i);
    } else if (size[i] < 0) {
      return Invalid(absl::StrCat("invalid size ", size[i], " at position ", i));
    } else if (__builtin_mul_overflow(known, size[i], &known)) {
      return Invalid(
          absl::StrCat("the element count of ", ShapeString(size), " overflows 64 bits"));
    }
  }
  const std::string mismatch =
      absl::StrCat("shape ", ShapeString(size), " is invalid for a ", ShapeString(input_shape),
                   " input of ", element_count, " elements");
  if (inferred >= 0) {
    if (known == 0 || element_count % known != 0) return Invalid(mismatch);
    resolved[inferred] = element_count / known;
  } else if (known != element_count) {
    return Invalid(mismatch);
  }
  return resolved;
}

}  // namespace

int32_t DimMap::OutputDimOf(int32_t input_dim) const {
  for (size_t d = 0; d < dims.size(); ++d) {
    const auto& inputs = dims[d].input_dims;
    if (std::find(inputs.begin(), inputs.end(), input_dim) != inputs.end()) {
      return static_cast<int32_t>(d);
    }
  }
  return -1;
}

absl::optional<ViewOp> ViewOpOf(absl::string_view target) {
  absl::ConsumePrefix(&target, "torch.ops.");
  static constexpr struct {
    const char* target;
    ViewOp op;
  } kViewOps[] = {
      {"aten.squeeze.default", ViewOp::kSqueeze},    {"aten.squeeze.dim", ViewOp::kSqueezeDim},
      {"aten.squeeze.dims", ViewOp::kSqueezeDims},   {"aten.unsqueeze.default", ViewOp::kUnsqueeze},
      {"aten.view.default", ViewOp::kView},          {"aten._unsafe_view.default", ViewOp::kView},
      {"aten.reshape.default", ViewOp::kView},       {"aten._reshape_alias.default", ViewOp::kView},
      {"aten.flatten.using_ints", ViewOp::kFlatten}, {"aten.expand.default", ViewOp::kExpand},
      {"aten.permute.default", ViewOp::kPermute},    {"aten.repeat.default", ViewOp::kRepeat},
      {"aten.transpose.int", ViewOp::kTranspose},    {"aten.t.default", ViewOp::kT},
  };
  for (const auto& entry : kViewOps) {
    if (target == entry.target) return entry.op;
  }
  return absl::nullopt;
}

absl::StatusOr<int32_t> NormalizeDim(int64_t dim, int64_t rank) {
  // Like torch's maybe_wrap_dim: a 0-d tensor accepts dims 0 and -1.
  const int64_t wrap = std::max<int64_t>(rank, 1);
  if (dim < -wrap || dim >= wrap) {
    return Invalid(absl::StrCat("dim ", dim, " is out of range for a ", rank, "-d tensor"));
  }
  return static_cast<int32_t>(dim < 0 ? dim + wrap : dim);
}

absl::StatusOr<DimMap> SqueezeDimMap(absl::Span<const int64_t> input_shape,
                                     absl::optional<absl::Span<const int64_t>> dims) {
  const int64_t rank = static_cast<int64_t>(input_shape.size());
  absl::InlinedVector<bool, 6> squeezable(input_shape.size(), !dims.has_value());
  if (dims.has_value()) {
    for (int64_t dim : *dims) {
      PARTPLAN_ASSIGN_OR_RETURN(const int32_t d, NormalizeDim(dim, rank));
      if (d < rank) squeezable[d] = true;
    }
  }
  absl::InlinedVector<int32_t, 6> kept;
  for (int32_t i = 0; i < rank; ++i) {
    if (!(squeezable[i] && input_shape[i] == 1)) kept.push_back(i);
  }
  return Reordered(input_shape, kept);
}

absl::StatusOr<DimMap> UnsqueezeDimMap(absl::Span<const int64_t> input_shape, int64_t dim) {
  const int64_t rank = static_cast<int64_t>(input_shape.size());
  PARTPLAN_ASSIGN_OR_RETURN(const int32_t at, NormalizeDim(dim, rank + 1));
  DimMap map = Reordered(input_shape, IdentityOrder(input_shape.size()));
  map.dims.emplace(map.dims.begin() + at);  // emplace: GCC -O2 misreads a temporary here
  map.output_shape.insert(map.output_shape.begin() + at, 1);
  return map;
}

absl::StatusOr<DimMap> ViewDimMap(absl::Span<const int64_t> input_shape,
                                  absl::Span<const int64_t> size) {
  PARTPLAN_ASSIGN_OR_RETURN(const int64_t element_count, ElementCount(input_shape));
  PARTPLAN_ASSIGN_OR_RETURN(const Dims to, ResolveViewSize(input_shape, size, element_count));
  DimMap map;
  if (element_count == 0) {
    // Without elements there are no groups to find; equal dims map across.
    for (size_t i = 0; i < to.size(); ++i) {
      map.output_shape.push_back(to[i]);
      map.dims.push_back(i < input_shape.size() && input_shape[i] == to[i]
                             ? FromInput(static_cast<int32_t>(i))
                             : DimSource{});
    }
    return map;
  }
  // torch's view_groups: walk both shapes, growing the smaller side of the
  // current group until both sides hold the same number of elements. Size-1
  // dims on one side alone form groups of their own.
  const size_t from_rank = input_shape.size();
  const size_t to_rank = to.size();
  size_t from_index = 0;
  size_t to_index = 0;
  while (from_index < from_rank || to_index < to_rank) {
    absl::InlinedVector<int32_t, 4> from_group;
    Dims to_group;
    int64_t from_elements = 1;
    int64_t to_elements = 1;
    if (from_index < from_rank) {
      from_elements = input_shape[from_index];
      from_group.push_back(static_cast<int32_t>(from_index++));
    }
    if (to_index < to_rank) {
      to_elements = to[to_index++];
      to_group.push_back(to_elements);
    }
    if (from_elements == 1 && to_elements != 1) {
      if (!to_group.empty()) --to_index;
      to_group.clear();
    } else if (from_elements != 1 && to_elements == 1) {
      if (!from_group.empty()) --from_index;
      from_group.clear();
    } else {
      while (from_elements != to_elements) {
        // Both sides hold the same total, so the side that is behind has dims left.
        if (from_elements < to_elements && from_index < from_rank) {
          from_elements *= input_shape[from_index];
          from_group.push_back(static_cast<int32_t>(from_index++));
        } else if (to_elements < from_elements && to_index < to_rank) {
          to_elements *= to[to_index];
          to_group.push_back(to[to_index++]);
        } else {
          return absl::InternalError("view_groups ran out of dimensions");
        }
      }
    }
    if (!to_group.empty()) AppendGroup(input_shape, from_group, to_group, &map);
  }
  return map;
}

absl::StatusOr<DimMap> FlattenDimMap(absl::Span<const int64_t> input_shape, int64_t start_dim,
                                     int64_t end_dim) {
  const int64_t rank = static_cast<int64_t>(input_shape.size());
  if (rank == 0) {
    DimMap map;
    map.dims.push_back(DimSource{});
    map.output_shape.push_back(1);
    return map;
  }
  PARTPLAN_ASSIGN_OR_RETURN(const int32_t start, NormalizeDim(start_dim, rank));
  PARTPLAN_ASSIGN_OR_RETURN(const int32_t end, NormalizeDim(end_dim, rank));
  if (start > end) return Invalid("start_dim cannot come after end_dim");
  DimMap map;
  for (int32_t i = 0; i < rank; ++i) {
    if (i < start || i > end || start == end) {
      map.dims.push_back(FromInput(i));
      map.output_shape.push_back(input_shape[i]);
      continue;
    }
    if (i == start) {
      map.dims.push_back(DimSource{});
      map.output_shape.push_back(1);
    }
    if (input_shape[i] != 1) map.dims.back().input_dims.push_back(i);
    if (__builtin_mul_overflow(map.output_shape.back(), input_shape[i], &map.output_shape.back())) {
      return Invalid("the flattened size overflows 64 bits");
    }
  }
  return map;
}

absl::StatusOr<DimMap> ExpandDimMap(absl::Span<const int64_t> input_shape,
                                    absl::Span<const int64_t> size) {
  if (size.size() < input_shape.size()) {
    return Invalid(absl::StrCat("cannot expand a ", ShapeString(input_shape), " tensor to ",
                                ShapeString(size), ": fewer dimensions"));
  }
  const size_t added = size.size() - input_shape.size();
  DimMap map;
  for (size_t i = 0; i < size.size(); ++i) {
    int64_t desired = size[i];
    if (i < added) {
      if (desired < 0) {
        return Invalid(absl::StrCat("size ", desired, " is not allowed for new leading dim ", i));
      }
      map.dims.push_back(DimSource{});
      map.output_shape.push_back(desired);
      continue;
    }
    const int32_t input_dim = static_cast<int32_t>(i - added);
    const int64_t actual = input_shape[input_dim];
    if (desired == -1) desired = actual;
    if (desired < 0 || (actual != 1 && desired != actual)) {
      return Invalid(absl::StrCat("cannot expand a ", ShapeString(input_shape), " tensor to ",
                                  ShapeString(size), ": dim ", input_dim, " has size ", actual));
    }
    // A broadcast size-1 dim is new data, not the input dim.
    map.dims.push_back(desired == actual ? FromInput(input_dim) : DimSource{});
    map.output_shape.push_back(desired);
  }
  return map;
}

absl::StatusOr<DimMap> PermuteDimMap(absl::Span<const int64_t> input_shape,
                                     absl::Span<const int64_t> dims) {
  const int64_t rank = static_cast<int64_t>(input_shape.size());
  if (static_cast<int64_t>(dims.size()) != rank) {
    return Invalid(absl::StrCat("permute of a ", rank, "-d tensor needs ", rank, " dims, got ",
                                ShapeString(dims)));
  }
  absl::InlinedVector<int32_t, 6> order;
  absl::InlinedVector<bool, 6> seen(input_shape.size(), false);
  for (int64_t dim : dims) {
    PARTPLAN_ASSIGN_OR_RETURN(const int32_t d, NormalizeDim(dim, rank));
    if (seen[d]) return Invalid(absl::StrCat("dim ", d, " appears twice in ", ShapeString(dims)));
    seen[d] = true;
    order.push_back(d);
  }
  return Reordered(input_shape, order);
}

absl::StatusOr<DimMap> RepeatDimMap(absl::Span<const int64_t> input_shape,
                                    absl::Span<const int64_t> repeats) {
  if (repeats.size() < input_shape.size()) {
    return Invalid(absl::StrCat("repeat of a ", input_shape.size(), "-d tensor needs at least ",
                                input_shape.size(), " repeats, got ", ShapeString(repeats)));
  }
  const size_t added = repeats.size() - input_shape.size();
  DimMap map;
  for (size_t i = 0; i < repeats.size(); ++i) {
    if (repeats[i] < 0) return Invalid(absl::StrCat("negative repeat ", repeats[i]));
    if (i < added) {
      map.dims.push_back(DimSource{});
      map.output_shape.push_back(repeats[i]);
      continue;
    }
    const int32_t input_dim = static_cast<int32_t>(i - added);
    DimSource source = FromInput(input_dim);
    source.repeat = repeats[i];
    map.dims.push_back(std::move(source));
    int64_t out = 0;
    if (__builtin_mul_overflow(input_shape[input_dim], repeats[i], &out)) {
      return Invalid("the repeated size overflows 64 bits");
    }
    map.output_shape.push_back(out);
  }
  return map;
}

absl::StatusOr<DimMap> TransposeDimMap(absl::Span<const int64_t> input_shape, int64_t dim0,
                                       int64_t dim1) {
  const int64_t rank = static_cast<int64_t>(input_shape.size());
  PARTPLAN_ASSIGN_OR_RETURN(const int32_t a, NormalizeDim(dim0, rank));
  PARTPLAN_ASSIGN_OR_RETURN(const int32_t b, NormalizeDim(dim1, rank));
  absl::InlinedVector<int32_t, 6> order = IdentityOrder(input_shape.size());
  if (rank > 0) std::swap(order[a], order[b]);
  return Reordered(input_shape, order);
}

absl::StatusOr<DimMap> TDimMap(absl::Span<const int64_t> input_shape) {
  if (input_shape.size() > 2) {
    return Invalid(
        absl::StrCat("t() expects a tensor of at most 2 dims, got ", ShapeString(input_shape)));
  }
  absl::InlinedVector<int32_t, 6> order = IdentityOrder(input_shape.size());
  std::reverse(order.begin(), order.end());
  return Reordered(input_shape, order);
}

absl::StatusOr<DimMap> DimMapOfNode(ViewOp op, const NodeArgs& args,
                                    absl::Span<const int64_t> input_shape) {
  // The argument the map depends on, for error fields.
  NodeArgs::Arg shaping = args.Get(0, "self");
  absl::StatusOr<DimMap> map;
  switch (op) {
    case ViewOp::kSqueeze:
      map = SqueezeDimMap(input_shape, absl::nullopt);
      break;
    case ViewOp::kSqueezeDim:
    case ViewOp::kSqueezeDims: {
      shaping = args.Get(1, "dim");
      PARTPLAN_ASSIGN_OR_RETURN(const Dims dims, args.Ints(shaping, "dim"));
      map = SqueezeDimMap(input_shape, absl::MakeConstSpan(dims));
      break;
    }
    case ViewOp::kUnsqueeze: {
      shaping = args.Get(1, "dim");
      PARTPLAN_ASSIGN_OR_RETURN(const int64_t dim, args.Int(shaping, "dim"));
      map = UnsqueezeDimMap(input_shape, dim);
      break;
    }
    case ViewOp::kView: {
      shaping = args.Get(1, "size");
      if (!shaping.present()) shaping = args.Get(1, "shape");
      PARTPLAN_ASSIGN_OR_RETURN(const Dims size, args.Ints(shaping, "size"));
      map = ViewDimMap(input_shape, size);
      break;
    }
    case ViewOp::kFlatten: {
      shaping = args.Get(1, "start_dim");
      PARTPLAN_ASSIGN_OR_RETURN(const int64_t start, args.IntOr(shaping, 0, "start_dim"));
      PARTPLAN_ASSIGN_OR_RETURN(const int64_t end,
                                args.IntOr(args.Get(2, "end_dim"), -1, "end_dim"));
      map = FlattenDimMap(input_shape, start, end);
      break;
    }
    case ViewOp::kExpand: {
      shaping = args.Get(1, "size");
      PARTPLAN_ASSIGN_OR_RETURN(const Dims size, args.Ints(shaping, "size"));
      map = ExpandDimMap(input_shape, size);
      break;
    }
    case ViewOp::kPermute: {
      shaping = args.Get(1, "dims");
      PARTPLAN_ASSIGN_OR_RETURN(const Dims dims, args.Ints(shaping, "dims"));
      map = PermuteDimMap(input_shape, dims);
      break;
    }
    case ViewOp::kRepeat: {
      shaping = args.Get(1, "repeats");
      PARTPLAN_ASSIGN_OR_RETURN(const Dims repeats, args.Ints(shaping, "repeats"));
      map = RepeatDimMap(input_shape, repeats);
      break;
    }
    case ViewOp::kTranspose: {
      shaping = args.Get(1, "dim0");
      PARTPLAN_ASSIGN_OR_RETURN(const int64_t dim0, args.Int(shaping, "dim0"));
      PARTPLAN_ASSIGN_OR_RETURN(const int64_t dim1, args.Int(args.Get(2, "dim1"), "dim1"));
      map = TransposeDimMap(input_shape, dim0, dim1);
      break;
    }
    case ViewOp::kT:
      map = TDimMap(input_shape);
      break;
  }
  if (!map.ok() && map.status().code() == absl::StatusCode::kInvalidArgument) {
    return args.Error(shaping, map.status().message());
  }
  return map;
}

}  // namespace partplan

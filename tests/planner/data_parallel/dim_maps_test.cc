// The view-like ops' dimension maps, each checked against what torch does
// with the same shapes (sizes worked out by hand), and their errors.
#include "planner/data_parallel/dim_maps.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/base/cancellation.h"
#include "planner/base/status_util.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/data_parallel/dp_test_graphs.h"

namespace partplan {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// An expected output dim: the input dims it is made of, then split count,
// split index and repeat.
DimSource From(std::vector<int32_t> input_dims, int32_t split_count = 1, int32_t split_index = 0,
               int64_t repeat = 1) {
  DimSource source;
  source.input_dims.assign(input_dims.begin(), input_dims.end());
  source.split_count = split_count;
  source.split_index = split_index;
  source.repeat = repeat;
  return source;
}
const DimSource kNew = DimSource{};

std::string Describe(const DimSource& s) {
  std::string text = "{";
  for (int32_t d : s.input_dims) text += std::to_string(d) + " ";
  return text + "split " + std::to_string(s.split_index) + "/" + std::to_string(s.split_count) +
         " repeat " + std::to_string(s.repeat) + "}";
}

void ExpectMap(const absl::StatusOr<DimMap>& map, const std::vector<DimSource>& dims,
               const std::vector<int64_t>& shape) {
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_THAT(map->output_shape, ElementsAreArray(shape));
  ASSERT_EQ(map->dims.size(), dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    EXPECT_EQ(map->dims[d], dims[d]) << "output dim " << d << ": got " << Describe(map->dims[d])
                                     << ", want " << Describe(dims[d]);
  }
}

void ExpectInvalid(const absl::StatusOr<DimMap>& map, const std::string& text) {
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(map.status().message()), HasSubstr(text));
}

// ---- view / reshape / _unsafe_view / _reshape_alias ----------------------

struct ViewCase {
  const char* name;
  std::vector<int64_t> input;
  std::vector<int64_t> size;
  std::vector<DimSource> dims;
  std::vector<int64_t> output;
};

class ViewDimMapTest : public ::testing::TestWithParam<ViewCase> {};

TEST_P(ViewDimMapTest, MatchesTorch) {
  const ViewCase& c = GetParam();
  ExpectMap(ViewDimMap(c.input, c.size), c.dims, c.output);
}

INSTANTIATE_TEST_SUITE_P(
    Views, ViewDimMapTest,
    ::testing::Values(
        // [B, S, H] -> [B*S, H]: the batch merged with the sequence.
        ViewCase{"merge", {4, 6, 8}, {24, 8}, {From({0, 1}), From({2})}, {24, 8}},
        ViewCase{"merge_last", {4, 6, 8}, {4, 48}, {From({0}), From({1, 2})}, {4, 48}},
        // [B*S, H] -> [B, S, H]: split; the batch is the outer piece.
        ViewCase{
            "split", {24, 8}, {4, 6, 8}, {From({0}, 2, 0), From({0}, 2, 1), From({1})}, {4, 6, 8}},
        ViewCase{"split_inferred",
                 {24, 8},
                 {4, -1, 8},
                 {From({0}, 2, 0), From({0}, 2, 1), From({1})},
                 {4, 6, 8}},
        // Heads: [B, S, H] -> [B, S, heads, d].
        ViewCase{"heads",
                 {4, 6, 8},
                 {4, 6, 2, 4},
                 {From({0}), From({1}), From({2}, 2, 0), From({2}, 2, 1)},
                 {4, 6, 2, 4}},
        // [2, 3] -> [3, 2]: both output dims come from the flattened pair.
        ViewCase{"regroup", {2, 3}, {3, 2}, {From({0, 1}, 2, 0), From({0, 1}, 2, 1)}, {3, 2}},
        // Size-1 dims carry nothing.
        ViewCase{"drop_singleton", {4, 1, 6}, {4, 6}, {From({0}), From({2})}, {4, 6}},
        ViewCase{"add_singleton", {4, 6}, {4, 1, 6}, {From({0}), kNew, From({1})}, {4, 1, 6}},
        ViewCase{"split_with_singleton",
                 {24},
                 {4, 1, 6},
                 {From({0}, 2, 0), kNew, From({0}, 2, 1)},
                 {4, 1, 6}},
        ViewCase{"identity", {4, 6}, {4, 6}, {From({0}), From({1})}, {4, 6}},
        ViewCase{"to_scalar", {1, 1}, {}, {}, {}},
        ViewCase{"from_scalar", {}, {1, 1}, {kNew, kNew}, {1, 1}},
        // No elements: equal dims map across, others are new.
        ViewCase{"empty", {0, 4}, {0, 4}, {From({0}), From({1})}, {0, 4}},
        ViewCase{"empty_reordered", {0, 4}, {4, 0}, {kNew, kNew}, {4, 0}}),
    [](const ::testing::TestParamInfo<ViewCase>& info) { return info.param.name; });

TEST(ViewDimMap, RejectsSizesThatDoNotFit) {
  ExpectInvalid(ViewDimMap({4, 6}, {5, 5}), "is invalid for a [4, 6] input of 24 elements");
  ExpectInvalid(ViewDimMap({4, 6}, {5, -1}), "is invalid");
  ExpectInvalid(ViewDimMap({4, 6}, {-1, -1}), "only one dimension can be inferred");
  ExpectInvalid(ViewDimMap({4, 6}, {-2, -12}), "invalid size -2");
  ExpectInvalid(ViewDimMap({0, 6}, {-1, 0}), "is invalid");
}

// ---- squeeze / unsqueeze --------------------------------------------------

TEST(SqueezeDimMap, AllFormsDropOnlySize1Dims) {
  const std::vector<int64_t> shape = {4, 1, 6, 1};
  ExpectMap(SqueezeDimMap(shape, absl::nullopt), {From({0}), From({2})}, {4, 6});
  const std::vector<int64_t> dim1 = {1};
  ExpectMap(SqueezeDimMap(shape, absl::MakeConstSpan(dim1)), {From({0}), From({2}), From({3})},
            {4, 6, 1});
  const std::vector<int64_t> dim0 = {0};  // size 4: kept
  ExpectMap(SqueezeDimMap(shape, absl::MakeConstSpan(dim0)),
            {From({0}), From({1}), From({2}), From({3})}, {4, 1, 6, 1});
  const std::vector<int64_t> dims = {-1, 1, 2};  // squeeze.dims; dim 2 has size 6
  ExpectMap(SqueezeDimMap(shape, absl::MakeConstSpan(dims)), {From({0}), From({2})}, {4, 6});
  ExpectMap(SqueezeDimMap(std::vector<int64_t>{1, 1}, absl::nullopt), {}, {});
  // A dim of size 0 is not squeezed.
  ExpectMap(SqueezeDimMap(std::vector<int64_t>{0, 1}, absl::nullopt), {From({0})}, {0});
  const std::vector<int64_t> bad = {4};
  ExpectInvalid(SqueezeDimMap(shape, absl::MakeConstSpan(bad)),
                "dim 4 is out of range for a 4-d tensor");
}

TEST(UnsqueezeDimMap, InsertsANewDim) {
  const std::vector<int64_t> shape = {4, 6};
  ExpectMap(UnsqueezeDimMap(shape, 0), {kNew, From({0}), From({1})}, {1, 4, 6});
  ExpectMap(UnsqueezeDimMap(shape, 2), {From({0}), From({1}), kNew}, {4, 6, 1});
  ExpectMap(UnsqueezeDimMap(shape, -1), {From({0}), From({1}), kNew}, {4, 6, 1});
  ExpectMap(UnsqueezeDimMap(shape, -3), {kNew, From({0}), From({1})}, {1, 4, 6});
  ExpectMap(UnsqueezeDimMap(std::vector<int64_t>{}, 0), {kNew}, {1});
  ExpectInvalid(UnsqueezeDimMap(shape, 3), "dim 3 is out of range for a 3-d tensor");
}

// ---- flatten / expand / permute / repeat / transpose / t ------------------

TEST(FlattenDimMap, MergesARange) {
  const std::vector<int64_t> shape = {4, 6, 8};
  ExpectMap(FlattenDimMap(shape, 1, 2), {From({0}), From({1, 2})}, {4, 48});
  ExpectMap(FlattenDimMap(shape, 0, -1), {From({0, 1, 2})}, {192});
  ExpectMap(FlattenDimMap(shape, 1, 1), {From({0}), From({1}), From({2})}, {4, 6, 8});
  ExpectMap(FlattenDimMap(std::vector<int64_t>{4, 1, 8}, 0, -1), {From({0, 2})}, {32});
  ExpectMap(FlattenDimMap(std::vector<int64_t>{}, 0, -1), {kNew}, {1});
  ExpectInvalid(FlattenDimMap(shape, 2, 1), "start_dim cannot come after end_dim");
  ExpectInvalid(FlattenDimMap(shape, 0, 3), "dim 3 is out of range");
}

TEST(ExpandDimMap, BroadcastsSize1DimsAndAddsLeadingOnes) {
  ExpectMap(ExpandDimMap(std::vector<int64_t>{4, 1}, std::vector<int64_t>{4, 6}), {From({0}), kNew},
            {4, 6});
  ExpectMap(ExpandDimMap(std::vector<int64_t>{8}, std::vector<int64_t>{4, 8}), {kNew, From({0})},
            {4, 8});
  ExpectMap(ExpandDimMap(std::vector<int64_t>{4, 1}, std::vector<int64_t>{-1, 6}),
            {From({0}), kNew}, {4, 6});
  ExpectMap(ExpandDimMap(std::vector<int64_t>{}, std::vector<int64_t>{4, 8}), {kNew, kNew}, {4, 8});
  ExpectMap(ExpandDimMap(std::vector<int64_t>{4, 6}, std::vector<int64_t>{4, 6}),
            {From({0}), From({1})}, {4, 6});
  ExpectInvalid(ExpandDimMap(std::vector<int64_t>{4, 2}, std::vector<int64_t>{4, 3}),
                "dim 1 has size 2");
  ExpectInvalid(ExpandDimMap(std::vector<int64_t>{4}, std::vector<int64_t>{-1, 4}),
                "not allowed for new leading dim 0");
  ExpectInvalid(ExpandDimMap(std::vector<int64_t>{4, 4}, std::vector<int64_t>{4}),
                "fewer dimensions");
}

TEST(PermuteDimMap, ReordersDims) {
  const std::vector<int64_t> shape = {4, 6, 8};
  ExpectMap(PermuteDimMap(shape, std::vector<int64_t>{2, 0, 1}), {From({2}), From({0}), From({1})},
            {8, 4, 6});
  ExpectMap(PermuteDimMap(shape, std::vector<int64_t>{-1, 1, 0}), {From({2}), From({1}), From({0})},
            {8, 6, 4});
  ExpectInvalid(PermuteDimMap(shape, std::vector<int64_t>{0, 0, 1}), "appears twice");
  ExpectInvalid(PermuteDimMap(shape, std::vector<int64_t>{0, 1}), "needs 3 dims");
}

TEST(RepeatDimMap, TilesDims) {
  ExpectMap(RepeatDimMap(std::vector<int64_t>{4, 6}, std::vector<int64_t>{2, 1, 3}),
            {kNew, From({0}), From({1}, 1, 0, 3)}, {2, 4, 18});
  ExpectMap(RepeatDimMap(std::vector<int64_t>{4}, std::vector<int64_t>{2}), {From({0}, 1, 0, 2)},
            {8});
  ExpectInvalid(RepeatDimMap(std::vector<int64_t>{4, 6}, std::vector<int64_t>{2}),
                "needs at least 2 repeats");
  ExpectInvalid(RepeatDimMap(std::vector<int64_t>{4}, std::vector<int64_t>{-1}), "negative repeat");
}

TEST(TransposeDimMap, SwapsTwoDims) {
  const std::vector<int64_t> shape = {4, 6, 8};
  ExpectMap(TransposeDimMap(shape, 0, -1), {From({2}), From({1}), From({0})}, {8, 6, 4});
  ExpectMap(TransposeDimMap(shape, 1, 1), {From({0}), From({1}), From({2})}, {4, 6, 8});
  ExpectMap(TransposeDimMap(std::vector<int64_t>{}, 0, -1), {}, {});
  ExpectInvalid(TransposeDimMap(shape, 0, 3), "dim 3 is out of range for a 3-d tensor");
}

TEST(TDimMap, TransposesMatricesOnly) {
  ExpectMap(TDimMap(std::vector<int64_t>{4, 6}), {From({1}), From({0})}, {6, 4});
  ExpectMap(TDimMap(std::vector<int64_t>{5}), {From({0})}, {5});
  ExpectMap(TDimMap(std::vector<int64_t>{}), {}, {});
  ExpectInvalid(TDimMap(std::vector<int64_t>{2, 3, 4}), "at most 2 dims");
}

TEST(DimMap, OutputDimOfFindsTheFirstDimMadeFromAnInputDim) {
  absl::StatusOr<DimMap> map =
      ViewDimMap(std::vector<int64_t>{24, 8}, std::vector<int64_t>{4, 6, 8});
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->OutputDimOf(0), 0);
  EXPECT_EQ(map->OutputDimOf(1), 2);
  map = SqueezeDimMap(std::vector<int64_t>{1, 4}, absl::nullopt);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->OutputDimOf(0), -1);  // squeezed away
  EXPECT_EQ(map->OutputDimOf(1), 0);
}

TEST(NormalizeDim, WrapsNegativeDimsLikeTorch) {
  EXPECT_EQ(*NormalizeDim(-1, 3), 2);
  EXPECT_EQ(*NormalizeDim(2, 3), 2);
  EXPECT_EQ(*NormalizeDim(0, 0), 0);
  EXPECT_EQ(*NormalizeDim(-1, 0), 0);
  EXPECT_FALSE(NormalizeDim(3, 3).ok());
  EXPECT_FALSE(NormalizeDim(-4, 3).ok());
  EXPECT_FALSE(NormalizeDim(1, 0).ok());
}

TEST(ViewOpOf, KnowsEveryViewLikeOverload) {
  const std::pair<const char*, ViewOp> known[] = {
      {"aten.squeeze.default", ViewOp::kSqueeze},    {"aten.squeeze.dim", ViewOp::kSqueezeDim},
      {"aten.squeeze.dims", ViewOp::kSqueezeDims},   {"aten.unsqueeze.default", ViewOp::kUnsqueeze},
      {"aten.view.default", ViewOp::kView},          {"aten._unsafe_view.default", ViewOp::kView},
      {"aten.reshape.default", ViewOp::kView},       {"aten._reshape_alias.default", ViewOp::kView},
      {"aten.flatten.using_ints", ViewOp::kFlatten}, {"aten.expand.default", ViewOp::kExpand},
      {"aten.permute.default", ViewOp::kPermute},    {"aten.repeat.default", ViewOp::kRepeat},
      {"aten.transpose.int", ViewOp::kTranspose},    {"aten.t.default", ViewOp::kT},
      {"torch.ops.aten.t.default", ViewOp::kT},
  };
  for (const auto& [target, op] : known) {
    ASSERT_TRUE(ViewOpOf(target).has_value()) << target;
    EXPECT_EQ(*ViewOpOf(target), op) << target;
  }
  EXPECT_FALSE(ViewOpOf("aten.mm.default").has_value());
  EXPECT_FALSE(ViewOpOf("view").has_value());
}

// ---- Reading the arguments of a node --------------------------------------

class DimMapOfNodeTest : public ::testing::Test {
 protected:
  absl::StatusOr<DimMap> MapOf(AtenGraph graph, ViewOp op) {
    graph.Output({"v"});
    graph_ = graph.graph();
    absl::StatusOr<CompactGraph> compact = ImportGraph(graph_, InputLimits(), token_);
    EXPECT_TRUE(compact.ok()) << compact.status();
    compact_ = std::make_unique<CompactGraph>(std::move(*compact));
    const NodeId v = compact_->Find("v");
    return DimMapOfNode(op, NodeArgs(*compact_, v), std::vector<int64_t>{4, 6, 8});
  }
  v1::Graph graph_;
  std::unique_ptr<CompactGraph> compact_;
  CancellationToken token_;
};

TEST_F(DimMapOfNodeTest, ReadsPositionalAndKeywordArguments) {
  AtenGraph g;
  g.Input("x", {4, 6, 8}).Op("v", "aten.view.default", {A::Node("x"), A::Ints({24, 8})}, {});
  ExpectMap(MapOf(g, ViewOp::kView), {From({0, 1}), From({2})}, {24, 8});

  AtenGraph reshape;  // reshape names its size `shape`
  reshape.Input("x", {4, 6, 8})
      .Op("v", "aten.reshape.default", {A::Node("x")}, {}, {{"shape", A::Ints({4, 48})}});
  ExpectMap(MapOf(reshape, ViewOp::kView), {From({0}), From({1, 2})}, {4, 48});

  AtenGraph flatten;  // flatten's defaults: start_dim 0, end_dim -1
  flatten.Input("x", {4, 6, 8})
      .Op("v", "aten.flatten.using_ints", {A::Node("x")}, {}, {{"start_dim", A::Int(1)}});
  ExpectMap(MapOf(flatten, ViewOp::kFlatten), {From({0}), From({1, 2})}, {4, 48});

  AtenGraph squeeze;  // squeeze.dim takes one int
  squeeze.Input("x", {4, 6, 8}).Op("v", "aten.squeeze.dim", {A::Node("x"), A::Int(0)}, {});
  ExpectMap(MapOf(squeeze, ViewOp::kSqueezeDim), {From({0}), From({1}), From({2})}, {4, 6, 8});
}

TEST_F(DimMapOfNodeTest, ErrorsNameTheArgumentAndTheNode) {
  AtenGraph g;
  g.Input("x", {4, 6, 8}).Op("v", "aten.view.default", {A::Node("x"), A::Ints({5, 8})}, {});
  absl::StatusOr<DimMap> map = MapOf(g, ViewOp::kView);
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(InvalidFieldPath(map.status()), "graph.nodes[1].args[1]");
  EXPECT_THAT(std::string(map.status().message()),
              HasSubstr("node 'v' (aten.view.default): shape [5, 8] is invalid"));

  AtenGraph missing;
  missing.Input("x", {4, 6, 8}).Op("v", "aten.transpose.int", {A::Node("x"), A::Int(0)}, {});
  map = MapOf(missing, ViewOp::kTranspose);
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(InvalidFieldPath(map.status()), "graph.nodes[1].args");
  EXPECT_THAT(std::string(map.status().message()), HasSubstr("missing argument dim1"));

  AtenGraph wrong_kind;
  wrong_kind.Input("x", {4, 6, 8})
      .Op("v", "aten.permute.default", {A::Node("x"), A::Float(1.5)}, {});
  map = MapOf(wrong_kind, ViewOp::kPermute);
  ASSERT_FALSE(map.ok());
  EXPECT_THAT(std::string(map.status().message()), HasSubstr("dims must be a list of ints"));
}

}  // namespace
}  // namespace partplan

// The batch-dimension analysis on small aten graphs, each expectation worked
// out by hand: view-like ops, batch-size changes, reductions (Partial, local
// scalars, ops that need the whole batch), the ambiguity fix, tuples, model
// state, placeholders, and malformed graphs.
#include "planner/data_parallel/batch_dim_analysis.h"

#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/base/cancellation.h"
#include "planner/base/status_util.h"
#include "planner/data_parallel/data_parallel_options.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/data_parallel/dp_test_graphs.h"

namespace partplan {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Runs the analysis on a graph; roles by placeholder name.
class Analysis {
 public:
  Analysis(AtenGraph graph, std::vector<std::pair<std::string, v1::PlaceholderRole>> roles = {},
           int32_t input_batch_dim = 0) {
    if (graph.graph().nodes(graph.graph().nodes_size() - 1).op() != v1::OUTPUT) {
      graph.Output({graph.graph().nodes(graph.graph().nodes_size() - 1).name()});
    }
    proto_ = graph.graph();
    absl::StatusOr<CompactGraph> compact = ImportGraph(proto_, InputLimits(), token_);
    if (!compact.ok()) {
      status_ = compact.status();
      return;
    }
    graph_ = std::make_unique<CompactGraph>(std::move(*compact));
    BatchDimOptions options;
    options.roles.assign(graph_->num_nodes(), InputRole::kUnspecified);
    for (const auto& [name, role] : roles) options.roles[graph_->Find(name)] = InputRoleOf(role);
    options.input_batch_dim = input_batch_dim;
    status_ = options.CheckAndSetup(*graph_);
    if (!status_.ok()) return;
    absl::StatusOr<BatchDimAnalysis> analysis = AnalyzeBatchDims(*graph_, options, token_);
    status_ = analysis.status();
    if (analysis.ok()) analysis_ = std::move(*analysis);
  }

  const absl::Status& status() const { return status_; }
  NodeId id(const std::string& name) const {
    const NodeId v = graph_->Find(name);
    EXPECT_GE(v, 0) << name;
    return v;
  }
  const ValueLayout& operator[](const std::string& name) const {
    return analysis_.layout(id(name));
  }
  bool ambiguous(const std::string& name) const { return analysis_.ambiguous(id(name)); }
  const std::string& note(const std::string& name) const { return analysis_.note(id(name)); }
  const BatchDimAnalysis& analysis() const { return analysis_; }

 private:
  v1::Graph proto_;
  CancellationToken token_;
  std::unique_ptr<CompactGraph> graph_;
  absl::Status status_;
  BatchDimAnalysis analysis_;
};

::testing::AssertionResult IsShard(const ValueLayout& value, int32_t dim, int64_t batch_size) {
  if (value.layout == Layout::kShard && value.dim == dim && value.batch_size == batch_size) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "layout " << static_cast<int>(value.layout) << " dim " << value.dim << " batch size "
         << value.batch_size << ", want Shard(" << dim << ") of batch size " << batch_size;
}

::testing::AssertionResult IsPartial(const ValueLayout& value, ReduceOp reduce) {
  if (value.layout == Layout::kPartial && value.reduce == reduce) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "layout " << static_cast<int>(value.layout) << " reduce " << ReduceOpName(value.reduce)
         << ", want Partial(" << ReduceOpName(reduce) << ")";
}

constexpr v1::PlaceholderRole kParameter = v1::PARAMETER;

// ---- View-like ops --------------------------------------------------------

TEST(BatchDimAnalysis, ViewLikeOpsFollowTheirDimensionMaps) {
  AtenGraph g;
  g.Input("x", {4, 6, 8})
      .Input("y", {4, 5})
      .Op("merged", "aten.view.default", {A::Node("x"), A::Ints({24, 8})}, {{24, 8}})
      .Op("split", "aten._unsafe_view.default", {A::Node("merged"), A::Ints({4, 6, 8})},
          {{4, 6, 8}})
      .Op("reshaped", "aten.reshape.default", {A::Node("x"), A::Ints({4, -1})}, {{4, 48}})
      .Op("aliased", "aten._reshape_alias.default",
          {A::Node("x"), A::Ints({4, 48}), A::Ints({48, 1})}, {{4, 48}})
      .Op("transposed", "aten.transpose.int", {A::Node("x"), A::Int(0), A::Int(-1)}, {{8, 6, 4}})
      .Op("permuted", "aten.permute.default", {A::Node("x"), A::Ints({1, 0, 2})}, {{6, 4, 8}})
      .Op("unsqueezed", "aten.unsqueeze.default", {A::Node("x"), A::Int(0)}, {{1, 4, 6, 8}})
      .Op("squeezed", "aten.squeeze.default", {A::Node("unsqueezed")}, {{4, 6, 8}})
      .Op("squeezed_dim", "aten.squeeze.dim", {A::Node("unsqueezed"), A::Int(0)}, {{4, 6, 8}})
      .Op("squeezed_dims", "aten.squeeze.dims", {A::Node("unsqueezed"), A::Ints({0})}, {{4, 6, 8}})
      .Op("flat", "aten.flatten.using_ints", {A::Node("x"), A::Int(1), A::Int(2)}, {{4, 48}})
      .Op("flat_batch", "aten.flatten.using_ints", {A::Node("x"), A::Int(0), A::Int(1)}, {{24, 8}})
      .Op("one", "aten.unsqueeze.default", {A::Node("x"), A::Int(1)}, {{4, 1, 6, 8}})
      .Op("expanded", "aten.expand.default", {A::Node("one"), A::Ints({4, 3, 6, 8})},
          {{4, 3, 6, 8}})
      .Op("repeated", "aten.repeat.default", {A::Node("x"), A::Ints({2, 1, 1})}, {{8, 6, 8}})
      .Op("t", "aten.t.default", {A::Node("y")}, {{5, 4}})
      .Op("seq_first", "aten.transpose.int", {A::Node("x"), A::Int(0), A::Int(1)}, {{6, 4, 8}})
      .Op("interleaved", "aten.view.default", {A::Node("seq_first"), A::Ints({24, 8})}, {{24, 8}});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsShard(a["x"], 0, 4));
  EXPECT_TRUE(IsShard(a["merged"], 0, 24));
  EXPECT_THAT(a.note("merged"), HasSubstr("merges the batch dim (input dim 0, size 4) with input "
                                          "dims [0, 1] into dim 0 of size 24"));
  EXPECT_TRUE(IsShard(a["split"], 0, 4));
  EXPECT_THAT(a.note("split"),
              HasSubstr("splits input dim 0 (size 24) over dims [0, 1]; the batch is "
                        "dim 0 of size 4"));
  EXPECT_TRUE(IsShard(a["reshaped"], 0, 4));
  EXPECT_TRUE(IsShard(a["aliased"], 0, 4));
  EXPECT_TRUE(IsShard(a["transposed"], 2, 4));
  EXPECT_TRUE(IsShard(a["permuted"], 1, 4));
  EXPECT_TRUE(IsShard(a["unsqueezed"], 1, 4));
  EXPECT_TRUE(IsShard(a["squeezed"], 0, 4));
  EXPECT_TRUE(IsShard(a["squeezed_dim"], 0, 4));
  EXPECT_TRUE(IsShard(a["squeezed_dims"], 0, 4));
  EXPECT_TRUE(IsShard(a["flat"], 0, 4));
  EXPECT_THAT(a.note("flat"), IsEmpty());  // the batch is not merged
  EXPECT_TRUE(IsShard(a["flat_batch"], 0, 24));
  EXPECT_TRUE(IsShard(a["expanded"], 0, 4));
  EXPECT_TRUE(IsShard(a["repeated"], 0, 8));
  EXPECT_THAT(a.note("repeated"), HasSubstr("repeats the batch dim 2 times"));
  EXPECT_TRUE(IsShard(a["t"], 1, 4));
  EXPECT_TRUE(IsShard(a["interleaved"], 0, 24));
  EXPECT_THAT(a.note("interleaved"), HasSubstr("not the outermost"));
  for (const char* name : {"merged", "split", "t", "interleaved"}) {
    EXPECT_FALSE(a.ambiguous(name)) << name;
  }
}

TEST(BatchDimAnalysis, ASplitFindsTheBatchWhereAMergeHidIt) {
  // Attention in a sequence-first layout: [S, B, H] merged into [S*B, H]
  // (the batch inside), projected, split back. Upstream takes the outer
  // piece, S, for the batch.
  AtenGraph g;
  g.Input("x", {4, 6, 8})
      .Input("w", {5, 8})
      .Op("seq_first", "aten.transpose.int", {A::Node("x"), A::Int(0), A::Int(1)}, {{6, 4, 8}})
      .Op("merged", "aten.view.default", {A::Node("seq_first"), A::Ints({24, 8})}, {{24, 8}})
      .Op("t", "aten.t.default", {A::Node("w")}, {{8, 5}})
      .Op("projected", "aten.mm.default", {A::Node("merged"), A::Node("t")}, {{24, 5}})
      .Op("back", "aten.view.default", {A::Node("projected"), A::Ints({6, 4, 5})}, {{6, 4, 5}})
      // Heads merged inside the batch: [B, heads, S, d] -> [B*heads, S, d].
      .Op("heads", "aten.view.default", {A::Node("x"), A::Ints({4, 6, 2, 4})}, {{4, 6, 2, 4}})
      .Op("heads_t", "aten.transpose.int", {A::Node("heads"), A::Int(1), A::Int(2)}, {{4, 2, 6, 4}})
      .Op("per_head", "aten.view.default", {A::Node("heads_t"), A::Ints({8, 6, 4})}, {{8, 6, 4}})
      .Op("unheaded", "aten.view.default", {A::Node("per_head"), A::Ints({4, 2, 6, 4})},
          {{4, 2, 6, 4}})
      // A batch of 4 cut in two dims of 2.
      .Op("cut", "aten.view.default", {A::Node("x"), A::Ints({2, 2, 6, 8})}, {{2, 2, 6, 8}})
      .Output({"back", "unheaded", "cut"});
  const Analysis a(g, {{"w", kParameter}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsShard(a["merged"], 0, 24));
  EXPECT_EQ(a["merged"].batch_outer, 6);
  EXPECT_EQ(a["merged"].batch_inner, 1);
  EXPECT_THAT(a.note("merged"), HasSubstr("the batch is not the outermost of the dims merged into "
                                          "dim 0 (6 elements outside it)"));
  EXPECT_TRUE(IsShard(a["projected"], 0, 24));
  EXPECT_EQ(a["projected"].batch_outer, 6);
  EXPECT_TRUE(IsShard(a["back"], 1, 4));
  EXPECT_EQ(a["back"].batch_outer, 1);
  EXPECT_FALSE(a.ambiguous("back"));
  EXPECT_TRUE(IsShard(a["per_head"], 0, 8));
  EXPECT_EQ(a["per_head"].batch_inner, 2);
  EXPECT_EQ(a["per_head"].batch_outer, 1);
  EXPECT_TRUE(IsShard(a["unheaded"], 0, 4));
  EXPECT_EQ(a["unheaded"].batch_inner, 1);
  EXPECT_TRUE(IsShard(a["cut"], 0, 2));
  EXPECT_THAT(a.note("cut"), HasSubstr("the split cuts through the batch itself; took dim 0"));
}

TEST(BatchDimAnalysis, BatchSizeIsTrackedPerValueNotGlobally) {
  // Upstream keeps one batch size, updated by the last view in graph order:
  // after `merged` it would look for 24 in `other` and pick dim 1.
  AtenGraph g;
  g.Input("x", {4, 6, 8})
      .Op("merged", "aten.view.default", {A::Node("x"), A::Ints({24, 8})}, {{24, 8}})
      .Op("after_merge", "custom.op", {A::Node("merged")}, {{24, 5}})
      .Op("other", "custom.op", {A::Node("x")}, {{4, 24}})
      .Output({"after_merge", "other"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsShard(a["after_merge"], 0, 24));
  EXPECT_TRUE(IsShard(a["other"], 0, 4));
  // An op without a rule is a guess even with one dim of the batch size,
  // but the guess looks for 4, not 24.
  EXPECT_THAT(a.note("other"), HasSubstr("output dim 0 is the only one of the batch size 4"));
  EXPECT_EQ(a.analysis().batch_size(), 4);
}

// ---- Reductions -------------------------------------------------------------

TEST(BatchDimAnalysis, ReductionsOverTheBatchArePartialAndFullReductionsStayLocal) {
  AtenGraph g;
  g.Input("x", {4, 6})
      .Op("sum_batch", "aten.sum.dim_IntList", {A::Node("x"), A::Ints({0})}, {{6}})
      .Op("sum_rows", "aten.sum.dim_IntList", {A::Node("x"), A::Ints({1}), A::Bool(true)}, {{4, 1}})
      .Op("mean_batch", "aten.mean.dim", {A::Node("x"), A::Ints({0}), A::Bool(true)}, {{1, 6}})
      .Op("max_batch", "aten.amax.default", {A::Node("x"), A::Ints({0})}, {{6}})
      .Op("min_batch", "aten.amin.default", {A::Node("x"), A::Ints({-2})}, {{6}})
      .Op("argmax_rows", "aten.argmax.default", {A::Node("x"), A::Int(1)}, {{4}})
      .Op("var_batch", "aten.var.correction", {A::Node("x"), A::Ints({0})}, {{6}})
      .Op("mean_all", "aten.mean.default", {A::Node("x")}, {{}})
      .Op("sum_all", "aten.sum.dim_IntList", {A::Node("x"), A::Ints({0, 1})}, {{}})
      .Op("custom_all", "custom.reduce", {A::Node("x")}, {{}})
      .Op("custom_batch", "custom.reduce", {A::Node("x")}, {{6}})
      .Output({"sum_batch"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsPartial(a["sum_batch"], ReduceOp::kSum));
  EXPECT_TRUE(IsShard(a["sum_rows"], 0, 4));
  EXPECT_TRUE(IsPartial(a["mean_batch"], ReduceOp::kAvg));
  EXPECT_TRUE(IsPartial(a["max_batch"], ReduceOp::kMax));
  EXPECT_TRUE(IsPartial(a["min_batch"], ReduceOp::kMin));
  EXPECT_TRUE(IsShard(a["argmax_rows"], 0, 4));
  // A variance over the batch is not a combination of the devices' ones.
  EXPECT_EQ(a["var_batch"].layout, Layout::kReplicate);
  EXPECT_TRUE(a.analysis().gathers_batch(a.id("var_batch")));
  EXPECT_THAT(a.note("var_batch"), HasSubstr("needs the whole batch"));
  // Full reductions to a scalar keep the reduced operand's batch dim.
  for (const char* name : {"mean_all", "sum_all", "custom_all"}) {
    EXPECT_EQ(a[name].layout, Layout::kLocalScalar) << name;
    EXPECT_EQ(a[name].dim, 0) << name;
    EXPECT_EQ(a[name].batch_size, 4) << name;
    EXPECT_THAT(a.note(name), HasSubstr("full reduction over the batch")) << name;
  }
  EXPECT_EQ(a["mean_all"].reduce, ReduceOp::kAvg);
  EXPECT_TRUE(a["mean_all"].local_mean);
  EXPECT_EQ(a["sum_all"].reduce, ReduceOp::kSum);
  EXPECT_FALSE(a["sum_all"].local_mean);
  // No rule, no dim of the batch size left: upstream's Partial.
  EXPECT_TRUE(IsPartial(a["custom_batch"], ReduceOp::kSum));
}

TEST(BatchDimAnalysis, GradientsOfAMeanLossAverageAndOfASumLossAdd) {
  auto backward_of = [](const char* loss_target) {
    AtenGraph g;
    g.Input("x", {4, 3})
        .Input("w", {5, 3})
        .Op("t", "aten.t.default", {A::Node("w")}, {{3, 5}})
        .Op("y", "aten.mm.default", {A::Node("x"), A::Node("t")}, {{4, 5}})
        .Op("loss", loss_target, {A::Node("y")}, {{}})
        .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
        .Op("dy", "aten.expand.default", {A::Node("seed"), A::Ints({4, 5})}, {{4, 5}})
        .Op("dy_t", "aten.t.default", {A::Node("dy")}, {{5, 4}})
        .Op("dw", "aten.mm.default", {A::Node("dy_t"), A::Node("x")}, {{5, 3}})
        .Output({"dw"});
    return Analysis(g, {{"w", kParameter}});
  };
  const Analysis mean = backward_of("aten.mean.default");
  ASSERT_TRUE(mean.status().ok()) << mean.status();
  EXPECT_EQ(mean["t"].layout, Layout::kModelState);
  EXPECT_TRUE(IsShard(mean["y"], 0, 4));
  EXPECT_EQ(mean["seed"].layout, Layout::kLocalScalar);
  EXPECT_TRUE(IsShard(mean["dy"], 0, 4));
  EXPECT_TRUE(IsShard(mean["dy_t"], 1, 4));
  EXPECT_TRUE(IsPartial(mean["dw"], ReduceOp::kAvg));
  const Analysis sum = backward_of("aten.sum.default");
  ASSERT_TRUE(sum.status().ok()) << sum.status();
  EXPECT_TRUE(IsPartial(sum["dw"], ReduceOp::kSum));
}

// ---- Ambiguity ----------------------------------------------------------------

TEST(BatchDimAnalysis, RulesAndDimMapsSettleDimsThatMerelyHaveTheBatchSize) {
  // Batch 4, features 4: every dim has the batch size.
  AtenGraph g;
  g.Input("x", {4, 4})
      .Input("w", {4, 4})
      .Input("b", {4})
      .Op("t", "aten.t.default", {A::Node("w")}, {{4, 4}})
      .Op("h", "aten.addmm.default", {A::Node("b"), A::Node("x"), A::Node("t")}, {{4, 4}})
      .Op("h_t", "aten.t.default", {A::Node("h")}, {{4, 4}})
      .Op("dw", "aten.mm.default", {A::Node("h_t"), A::Node("x")}, {{4, 4}})
      .Op("db", "aten.sum.dim_IntList", {A::Node("h"), A::Ints({0}), A::Bool(true)}, {{1, 4}})
      .Op("rows", "aten.sum.dim_IntList", {A::Node("h_t"), A::Ints({0})}, {{4}})
      .Output({"dw", "db", "rows"});
  const Analysis a(g, {{"w", kParameter}, {"b", kParameter}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsShard(a["h"], 0, 4));
  EXPECT_TRUE(IsShard(a["h_t"], 1, 4));
  EXPECT_TRUE(IsPartial(a["dw"], ReduceOp::kSum));
  EXPECT_TRUE(IsPartial(a["db"], ReduceOp::kSum));
  // Summing h_t's dim 0 (features) leaves its batch dim 1, now dim 0.
  EXPECT_TRUE(IsShard(a["rows"], 0, 4));
  for (const char* name : {"h", "h_t", "dw", "db", "rows"}) {
    EXPECT_FALSE(a.ambiguous(name)) << name;
  }
  EXPECT_THAT(a.note("dw"), HasSubstr("contracts the batch dim"));
  EXPECT_THAT(a.note("h"), HasSubstr("puts the batch on dim 0"));
}

TEST(BatchDimAnalysis, OperandsSettleOpsWithoutARuleWhereTheyCan) {
  AtenGraph g;
  g.Input("x", {4, 4})
      .Input("z", {4, 3})
      // Elementwise-shaped, but an op without a rule may move the batch
      // (rot90 does): where x's batch dim lands when broadcast is a guess.
      .Op("same_shape", "custom.op", {A::Node("x")}, {{4, 4}})
      // Broadcast onto a new leading dim: dim 1, a guess too.
      .Op("broadcast", "custom.op", {A::Node("x")}, {{2, 4, 4}})
      // A pointwise op broadcasts by rule: that settles it.
      .Op("pointwise", "aten.add.Tensor", {A::Node("x"), A::Node("x")}, {{4, 4}})
      // One dim of the batch size and no operand dim that could make it:
      // still a guess, since an op without a rule may mix the samples
      // (tril over them, a kthvalue along them keep the size).
      .Op("unique", "custom.op", {A::Node("z")}, {{3, 4}})
      .Output({"same_shape", "broadcast", "pointwise", "unique"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsShard(a["same_shape"], 0, 4));
  EXPECT_TRUE(a.ambiguous("same_shape"));
  EXPECT_THAT(a.note("same_shape"), HasSubstr("is a guess"));
  EXPECT_THAT(a.note("same_shape"), HasSubstr("lands there when broadcast"));
  EXPECT_TRUE(IsShard(a["broadcast"], 1, 4));
  EXPECT_TRUE(a.ambiguous("broadcast"));
  EXPECT_TRUE(IsShard(a["pointwise"], 0, 4));
  EXPECT_FALSE(a.ambiguous("pointwise"));
  EXPECT_TRUE(IsShard(a["unique"], 1, 4));
  EXPECT_TRUE(a.ambiguous("unique"));
  EXPECT_THAT(a.note("unique"), HasSubstr("the op has no dimension rule"));
}

TEST(BatchDimAnalysis, FlagsWhatTrulyCannotBeTold) {
  AtenGraph g;
  g.Input("x", {4, 4})
      .Input("z", {4, 3})
      // Two output dims of the batch size, no rule, z does not broadcast.
      .Op("two", "custom.op", {A::Node("z")}, {{4, 4}})
      // x [4, 4] -> [4]: the kept dim may be the batch or the features.
      .Op("dropped", "custom.op", {A::Node("x")}, {{4}})
      .Output({"two", "dropped"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsShard(a["two"], 0, 4));
  EXPECT_TRUE(a.ambiguous("two"));
  EXPECT_THAT(a.note("two"), HasSubstr("ambiguous: output dims [0, 1] have the batch size 4"));
  EXPECT_TRUE(IsShard(a["dropped"], 0, 4));
  EXPECT_TRUE(a.ambiguous("dropped"));
  EXPECT_THAT(a.note("dropped"), HasSubstr("operand 'x' has a non-batch dim 1 of that size"));
}

TEST(BatchDimAnalysis, ExpandOfALossGradientRestoresTheReducedBatchDim) {
  // Batch dim 1 of a [4, 4] input: sizes cannot tell, the loss's batch dim can.
  AtenGraph g;
  g.Input("x", {4, 4})
      .Op("loss", "aten.mean.default", {A::Node("x")}, {{}})
      .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
      .Op("grad", "aten.expand.default", {A::Node("seed"), A::Ints({4, 4})}, {{4, 4}})
      .Op("scaled", "aten.div.Scalar", {A::Node("grad"), A::Int(16)}, {{4, 4}})
      .Output({"scaled"});
  const Analysis a(g, {}, /*input_batch_dim=*/1);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_EQ(a["loss"].layout, Layout::kLocalScalar);
  EXPECT_EQ(a["loss"].dim, 1);
  EXPECT_TRUE(IsShard(a["grad"], 1, 4));
  EXPECT_FALSE(a.ambiguous("grad"));
  EXPECT_THAT(a.note("grad"), HasSubstr("where 'seed' reduced its batch dim"));
  EXPECT_TRUE(IsShard(a["scaled"], 1, 4));
}

TEST(BatchDimAnalysis, NewTensorsOfTheBatchSizeAreShardedAndOthersReplicated) {
  AtenGraph g;
  g.Input("x", {4, 6})
      .Constant("c", {4, 4})
      .Op("zeros", "aten.zeros.default", {A::Ints({4, 3})}, {{4, 3}})
      .Op("square", "aten.zeros.default", {A::Ints({4, 4})}, {{4, 4}})
      .Op("small", "aten.zeros.default", {A::Ints({3, 5})}, {{3, 5}})
      .Op("scalar", "aten.scalar_tensor.default", {A::Float(1.0)}, {{}})
      // A replicated constant stays replicated though its dims have the
      // batch size (upstream would shard it).
      .Op("c_relu", "aten.relu.default", {A::Node("c")}, {{4, 4}})
      // The backward of a mean over the batch: the Partial is broadcast back
      // to the batch.
      .Op("mean", "aten.mean.dim", {A::Node("x"), A::Ints({0}), A::Bool(true)}, {{1, 6}})
      .Op("back", "aten.expand.default", {A::Node("mean"), A::Ints({4, 6})}, {{4, 6}})
      .Output({"zeros", "square", "small", "scalar", "c_relu", "back"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsShard(a["zeros"], 0, 4));
  EXPECT_FALSE(a.ambiguous("zeros"));
  EXPECT_THAT(a.note("zeros"), HasSubstr("makes a new dim 0 of the batch size"));
  // Several dims of the batch size: which is the batch cannot be told, but
  // zeros are zeros wherever cut, so the whole tensor is right (found by
  // the outside cross-check: a causal mask [S, S] with S == B flagged the
  // whole attention).
  EXPECT_EQ(a["square"].layout, Layout::kReplicate);
  EXPECT_FALSE(a.ambiguous("square"));
  EXPECT_THAT(a.note("square"), HasSubstr("uniform values, replicated"));
  EXPECT_EQ(a["small"].layout, Layout::kReplicate);
  EXPECT_EQ(a["scalar"].layout, Layout::kReplicate);
  EXPECT_EQ(a["c"].layout, Layout::kReplicate);
  EXPECT_EQ(a["c_relu"].layout, Layout::kReplicate);
  EXPECT_FALSE(a.ambiguous("c_relu"));
  EXPECT_TRUE(IsPartial(a["mean"], ReduceOp::kAvg));
  EXPECT_TRUE(IsShard(a["back"], 0, 4));
  EXPECT_FALSE(a.analysis().keeps_partial_operands(a.id("back")));
}

// ---- Partial operands ---------------------------------------------------------

TEST(BatchDimAnalysis, PartialsPassThroughLinearOpsOnly) {
  AtenGraph g;
  g.Input("x", {4, 6})
      .Constant("c", {6})
      .Op("p", "aten.sum.dim_IntList", {A::Node("x"), A::Ints({0})}, {{6}})
      .Op("q", "aten.sum.dim_IntList", {A::Node("x"), A::Ints({0})}, {{6}})
      .Op("viewed", "aten.view.default", {A::Node("p"), A::Ints({2, 3})}, {{2, 3}})
      .Op("scaled", "aten.mul.Tensor", {A::Node("viewed"), A::Float(2.0)}, {{2, 3}})
      .Op("by_constant", "aten.mul.Tensor", {A::Node("p"), A::Node("c")}, {{6}})
      .Op("sum_of_two", "aten.add.Tensor", {A::Node("p"), A::Node("q")}, {{6}})
      .Op("product_of_two", "aten.mul.Tensor", {A::Node("p"), A::Node("q")}, {{6}})
      .Op("plus_constant", "aten.add.Tensor", {A::Node("p"), A::Node("c")}, {{6}})
      .Op("divided", "aten.div.Tensor", {A::Node("p"), A::Node("c")}, {{6}})
      .Op("divisor", "aten.div.Tensor", {A::Node("c"), A::Node("p")}, {{6}})
      .Op("relu", "aten.relu.default", {A::Node("p")}, {{6}})
      .Op("mixed", "aten.add.Tensor", {A::Node("x"), A::Node("p")}, {{4, 6}})
      .Op("ones", "aten.ones_like.default", {A::Node("p")}, {{6}})
      .Output({"scaled"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  for (const char* name : {"viewed", "scaled", "by_constant", "sum_of_two", "divided"}) {
    EXPECT_TRUE(IsPartial(a[name], ReduceOp::kSum)) << name;
    EXPECT_TRUE(a.analysis().keeps_partial_operands(a.id(name))) << name;
  }
  for (const char* name : {"product_of_two", "plus_constant", "divisor", "relu", "ones"}) {
    EXPECT_EQ(a[name].layout, Layout::kReplicate) << name;
    EXPECT_FALSE(a.analysis().keeps_partial_operands(a.id(name))) << name;
  }
  EXPECT_TRUE(IsShard(a["mixed"], 0, 4));
  EXPECT_FALSE(a.analysis().keeps_partial_operands(a.id("mixed")));
}

// ---- Ops with rules and tuples --------------------------------------------------

TEST(BatchDimAnalysis, TupleElementsAndTheirGetitems) {
  AtenGraph g;
  g.Input("x", {4, 6, 8})
      .Input("w", {8})
      .Input("b", {8})
      .Op("ln", "aten.native_layer_norm.default",
          {A::Node("x"), A::Ints({8}), A::Node("w"), A::Node("b"), A::Float(1e-5)},
          {{4, 6, 8}, {4, 6, 1}, {4, 6, 1}})
      .Op("ln_out", "operator.getitem", {A::Node("ln"), A::Int(0)}, {{4, 6, 8}})
      .Op("ln_mean", "operator.getitem", {A::Node("ln"), A::Int(1)}, {{4, 6, 1}})
      .Op("ln_rstd", "operator.getitem", {A::Node("ln"), A::Int(2)}, {})
      // Only the weight and bias gradients are asked for.
      .Op("lnb", "aten.native_layer_norm_backward.default",
          {A::Node("ln_out"), A::Node("x"), A::Ints({8}), A::Node("ln_mean"), A::Node("ln_rstd"),
           A::Node("w"), A::Node("b"), A::Bools({false, true, true})},
          {{8}, {8}})
      .Op("dx", "operator.getitem", {A::Node("lnb"), A::Int(0)}, {})
      .Op("dw", "operator.getitem", {A::Node("lnb"), A::Int(1)}, {{8}})
      .Op("db", "operator.getitem", {A::Node("lnb"), A::Int(2)}, {})
      .Op("drop", "aten.native_dropout.default", {A::Node("x"), A::Float(0.1), A::Bool(true)},
          {{4, 6, 8}, {4, 6, 8}})
      .Op("mask", "operator.getitem", {A::Node("drop"), A::Int(1)}, {{4, 6, 8}})
      .Output({"dw"});
  const Analysis a(g, {{"w", kParameter}, {"b", kParameter}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsShard(a["ln"], 0, 4));
  EXPECT_TRUE(IsShard(a["ln_out"], 0, 4));
  EXPECT_TRUE(IsShard(a["ln_mean"], 0, 4));  // per sample
  EXPECT_TRUE(IsShard(a["ln_rstd"], 0, 4));  // shape taken from the tuple
  EXPECT_EQ(a.analysis().shape(a.id("ln_rstd")).size(), 3u);
  // The tuple node reports its first listed element, the weight gradient.
  EXPECT_TRUE(IsPartial(a["lnb"], ReduceOp::kSum));
  EXPECT_EQ(a["dx"].layout, Layout::kNotTensor);  // masked off: None
  EXPECT_TRUE(IsPartial(a["dw"], ReduceOp::kSum));
  EXPECT_TRUE(IsPartial(a["db"], ReduceOp::kSum));
  EXPECT_TRUE(IsShard(a["mask"], 0, 4));
  EXPECT_TRUE(a.analysis().selects_element(a.id("dw")));
}

TEST(BatchDimAnalysis, ATupleWithoutOutputsTakesItsShapesFromItsGetitems) {
  // make_fx leaves tuple-valued nodes without tensor_meta; partplan's
  // exporter then gives only the getitems shapes.
  AtenGraph g;
  g.Input("x", {4, 3, 5, 5})
      .Input("w", {3})
      .Input("b", {3})
      .Input("mean", {3})
      .Input("var", {3})
      .Op("bn", "aten.native_batch_norm.default",
          {A::Node("x"), A::Node("w"), A::Node("b"), A::Node("mean"), A::Node("var"), A::Bool(true),
           A::Float(0.1), A::Float(1e-5)},
          {})
      .Op("normed", "operator.getitem", {A::Node("bn"), A::Int(0)}, {{4, 3, 5, 5}})
      .Op("batch_invstd", "operator.getitem", {A::Node("bn"), A::Int(2)}, {{3}})
      .Op("parts", "custom.split3", {A::Node("x")}, {})
      .Op("part", "operator.getitem", {A::Node("parts"), A::Int(1)}, {{4, 1, 5, 5}})
      .Output({"normed", "batch_invstd", "part"});
  const Analysis a(
      g, {{"w", kParameter}, {"b", kParameter}, {"mean", kParameter}, {"var", kParameter}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsShard(a["bn"], 0, 4));
  EXPECT_EQ(a.analysis().num_elements(a.id("bn")), 3);
  EXPECT_EQ(a.analysis().element_layout(a.id("bn"), 1).layout, Layout::kNotTensor);  // no getitem
  EXPECT_TRUE(IsShard(a["normed"], 0, 4));
  // Training-mode statistics: the whole batch's once synchronised (not a
  // Partial sum: an inverse standard deviation does not add up).
  EXPECT_EQ(a["batch_invstd"].layout, Layout::kReplicate);
  EXPECT_TRUE(IsShard(a["part"], 0, 4));
  EXPECT_EQ(a["parts"].layout, Layout::kNotTensor);  // element 0 has no getitem
}

TEST(BatchDimAnalysis, OpRulesForLossesConvolutionsEmbeddingsAndIndexing) {
  AtenGraph g;
  g.Input("logits", {4, 5})
      .Input("target", {4}, "torch.int64")
      .Input("image", {4, 3, 5, 5})
      .Input("kernel", {2, 3, 3, 3})
      .Input("table", {10, 4})
      .Input("ids", {4, 6}, "torch.int64")
      .Op("nll", "aten.nll_loss_forward.default",
          {A::Node("logits"), A::Node("target"), A::None(), A::Int(1), A::Int(-100)}, {{}, {}})
      .Op("nll_total", "operator.getitem", {A::Node("nll"), A::Int(1)}, {{}})
      .Op("nll_none", "aten.nll_loss_forward.default",
          {A::Node("logits"), A::Node("target"), A::None(), A::Int(0), A::Int(-100)}, {{4}, {}})
      .Op("nll_sum", "aten.nll_loss_forward.default",
          {A::Node("logits"), A::Node("target"), A::None(), A::Int(2), A::Int(-100)}, {{}, {}})
      .Op("conv", "aten.convolution.default",
          {A::Node("image"), A::Node("kernel"), A::None(), A::Ints({1, 1}), A::Ints({0, 0}),
           A::Ints({1, 1}), A::Bool(false), A::Ints({0, 0}), A::Int(1)},
          {{4, 2, 3, 3}})
      .Op("embedded", "aten.embedding.default", {A::Node("table"), A::Node("ids")}, {{4, 6, 4}})
      .Op("table_grad", "aten.embedding_dense_backward.default",
          {A::Node("embedded"), A::Node("ids"), A::Int(10), A::Int(-1), A::Bool(false)}, {{10, 4}})
      .Op("cat_features", "aten.cat.default", {A::Nodes({"logits", "logits"}), A::Int(1)},
          {{4, 10}})
      .Op("cat_batch", "aten.cat.default", {A::Nodes({"logits", "logits"}), A::Int(0)}, {{8, 5}})
      .Op("pieces", "aten.split.Tensor", {A::Node("logits"), A::Int(2), A::Int(1)},
          {{4, 2}, {4, 2}, {4, 1}})
      .Op("batch_pieces", "aten.split.Tensor", {A::Node("logits"), A::Int(2)}, {{2, 5}, {2, 5}})
      .Op("sample", "aten.select.int", {A::Node("logits"), A::Int(0), A::Int(1)}, {{5}})
      .Op("column", "aten.select.int", {A::Node("logits"), A::Int(1), A::Int(0)}, {{4}})
      .Op("all_rows", "aten.slice.Tensor",
          {A::Node("logits"), A::Int(0), A::Int(0), A::Int(std::numeric_limits<int64_t>::max())},
          {{4, 5}})
      .Op("two_rows", "aten.slice.Tensor", {A::Node("logits"), A::Int(0), A::Int(0), A::Int(2)},
          {{2, 5}})
      .Output({"nll"});
  const Analysis a(g, {{"kernel", kParameter}, {"table", kParameter}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_EQ(a["nll"].layout, Layout::kLocalScalar);
  EXPECT_EQ(a["nll"].reduce, ReduceOp::kAvg);
  EXPECT_EQ(a["nll_total"].layout, Layout::kLocalScalar);
  EXPECT_EQ(a["nll_total"].reduce, ReduceOp::kSum);
  EXPECT_TRUE(IsShard(a["nll_none"], 0, 4));
  EXPECT_EQ(a["nll_sum"].reduce, ReduceOp::kSum);
  EXPECT_TRUE(IsShard(a["conv"], 0, 4));
  EXPECT_TRUE(IsShard(a["embedded"], 0, 4));
  EXPECT_TRUE(IsPartial(a["table_grad"], ReduceOp::kSum));
  EXPECT_TRUE(IsShard(a["cat_features"], 0, 4));
  EXPECT_TRUE(IsShard(a["cat_batch"], 0, 8));
  EXPECT_THAT(a.note("cat_batch"), HasSubstr("concatenates along the batch dim"));
  EXPECT_TRUE(IsShard(a["pieces"], 0, 4));
  for (const char* name : {"batch_pieces", "sample", "two_rows"}) {
    EXPECT_EQ(a[name].layout, Layout::kReplicate) << name;
    EXPECT_TRUE(a.analysis().gathers_batch(a.id(name))) << name;
  }
  EXPECT_TRUE(IsShard(a["column"], 0, 4));
  EXPECT_TRUE(IsShard(a["all_rows"], 0, 4));
  EXPECT_FALSE(a.analysis().gathers_batch(a.id("all_rows")));
}

TEST(BatchDimAnalysis, PoolingAndGroupNormKeepTheBatchWhereSizesCannotTell) {
  // Batch 4, 4 channels, 4x4 images: every dim of the pooled output is 4... or 2.
  AtenGraph g;
  g.Input("x", {4, 4, 4, 4})
      .Input("w", {4})
      .Input("b", {4})
      .Op("pool", "aten.max_pool2d_with_indices.default",
          {A::Node("x"), A::Ints({2, 2}), A::Ints({2, 2})}, {{4, 4, 2, 2}, {4, 4, 2, 2}})
      .Op("pooled", "operator.getitem", {A::Node("pool"), A::Int(0)}, {{4, 4, 2, 2}})
      .Op("indices", "operator.getitem", {A::Node("pool"), A::Int(1)}, {{4, 4, 2, 2}})
      .Op("unpooled", "aten.max_pool2d_with_indices_backward.default",
          {A::Node("pooled"), A::Node("x"), A::Ints({2, 2}), A::Ints({2, 2}), A::Ints({0, 0}),
           A::Ints({1, 1}), A::Bool(false), A::Node("indices")},
          {{4, 4, 4, 4}})
      .Op("gn", "aten.native_group_norm.default",
          {A::Node("x"), A::Node("w"), A::Node("b"), A::Int(4), A::Int(4), A::Int(16), A::Int(2),
           A::Float(1e-5)},
          {{4, 4, 4, 4}, {4, 2}, {4, 2}})
      .Op("gn_mean", "operator.getitem", {A::Node("gn"), A::Int(1)}, {{4, 2}})
      .Op("avg", "aten._adaptive_avg_pool2d.default", {A::Node("x"), A::Ints({1, 1})},
          {{4, 4, 1, 1}})
      .Output({"unpooled", "gn_mean", "avg"});
  const Analysis a(g, {{"w", kParameter}, {"b", kParameter}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  for (const char* name : {"pool", "pooled", "indices", "unpooled", "gn", "gn_mean", "avg"}) {
    EXPECT_TRUE(IsShard(a[name], 0, 4)) << name;
    EXPECT_FALSE(a.ambiguous(name)) << name;
  }
}

TEST(BatchDimAnalysis, ASumDividedByTheBatchSizeIsAMean) {
  // make_fx bakes x.shape[0] into `sum / 4`: per device it divides by its
  // own share, so the devices' losses, and gradients, average.
  auto loss_divided_by = [](int64_t divisor) {
    AtenGraph g;
    g.Input("x", {4, 3})
        .Input("w", {5, 3})
        .Op("t", "aten.t.default", {A::Node("w")}, {{3, 5}})
        .Op("y", "aten.mm.default", {A::Node("x"), A::Node("t")}, {{4, 5}})
        .Op("total", "aten.sum.default", {A::Node("y")}, {{}})
        .Op("loss", "aten.div.Scalar", {A::Node("total"), A::Int(divisor)}, {{}})
        .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
        .Op("dy", "aten.expand.default", {A::Node("seed"), A::Ints({4, 5})}, {{4, 5}})
        .Op("dy_t", "aten.t.default", {A::Node("dy")}, {{5, 4}})
        .Op("dw", "aten.mm.default", {A::Node("dy_t"), A::Node("x")}, {{5, 3}})
        .Output({"dw"});
    return Analysis(g, {{"w", kParameter}});
  };
  const Analysis by_batch = loss_divided_by(4);
  ASSERT_TRUE(by_batch.status().ok()) << by_batch.status();
  EXPECT_EQ(by_batch["total"].reduce, ReduceOp::kSum);
  EXPECT_EQ(by_batch["loss"].layout, Layout::kLocalScalar);
  EXPECT_EQ(by_batch["loss"].reduce, ReduceOp::kAvg);
  EXPECT_THAT(by_batch.note("loss"), HasSubstr("a multiple of the batch size 4: taken as a mean"));
  EXPECT_TRUE(IsPartial(by_batch["dw"], ReduceOp::kAvg));
  const Analysis by_elements = loss_divided_by(20);  // sum / numel: a mean too
  EXPECT_EQ(by_elements["loss"].reduce, ReduceOp::kAvg);
  const Analysis by_three = loss_divided_by(3);
  ASSERT_TRUE(by_three.status().ok()) << by_three.status();
  EXPECT_EQ(by_three["loss"].reduce, ReduceOp::kSum);
  EXPECT_TRUE(IsPartial(by_three["dw"], ReduceOp::kSum));
}

// ---- Ops that reorder or mix along a dim (issue #24, item 9) -----------------

TEST(BatchDimAnalysis, OpsThatReorderOrMixAlongTheBatchNeedItWhole) {
  AtenGraph g;
  g.Input("x", {4, 6})
      .Input("ids", {4, 6}, "torch.int64")
      .Input("table", {10, 6})
      .Input("picks", {2, 6}, "torch.int64")
      .Op("flip_batch", "aten.flip.default", {A::Node("x"), A::Ints({0})}, {{4, 6}})
      .Op("flip_features", "aten.flip.default", {A::Node("x"), A::Ints({-1})}, {{4, 6}})
      .Op("roll_flat", "aten.roll.default", {A::Node("x"), A::Ints({1})}, {{4, 6}})
      .Op("roll_features", "aten.roll.default", {A::Node("x"), A::Ints({1}), A::Ints({1})},
          {{4, 6}})
      .Op("cumsum_batch", "aten.cumsum.default", {A::Node("x"), A::Int(0)}, {{4, 6}})
      .Op("cumsum_features", "aten.cumsum.default", {A::Node("x"), A::Int(1)}, {{4, 6}})
      .Op("sort_last", "aten.sort.default", {A::Node("x")}, {{4, 6}, {4, 6}})
      .Op("sort_batch", "aten.sort.default", {A::Node("x"), A::Int(0)}, {{4, 6}, {4, 6}})
      .Op("argsort_batch", "aten.argsort.default", {A::Node("x"), A::Int(-2)}, {{4, 6}})
      .Op("topk_batch", "aten.topk.default", {A::Node("x"), A::Int(2), A::Int(0)},
          {{2, 6}, {2, 6}})
      .Op("topk_last", "aten.topk.default", {A::Node("x"), A::Int(2)}, {{4, 2}, {4, 2}})
      .Op("softmax_batch", "aten._softmax.default", {A::Node("x"), A::Int(0), A::Bool(false)},
          {{4, 6}})
      .Op("softmax_features", "aten._softmax.default", {A::Node("x"), A::Int(1), A::Bool(false)},
          {{4, 6}})
      .Op("gather_batch", "aten.gather.default", {A::Node("x"), A::Int(0), A::Node("picks")},
          {{2, 6}})
      .Op("lookup", "aten.gather.default", {A::Node("table"), A::Int(0), A::Node("ids")},
          {{4, 6}})
      .Op("index_rows", "aten.index.Tensor", {A::Node("x"), A::Nodes({"picks"})}, {{2, 6, 6}})
      .Output({"flip_batch"});
  const Analysis a(g, {{"table", kParameter}, {"picks", v1::PARAMETER}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  for (const char* name : {"flip_batch", "roll_flat", "cumsum_batch", "sort_batch",
                           "argsort_batch", "topk_batch", "softmax_batch", "gather_batch",
                           "index_rows"}) {
    EXPECT_EQ(a[name].layout, Layout::kReplicate) << name;
    EXPECT_TRUE(a.analysis().gathers_batch(a.id(name))) << name;
    EXPECT_THAT(a.note(name), HasSubstr("needs the whole batch")) << name;
  }
  EXPECT_EQ(a.analysis().element_layout(a.id("sort_batch"), 1).layout, Layout::kReplicate);
  // Where the result holds the whole batch row for row, ops on samples can
  // take each device's rows of it again; picked or reduced rows cannot.
  for (const char* name : {"flip_batch", "roll_flat", "cumsum_batch", "sort_batch", "softmax_batch"}) {
    EXPECT_EQ(a[name].dim, 0) << name;
  }
  for (const char* name : {"topk_batch", "gather_batch", "index_rows"}) {
    EXPECT_EQ(a[name].dim, -1) << name;
  }
  for (const char* name : {"flip_features", "roll_features", "cumsum_features", "sort_last",
                           "topk_last", "softmax_features", "lookup"}) {
    EXPECT_TRUE(IsShard(a[name], 0, 4)) << name;
    EXPECT_FALSE(a.analysis().gathers_batch(a.id(name))) << name;
  }
  EXPECT_TRUE(IsShard(a.analysis().element_layout(a.id("topk_last"), 1), 0, 4));
}

TEST(BatchDimAnalysis, Rot90MovesTheBatchOrNeedsItWhole) {
  // A [4, 4] input: sizes alone cannot tell where rot90 puts the batch.
  AtenGraph g;
  g.Input("x", {4, 4})
      .Op("quarter", "aten.rot90.default", {A::Node("x"), A::Int(1), A::Ints({0, 1})}, {{4, 4}})
      .Op("default_dims", "aten.rot90.default", {A::Node("x")}, {{4, 4}})
      .Op("reversed_dims", "aten.rot90.default", {A::Node("x"), A::Int(-1), A::Ints({1, 0})},
          {{4, 4}})
      .Op("half", "aten.rot90.default", {A::Node("x"), A::Int(2), A::Ints({0, 1})}, {{4, 4}})
      .Op("three_quarters", "aten.rot90.default", {A::Node("x"), A::Int(3), A::Ints({0, 1})},
          {{4, 4}})
      .Op("none", "aten.rot90.default", {A::Node("x"), A::Int(4), A::Ints({0, 1})}, {{4, 4}})
      .Output({"quarter"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  // k=1 is flip(dim 1) then a transpose: the batch lands on dim 1, in order.
  for (const char* name : {"quarter", "default_dims", "reversed_dims"}) {
    EXPECT_TRUE(IsShard(a[name], 1, 4)) << name;
    EXPECT_FALSE(a.ambiguous(name)) << name;
  }
  // k=2 and k=3 reverse the batch.
  for (const char* name : {"half", "three_quarters"}) {
    EXPECT_EQ(a[name].layout, Layout::kReplicate) << name;
    EXPECT_TRUE(a.analysis().gathers_batch(a.id(name))) << name;
  }
  EXPECT_TRUE(IsShard(a["none"], 0, 4));
}

// ---- Guesses are not passed on as known (issue #24, item 10) -----------------

TEST(BatchDimAnalysis, EverythingComputedFromAGuessCarriesIt) {
  // custom.rot of a [4, 4] batch has no rule: dim 0 is a guess, and the
  // loss and gradient computed from it are only as right as that guess.
  AtenGraph g;
  g.Input("x", {4, 4})
      .Input("w", {3, 4})
      .Op("rot", "custom.rot", {A::Node("x")}, {{4, 4}})
      .Op("t", "aten.t.default", {A::Node("w")}, {{4, 3}})
      .Op("y", "aten.mm.default", {A::Node("rot"), A::Node("t")}, {{4, 3}})
      .Op("loss", "aten.mean.default", {A::Node("y")}, {{}})
      .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
      .Op("dy", "aten.expand.default", {A::Node("seed"), A::Ints({4, 3})}, {{4, 3}})
      .Op("dy_t", "aten.t.default", {A::Node("dy")}, {{3, 4}})
      .Op("dw", "aten.mm.default", {A::Node("dy_t"), A::Node("rot")}, {{3, 4}})
      .Op("clean", "aten.relu.default", {A::Node("x")}, {{4, 4}})
      .Output({"dw", "clean"});
  const Analysis a(g, {{"w", kParameter}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  const NodeId rot = a.id("rot");
  EXPECT_TRUE(a.ambiguous("rot"));
  EXPECT_EQ(a.analysis().guess_of(rot), rot);
  for (const char* name : {"y", "loss", "seed", "dy", "dy_t", "dw"}) {
    EXPECT_FALSE(a.ambiguous(name)) << name;
    EXPECT_EQ(a.analysis().guess_of(a.id(name)), rot) << name;
  }
  for (const char* name : {"x", "w", "t", "clean"}) {
    EXPECT_EQ(a.analysis().guess_of(a.id(name)), -1) << name;
  }
}

// ---- Training-mode batch norm (issue #24, item 11) ---------------------------

TEST(BatchDimAnalysis, TrainingBatchNormIsPlannedAsSyncBatchNorm) {
  auto graph = [](bool training, const Shape& x_shape) {
    const int64_t channels = x_shape[1];
    AtenGraph g;
    g.Input("x", x_shape)
        .Input("w", {channels})
        .Input("b", {channels})
        .Input("mean", {channels})
        .Input("var", {channels})
        .Op("bn", "aten.native_batch_norm.default",
            {A::Node("x"), A::Node("w"), A::Node("b"), A::Node("mean"), A::Node("var"),
             A::Bool(training), A::Float(0.1), A::Float(1e-5)},
            {x_shape, {training ? channels : 0}, {training ? channels : 0}})
        .Op("out", "operator.getitem", {A::Node("bn"), A::Int(0)}, {x_shape})
        .Op("save_mean", "operator.getitem", {A::Node("bn"), A::Int(1)},
            {{training ? channels : 0}})
        .Op("save_invstd", "operator.getitem", {A::Node("bn"), A::Int(2)},
            {{training ? channels : 0}})
        .Op("back", "aten.native_batch_norm_backward.default",
            {A::Node("out"), A::Node("x"), A::Node("w"), A::Node("mean"), A::Node("var"),
             A::Node("save_mean"), A::Node("save_invstd"), A::Bool(training), A::Float(1e-5),
             A::Bools({true, true, true})},
            {x_shape, {channels}, {channels}})
        .Op("dx", "operator.getitem", {A::Node("back"), A::Int(0)}, {x_shape})
        .Op("dw", "operator.getitem", {A::Node("back"), A::Int(1)}, {{channels}})
        .Output({"dx", "dw"});
    return g;
  };
  const std::vector<std::pair<std::string, v1::PlaceholderRole>> roles = {
      {"w", kParameter}, {"b", kParameter}, {"mean", kParameter}, {"var", kParameter}};
  const Analysis train(graph(true, {4, 3, 5}), roles);
  ASSERT_TRUE(train.status().ok()) << train.status();
  EXPECT_TRUE(IsShard(train["out"], 0, 4));
  EXPECT_EQ(train["save_mean"].layout, Layout::kReplicate);
  EXPECT_EQ(train["save_invstd"].layout, Layout::kReplicate);
  EXPECT_TRUE(IsShard(train["dx"], 0, 4));
  EXPECT_TRUE(IsPartial(train["dw"], ReduceOp::kSum));
  const BatchDimAnalysis::StatisticsSync* forward =
      train.analysis().statistics_sync(train.id("bn"));
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(forward->operand, train.id("x"));
  EXPECT_EQ(forward->values, 6);  // sums and sums of squares of 3 channels
  EXPECT_EQ(forward->element_bytes, 4);
  EXPECT_THAT(train.note("bn"), HasSubstr("SyncBatchNorm"));
  const BatchDimAnalysis::StatisticsSync* backward =
      train.analysis().statistics_sync(train.id("back"));
  ASSERT_NE(backward, nullptr);
  EXPECT_EQ(backward->operand, train.id("out"));
  EXPECT_EQ(backward->values, 6);

  // Eval mode normalises each sample by the running statistics.
  const Analysis eval(graph(false, {4, 3, 5}), roles);
  ASSERT_TRUE(eval.status().ok()) << eval.status();
  EXPECT_TRUE(IsShard(eval["out"], 0, 4));
  EXPECT_EQ(eval.analysis().statistics_sync(eval.id("bn")), nullptr);
  EXPECT_EQ(eval.analysis().statistics_sync(eval.id("back")), nullptr);

  // The batch on the channel dim: per-channel statistics are per sample.
  AtenGraph channels_first = graph(true, {3, 4, 5});
  const Analysis on_channels(channels_first, roles, /*input_batch_dim=*/1);
  ASSERT_TRUE(on_channels.status().ok()) << on_channels.status();
  EXPECT_EQ(on_channels["out"].layout, Layout::kReplicate);
  EXPECT_TRUE(on_channels.analysis().gathers_batch(on_channels.id("bn")));
  EXPECT_EQ(on_channels.analysis().statistics_sync(on_channels.id("bn")), nullptr);
}

// ---- The backward of a mean loss is scaled (issue #24, item 12) ---------------

TEST(BatchDimAnalysis, TheBackwardOfAMeanLossIsScaledFromWhereItDividesByTheSamples) {
  AtenGraph g;
  g.Input("x", {4, 3})
      .Input("w", {5, 3})
      .Input("target", {4, 5})
      .Op("t", "aten.t.default", {A::Node("w")}, {{3, 5}})
      .Op("y", "aten.mm.default", {A::Node("x"), A::Node("t")}, {{4, 5}})
      // mean(y)'s backward as make_fx writes it: expand, then / numel.
      .Op("loss", "aten.mean.default", {A::Node("y")}, {{}})
      .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
      .Op("spread", "aten.expand.default", {A::Node("seed"), A::Ints({4, 5})}, {{4, 5}})
      .Op("dy", "aten.div.Scalar", {A::Node("spread"), A::Int(20)}, {{4, 5}})
      .Op("dy_t", "aten.t.default", {A::Node("dy")}, {{5, 4}})
      .Op("dw", "aten.mm.default", {A::Node("dy_t"), A::Node("x")}, {{5, 3}})
      .Op("dx", "aten.mm.default", {A::Node("dy"), A::Node("w")}, {{4, 3}})
      // Loss backward ops divide by their own samples under a mean only.
      .Op("mse_mean", "aten.mse_loss_backward.default",
          {A::Node("seed"), A::Node("y"), A::Node("target"), A::Int(1)}, {{4, 5}})
      .Op("mse_sum", "aten.mse_loss_backward.default",
          {A::Node("seed"), A::Node("y"), A::Node("target"), A::Int(2)}, {{4, 5}})
      // A forward division by a multiple of the batch size is no mean's backward.
      .Op("halved", "aten.div.Scalar", {A::Node("y"), A::Int(8)}, {{4, 5}})
      .Output({"dw", "dx", "mse_mean", "mse_sum", "halved"});
  const Analysis a(g, {{"w", kParameter}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_FALSE(a["y"].scaled);
  EXPECT_TRUE(IsShard(a["spread"], 0, 4));
  EXPECT_FALSE(a["spread"].scaled);  // ones: each device's rows are the whole's
  for (const char* name : {"dy", "dx", "mse_mean"}) {
    EXPECT_TRUE(IsShard(a[name], 0, 4)) << name;
    EXPECT_TRUE(a[name].scaled) << name;
  }
  EXPECT_TRUE(IsShard(a["dy_t"], 1, 4));
  EXPECT_TRUE(a["dy_t"].scaled);
  // Contracted, the scaled terms average to the whole gradient.
  EXPECT_TRUE(IsPartial(a["dw"], ReduceOp::kAvg));
  EXPECT_FALSE(a["dw"].scaled);
  EXPECT_FALSE(a["mse_sum"].scaled);
  EXPECT_FALSE(a["halved"].scaled);
}

TEST(BatchDimAnalysis, TheBackwardOfASumOverTheBatchSizeIsScaledFromTheSeed) {
  // loss = y.sum() / 4 and its backward, as make_fx writes them; and a mean
  // loss divided by 4 in the forward, which is no backward.
  AtenGraph g;
  g.Input("y", {4, 5})
      .Op("total", "aten.sum.default", {A::Node("y")}, {{}})
      .Op("loss", "aten.div.Tensor", {A::Node("total"), A::Int(4)}, {{}})
      .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
      .Op("seed_share", "aten.div.Tensor", {A::Node("seed"), A::Int(4)}, {{}})
      .Op("dy", "aten.expand.default", {A::Node("seed_share"), A::Ints({4, 5})}, {{4, 5}})
      .Op("mean", "aten.mean.default", {A::Node("y")}, {{}})
      .Op("quarter", "aten.div.Tensor", {A::Node("mean"), A::Int(4)}, {{}})
      .Output({"dy", "quarter"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_EQ(a["loss"].layout, Layout::kLocalScalar);
  EXPECT_FALSE(a["loss"].scaled);
  EXPECT_EQ(a["seed_share"].layout, Layout::kLocalScalar);
  EXPECT_TRUE(a["seed_share"].scaled);
  EXPECT_TRUE(IsShard(a["dy"], 0, 4));
  EXPECT_TRUE(a["dy"].scaled);
  EXPECT_FALSE(a["quarter"].scaled);
}

TEST(BatchDimAnalysis, TheBackwardOfAMeanOverTheBatchIsScaledToo) {
  // loss = y.mean(0).sum(): a Partial average, not a per-device mean loss;
  // its backward still divides by the device's own 4 / N samples.
  AtenGraph g;
  g.Input("y", {4, 5})
      .Op("means", "aten.mean.dim", {A::Node("y"), A::Ints({0})}, {{5}})
      .Op("loss", "aten.sum.default", {A::Node("means")}, {{}})
      .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
      .Op("spread", "aten.expand.default", {A::Node("seed"), A::Ints({5})}, {{5}})
      .Op("rows", "aten.unsqueeze.default", {A::Node("spread"), A::Int(0)}, {{1, 5}})
      .Op("tiled", "aten.expand.default", {A::Node("rows"), A::Ints({4, 5})}, {{4, 5}})
      .Op("dy", "aten.div.Scalar", {A::Node("tiled"), A::Int(4)}, {{4, 5}})
      .Output({"dy"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsPartial(a["loss"], ReduceOp::kAvg));
  EXPECT_TRUE(IsShard(a["tiled"], 0, 4));
  EXPECT_FALSE(a["tiled"].scaled);
  EXPECT_TRUE(IsShard(a["dy"], 0, 4));
  EXPECT_TRUE(a["dy"].scaled);
}

// ---- Model state and placeholders -------------------------------------------

TEST(BatchDimAnalysis, ModelStateIsWhatIsComputedFromParametersAndStatesAlone) {
  AtenGraph g;
  g.Input("x", {4, 3})
      .Input("w", {5, 3})
      .Input("m", {5, 3})
      .Op("t", "aten.t.default", {A::Node("w")}, {{3, 5}})
      .Op("y", "aten.mm.default", {A::Node("x"), A::Node("t")}, {{4, 5}})
      .Op("y_t", "aten.t.default", {A::Node("y")}, {{5, 4}})
      .Op("grad", "aten.mm.default", {A::Node("y_t"), A::Node("x")}, {{5, 3}})
      .Op("decayed", "aten.mul.Tensor", {A::Node("m"), A::Float(0.9)}, {{5, 3}})
      .Op("momentum", "aten.add.Tensor", {A::Node("decayed"), A::Node("grad")}, {{5, 3}})
      .Op("updated", "aten.sub.Tensor", {A::Node("w"), A::Node("momentum")}, {{5, 3}})
      .Output({"updated", "momentum"});
  const Analysis a(g, {{"w", kParameter}, {"m", v1::OPTIMIZER_STATE}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  for (const char* name : {"w", "m", "t", "decayed", "momentum", "updated"}) {
    EXPECT_EQ(a[name].layout, Layout::kModelState) << name;
  }
  EXPECT_TRUE(IsShard(a["y"], 0, 4));
  EXPECT_TRUE(IsPartial(a["grad"], ReduceOp::kSum));
  EXPECT_TRUE(a.analysis().elementwise(a.id("momentum")));
  EXPECT_FALSE(a.analysis().elementwise(a.id("t")));
}

TEST(BatchDimAnalysis, PlaceholdersAndTheSeedOfTheBatch) {
  AtenGraph g;
  g.Input("mask", {6, 6})  // unspecified, before x
      .Input("x", {4, 8})
      .Input("lr", {})
      .Input("extra", {4, 2});
  v1::Node* none = g.Input("none", {}).last();
  none->clear_outputs();  // no shape: not a tensor
  g.Output({"x"});
  const Analysis a(g, {{"x", v1::ACTIVATION}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_EQ(a.analysis().batch_size(), 4);  // from x, the explicit activation
  EXPECT_EQ(a["mask"].layout, Layout::kReplicate);
  EXPECT_THAT(a.note("mask"), HasSubstr("taken as a replicated input"));
  EXPECT_TRUE(IsShard(a["x"], 0, 4));
  EXPECT_EQ(a["lr"].layout, Layout::kReplicate);
  EXPECT_TRUE(IsShard(a["extra"], 0, 4));
  EXPECT_EQ(a["none"].layout, Layout::kNotTensor);
}

// ---- Malformed graphs -------------------------------------------------------

struct MalformedCase {
  const char* name;
  AtenGraph graph;
  std::vector<std::pair<std::string, v1::PlaceholderRole>> roles;
  int32_t input_batch_dim;
  const char* field;
  const char* message;
};

std::vector<MalformedCase> MalformedCases() {
  std::vector<MalformedCase> cases;
  auto with_x = [] { return std::move(AtenGraph().Input("x", {4, 6})); };
  cases.push_back({"unknown_op_without_shapes",
                   with_x().Op("f", "custom.op", {A::Node("x")}, {}),
                   {},
                   0,
                   "graph.nodes[1].outputs",
                   "node 'f' (custom.op): an op without a dimension rule here and without output "
                   "shapes"});
  cases.push_back({"known_op_without_shapes",
                   with_x().Op("r", "aten.relu.default", {A::Node("x")}, {}),
                   {},
                   0,
                   "graph.nodes[1].outputs",
                   "node 'r' (aten.relu.default): no output shapes"});
  cases.push_back({"view_output_shape_mismatch",
                   with_x().Op("v", "aten.view.default", {A::Node("x"), A::Ints({24})}, {{12, 2}}),
                   {},
                   0,
                   "graph.nodes[1].outputs[0].shape",
                   "node 'v' (aten.view.default): the output shape [12, 2] is not the [24]"});
  cases.push_back({"view_element_count_mismatch",
                   with_x().Op("v", "aten.view.default", {A::Node("x"), A::Ints({5, 5})}, {}),
                   {},
                   0,
                   "graph.nodes[1].args[1]",
                   "node 'v' (aten.view.default): shape [5, 5] is invalid for a [4, 6] input"});
  cases.push_back({"operands_do_not_broadcast",
                   with_x()
                       .Input("y", {4, 5})
                       .Op("s", "aten.add.Tensor", {A::Node("x"), A::Node("y")}, {{4, 6}}),
                   {},
                   0,
                   "graph.nodes[2].outputs[0].shape",
                   "node 's' (aten.add.Tensor): shape mismatch: operand 'y' of shape [4, 5] does "
                   "not broadcast to the output shape [4, 6]"});
  cases.push_back({"mm_inner_sizes",
                   with_x()
                       .Input("w", {5, 3})
                       .Op("y", "aten.mm.default", {A::Node("x"), A::Node("w")}, {{4, 3}}),
                   {{"w", v1::PARAMETER}},
                   0,
                   "graph.nodes[2].outputs[0].shape",
                   "node 'y' (aten.mm.default): shape mismatch: 'x' [4, 6] by 'w' [5, 3]: the "
                   "inner sizes differ"});
  cases.push_back({"mm_output_shape",
                   with_x()
                       .Input("w", {6, 3})
                       .Op("y", "aten.mm.default", {A::Node("x"), A::Node("w")}, {{4, 4}}),
                   {{"w", v1::PARAMETER}},
                   0,
                   "graph.nodes[2].outputs[0].shape",
                   "gives [4, 3], not the output shape [4, 4]"});
  cases.push_back(
      {"transpose_dim_out_of_range",
       with_x().Op("t", "aten.transpose.int", {A::Node("x"), A::Int(0), A::Int(2)}, {{6, 4}}),
       {},
       0,
       "graph.nodes[1].args[1]",
       "node 't' (aten.transpose.int): dim 2 is out of range for a 2-d tensor"});
  cases.push_back({"batch_dim_out_of_range",
                   with_x().Op("r", "aten.relu.default", {A::Node("x")}, {{4, 6}}),
                   {{"x", v1::ACTIVATION}},
                   2,
                   "input_batch_dim",
                   "batch dim 2 is out of range for activation input 'x' of shape [4, 6]"});
  cases.push_back(
      {"negative_batch_dim", with_x(), {}, -1, "input_batch_dim", "must not be negative, got -1"});
  cases.push_back({"no_activation_input",
                   AtenGraph().Input("w", {4}).Op("r", "aten.relu.default", {A::Node("w")}, {{4}}),
                   {{"w", v1::PARAMETER}},
                   0,
                   "roles",
                   "the graph has no activation input to take the batch from"});
  cases.push_back(
      {"activation_batch_sizes_differ",
       with_x().Input("y", {3, 6}).Op("s", "aten.relu.default", {A::Node("y")}, {{3, 6}}),
       {{"x", v1::ACTIVATION}, {"y", v1::ACTIVATION}},
       0,
       "graph.nodes[1].outputs[0].shape[0]",
       "activation input 'y' has batch size 3, but the first activation input 'x' "
       "has 4"});
  {
    AtenGraph g = with_x();
    g.Input("w", {});
    g.last()->clear_outputs();
    cases.push_back({"parameter_without_shape",
                     std::move(g),
                     {{"w", v1::PARAMETER}},
                     0,
                     "graph.nodes[1].outputs",
                     "PARAMETER 'w' has no shape"});
  }
  {
    AtenGraph g;
    g.Input("x", {});
    g.last()->clear_outputs();
    cases.push_back({"activation_without_shape",
                     std::move(g),
                     {{"x", v1::ACTIVATION}},
                     0,
                     "graph.nodes[0].outputs",
                     "activation input 'x' has no shape"});
  }
  cases.push_back({"getitem_of_a_constant",
                   with_x().Op("g", "operator.getitem", {A::Int(3), A::Int(0)}, {{4}}),
                   {},
                   0,
                   "graph.nodes[1].args[0]",
                   "node 'g' (operator.getitem): the indexed value must be a node"});
  return cases;
}

class MalformedGraphTest : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedGraphTest, IsInvalidArgumentNamingTheFieldAndNode) {
  const MalformedCase& c = GetParam();
  const Analysis a(c.graph, c.roles, c.input_batch_dim);
  ASSERT_FALSE(a.status().ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << a.status();
  EXPECT_EQ(InvalidFieldPath(a.status()), c.field) << a.status();
  EXPECT_THAT(std::string(a.status().message()), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(Cases, MalformedGraphTest, ::testing::ValuesIn(MalformedCases()),
                         [](const ::testing::TestParamInfo<MalformedCase>& info) {
                           return info.param.name;
                         });

// ---- Found by tests/fixtures/data_parallel/crosscheck.py on unseen models ----

TEST(BatchDimAnalysis, InPlaceOpsTakeTheirFunctionalFormsRule) {
  // torchvision's nn.ReLU(inplace=True) traces to relu_; on a [4, 4] batch
  // the size rule could not tell the batch dim (shufflenet's 4 x 4 maps).
  AtenGraph g;
  g.Input("x", {4, 4})
      .Op("relu_", "aten.relu_.default", {A::Node("x")}, {{4, 4}})
      .Op("add_", "aten.add_.Tensor", {A::Node("relu_"), A::Node("x")}, {{4, 4}})
      .Op("flip_", "aten.cumsum_.default", {A::Node("add_"), A::Int(0)}, {{4, 4}})
      .Output({"flip_"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  for (const char* name : {"relu_", "add_"}) {
    EXPECT_TRUE(IsShard(a[name], 0, 4)) << name;
    EXPECT_FALSE(a.ambiguous(name)) << name;
    EXPECT_EQ(a.analysis().guess_of(a.id(name)), -1) << name;
  }
  // cumsum_ over the batch is cumsum's: it needs the whole batch.
  EXPECT_EQ(a["flip_"].layout, Layout::kReplicate);
  EXPECT_TRUE(a.analysis().gathers_batch(a.id("flip_")));
}

TEST(BatchDimAnalysis, PositionDependentOpsOverTheBatchNeedItWholeOrAreFlagged) {
  // x [4, 6]: one dim of the batch size everywhere, so the size rule alone
  // would find the batch "unambiguously" in every output below.
  AtenGraph g;
  g.Input("x", {4, 6})
      .Input("cube", {4, 3, 3})
      .Op("xt", "aten.t.default", {A::Node("x")}, {{6, 4}})
      // tril / triu keep an element by its row and column index, which a
      // device knows only within its own rows.
      .Op("tril", "aten.tril.default", {A::Node("x")}, {{4, 6}})
      .Op("triu_t", "aten.triu.default", {A::Node("xt"), A::Int(1)}, {{6, 4}})
      .Op("tril_inner", "aten.tril.default", {A::Node("cube")}, {{4, 3, 3}})
      // Order statistics do not decompose over the batch.
      .Op("median", "aten.median.default", {A::Node("x")}, {{}})
      .Op("median_batch", "aten.median.dim", {A::Node("x"), A::Int(0)}, {{6}, {6}})
      .Op("kth_over_batch", "aten.kthvalue.default", {A::Node("xt"), A::Int(2)}, {{6}, {6}})
      .Op("kth_per_sample", "aten.kthvalue.default", {A::Node("x"), A::Int(2)}, {{4}, {4}})
      .Op("mode_per_sample", "aten.mode.default", {A::Node("x")}, {{4}, {4}})
      // Ops without a rule: a guess even with one dim of the batch size, or
      // none (taken as a sum over the batch).
      .Op("unknown_same", "aten.special_shuffle.default", {A::Node("x")}, {{4, 6}})
      .Op("unknown_reduced", "aten.special_rank.default", {A::Node("xt")}, {{6}})
      .Op("unknown_scalar", "aten.special_quantile.default", {A::Node("x")}, {{}})
      .Output({"tril"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  for (const char* name : {"tril", "triu_t", "median", "median_batch", "kth_over_batch"}) {
    EXPECT_EQ(a[name].layout, Layout::kReplicate) << name;
    EXPECT_TRUE(a.analysis().gathers_batch(a.id(name))) << name;
    EXPECT_FALSE(a.ambiguous(name)) << name;
  }
  // tril keeps the rows where they were: ops on samples take theirs again.
  EXPECT_EQ(a["tril"].dim, 0);
  EXPECT_EQ(a["triu_t"].dim, 1);
  EXPECT_EQ(a["median"].dim, -1);
  EXPECT_EQ(a.analysis().element_layout(a.id("median_batch"), 1).layout, Layout::kReplicate);
  for (const char* name : {"tril_inner", "kth_per_sample", "mode_per_sample"}) {
    EXPECT_TRUE(IsShard(a[name], 0, 4)) << name;
    EXPECT_FALSE(a.ambiguous(name)) << name;
  }
  EXPECT_TRUE(IsShard(a["unknown_same"], 0, 4));
  EXPECT_EQ(a["unknown_reduced"].layout, Layout::kPartial);
  EXPECT_EQ(a["unknown_scalar"].layout, Layout::kLocalScalar);
  for (const char* name : {"unknown_same", "unknown_reduced", "unknown_scalar"}) {
    EXPECT_TRUE(a.ambiguous(name)) << name;
    EXPECT_THAT(a.note(name), HasSubstr("no dimension rule")) << name;
    EXPECT_EQ(a.analysis().guess_of(a.id(name)), a.id(name)) << name;
  }
}

TEST(BatchDimAnalysis, FactoriesAndSplitsWithoutAliasingChecksHaveRules) {
  // new_zeros takes only dtype and device from its operand (make_fx's
  // backward of gather and kthvalue); nn.LSTMCell chunks its gates with
  // unsafe_split. On a [4, 8] batch split into [4, 4] pieces the size rule
  // alone could not tell.
  AtenGraph g;
  g.Input("x", {4, 8})
      .Op("zeros", "aten.new_zeros.default", {A::Node("x"), A::Ints({4, 5})}, {{4, 5}})
      .Op("zeros_t", "aten.new_zeros.default", {A::Node("x"), A::Ints({5, 4})}, {{5, 4}})
      .Op("square", "aten.new_zeros.default", {A::Node("x"), A::Ints({4, 4})}, {{4, 4}})
      .Op("gates", "aten.unsafe_split.Tensor", {A::Node("x"), A::Int(4), A::Int(1)},
          {{4, 4}, {4, 4}})
      .Op("chunks", "aten.unsafe_chunk.default", {A::Node("x"), A::Int(2), A::Int(1)},
          {{4, 4}, {4, 4}})
      .Output({"zeros"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsShard(a["zeros"], 0, 4));
  EXPECT_TRUE(IsShard(a["zeros_t"], 1, 4));
  for (const char* name : {"zeros", "zeros_t", "gates", "chunks"}) {
    EXPECT_FALSE(a.ambiguous(name)) << name;
  }
  EXPECT_EQ(a["square"].layout, Layout::kReplicate);  // two new dims of the batch size
  for (int k = 0; k < 2; ++k) {
    EXPECT_TRUE(IsShard(a.analysis().element_layout(a.id("gates"), k), 0, 4)) << k;
    EXPECT_TRUE(IsShard(a.analysis().element_layout(a.id("chunks"), k), 0, 4)) << k;
  }
}

TEST(BatchDimAnalysis, OpsNotLinearInTheDevicesLocalScalarsAreFlagged) {
  // Each device keeps its own full reductions; only ops linear in them keep
  // "the whole value is the sum / average of the devices' values".
  AtenGraph g;
  g.Input("x", {4, 3})
      .Op("loss", "aten.mean.default", {A::Node("x")}, {{}})
      .Op("total", "aten.sum.default", {A::Node("x")}, {{}})
      .Op("count", "aten.sum.default", {A::Node("x")}, {{}})
      .Op("twice", "aten.add.Tensor", {A::Node("loss"), A::Node("loss")}, {{}})
      .Op("scaled", "aten.mul.Tensor", {A::Node("loss"), A::Float(0.5)}, {{}})
      .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
      .Op("mean_by_size", "aten.div.Tensor", {A::Node("total"), A::Int(12)}, {{}})
      // The backward of median divides by the count of ties: per device,
      // its own partial gradient by its own count.
      .Op("per_tie", "aten.div.Tensor", {A::Node("total"), A::Node("count")}, {{}})
      .Op("rmse", "aten.sqrt.default", {A::Node("loss")}, {{}})
      .Op("mixed", "aten.add.Tensor", {A::Node("loss"), A::Node("total")}, {{}})
      .Op("after", "aten.mul.Tensor", {A::Node("per_tie"), A::Float(2.0)}, {{}})
      .Output({"twice"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  for (const char* name : {"twice", "scaled", "seed", "mean_by_size"}) {
    EXPECT_EQ(a[name].layout, Layout::kLocalScalar) << name;
    EXPECT_FALSE(a.ambiguous(name)) << name;
  }
  for (const char* name : {"per_tie", "rmse", "mixed"}) {
    EXPECT_TRUE(a.ambiguous(name)) << name;
    EXPECT_THAT(a.note(name), HasSubstr("not linear in them")) << name;
  }
  EXPECT_EQ(a.analysis().guess_of(a.id("after")), a.id("per_tie"));
}

TEST(BatchDimAnalysis, ASumOfScaledAndWholeGradientsIsFlagged) {
  // The backward of a mean loss as each device takes it (N times the
  // whole: scaled) plus a gradient reduced to the whole batch's (here a
  // Partial average made whole by exp's all-reduce; in median_scale the
  // backward through a gathered kthvalue) is neither.
  AtenGraph g;
  g.Input("x", {4, 3})
      .Op("loss", "aten.mean.default", {A::Node("x")}, {{}})
      .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
      .Op("spread", "aten.expand.default", {A::Node("seed"), A::Ints({4, 3})}, {{4, 3}})
      .Op("dy", "aten.div.Tensor", {A::Node("spread"), A::Int(12)}, {{4, 3}})
      .Op("column", "aten.sum.dim_IntList", {A::Node("dy"), A::Ints({0}), A::Bool(true)},
          {{1, 3}})
      .Op("whole", "aten.exp.default", {A::Node("column")}, {{1, 3}})
      .Op("mixed", "aten.add.Tensor", {A::Node("dy"), A::Node("whole")}, {{4, 3}})
      .Op("alike", "aten.add.Tensor", {A::Node("dy"), A::Node("dy")}, {{4, 3}})
      .Op("by_input", "aten.mul.Tensor", {A::Node("dy"), A::Node("x")}, {{4, 3}})
      .Output({"mixed", "alike", "by_input"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(a["dy"].scaled);
  EXPECT_EQ(a["whole"].layout, Layout::kReplicate);
  EXPECT_FALSE(a["whole"].scaled);
  EXPECT_TRUE(a.ambiguous("mixed"));
  EXPECT_THAT(a.note("mixed"), HasSubstr("the result is neither"));
  for (const char* name : {"dy", "alike", "by_input"}) {
    EXPECT_FALSE(a.ambiguous(name)) << name;
  }
}

TEST(BatchDimAnalysis, TheBackwardOfSelectAndSliceMapsTheBatchBack) {
  // out[:, -1] of a [4, 4, 8] sequence (a classifier on the last token):
  // its backward places a [4, 8] gradient into [4, 4, 8]. Two dims of the
  // batch size: without a rule it was a flagged guess.
  AtenGraph g;
  g.Input("dy", {4, 8})
      .Input("dz", {4, 4, 8})
      .Input("rows", {2, 8})
      .Op("select_back", "aten.select_backward.default",
          {A::Node("dy"), A::Ints({4, 4, 8}), A::Int(1), A::Int(-1)}, {{4, 4, 8}})
      .Op("slice_back", "aten.slice_backward.default",
          {A::Node("dz"), A::Ints({4, 4, 8}), A::Int(0), A::Int(0),
           A::Int(std::numeric_limits<int64_t>::max()), A::Int(1)},
          {{4, 4, 8}})
      .Op("slice_back_seq", "aten.slice_backward.default",
          {A::Node("dz"), A::Ints({4, 6, 8}), A::Int(1), A::Int(1), A::Int(5), A::Int(1)},
          {{4, 6, 8}})
      .Output({"select_back", "slice_back", "slice_back_seq"});
  const Analysis a(g, {{"dy", v1::ACTIVATION}, {"dz", v1::ACTIVATION}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  for (const char* name : {"select_back", "slice_back", "slice_back_seq"}) {
    EXPECT_TRUE(IsShard(a[name], 0, 4)) << name;
    EXPECT_FALSE(a.ambiguous(name)) << name;
  }
}

TEST(BatchDimAnalysis, AnOpWithoutARuleOrInputsOfTheBatchSizeIsAGuess) {
  // arange(4) made per device is 0, 1 on every device, not its rows of
  // 0..3; zeros(4, 8) is the same wherever it is cut.
  AtenGraph g;
  g.Input("x", {4, 8})
      .Op("ids", "aten.arange.default", {A::Int(4)}, {{4}})
      .Op("h0", "aten.zeros.default", {A::Ints({4, 8})}, {{4, 8}})
      .Output({"ids", "h0"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsShard(a["ids"], 0, 4));
  EXPECT_TRUE(a.ambiguous("ids"));
  EXPECT_THAT(a.note("ids"), HasSubstr("depend on their position"));
  EXPECT_TRUE(IsShard(a["h0"], 0, 4));
  EXPECT_FALSE(a.ambiguous("h0"));
}

TEST(BatchDimAnalysis, AProductWithTheReciprocalOfTheBatchSizeIsAMeanToo) {
  // Issue #24 (c): `loss = x.sum() * (1 / B)` is a mean like `sum / B`, and
  // its backward `ones_like(loss) * (1 / B)` divides by each device's own
  // samples like `ones_like(loss) / B`.
  AtenGraph g;
  g.Input("x", {4, 3})
      .Op("total", "aten.sum.default", {A::Node("x")}, {{}})
      .Op("loss", "aten.mul.Tensor", {A::Node("total"), A::Float(0.25)}, {{}})
      .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
      .Op("seed_share", "aten.mul.Tensor", {A::Node("seed"), A::Float(0.25)}, {{}})
      .Op("dy", "aten.expand.default", {A::Node("seed_share"), A::Ints({4, 3})}, {{4, 3}})
      .Op("not_a_mean", "aten.mul.Tensor", {A::Node("total"), A::Float(0.3)}, {{}})
      .Output({"loss", "dy", "not_a_mean"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_EQ(a["loss"].layout, Layout::kLocalScalar);
  EXPECT_EQ(a["loss"].reduce, ReduceOp::kAvg);
  EXPECT_THAT(a.note("loss"), HasSubstr("taken as a mean"));
  EXPECT_TRUE(a["seed_share"].scaled);
  EXPECT_TRUE(a["dy"].scaled);
  EXPECT_EQ(a["not_a_mean"].reduce, ReduceOp::kSum);
}

TEST(BatchDimAnalysis, ABatchSizedConstantInTheBackwardThroughAGatheredBatchIsFlagged) {
  // std over the batch gathers it; make_fx bakes its backward's 2 / (B - 1)
  // as a constant, which a device's program bakes for its own B/N.
  AtenGraph g;
  g.Input("x", {4, 3})
      .Op("loss", "aten.mean.default", {A::Node("x")}, {{}})
      .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
      .Op("spread", "aten.expand.default", {A::Node("seed"), A::Ints({4, 3})}, {{4, 3}})
      .Op("dy", "aten.div.Tensor", {A::Node("spread"), A::Int(12)}, {{4, 3}})
      .Op("column", "aten.sum.dim_IntList", {A::Node("dy"), A::Ints({0})}, {{3}})
      .Op("whole", "aten.exp.default", {A::Node("column")}, {{3}})
      .Op("by_count", "aten.mul.Scalar", {A::Node("whole"), A::Float(2.0 / 3.0)}, {{3}})
      .Op("by_lr", "aten.mul.Scalar", {A::Node("whole"), A::Float(0.1)}, {{3}})
      .Output({"by_count", "by_lr"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_EQ(a["by_count"].layout, Layout::kReplicate);
  EXPECT_TRUE(a.ambiguous("by_count"));
  EXPECT_THAT(a.note("by_count"), HasSubstr("2 / 3"));
  EXPECT_FALSE(a.ambiguous("by_lr"));
}

TEST(BatchDimAnalysis, AParameterExpandedOverTheBatchIsMadePerDevice) {
  // A ViT's class token: expand(cls [1, 1, H], [B, 1, H]) is made by each
  // device for its own samples, then concatenated with its patches.
  AtenGraph g;
  g.Input("x", {4, 6, 8})
      .Input("cls", {1, 1, 8})
      .Op("tokens", "aten.expand.default", {A::Node("cls"), A::Ints({4, -1, -1})}, {{4, 1, 8}})
      .Op("seq", "aten.cat.default", {A::Nodes({"tokens", "x"}), A::Int(1)}, {{4, 7, 8}})
      .Output({"seq"});
  const Analysis a(g, {{"cls", kParameter}});
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_TRUE(IsShard(a["tokens"], 0, 4));
  EXPECT_TRUE(IsShard(a["seq"], 0, 4));
  EXPECT_FALSE(a.ambiguous("seq"));
}

TEST(BatchDimAnalysis, AnInPlaceOpThatChangesItsSelfsLayoutIsFlaggedForLaterReaders) {
  // BCE with logits' backward as make_fx writes it: (sigmoid - y) * seed,
  // then div_ by the element count (mobilenet_v3_small): the div_ makes the
  // gradient scaled in place. A reader of the gradient after it would see
  // scaled values planned as unscaled.
  AtenGraph g;
  g.Input("x", {4, 3})
      .Op("loss", "aten.mean.default", {A::Node("x")}, {{}})
      .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
      .Op("grad", "aten.mul.Tensor", {A::Node("x"), A::Node("seed")}, {{4, 3}})
      .Op("grad_relu", "aten.relu_.default", {A::Node("x")}, {{4, 3}})
      .Op("scale_", "aten.div_.Scalar", {A::Node("grad"), A::Int(12)}, {{4, 3}})
      .Op("later", "aten.mul.Tensor", {A::Node("grad"), A::Float(2.0)}, {{4, 3}})
      .Op("after_relu", "aten.neg.default", {A::Node("x")}, {{4, 3}})
      .Output({"scale_", "later", "after_relu", "grad_relu"});
  const Analysis a(g);
  ASSERT_TRUE(a.status().ok()) << a.status();
  EXPECT_FALSE(a["grad"].scaled);
  EXPECT_TRUE(a["scale_"].scaled);
  EXPECT_TRUE(a.ambiguous("scale_"));
  EXPECT_THAT(a.note("scale_"), HasSubstr("in place"));
  EXPECT_EQ(a.analysis().guess_of(a.id("later")), a.id("scale_"));
  // relu_ keeps x's layout: nothing to flag.
  EXPECT_FALSE(a.ambiguous("grad_relu"));
  EXPECT_EQ(a.analysis().guess_of(a.id("after_relu")), -1);
}

TEST(BatchDimAnalysis, StopsWhenCancelled) {
  AtenGraph g;
  g.Input("x", {4}).Op("r", "aten.relu.default", {A::Node("x")}, {{4}}).Output({"r"});
  const v1::Graph proto = g.graph();
  CancellationToken token;
  absl::StatusOr<CompactGraph> graph = ImportGraph(proto, InputLimits(), token);
  ASSERT_TRUE(graph.ok());
  BatchDimOptions options;
  ASSERT_TRUE(options.CheckAndSetup(*graph).ok());
  token.Cancel();
  EXPECT_EQ(AnalyzeBatchDims(*graph, options, token).status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace partplan

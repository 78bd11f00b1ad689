// PlanDataParallelPlan end to end on small aten graphs: the styles
// (REPLICATE, FULLY_SHARD, MEMORY_AWARE with its charge worked out by hand),
// redistributions and their ring bytes, meshes, and request errors.
#include "planner/data_parallel/data_parallel_plan.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/base/cancellation.h"
#include "planner/base/status_util.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/data_parallel/dp_test_graphs.h"
#include "tests/planner/data_parallel/plan_request.h"

namespace partplan {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Imports the request's graph and plans; keeps the request alive.
class Planned {
 public:
  explicit Planned(v1::PlanDataParallelRequest request, bool cancel = false)
      : request_(std::move(request)) {
    absl::StatusOr<CompactGraph> graph = ImportGraph(request_.graph(), InputLimits(), token_);
    if (!graph.ok()) {
      response_ = graph.status();
      return;
    }
    graph_ = std::make_unique<CompactGraph>(std::move(*graph));
    if (cancel) token_.Cancel();
    response_ = PlanRequest(*graph_, request_, token_);
  }
  const absl::StatusOr<v1::PlanDataParallelResponse>& response() const { return response_; }
  const v1::NodeSharding& node(const std::string& name) const {
    const auto& nodes = response_->nodes();
    const auto it = std::find_if(nodes.begin(), nodes.end(),
                                 [&](const v1::NodeSharding& n) { return n.node() == name; });
    EXPECT_NE(it, nodes.end()) << name;
    return *it;
  }
  // "value->consumer collective bytes", one per redistribution.
  std::vector<std::string> redistributions() const {
    std::vector<std::string> out;
    for (const v1::Redistribution& r : response_->redistributions()) {
      out.push_back(
          absl::StrCat(r.value(), "->", r.consumer(), " ", r.collective(), " ", r.bytes()));
    }
    return out;
  }

 private:
  v1::PlanDataParallelRequest request_;
  CancellationToken token_;
  std::unique_ptr<CompactGraph> graph_;
  absl::StatusOr<v1::PlanDataParallelResponse> response_;
};

std::string PlacementOf(const v1::NodeSharding& n) {
  const v1::Placement& p = n.placement();
  switch (p.kind()) {
    case v1::Placement::SHARD:
      return absl::StrCat("Shard(", p.dim(), ")");
    case v1::Placement::REPLICATE:
      return "Replicate";
    case v1::Placement::PARTIAL:
      return absl::StrCat("Partial(", p.reduce_op(), ")");
    default:
      return "none";
  }
}

// One SGD-with-momentum step of y = x W^T + b with a mean loss, float32:
// W [5, 3] is 60 bytes, b [5] 20 bytes, and their momentum m, mb the same.
AtenGraph TrainStep() {
  AtenGraph g;
  g.Input("x", {4, 3})
      .Input("w", {5, 3})
      .Input("b", {5})
      .Input("m", {5, 3})
      .Input("mb", {5})
      .Op("t", "aten.t.default", {A::Node("w")}, {{3, 5}})
      .Op("y", "aten.addmm.default", {A::Node("b"), A::Node("x"), A::Node("t")}, {{4, 5}})
      .Op("loss", "aten.mean.default", {A::Node("y")}, {{}})
      .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
      .Op("dy", "aten.expand.default", {A::Node("seed"), A::Ints({4, 5})}, {{4, 5}})
      .Op("dy_t", "aten.t.default", {A::Node("dy")}, {{5, 4}})
      .Op("dw", "aten.mm.default", {A::Node("dy_t"), A::Node("x")}, {{5, 3}})
      .Op("db", "aten.sum.dim_IntList", {A::Node("dy"), A::Ints({0})}, {{5}})
      .Op("mw", "aten.mul.Tensor", {A::Node("m"), A::Float(0.9)}, {{5, 3}})
      .Op("mw2", "aten.add.Tensor", {A::Node("mw"), A::Node("dw")}, {{5, 3}})
      .Op("w2", "aten.sub.Tensor", {A::Node("w"), A::Node("mw2")}, {{5, 3}})
      .Op("mbb", "aten.mul.Tensor", {A::Node("mb"), A::Float(0.9)}, {{5}})
      .Op("mb2", "aten.add.Tensor", {A::Node("mbb"), A::Node("db")}, {{5}})
      .Op("b2", "aten.sub.Tensor", {A::Node("b"), A::Node("mb2")}, {{5}})
      .Output({"w2", "b2", "mw2", "mb2", "loss"});
  return g;
}

v1::PlanDataParallelRequest TrainStepRequest(v1::DataParallelStyle style, int devices = 2,
                                             int64_t memory = int64_t{1} << 30) {
  return TrainStep().Request({{"x", v1::ACTIVATION},
                              {"w", v1::PARAMETER},
                              {"b", v1::PARAMETER},
                              {"m", v1::OPTIMIZER_STATE},
                              {"mb", v1::OPTIMIZER_STATE}},
                             style, devices, memory);
}

// ---- Styles ------------------------------------------------------------------

TEST(PlanDataParallel, ReplicateKeepsParametersWholeAndAllReducesAveragedGradients) {
  const Planned plan(TrainStepRequest(v1::REPLICATE));
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  const std::pair<const char*, const char*> expected[] = {
      {"x", "Shard(0)"},      {"w", "Replicate"},   {"b", "Replicate"},   {"m", "Replicate"},
      {"mb", "Replicate"},    {"t", "Replicate"},   {"y", "Shard(0)"},    {"loss", "Shard(0)"},
      {"seed", "Shard(0)"},   {"dy", "Shard(0)"},   {"dy_t", "Shard(1)"}, {"dw", "Partial(avg)"},
      {"db", "Partial(avg)"}, {"mw", "Replicate"},  {"mw2", "Replicate"}, {"w2", "Replicate"},
      {"mbb", "Replicate"},   {"mb2", "Replicate"}, {"b2", "Replicate"},  {"output", "none"},
  };
  ASSERT_EQ(plan.response()->nodes_size(), 20);
  for (const auto& [name, placement] : expected) {
    EXPECT_EQ(PlacementOf(plan.node(name)), placement) << name;
  }
  EXPECT_EQ(plan.node("y").batch_dim(), 0);
  EXPECT_EQ(plan.node("dy_t").batch_dim(), 1);
  EXPECT_EQ(plan.node("dw").batch_dim(), -2);
  EXPECT_EQ(plan.node("w").batch_dim(), -1);
  EXPECT_EQ(plan.node("loss").batch_dim(), 0);  // a local scalar keeps its operand's batch dim
  EXPECT_THAT(plan.node("loss").note(), HasSubstr("full reduction over the batch"));
  EXPECT_THAT(plan.node("w").note(), IsEmpty());
  // all_reduce: 2 (N - 1) S / N = S for N = 2.
  EXPECT_THAT(plan.redistributions(),
              ::testing::ElementsAre("dw->mw2 all_reduce 60", "db->mb2 all_reduce 20"));
  const v1::Redistribution& r = plan.response()->redistributions(0);
  EXPECT_EQ(r.from_placement().kind(), v1::Placement::PARTIAL);
  EXPECT_EQ(r.from_placement().reduce_op(), "avg");
  EXPECT_EQ(r.to_placement().kind(), v1::Placement::REPLICATE);
  EXPECT_EQ(plan.response()->communication_bytes_per_step(), 80);
}

TEST(PlanDataParallel, RingBytesFollowTheAxisSize) {
  // all_reduce 2 (N - 1) S / N, rounded down: N = 3 gives 80 and 26 (26.7).
  const std::pair<int, std::vector<std::string>> cases[] = {
      {1, {"dw->mw2 all_reduce 0", "db->mb2 all_reduce 0"}},
      {3, {"dw->mw2 all_reduce 80", "db->mb2 all_reduce 26"}},
      {4, {"dw->mw2 all_reduce 90", "db->mb2 all_reduce 30"}},
  };
  for (const auto& [devices, expected] : cases) {
    const Planned plan(TrainStepRequest(v1::REPLICATE, devices));
    ASSERT_TRUE(plan.response().ok()) << plan.response().status();
    EXPECT_EQ(plan.redistributions(), expected) << devices << " devices";
  }
}

TEST(PlanDataParallel, FullyShardGathersParametersBeforeUseAndReduceScattersGradients) {
  const Planned plan(TrainStepRequest(v1::FULLY_SHARD));
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  for (const char* name : {"w", "b", "m", "mb", "mw", "mw2", "w2", "mbb", "mb2", "b2"}) {
    EXPECT_EQ(PlacementOf(plan.node(name)), "Shard(0)") << name;
  }
  EXPECT_EQ(PlacementOf(plan.node("t")), "Replicate");  // a use of w needs it whole
  // all_gather and reduce_scatter: (N - 1) S / N = S / 2.
  EXPECT_THAT(plan.redistributions(),
              ::testing::ElementsAre("w->t all_gather 30", "b->y all_gather 10",
                                     "dw->mw2 reduce_scatter 30", "db->mb2 reduce_scatter 10"));
  EXPECT_EQ(plan.response()->communication_bytes_per_step(), 80);
}

TEST(PlanDataParallel, FullyShardKeepsA0dParameterReplicatedAndGathersOnce) {
  // A second use of w and a 0-d scale parameter.
  AtenGraph h;
  h.Input("x", {4, 3})
      .Input("w", {5, 3})
      .Input("scale", {})
      .Op("t", "aten.t.default", {A::Node("w")}, {{3, 5}})
      .Op("t_again", "aten.t.default", {A::Node("w")}, {{3, 5}})
      .Op("y", "aten.mm.default", {A::Node("x"), A::Node("t")}, {{4, 5}})
      .Op("z", "aten.mm.default", {A::Node("x"), A::Node("t_again")}, {{4, 5}})
      .Op("scaled", "aten.mul.Tensor", {A::Node("y"), A::Node("scale")}, {{4, 5}})
      .Output({"scaled", "z"});
  const Planned plan(h.Request({{"w", v1::PARAMETER}, {"scale", v1::PARAMETER}}, v1::FULLY_SHARD));
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  EXPECT_EQ(PlacementOf(plan.node("w")), "Shard(0)");
  EXPECT_EQ(PlacementOf(plan.node("scale")), "Replicate");
  EXPECT_THAT(plan.node("scale").note(),
              HasSubstr("FULLY_SHARD: replicated: a 0-d tensor cannot be sharded"));
  // w is gathered once, for its first use; the second use reuses it.
  EXPECT_THAT(plan.redistributions(), ::testing::ElementsAre("w->t all_gather 30"));
}

// MEMORY_AWARE on TrainStep over 2 devices, by hand. Groups: {w, m} 120
// bytes whole, 72 sharded (3 of 5 rows each: saves 48); {b, mb} 40 whole,
// 24 sharded (saves 16). Other values alive at once, in graph order: x's
// shard 24, y's shard 40, loss 4, seed 4 (dy and dy_t are views of it), dw
// 60, db 20 (t is a view of w). The peak is at dw: x 24 + loss 4 + seed 4 +
// dw 60 = 92. Everything replicated: 92 + 160 = 252 bytes.
struct MemoryCase {
  int64_t memory;
  bool w_sharded;
  bool b_sharded;
  int64_t planned;  // bytes per device of the plan, in the notes
};

class MemoryAwareTest : public ::testing::TestWithParam<MemoryCase> {};

TEST_P(MemoryAwareTest, ShardsTheFewestBytesThatFit) {
  const MemoryCase& c = GetParam();
  const Planned plan(TrainStepRequest(v1::MEMORY_AWARE, 2, c.memory));
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  EXPECT_EQ(PlacementOf(plan.node("w")), c.w_sharded ? "Shard(0)" : "Replicate");
  EXPECT_EQ(PlacementOf(plan.node("m")), c.w_sharded ? "Shard(0)" : "Replicate");
  EXPECT_EQ(PlacementOf(plan.node("b")), c.b_sharded ? "Shard(0)" : "Replicate");
  EXPECT_EQ(PlacementOf(plan.node("mb")), c.b_sharded ? "Shard(0)" : "Replicate");
  for (const char* name : {"w", "m", "b", "mb"}) {
    const std::string& note = plan.node(name).note();
    EXPECT_THAT(note, HasSubstr("needs 252 bytes (160 of model state, 92 of other values at "
                                "their peak)"))
        << name;
    const bool sharded = PlacementOf(plan.node(name)) == "Shard(0)";
    if (!c.w_sharded && !c.b_sharded) {
      EXPECT_THAT(note, HasSubstr("MEMORY_AWARE: replicated: with every parameter")) << name;
      EXPECT_THAT(note, HasSubstr("within the")) << name;
    } else if (sharded) {
      EXPECT_THAT(note, HasSubstr("MEMORY_AWARE: sharded on dim 0")) << name;
      EXPECT_THAT(note, HasSubstr(absl::StrCat("the plan needs ", c.planned, " bytes"))) << name;
    }
  }
  if (c.w_sharded != c.b_sharded) {
    const char* replicated = c.w_sharded ? "b" : "w";
    EXPECT_THAT(plan.node(replicated).note(),
                HasSubstr(absl::StrCat("MEMORY_AWARE: replicated: with every parameter and "
                                       "optimizer state replicated a device needs 252 bytes")));
    EXPECT_THAT(plan.node(replicated).note(),
                HasSubstr(absl::StrCat("the groups chosen for sharding bring it to ", c.planned,
                                       " bytes, so this one stays whole")));
  }
}

INSTANTIATE_TEST_SUITE_P(Budgets, MemoryAwareTest,
                         ::testing::Values(
                             // Everything fits.
                             MemoryCase{252, false, false, 252},
                             // 1 byte short: the smallest group that closes the gap, {b, mb}.
                             MemoryCase{251, false, true, 236}, MemoryCase{236, false, true, 236},
                             // 17 short: {b, mb} saves only 16, so {w, m}, which closes it alone.
                             MemoryCase{235, true, false, 204},
                             // 64 short: both (they save 64 together; 65 short fails, below).
                             MemoryCase{188, true, true, 188}),
                         [](const ::testing::TestParamInfo<MemoryCase>& info) {
                           return absl::StrCat("memory_", info.param.memory);
                         });

TEST(PlanDataParallel, MemoryAwareFailsWhenEvenShardingEverythingDoesNotFit) {
  const Planned plan(TrainStepRequest(v1::MEMORY_AWARE, 2, 187));
  ASSERT_FALSE(plan.response().ok());
  EXPECT_EQ(plan.response().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(plan.response().status().message()),
              HasSubstr("even with every parameter and optimizer state sharded over 2 devices a "
                        "device needs 188 bytes (96 of model state, 92 of other values at their "
                        "peak), above the 187 bytes of the smallest device 'gpu0'"));
}

TEST(PlanDataParallel, MemoryAwareIsTheDefaultAndUsesTheSmallestDevice) {
  v1::PlanDataParallelRequest request = TrainStepRequest(v1::STYLE_UNSPECIFIED, 2, 1 << 20);
  request.mutable_devices()->mutable_devices(1)->set_available_memory_bytes(251);
  const Planned plan(request);
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  EXPECT_EQ(PlacementOf(plan.node("b")), "Shard(0)");
  EXPECT_EQ(PlacementOf(plan.node("w")), "Replicate");
  EXPECT_THAT(plan.node("b").note(), HasSubstr("251 bytes of the smallest device 'gpu1'"));
}

// ---- Redistributions -----------------------------------------------------------

TEST(PlanDataParallel, PartialsAreReducedOnlyWhereAnOpIsNotLinearInThem) {
  AtenGraph g;
  g.Input("x", {4, 6})  // 96 bytes; its batch sum 24 bytes
      .Op("p", "aten.sum.dim_IntList", {A::Node("x"), A::Ints({0})}, {{6}})
      .Op("doubled", "aten.mul.Tensor", {A::Node("p"), A::Float(2.0)}, {{6}})
      .Op("centred", "aten.sub.Tensor", {A::Node("x"), A::Node("p")}, {{4, 6}})
      .Op("activated", "aten.relu.default", {A::Node("p")}, {{6}})
      .Output({"doubled", "centred", "activated", "p"});
  const Planned plan(g.Request());
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  EXPECT_EQ(PlacementOf(plan.node("doubled")), "Partial(sum)");
  EXPECT_EQ(PlacementOf(plan.node("centred")), "Shard(0)");
  EXPECT_EQ(PlacementOf(plan.node("activated")), "Replicate");
  // One all-reduce of p serves both consumers that need it whole; the
  // output returns values as they lie.
  EXPECT_THAT(plan.redistributions(), ::testing::ElementsAre("p->centred all_reduce 24"));
}

TEST(PlanDataParallel, OpsThatNeedTheWholeBatchGatherIt) {
  AtenGraph g;
  g.Input("x", {4, 6})
      .Op("first", "aten.select.int", {A::Node("x"), A::Int(0), A::Int(0)}, {{6}})
      .Op("spread", "aten.var.correction", {A::Node("x"), A::Ints({0})}, {{6}})
      .Output({"first", "spread"});
  const Planned plan(g.Request());
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  EXPECT_EQ(PlacementOf(plan.node("first")), "Replicate");
  EXPECT_THAT(plan.redistributions(), ::testing::ElementsAre("x->first all_gather 48"));
  const v1::Redistribution& r = plan.response()->redistributions(0);
  EXPECT_EQ(r.from_placement().kind(), v1::Placement::SHARD);
  EXPECT_EQ(r.from_placement().dim(), 0);
}

TEST(PlanDataParallel, ReplicatedOperandsAreCutToTheShardWhereTheyDoNotBroadcast) {
  AtenGraph g;
  g.Input("x", {4, 6})
      .Input("w", {4, 6})
      .Constant("rows", {4, 6})
      .Constant("row", {6})
      .Constant("column", {4, 1})
      .Op("plus_rows", "aten.add.Tensor", {A::Node("x"), A::Node("rows")}, {{4, 6}})
      .Op("plus_row", "aten.add.Tensor", {A::Node("x"), A::Node("row")}, {{4, 6}})
      // A sharded update reading a replicated [4, 6] and a broadcast [4, 1].
      .Op("w2", "aten.sub.Tensor", {A::Node("w"), A::Node("rows")}, {{4, 6}})
      .Op("w3", "aten.mul.Tensor", {A::Node("w2"), A::Node("row")}, {{4, 6}})
      .Output({"plus_rows", "plus_row", "w3"});
  const Planned plan(g.Request({{"w", v1::PARAMETER}}, v1::FULLY_SHARD));
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  EXPECT_EQ(PlacementOf(plan.node("w2")), "Shard(0)");
  EXPECT_EQ(PlacementOf(plan.node("w3")), "Shard(0)");
  EXPECT_THAT(plan.redistributions(), ::testing::ElementsAre("rows->plus_rows local_chunk 0"));
}

TEST(PlanDataParallel, ReplicatedValuesReadPerSampleAreCutToTheShard) {
  // A gather index and loss targets made inside the step (constants of the
  // traced program, replicated) beside a batch-sharded x: each device must
  // read its rows of them, not the whole batch's.
  AtenGraph g;
  g.Input("x", {4, 5})
      .Constant("index", {4, 2})
      .Constant("target", {4, 2})
      .Constant("labels", {4})
      .Constant("one_row", {1, 2})
      .Op("picked", "aten.gather.default", {A::Node("x"), A::Int(1), A::Node("index")}, {{4, 2}})
      .Op("mse", "aten.mse_loss.default", {A::Node("picked"), A::Node("target"), A::Int(1)}, {{}})
      .Op("broadcast_mse", "aten.mse_loss.default",
          {A::Node("picked"), A::Node("one_row"), A::Int(1)}, {{}})
      .Op("logp", "aten._log_softmax.default", {A::Node("x"), A::Int(1), A::Bool(false)},
          {{4, 5}})
      .Op("nll", "aten.nll_loss_forward.default",
          {A::Node("logp"), A::Node("labels"), A::None(), A::Int(1), A::Int(-100)}, {{}, {}})
      .Op("seed", "aten.ones_like.default", {A::Node("mse")}, {{}})
      .Op("dpicked", "aten.mse_loss_backward.default",
          {A::Node("seed"), A::Node("picked"), A::Node("target"), A::Int(1)}, {{4, 2}})
      .Output({"mse", "broadcast_mse", "nll", "dpicked"});
  const Planned plan(g.Request());
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  EXPECT_EQ(PlacementOf(plan.node("picked")), "Shard(0)");
  EXPECT_EQ(PlacementOf(plan.node("dpicked")), "Shard(0)");
  // One cut per value (later consumers reuse it); one_row broadcasts.
  EXPECT_THAT(plan.redistributions(),
              ::testing::ElementsAre("index->picked local_chunk 0", "target->mse local_chunk 0",
                                     "labels->nll local_chunk 0"));
  EXPECT_THAT(plan.node("picked").note(), HasSubstr("reads replicated 'index' per sample"));
  EXPECT_THAT(plan.node("dpicked").note(), HasSubstr("reads replicated 'target' per sample"));
  EXPECT_FALSE(plan.node("picked").ambiguous());
}

TEST(PlanDataParallel, ABatchMergedInsideAnotherDimSaysItsRowsInterleave) {
  // nn.MultiheadAttention's in-projection: [B, S, H] transposed to
  // [S, B, H] and viewed as [S*B, H]. Each device's rows are B/N of every
  // S block: Shard(0) of a contiguous block would be wrong.
  AtenGraph g;
  g.Input("x", {4, 5, 8})
      .Input("w", {8, 8})
      .Constant("pos", {20, 8})
      .Op("xt", "aten.transpose.int", {A::Node("x"), A::Int(1), A::Int(0)}, {{5, 4, 8}})
      .Op("flat", "aten.view.default", {A::Node("xt"), A::Ints({20, 8})}, {{20, 8}})
      .Op("mm", "aten.mm.default", {A::Node("flat"), A::Node("w")}, {{20, 8}})
      .Op("plus", "aten.add.Tensor", {A::Node("mm"), A::Node("pos")}, {{20, 8}})
      .Op("back", "aten.view.default", {A::Node("plus"), A::Ints({5, 4, 8})}, {{5, 4, 8}})
      .Output({"back"});
  const Planned plan(g.Request({{"w", v1::PARAMETER}}));
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  for (const char* name : {"flat", "mm", "plus"}) {
    EXPECT_EQ(PlacementOf(plan.node(name)), "Shard(0)") << name;
    EXPECT_EQ(plan.node(name).placement().interleave(), 5) << name;
  }
  EXPECT_EQ(PlacementOf(plan.node("back")), "Shard(1)");
  EXPECT_EQ(plan.node("back").placement().interleave(), 0);
  EXPECT_EQ(plan.node("xt").placement().interleave(), 0);
  // The replicated [20, 8] is cut to the device's interleaved rows.
  ASSERT_EQ(plan.response()->redistributions_size(), 1);
  const v1::Redistribution& cut = plan.response()->redistributions(0);
  EXPECT_EQ(cut.value(), "pos");
  EXPECT_EQ(cut.collective(), "local_chunk");
  EXPECT_EQ(cut.to_placement().interleave(), 5);
}

TEST(PlanDataParallel, ALossEachDeviceKeepsSaysHowTheDevicesValuesCombine) {
  // An outside checker cannot tell from Shard(0) of a 0-d value whether the
  // devices' losses average (a mean) or add up (a sum, nll's total weight).
  AtenGraph g;
  g.Input("x", {4, 3})
      .Op("mean", "aten.mean.default", {A::Node("x")}, {{}})
      .Op("total", "aten.sum.default", {A::Node("x")}, {{}})
      .Op("seed", "aten.ones_like.default", {A::Node("mean")}, {{}})
      // The seed of a sum loss is 1 on every device, the whole seed: its
      // devices' values average to it too.
      .Op("seed_of_total", "aten.ones_like.default", {A::Node("total")}, {{}})
      .Output({"mean", "total", "seed", "seed_of_total"});
  const Planned plan(g.Request());
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  EXPECT_EQ(PlacementOf(plan.node("mean")), "Shard(0)");
  EXPECT_EQ(plan.node("mean").placement().reduce_op(), "avg");
  EXPECT_EQ(plan.node("total").placement().reduce_op(), "sum");
  EXPECT_EQ(plan.node("seed").placement().reduce_op(), "avg");
  EXPECT_EQ(plan.node("seed_of_total").placement().reduce_op(), "avg");
  EXPECT_EQ(plan.node("x").placement().reduce_op(), "");
}

TEST(PlanDataParallel, ATargetHeldInABufferIsCutToTheShardToo) {
  // mse_loss(out, self.target) with a [4, 2] buffer: replicated, each
  // device takes its rows (local_chunk); sharded on dim 0 under
  // FULLY_SHARD, it already holds them.
  AtenGraph g;
  g.Input("x", {4, 2})
      .Input("target", {4, 2})
      .Op("mse", "aten.mse_loss.default", {A::Node("x"), A::Node("target"), A::Int(1)}, {{}})
      .Output({"mse"});
  const Planned replicated(g.Request({{"target", v1::PARAMETER}}));
  ASSERT_TRUE(replicated.response().ok()) << replicated.response().status();
  EXPECT_THAT(replicated.redistributions(), ::testing::ElementsAre("target->mse local_chunk 0"));
  const Planned sharded(g.Request({{"target", v1::PARAMETER}}, v1::FULLY_SHARD));
  ASSERT_TRUE(sharded.response().ok()) << sharded.response().status();
  EXPECT_EQ(PlacementOf(sharded.node("target")), "Shard(0)");
  EXPECT_THAT(sharded.redistributions(), IsEmpty());
}

// ---- Issue #24, items 9-12 --------------------------------------------------------

TEST(PlanDataParallel, AFlipOfTheBatchGathersItAndOpsOnSamplesTakeTheirRowsAgain) {
  AtenGraph g;
  g.Input("x", {4, 6})  // 96 bytes
      .Input("w", {3, 6})
      .Op("flipped", "aten.flip.default", {A::Node("x"), A::Ints({0})}, {{4, 6}})
      .Op("mirrored", "aten.flip.default", {A::Node("x"), A::Ints({1})}, {{4, 6}})
      // Ops on samples read each device's rows of the flipped batch.
      .Op("activated", "aten.relu.default", {A::Node("flipped")}, {{4, 6}})
      .Op("t", "aten.t.default", {A::Node("w")}, {{6, 3}})
      .Op("projected", "aten.mm.default", {A::Node("flipped"), A::Node("t")}, {{4, 3}})
      // A view of it is replicated too, with the batch still on dim 0.
      .Op("viewed", "aten.view.default", {A::Node("flipped"), A::Ints({4, 2, 3})}, {{4, 2, 3}})
      .Op("viewed_relu", "aten.relu.default", {A::Node("viewed")}, {{4, 2, 3}})
      // The two best rows are not the batch: their consumers use them whole.
      .Op("best", "aten.topk.default", {A::Node("x"), A::Int(2), A::Int(0)}, {{2, 6}, {2, 6}})
      .Op("best_values", "operator.getitem", {A::Node("best"), A::Int(0)}, {{2, 6}})
      .Op("best_relu", "aten.relu.default", {A::Node("best_values")}, {{2, 6}})
      .Output({"mirrored", "activated", "projected", "viewed_relu", "best_relu"});
  const Planned plan(g.Request({{"w", v1::PARAMETER}}));
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  EXPECT_EQ(PlacementOf(plan.node("flipped")), "Replicate");
  EXPECT_EQ(plan.node("flipped").batch_dim(), -1);
  EXPECT_EQ(PlacementOf(plan.node("mirrored")), "Shard(0)");
  EXPECT_EQ(PlacementOf(plan.node("activated")), "Shard(0)");
  EXPECT_EQ(PlacementOf(plan.node("projected")), "Shard(0)");
  EXPECT_EQ(PlacementOf(plan.node("viewed")), "Replicate");
  EXPECT_EQ(PlacementOf(plan.node("viewed_relu")), "Shard(0)");
  EXPECT_EQ(PlacementOf(plan.node("best_relu")), "Replicate");
  // One gather of x serves the flip and topk; each device then cuts its
  // rows of the flip (no traffic), once for relu and mm.
  EXPECT_THAT(plan.redistributions(),
              ::testing::ElementsAre("x->flipped all_gather 48", "flipped->activated local_chunk 0",
                                     "viewed->viewed_relu local_chunk 0"));
}

TEST(PlanDataParallel, NodesComputedFromAGuessSayWhichGuess) {
  AtenGraph g;
  g.Input("x", {4, 4})
      .Input("w", {3, 4})
      .Op("rot", "custom.rot", {A::Node("x")}, {{4, 4}})
      .Op("t", "aten.t.default", {A::Node("w")}, {{4, 3}})
      .Op("y", "aten.mm.default", {A::Node("rot"), A::Node("t")}, {{4, 3}})
      .Op("loss", "aten.mean.default", {A::Node("y")}, {{}})
      .Op("clean", "aten.relu.default", {A::Node("x")}, {{4, 4}})
      .Output({"loss", "clean"});
  const Planned plan(g.Request({{"w", v1::PARAMETER}}));
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  EXPECT_TRUE(plan.node("rot").ambiguous());
  for (const char* name : {"rot", "y", "loss"}) {
    EXPECT_EQ(plan.node(name).guessed_at(), "rot") << name;
  }
  EXPECT_FALSE(plan.node("y").ambiguous());
  for (const char* name : {"x", "w", "t", "clean", "output"}) {
    EXPECT_EQ(plan.node(name).guessed_at(), "") << name;
  }
}

TEST(PlanDataParallel, TrainingBatchNormAllReducesItsStatisticsAsSyncBatchNormDoes) {
  AtenGraph g;
  g.Input("x", {4, 3, 5})
      .Input("w", {3})
      .Input("b", {3})
      .Input("mean", {3})
      .Input("var", {3})
      .Op("bn", "aten.native_batch_norm.default",
          {A::Node("x"), A::Node("w"), A::Node("b"), A::Node("mean"), A::Node("var"),
           A::Bool(true), A::Float(0.1), A::Float(1e-5)},
          {{4, 3, 5}, {3}, {3}})
      .Op("out", "operator.getitem", {A::Node("bn"), A::Int(0)}, {{4, 3, 5}})
      .Op("save_invstd", "operator.getitem", {A::Node("bn"), A::Int(2)}, {{3}})
      .Output({"out", "save_invstd"});
  const Planned plan(g.Request({{"w", v1::PARAMETER},
                                {"b", v1::PARAMETER},
                                {"mean", v1::PARAMETER},
                                {"var", v1::PARAMETER}},
                               v1::REPLICATE, 4));
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  EXPECT_EQ(PlacementOf(plan.node("out")), "Shard(0)");
  EXPECT_EQ(PlacementOf(plan.node("save_invstd")), "Replicate");
  // 2 x 3 float32 statistics = 24 bytes; a ring all-reduce over 4 devices
  // sends 2 x 3/4 of them.
  ASSERT_THAT(plan.redistributions(), ::testing::ElementsAre("x->bn all_reduce 36"));
  const v1::Redistribution& sync = plan.response()->redistributions(0);
  EXPECT_EQ(sync.from_placement().kind(), v1::Placement::PARTIAL);
  EXPECT_EQ(sync.to_placement().kind(), v1::Placement::REPLICATE);
  EXPECT_THAT(sync.statistics(), HasSubstr("sums and sums of squares of 'x'"));
  EXPECT_EQ(plan.response()->communication_bytes_per_step(), 36);
}

TEST(PlanDataParallel, TheBackwardOfAMeanLossSaysItsShardsAreNTimesTheWhole) {
  for (const int devices : {2, 4}) {
    AtenGraph g;
    g.Input("x", {4, 3})
        .Input("w", {5, 3})
        .Op("t", "aten.t.default", {A::Node("w")}, {{3, 5}})
        .Op("y", "aten.mm.default", {A::Node("x"), A::Node("t")}, {{4, 5}})
        .Op("loss", "aten.mean.default", {A::Node("y")}, {{}})
        .Op("seed", "aten.ones_like.default", {A::Node("loss")}, {{}})
        .Op("spread", "aten.expand.default", {A::Node("seed"), A::Ints({4, 5})}, {{4, 5}})
        .Op("dy", "aten.div.Scalar", {A::Node("spread"), A::Int(20)}, {{4, 5}})
        .Op("dy_t", "aten.t.default", {A::Node("dy")}, {{5, 4}})
        .Op("dw", "aten.mm.default", {A::Node("dy_t"), A::Node("x")}, {{5, 3}})
        // A sort over the batch gathers the scaled rows as they are.
        .Op("sorted", "aten.sort.default", {A::Node("dy"), A::Int(0)}, {{4, 5}, {4, 5}})
        .Output({"dw", "sorted"});
    const Planned plan(g.Request({{"w", v1::PARAMETER}}, v1::REPLICATE, devices));
    ASSERT_TRUE(plan.response().ok()) << plan.response().status();
    EXPECT_EQ(plan.node("y").placement().scale(), 0);
    EXPECT_EQ(plan.node("spread").placement().scale(), 0);
    EXPECT_EQ(PlacementOf(plan.node("dy")), "Shard(0)");
    EXPECT_EQ(plan.node("dy").placement().scale(), devices);
    EXPECT_EQ(PlacementOf(plan.node("dy_t")), "Shard(1)");
    EXPECT_EQ(plan.node("dy_t").placement().scale(), devices);
    EXPECT_EQ(PlacementOf(plan.node("dw")), "Partial(avg)");
    EXPECT_EQ(plan.node("dw").placement().scale(), 0);
    EXPECT_EQ(PlacementOf(plan.node("sorted")), "Replicate");
    EXPECT_EQ(plan.node("sorted").placement().scale(), devices);
    const auto& redistributions = plan.response()->redistributions();
    const auto gather =
        std::find_if(redistributions.begin(), redistributions.end(),
                     [](const v1::Redistribution& r) { return r.consumer() == "sorted"; });
    ASSERT_NE(gather, redistributions.end());
    EXPECT_EQ(gather->collective(), "all_gather");
    EXPECT_EQ(gather->from_placement().scale(), devices);
    EXPECT_EQ(gather->to_placement().scale(), devices);
  }
}

// ---- Meshes ---------------------------------------------------------------------

v1::PlanDataParallelRequest OnMesh(std::vector<int32_t> shape, std::vector<std::string> names,
                                   const std::string& axis) {
  int devices = 1;
  for (int32_t size : shape) devices *= size;
  v1::PlanDataParallelRequest request = TrainStepRequest(v1::REPLICATE, devices);
  for (int32_t size : shape) request.mutable_devices()->add_mesh_shape(size);
  for (const std::string& name : names) request.mutable_devices()->add_mesh_axis_names(name);
  request.set_data_parallel_axis(axis);
  return request;
}

TEST(PlanDataParallel, TheDataParallelAxisSetsTheGroupSize) {
  // dp = 4 on a [2, 4] mesh: all_reduce of 60 bytes over 4 devices is 90.
  const Planned named(OnMesh({2, 4}, {"pp", "dp"}, "dp"));
  ASSERT_TRUE(named.response().ok()) << named.response().status();
  EXPECT_EQ(named.redistributions()[0], "dw->mw2 all_reduce 90");
  const Planned one_axis(OnMesh({4}, {}, ""));
  ASSERT_TRUE(one_axis.response().ok()) << one_axis.response().status();
  EXPECT_EQ(one_axis.redistributions()[0], "dw->mw2 all_reduce 90");
}

// ---- Request errors ---------------------------------------------------------------

struct RequestErrorCase {
  const char* name;
  v1::PlanDataParallelRequest request;
  const char* field;
  const char* message;
};

std::vector<RequestErrorCase> RequestErrorCases() {
  std::vector<RequestErrorCase> cases;
  const auto with_roles =
      [](std::initializer_list<std::pair<std::string, v1::PlaceholderRole>> roles) {
        return TrainStep().Request(roles);
      };
  cases.push_back({"unknown_role_node", with_roles({{"nope", v1::PARAMETER}}), "roles[0].node",
                   "no node is called 'nope'"});
  cases.push_back({"role_of_an_op", with_roles({{"w", v1::PARAMETER}, {"t", v1::PARAMETER}}),
                   "roles[1].node",
                   "node 't' is a CALL_FUNCTION; roles are given to placeholders"});
  cases.push_back({"role_twice", with_roles({{"w", v1::PARAMETER}, {"w", v1::OPTIMIZER_STATE}}),
                   "roles[1].node", "placeholder 'w' already has a role (roles[0])"});
  {
    v1::PlanDataParallelRequest request = with_roles({{"w", v1::PARAMETER}});
    request.mutable_roles(0)->set_role(static_cast<v1::PlaceholderRole>(7));
    cases.push_back({"unknown_role", request, "roles[0].role", "unknown role 7"});
  }
  {
    v1::PlanDataParallelRequest request = TrainStepRequest(v1::REPLICATE);
    request.set_style(static_cast<v1::DataParallelStyle>(9));
    cases.push_back({"unknown_style", request, "style", "unknown style 9"});
  }
  {
    v1::PlanDataParallelRequest request = TrainStepRequest(v1::REPLICATE);
    request.clear_devices();
    cases.push_back({"no_devices", request, "devices.devices",
                     "a data-parallel plan needs at least one device"});
  }
  {
    v1::PlanDataParallelRequest request = TrainStepRequest(v1::REPLICATE);
    request.mutable_devices()->mutable_devices(0)->set_available_memory_bytes(-1);
    cases.push_back({"bad_device", request, "devices.devices[0].available_memory_bytes",
                     "must have positive memory"});
  }
  cases.push_back({"unknown_mesh_axis", OnMesh({2, 4}, {"pp", "dp"}, "tp"), "data_parallel_axis",
                   "no mesh axis is called 'tp' (the mesh axes are pp, dp)"});
  cases.push_back({"unnamed_axis_of_2d_mesh", OnMesh({2, 4}, {"pp", "dp"}, ""),
                   "data_parallel_axis", "a 2-D mesh needs the data-parallel axis named"});
  cases.push_back({"axis_without_mesh_names", OnMesh({8}, {}, "dp"), "data_parallel_axis",
                   "the inventory names no mesh axes"});
  {
    v1::PlanDataParallelRequest request = TrainStepRequest(v1::REPLICATE);
    request.set_input_batch_dim(2);
    cases.push_back({"batch_dim_out_of_range", request, "input_batch_dim",
                     "batch dim 2 is out of range for activation input 'x' of shape [4, 3]"});
  }
  {
    v1::PlanDataParallelRequest request = TrainStepRequest(v1::REPLICATE);
    request.mutable_graph()->mutable_nodes(6)->mutable_outputs(0)->set_shape(1, 6);
    cases.push_back({"shape_mismatch", request, "graph.nodes[6].outputs[0].shape",
                     "node 'y' (aten.addmm.default): shape mismatch"});
  }
  {
    v1::PlanDataParallelRequest request = TrainStepRequest(v1::REPLICATE);
    v1::Node* y = request.mutable_graph()->mutable_nodes(6);
    y->set_target("custom.linear");
    y->clear_outputs();
    cases.push_back({"unknown_op_without_shapes", request, "graph.nodes[6].outputs",
                     "node 'y' (custom.linear): an op without a dimension rule"});
  }
  return cases;
}

class RequestErrorTest : public ::testing::TestWithParam<RequestErrorCase> {};

TEST_P(RequestErrorTest, IsInvalidArgumentNamingTheField) {
  const RequestErrorCase& c = GetParam();
  const Planned plan(c.request);
  ASSERT_FALSE(plan.response().ok());
  EXPECT_EQ(plan.response().status().code(), absl::StatusCode::kInvalidArgument)
      << plan.response().status();
  EXPECT_EQ(InvalidFieldPath(plan.response().status()), c.field) << plan.response().status();
  EXPECT_THAT(std::string(plan.response().status().message()), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(Cases, RequestErrorTest, ::testing::ValuesIn(RequestErrorCases()),
                         [](const ::testing::TestParamInfo<RequestErrorCase>& info) {
                           return info.param.name;
                         });

// ---- Cancellation and size --------------------------------------------------------

TEST(PlanDataParallel, StopsWhenCancelled) {
  const Planned plan(TrainStepRequest(v1::REPLICATE), /*cancel=*/true);
  EXPECT_EQ(plan.response().status().code(), absl::StatusCode::kCancelled);
}

// Random graphs of known and unknown ops with random arguments and shapes:
// every one is planned or refused with INVALID_ARGUMENT (FAILED_PRECONDITION
// when MEMORY_AWARE finds no fit), never a crash (run under asan/ubsan too).
TEST(PlanDataParallel, SurvivesRandomGraphs) {
  const char* const kTargets[] = {
      "aten.view.default",
      "aten.reshape.default",
      "aten._reshape_alias.default",
      "aten.expand.default",
      "aten.permute.default",
      "aten.transpose.int",
      "aten.t.default",
      "aten.squeeze.default",
      "aten.squeeze.dim",
      "aten.squeeze.dims",
      "aten.unsqueeze.default",
      "aten.flatten.using_ints",
      "aten.repeat.default",
      "aten.add.Tensor",
      "aten.mul.Tensor",
      "aten.div.Scalar",
      "aten.relu.default",
      "aten.sum.dim_IntList",
      "aten.mean.default",
      "aten.mean.dim",
      "aten.amax.default",
      "aten.var.correction",
      "aten.mm.default",
      "aten.bmm.default",
      "aten.addmm.default",
      "aten.convolution.default",
      "aten.native_layer_norm.default",
      "aten.native_layer_norm_backward.default",
      "aten.convolution_backward.default",
      "aten.nll_loss_forward.default",
      "aten.mse_loss.default",
      "aten.embedding.default",
      "aten.cat.default",
      "aten.split.Tensor",
      "aten.select.int",
      "aten.slice.Tensor",
      "aten.ones_like.default",
      "aten.zeros.default",
      "aten.max_pool2d_with_indices.default",
      "operator.getitem",
      "custom.op",
  };
  std::mt19937 random(20240607);
  auto pick = [&random](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  auto random_shape = [&](int max_rank) {
    Shape shape;
    for (int d = pick(max_rank + 1); d > 0; --d) shape.push_back(pick(5));
    return shape;
  };
  int planned = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    AtenGraph g;
    std::vector<std::string> names = {"x", "w"};
    std::vector<Shape> shapes = {{4, 1 + pick(4), 1 + pick(4)}, random_shape(3)};
    g.Input("x", shapes[0]).Input("w", shapes[1]);
    // A third of the graphs are well formed, the rest a mix.
    const int chaos = trial % 3 == 0 ? 0 : 1 + pick(4);
    for (int i = 0; i < 12; ++i) {
      const std::string name = absl::StrCat("n", i);
      if (pick(5) >= chaos) {
        // Well formed: relu of an earlier node, or its sum over dim 0.
        const int from = pick(static_cast<int>(names.size()));
        Shape shape = shapes[from];
        if (pick(2) == 0 || shape.empty()) {
          g.Op(name, "aten.relu.default", {A::Node(names[from])}, {shape});
        } else {
          shape.erase(shape.begin());
          g.Op(name, "aten.sum.dim_IntList", {A::Node(names[from]), A::Ints({0})}, {shape});
        }
        names.push_back(name);
        shapes.push_back(shape);
        continue;
      }
      std::vector<A> args;
      for (int a = pick(5); a >= 0; --a) {
        switch (pick(7)) {
          case 0:
          case 1:
            args.push_back(A::Node(names[pick(static_cast<int>(names.size()))]));
            break;
          case 2:
            args.push_back(A::Int(pick(9) - 3));
            break;
          case 3:
            args.push_back(A::Ints({pick(6) - 1, pick(6) - 1}));
            break;
          case 4:
            args.push_back(A::Bool(pick(2) == 1));
            break;
          case 5:
            args.push_back(A::None());
            break;
          default:
            args.push_back(A::Bools({true, pick(2) == 1, false}));
            break;
        }
      }
      std::vector<Shape> outputs;
      for (int k = pick(3); k > 0; --k) outputs.push_back(random_shape(4));
      shapes.push_back(outputs.empty() ? Shape{} : outputs.front());
      g.Op(name, kTargets[pick(sizeof(kTargets) / sizeof(kTargets[0]))], std::move(args),
           std::move(outputs));
      names.push_back(name);
    }
    g.Output({names.back()});
    const v1::DataParallelStyle style =
        pick(3) == 0 ? v1::REPLICATE : (pick(2) == 0 ? v1::FULLY_SHARD : v1::MEMORY_AWARE);
    const Planned plan(g.Request({{"w", v1::PARAMETER}}, style, 1 + pick(4), 1 + pick(4096)));
    if (plan.response().ok()) {
      ++planned;
      continue;
    }
    const absl::StatusCode code = plan.response().status().code();
    EXPECT_TRUE(code == absl::StatusCode::kInvalidArgument ||
                code == absl::StatusCode::kFailedPrecondition)
        << plan.response().status();
    if (code == absl::StatusCode::kInvalidArgument) {
      EXPECT_TRUE(InvalidFieldPath(plan.response().status()).has_value())
          << plan.response().status();
    }
  }
  EXPECT_GT(planned, 100);  // the test reaches the planner, not only validation
}

TEST(PlanDataParallel, PlansALargeGraphInOnePass) {
  // 20,000 Linear + ReLU layers with their own parameters: 100,000 nodes.
  constexpr int kLayers = 20000;
  AtenGraph g;
  g.Input("x", {8, 16});
  std::vector<std::pair<std::string, v1::PlaceholderRole>> roles;
  std::string h = "x";
  for (int i = 0; i < kLayers; ++i) {
    const std::string w = absl::StrCat("w", i);
    const std::string t = absl::StrCat("t", i);
    const std::string y = absl::StrCat("y", i);
    const std::string r = absl::StrCat("r", i);
    g.Input(w, {16, 16});
    g.Op(t, "aten.t.default", {A::Node(w)}, {{16, 16}});
    g.Op(y, "aten.mm.default", {A::Node(h), A::Node(t)}, {{8, 16}});
    g.Op(r, "aten.relu.default", {A::Node(y)}, {{8, 16}});
    h = r;
  }
  g.Output({h});
  v1::PlanDataParallelRequest request = g.Request({}, v1::FULLY_SHARD);
  for (int i = 0; i < kLayers; ++i) {
    v1::PlaceholderRoleEntry* role = request.add_roles();
    role->set_node(absl::StrCat("w", i));
    role->set_role(v1::PARAMETER);
  }
  const Planned plan(request);
  ASSERT_TRUE(plan.response().ok()) << plan.response().status();
  EXPECT_EQ(plan.response()->nodes_size(), 4 * kLayers + 2);
  EXPECT_EQ(plan.response()->redistributions_size(), kLayers);  // one all_gather per weight
  EXPECT_EQ(PlacementOf(plan.node(h)), "Shard(0)");
}

}  // namespace
}  // namespace partplan

// AutoShard (fairscale's _split_nodes): walks worked out by hand, the two
// deliberate fixes, `exact`, and every bad input.
#include "planner/pipeline/auto_shard.h"

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/pipeline/pipeline_test_graphs.h"

namespace partplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Walk {
  v1::Graph proto;
  absl::StatusOr<AutoShardResult> result;
  std::vector<std::string> first_nodes;  // names of each shard's first node
};

// The charges and the walk on `source`.
absl::StatusOr<AutoShardResult> ChargeAndWalk(const GraphSource& source,
                                              const AutoShardOptions& options,
                                              std::vector<std::string>* first_nodes) {
  CancellationToken token;
  PARTPLAN_ASSIGN_OR_RETURN(const CompactGraph graph, ImportGraph(source, InputLimits(), token));
  PARTPLAN_ASSIGN_OR_RETURN(const ParameterCharges charges, ModuleParameterCharges(graph, token));
  PARTPLAN_ASSIGN_OR_RETURN(AutoShardResult result, AutoShard(graph, charges, options, token));
  for (NodeId v : result.first_node) first_nodes->emplace_back(graph.name(v));
  return result;
}

// The walk on the graph imported from the message, after checking that the
// graph imported from its bytes, as the server reads it (module targets
// through NodeReader::OwnFields), walks the same.
Walk ShardWalk(const v1::Graph& proto, int32_t shard_count, bool exact = false) {
  AutoShardOptions options;
  options.shard_count = shard_count;
  options.exact = exact;
  Walk walk{proto, absl::UnknownError("not run"), {}};
  walk.result = ChargeAndWalk(walk.proto, options, &walk.first_nodes);
  const std::string bytes = proto.SerializeAsString();
  std::vector<std::string> first_nodes;
  const absl::StatusOr<AutoShardResult> from_bytes =
      ChargeAndWalk(GraphSource::Serialized(bytes), options, &first_nodes);
  EXPECT_EQ(from_bytes.status(), walk.result.status());
  EXPECT_EQ(first_nodes, walk.first_nodes);
  if (from_bytes.ok() && walk.result.ok()) {
    EXPECT_EQ(from_bytes->parameters, walk.result->parameters);
  }
  return walk;
}

// x -> layers_0 -> ... -> layers_{n-1} -> output, `each` parameters per layer.
TestGraphBuilder Chain(int n, int64_t each) {
  TestGraphBuilder b;
  b.Placeholder("x");
  b.AddModule("", n * each);
  b.AddModule("layers", n * each);
  std::string previous = "x";
  for (int i = 0; i < n; ++i) {
    const std::string name = absl::StrCat("layers_", i);
    b.Module(name, absl::StrCat("layers.", i), {previous});
    b.AddModule(absl::StrCat("layers.", i), each);
    previous = name;
  }
  b.Output({previous});
  return b;
}

TEST(AutoShardTest, OpensAShardAfterTheNodePassingTheTarget) {
  // 9 layers of 3: target 27 // 3 = 9; shards close at 12 (4 layers each).
  const Walk walk = ShardWalk(Chain(9, 3).graph(), 3);
  ASSERT_TRUE(walk.result.ok()) << walk.result.status();
  EXPECT_EQ(walk.result->target, 9);
  EXPECT_THAT(walk.first_nodes, ElementsAre("x", "layers_4", "layers_8"));
  EXPECT_THAT(walk.result->parameters, ElementsAre(12, 12, 3));
}

TEST(AutoShardTest, ReachingTheTargetExactlyDoesNotClose) {
  // 6 layers of 4, target 24 // 3 = 8: a shard closes at 12, not at 8.
  const Walk walk = ShardWalk(Chain(6, 4).graph(), 3);
  ASSERT_TRUE(walk.result.ok()) << walk.result.status();
  EXPECT_THAT(walk.first_nodes, ElementsAre("x", "layers_3"));
  EXPECT_THAT(walk.result->parameters, ElementsAre(12, 12));
}

TEST(AutoShardTest, ExactSaysWhyTheParametersMadeFewerShards) {
  const Walk walk = ShardWalk(Chain(6, 4).graph(), 3, /*exact=*/true);
  ASSERT_FALSE(walk.result.ok());
  EXPECT_EQ(walk.result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(walk.result.status().message()),
              HasSubstr("auto_shard makes 2 shards, not the 3 asked for with exact"));
  EXPECT_THAT(std::string(walk.result.status().message()),
              HasSubstr("more than total // shard_count = 24 // 3 = 8 parameters, and the shards "
                        "hold [12, 12]"));
}

TEST(AutoShardTest, ExactAcceptsTheRightCount) {
  const Walk walk = ShardWalk(Chain(9, 3).graph(), 3, /*exact=*/true);
  ASSERT_TRUE(walk.result.ok()) << walk.result.status();
  EXPECT_EQ(walk.result->first_node.size(), 3u);
}

// x -> l0 (6) -> l1 (6) -> l2 (6) -> relu -> add(relu, <skip from l0>):
// target 18 // 2 = 9, so shard 0 is l0, l1 and the skip merges shard 1 back.
TestGraphBuilder SkipBlock() {
  TestGraphBuilder b;
  b.Placeholder("x");
  b.Module("l0", "l0", {"x"});
  b.Module("l1", "l1", {"l0"});
  b.Module("l2", "l2", {"l1"});
  b.Function("relu", {"l2"});
  b.AddModule("", 18);
  for (const char* name : {"l0", "l1", "l2"}) b.AddModule(name, 6);
  return b;
}

TEST(AutoShardTest, ThePreviousNodeIsTheNormalFlowNotASkip) {
  TestGraphBuilder b = SkipBlock();
  b.Function("add", {"relu", "l2"});  // l2 is in the current shard anyway
  b.Output({"add"});
  const Walk walk = ShardWalk(b.graph(), 2);
  ASSERT_TRUE(walk.result.ok()) << walk.result.status();
  // l2 reads l1, the node right before it, from shard 0: no merge.
  EXPECT_THAT(walk.first_nodes, ElementsAre("x", "l2"));
  EXPECT_THAT(walk.result->parameters, ElementsAre(12, 6));
}

TEST(AutoShardTest, APositionalSkipMergesTheShardsItBridges) {
  TestGraphBuilder b = SkipBlock();
  b.Function("add", {"relu", "l0"});
  b.Output({"add"});
  const Walk walk = ShardWalk(b.graph(), 2);
  ASSERT_TRUE(walk.result.ok()) << walk.result.status();
  EXPECT_THAT(walk.first_nodes, ElementsAre("x"));
  EXPECT_THAT(walk.result->parameters, ElementsAre(18));
}

// fairscale scans positional arguments only; these skips are found too.
TEST(AutoShardTest, KeywordAndListSkipsMergeToo) {
  TestGraphBuilder by_keyword = SkipBlock();
  by_keyword.Function("add", {"relu"});
  by_keyword.Kwarg("add", "other", "l0");
  by_keyword.Output({"add"});
  TestGraphBuilder by_list = SkipBlock();
  by_list.Function("cat", {});
  by_list.ListArg("cat", {"relu", "l0"});
  by_list.Output({"cat"});
  for (const TestGraphBuilder* b : {&by_keyword, &by_list}) {
    const Walk walk = ShardWalk(b->graph(), 2);
    ASSERT_TRUE(walk.result.ok()) << walk.result.status();
    EXPECT_THAT(walk.first_nodes, ElementsAre("x"));
  }
}

TEST(AutoShardTest, ExactNamesTheSkipConnectionThatMergedShards) {
  TestGraphBuilder b = SkipBlock();
  b.Function("add", {"relu", "l0"});
  b.Output({"add"});
  const Walk walk = ShardWalk(b.graph(), 2, /*exact=*/true);
  ASSERT_FALSE(walk.result.ok());
  EXPECT_EQ(walk.result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(walk.result.status().message()),
              HasSubstr("1 skip connection merged shards, the first from 'l0' (graph.nodes[1]) "
                        "to 'add' (graph.nodes[5]), which merged shards 0 to 1 back into "
                        "shard 0"));
}

TEST(AutoShardTest, AMergeCancelsAShardOpenedJustBefore) {
  // l1 passes the target; the next node reads l0 (shard 0, not the node
  // before it), so the shard about to open folds back into shard 0.
  TestGraphBuilder b;
  b.Placeholder("x");
  b.Module("l0", "l0", {"x"});
  b.Module("l1", "l1", {"l0"});
  b.Function("add", {"l1", "l0"});
  b.Module("l2", "l2", {"add"});
  b.Output({"l2"});
  b.AddModule("", 18);
  for (const char* name : {"l0", "l1", "l2"}) b.AddModule(name, 6);
  const Walk walk = ShardWalk(b.graph(), 2);
  ASSERT_TRUE(walk.result.ok()) << walk.result.status();
  // add joins shard 0 (now 12 > 9: the next node opens shard 1 again).
  EXPECT_THAT(walk.first_nodes, ElementsAre("x", "l2"));
  EXPECT_THAT(walk.result->parameters, ElementsAre(12, 6));
}

TEST(AutoShardTest, EachCallIsChargedItsOwnModuleOnly) {
  // fairscale would charge the second call, node `layers_0_1`, all of
  // `layers` (the name's prefix before "_"), and get_attr `layers_1_weight`
  // all of `layers` too.
  TestGraphBuilder b;
  b.Placeholder("x");
  b.Module("layers_0", "layers.0", {"x"});
  b.Module("layers_0_1", "layers.0", {"layers_0"});
  b.GetAttr("layers_1_weight");
  b.Function("matmul", {"layers_0_1", "layers_1_weight"});
  b.Output({"matmul"});
  b.AddModule("", 104);
  b.AddModule("layers", 104);
  b.AddModule("layers.0", 4);
  b.AddModule("layers.1", 100);
  const Walk walk = ShardWalk(b.graph(), 1);
  ASSERT_TRUE(walk.result.ok()) << walk.result.status();
  EXPECT_THAT(walk.result->parameters, ElementsAre(8));
}

TEST(AutoShardTest, ExactSaysWhyRepeatedCallsMadeMoreShards) {
  // fc is called five times, each call charged its 4 parameters: 20 charged
  // against a model of 8, so shards of 8 > 4 close every two calls.
  TestGraphBuilder b;
  b.Placeholder("x");
  std::string previous = "x";
  for (int i = 0; i < 5; ++i) {
    const std::string name = i == 0 ? "fc" : absl::StrCat("fc_", i);
    b.Module(name, "fc", {previous});
    previous = name;
  }
  b.Output({previous});
  b.AddModule("", 8);
  b.AddModule("fc", 4);
  const Walk loose = ShardWalk(b.graph(), 2);
  ASSERT_TRUE(loose.result.ok()) << loose.result.status();
  EXPECT_THAT(loose.first_nodes, ElementsAre("x", "fc_2", "fc_4"));
  const Walk walk = ShardWalk(b.graph(), 2, /*exact=*/true);
  ASSERT_FALSE(walk.result.ok());
  EXPECT_EQ(walk.result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(walk.result.status().message()),
              HasSubstr("makes 3 shards, not the 2 asked for with exact: the nodes are charged 20 "
                        "parameters in all, more than the model's 8"));
  EXPECT_THAT(std::string(walk.result.status().message()),
              HasSubstr("e.g. 'fc' by 'fc' (graph.nodes[1]) and 'fc_1' (graph.nodes[2])"));
}

TEST(AutoShardTest, AShardOpenedAfterTheLastNodeIsNotCounted) {
  const Walk walk = ShardWalk(Chain(2, 5).graph(), 2);
  ASSERT_TRUE(walk.result.ok()) << walk.result.status();
  // Target 10 // 2 = 5: layers_0 (5) does not pass it, layers_1 (10) does,
  // and the shard it opens gets no node.
  EXPECT_THAT(walk.first_nodes, ElementsAre("x"));
}

TEST(AutoShardTest, StopsWhenCancelled) {
  CancellationToken token;
  token.Cancel();
  const v1::Graph proto = Chain(3, 1).graph();
  const CompactGraph graph = *ImportGraph(proto, InputLimits(), CancellationToken());
  const ParameterCharges charges = *ModuleParameterCharges(graph, CancellationToken());
  absl::StatusOr<AutoShardResult> result = AutoShard(graph, charges, AutoShardOptions(), token);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
}

struct BadModulesCase {
  std::string name;
  std::function<void(TestGraphBuilder&)> edit;
  std::string field;
  std::string message;
};

// Failure messages name the case instead of dumping its bytes.
void PrintTo(const BadModulesCase& c, std::ostream* os) { *os << c.name; }

class BadModulesTest : public ::testing::TestWithParam<BadModulesCase> {};

TEST_P(BadModulesTest, IsInvalidArgumentNamingTheField) {
  TestGraphBuilder b = Chain(2, 3);
  GetParam().edit(b);
  const Walk walk = ShardWalk(b.graph(), 2);
  ASSERT_FALSE(walk.result.ok());
  EXPECT_EQ(walk.result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InvalidFieldPath(walk.result.status()).value_or("<none>"), GetParam().field);
  EXPECT_THAT(std::string(walk.result.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    AllChecks, BadModulesTest,
    ::testing::ValuesIn(std::vector<BadModulesCase>{
        {"NoModules", [](TestGraphBuilder& b) { b.mutable_graph()->clear_modules(); },
         "graph.modules", "the graph lists no modules"},
        {"NoRoot",
         [](TestGraphBuilder& b) {
           b.mutable_graph()->mutable_modules(0)->set_qualified_name("r");
         },
         "graph.modules", "no root module"},
        {"Twice", [](TestGraphBuilder& b) { b.AddModule("layers.1", 3); },
         "graph.modules[4].qualified_name",
         "module 'layers.1' is listed twice (first as "
         "modules[3])"},
        {"Negative",
         [](TestGraphBuilder& b) {
           b.mutable_graph()->mutable_modules(2)->set_parameter_count(-1);
         },
         "graph.modules[2].parameter_count", "must not be negative"},
        {"UnknownTarget", [](TestGraphBuilder& b) { b.Find("layers_1")->set_target("layers.7"); },
         "graph.nodes[2].target", "module 'layers.7' is not in graph.modules"},
        {"Overflow",
         [](TestGraphBuilder& b) {
           b.mutable_graph()->mutable_modules(2)->set_parameter_count(int64_t{1} << 62);
           b.mutable_graph()->mutable_modules(3)->set_parameter_count(int64_t{1} << 62);
           b.Find("layers_0")->set_target("layers.1");
         },
         "graph.nodes[2].target", "overflow 64 bits"},
    }),
    [](const ::testing::TestParamInfo<BadModulesCase>& info) { return info.param.name; });

TEST(AutoShardOptionsTest, ShardCountMustBePositive) {
  for (int32_t count : {0, -3}) {
    AutoShardOptions options;
    options.shard_count = count;
    const absl::Status status = options.CheckAndSetup();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(InvalidFieldPath(status).value_or("<none>"), "config.shard_count");
  }
  EXPECT_TRUE(AutoShardOptions().CheckAndSetup().ok());
}

}  // namespace
}  // namespace partplan

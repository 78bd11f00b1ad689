#include "planner/graph/graph_import.h"

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "planner/graph/node_fields.h"
#include "tests/planner/test_graphs.h"

namespace partplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What NodeReader::OwnFields gives for node v, as text; checked against
// what Read gives, and empty where OwnFields leaves fields out.
std::string OwnFieldsOf(NodeReader& nodes, NodeId v) {
  const NodeFields& own = nodes.OwnFields(v);
  EXPECT_TRUE(own.args.empty() && own.keywords.empty() && own.outputs.empty());
  const std::string text =
      absl::StrCat(own.name, "|", own.op, "|", own.target, "|", own.module_type, "|",
                   own.has_size_bytes, "|", own.total_bytes, "|", own.output_bytes, "|",
                   own.parameter_count, "|", own.parameter_bytes, "|", own.has_latency, "|",
                   own.memory_latency_seconds, "|", own.compute_latency_seconds, "|", own.flops);
  const v1::Node& node = nodes.Read(v);
  EXPECT_EQ(text,
            absl::StrCat(node.name(), "|", node.op(), "|", node.target(), "|", node.module_type(),
                         "|", node.has_size_bytes(), "|", node.size_bytes().total_bytes(), "|",
                         node.size_bytes().output_bytes(), "|", node.parameter_count(), "|",
                         node.parameter_bytes(), "|", node.has_latency(), "|",
                         node.latency().memory_latency_seconds(), "|",
                         node.latency().compute_latency_seconds(), "|", node.flops()));
  return text;
}

// Expects two imports of one graph to be the same graph.
void ExpectSameGraph(const CompactGraph& a, const CompactGraph& b) {
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  EXPECT_EQ(a.num_edges(), b.num_edges());
  EXPECT_EQ(a.num_op_nodes(), b.num_op_nodes());
  EXPECT_EQ(a.graph_total_bytes(), b.graph_total_bytes());
  EXPECT_EQ(a.has_latencies(), b.has_latencies());
  EXPECT_EQ(a.has_flops(), b.has_flops());
  EXPECT_EQ(a.modules().size(), b.modules().size());
  NodeReader a_nodes(a);
  NodeReader b_nodes(b);
  for (NodeId v = 0; v < a.num_nodes(); ++v) {
    EXPECT_EQ(a.name(v), b.name(v));
    EXPECT_EQ(a.Find(a.name(v)), v);
    EXPECT_EQ(b.Find(b.name(v)), v);
    EXPECT_EQ(a.op(v), b.op(v));
    EXPECT_EQ(a.total_bytes(v), b.total_bytes(v));
    EXPECT_EQ(a.output_bytes(v), b.output_bytes(v));
    EXPECT_EQ(a.latency_seconds(v), b.latency_seconds(v));
    EXPECT_EQ(a.flops(v), b.flops(v));
    EXPECT_THAT(a.inputs(v), ::testing::ElementsAreArray(b.inputs(v)));
    EXPECT_THAT(a.users(v), ::testing::ElementsAreArray(b.users(v)));
    EXPECT_EQ(a_nodes.Read(v).SerializeAsString(), b_nodes.Read(v).SerializeAsString());
    EXPECT_EQ(OwnFieldsOf(a_nodes, v), OwnFieldsOf(b_nodes, v));
  }
}

// Imports `proto` from the message and from its serialised bytes, as the
// server does, and expects the same error or the same graph both ways.
// Returns the import of the message.
absl::StatusOr<CompactGraph> ImportBothWays(const v1::Graph& proto, const InputLimits& limits,
                                            const CancellationToken& token) {
  absl::StatusOr<CompactGraph> parsed = ImportGraph(proto, limits, token);
  const std::string bytes = proto.SerializeAsString();
  const absl::StatusOr<CompactGraph> serialized =
      ImportGraph(GraphSource::Serialized(bytes), limits, token);
  EXPECT_EQ(parsed.status(), serialized.status());
  if (parsed.ok() && serialized.ok()) {
    EXPECT_EQ(parsed->parsed(), &proto);
    EXPECT_EQ(serialized->parsed(), nullptr);
    ExpectSameGraph(*parsed, *serialized);
  }
  // In pieces, as gRPC delivers a large request: nodes across two pieces
  // are copied, the others read in place. (Tiny pieces only for small
  // graphs: a piece per byte of megabytes would be this test's own cost.)
  const std::vector<size_t> piece_sizes =
      bytes.size() <= 4096 ? std::vector<size_t>{1, 5, 64} : std::vector<size_t>{4096};
  for (size_t piece : piece_sizes) {
    std::vector<absl::string_view> pieces;
    for (size_t at = 0; at < bytes.size(); at += piece) {
      pieces.push_back(absl::string_view(bytes).substr(at, piece));
    }
    const absl::StatusOr<CompactGraph> chunked =
        ImportGraph(GraphSource::Serialized(ChunkedBytes(pieces)), limits, token);
    EXPECT_EQ(parsed.status(), chunked.status()) << "pieces of " << piece;
    if (parsed.ok() && chunked.ok()) ExpectSameGraph(*parsed, *chunked);
  }
  return parsed;
}

v1::Graph Diamond() {
  return TestGraph()
      .Placeholder("x", 10)
      .Op("a", {"x"}, 20, 20)
      .Op("b", {"x"}, 30, 30)
      .Op("c", {"a", "b"}, 40, 40)
      .Output({"c"})
      .Build();
}

// Independent faults of several nodes come back together, in node order,
// and a node after a faulty one is checked as if that one were sound.
TEST(ImportGraphTest, ReportsEveryNodeFaultInOnePass) {
  v1::Graph proto = Diamond();
  proto.mutable_nodes(1)->mutable_args(0)->set_node("nowhere");  // a reads an unknown node
  proto.mutable_nodes(2)->mutable_size_bytes()->set_total_bytes(-1);
  proto.mutable_nodes(3)->set_name("a");  // c's name repeats a's
  CancellationToken token;
  absl::StatusOr<CompactGraph> graph = ImportBothWays(proto, InputLimits(), token);
  ASSERT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  auto fields_of = [](const absl::Status& status) {
    std::vector<std::string> fields;
    for (const FieldViolation& violation : FieldViolations(status)) {
      fields.push_back(violation.field);
    }
    return fields;
  };
  // The repeated name ends the check: the output's reference to 'c' would
  // only repeat it.
  EXPECT_THAT(fields_of(graph.status()),
              ::testing::ElementsAre("graph.nodes[1].args[0]",
                                     "graph.nodes[2].size_bytes.total_bytes", "graph.nodes[3].name"))
      << graph.status();
  EXPECT_EQ(InvalidFieldPath(graph.status()).value_or(""), "graph.nodes[1].args[0]");
  EXPECT_THAT(std::string(graph.status().message()), HasSubstr("(and 2 more:"));

  // At most kMaxFieldViolations, and a graph-wide limit stops the pass.
  v1::Graph many = Diamond();
  for (int i = 0; i < 3 * kMaxFieldViolations; ++i) {
    v1::Node* node = many.mutable_nodes()->Add();
    *node = many.nodes(1);
    node->set_name(absl::StrCat("copy", i));
    node->mutable_args(0)->set_node("nowhere");  // each reads an unknown node
    many.mutable_nodes()->SwapElements(many.nodes_size() - 1, many.nodes_size() - 2);
  }
  graph = ImportBothWays(many, InputLimits(), token);
  EXPECT_EQ(FieldViolations(graph.status()).size(), static_cast<size_t>(kMaxFieldViolations));
  InputLimits limits;
  limits.max_values = 5;  // passed at the second copy
  graph = ImportBothWays(many, limits, token);
  EXPECT_THAT(fields_of(graph.status()),
              ::testing::ElementsAre("graph.nodes[4].args[0]", "graph.nodes"))
      << graph.status();
  EXPECT_THAT(std::string(graph.status().message()), HasSubstr("--max_values"));
}

TEST(ImportGraphTest, BuildsAdjacencyInGraphOrder) {
  const v1::Graph proto = Diamond();
  CancellationToken token;
  absl::StatusOr<CompactGraph> graph = ImportBothWays(proto, InputLimits(), token);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->num_nodes(), 5);
  EXPECT_EQ(graph->num_op_nodes(), 3);
  EXPECT_EQ(graph->output_node(), 4);
  EXPECT_THAT(graph->inputs(3), ElementsAre(1, 2));
  EXPECT_THAT(graph->users(0), ElementsAre(1, 2));
  EXPECT_THAT(graph->users(3), ElementsAre(4));
  EXPECT_EQ(graph->graph_total_bytes(), 10 + 20 + 30 + 40);
  EXPECT_EQ(graph->num_edges(), 5);
}

TEST(ImportGraphTest, InputsAreDistinctInFirstUseOrderThroughListsAndKwargs) {
  v1::Graph proto = TestGraph().Placeholder("x", 1).Placeholder("y", 1).Build();
  v1::Node* cat = proto.add_nodes();
  cat->set_name("cat");
  cat->set_op(v1::CALL_FUNCTION);
  cat->set_target("torch.cat");
  // torch.cat([y, [x, y]], dim=1, out=x)
  cat->add_args()->set_list(2);
  cat->add_args()->set_node("y");
  cat->add_args()->set_list(2);
  cat->add_args()->set_node("x");
  cat->add_args()->set_node("y");
  v1::KeywordArgument* dim = cat->add_kwargs();
  dim->set_name("dim");
  dim->add_value()->set_int_(1);
  v1::KeywordArgument* out = cat->add_kwargs();
  out->set_name("out");
  out->add_value()->set_node("x");
  v1::Node* output = proto.add_nodes();
  output->set_name("output");
  output->set_op(v1::OUTPUT);
  output->add_args()->set_node("cat");
  CancellationToken token;
  absl::StatusOr<CompactGraph> graph = ImportBothWays(proto, InputLimits(), token);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_THAT(graph->inputs(2), ElementsAre(1, 0));
}

// ArgumentNodes resolves each node-valued argument, args then kwargs, to the
// node it names: the next new input, or one named before.
TEST(ImportGraphTest, ArgumentNodesFollowTheArgumentsInOrder) {
  v1::Graph proto = TestGraph().Placeholder("x", 1).Placeholder("y", 1).Placeholder("z", 1).Build();
  v1::Node* call = proto.add_nodes();
  call->set_name("call");
  call->set_op(v1::CALL_FUNCTION);
  call->set_target("f");
  // f(y, x, y, [z, x], out=z)
  for (const char* name : {"y", "x", "y"}) call->add_args()->set_node(name);
  call->add_args()->set_list(2);
  call->add_args()->set_node("z");
  call->add_args()->set_node("x");
  v1::KeywordArgument* out = call->add_kwargs();
  out->set_name("out");
  out->add_value()->set_node("z");
  proto.add_nodes()->set_name("output");
  proto.mutable_nodes(4)->set_op(v1::OUTPUT);
  proto.mutable_nodes(4)->add_args()->set_node("call");
  CancellationToken token;
  absl::StatusOr<CompactGraph> graph = ImportBothWays(proto, InputLimits(), token);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ArgumentNodes arguments(*graph, 3);
  std::vector<NodeId> resolved;
  for (const char* name : {"y", "x", "y", "z", "x", "z"}) resolved.push_back(arguments.Next(name));
  EXPECT_THAT(resolved, ElementsAre(1, 0, 1, 2, 0, 2));
}

TEST(ImportGraphTest, DerivesSizesFromShapesLikeTorchFx) {
  v1::Graph proto;
  v1::Node* x = proto.add_nodes();
  x->set_name("x");
  x->set_op(v1::PLACEHOLDER);
  v1::TensorMeta* x_meta = x->add_outputs();
  x_meta->add_shape(4);
  x_meta->add_shape(16);
  x_meta->set_dtype("torch.float32");
  v1::Node* fc = proto.add_nodes();
  fc->set_name("fc");
  fc->set_op(v1::CALL_MODULE);
  fc->add_args()->set_node("x");
  fc->set_parameter_count(272);
  v1::TensorMeta* fc_meta = fc->add_outputs();
  fc_meta->add_shape(4);
  fc_meta->add_shape(16);
  fc_meta->set_dtype("torch.float16");
  v1::Node* output = proto.add_nodes();
  output->set_name("output");
  output->set_op(v1::OUTPUT);
  output->add_args()->set_node("fc");
  CancellationToken token;
  absl::StatusOr<CompactGraph> graph = ImportBothWays(proto, InputLimits(), token);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->output_bytes(0), 4 * 16 * 4);
  EXPECT_EQ(graph->total_bytes(0), 4 * 16 * 4);
  // Parameters are counted at the output's element size, as torch.fx does.
  EXPECT_EQ(graph->output_bytes(1), 4 * 16 * 2);
  EXPECT_EQ(graph->total_bytes(1), (4 * 16 + 272) * 2);
}

TEST(ImportGraphTest, StopsWhenCancelled) {
  const v1::Graph proto = Diamond();
  CancellationToken token;
  token.Cancel();
  EXPECT_EQ(ImportBothWays(proto, InputLimits(), token).status().code(),
            absl::StatusCode::kCancelled);
}

// 200k keyword arguments: the duplicate check stays linear (it was a
// quadratic scan, minutes of CPU that ignored the deadline).
TEST(ImportGraphTest, ManyKeywordArgumentsAreCheckedInLinearTime) {
  v1::Graph proto = Diamond();
  v1::Node* c = proto.mutable_nodes(3);
  constexpr int kKeywords = 200000;
  for (int k = 0; k < kKeywords; ++k) {
    v1::KeywordArgument* kwarg = c->add_kwargs();
    kwarg->set_name("k" + std::to_string(k));
    kwarg->add_value()->set_int_(k);
  }
  CancellationToken token;
  // Parsed and from the bytes (not ImportBothWays: its other checks are
  // not what is timed here).
  const absl::Time start = absl::Now();
  ASSERT_TRUE(ImportGraph(proto, InputLimits(), token).ok());
  v1::KeywordArgument* again = c->add_kwargs();
  again->set_name("k7");
  again->add_value()->set_int_(7);
  const absl::Status status = ImportGraph(proto, InputLimits(), token).status();
  const std::string bytes = proto.SerializeAsString();
  const absl::Status from_bytes =
      ImportGraph(GraphSource::Serialized(bytes), InputLimits(), token).status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(status, from_bytes);
  EXPECT_EQ(InvalidFieldPath(status), "graph.nodes[3].kwargs[200000].name") << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("duplicate keyword argument 'k7'"));
}

// A partition counts an input once per node reading it, so sizes whose
// total fits 64 bits can still make a partition's memory overflow: a is
// 2^62 bytes and b, c, d read it, all in one partition (AOT_BASED takes any
// such assignment). Import refuses such sizes, naming the reader that
// crosses the bound.
TEST(ImportGraphTest, SizesAsPartitionsCountThemMustFit64Bits) {
  constexpr int64_t kHuge = int64_t{1} << 62;
  const v1::Graph fits = TestGraph()
                             .Placeholder("x", 1)
                             .Op("a", {"x"}, kHuge, kHuge)
                             .Op("b", {"x"}, 1, 1)
                             .Output({"a", "b"})
                             .Build();
  CancellationToken token;
  EXPECT_TRUE(ImportBothWays(fits, InputLimits(), token).ok());

  const v1::Graph overflows = TestGraph()
                                  .Placeholder("x", 1)
                                  .Op("a", {"x"}, kHuge, kHuge)
                                  .Op("b", {"a"}, 1, 1)
                                  .Op("c", {"a"}, 1, 1)
                                  .Op("d", {"a"}, 1, 1)
                                  .Output({"b", "c", "d"})
                                  .Build();
  const absl::Status status = ImportBothWays(overflows, InputLimits(), token).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InvalidFieldPath(status), "graph.nodes[2]") << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("node 'b' reads 'a'"));
}

// One malformed graph: how to break a valid one, and the error expected.
struct BadGraphCase {
  std::string name;
  std::function<void(v1::Graph&)> corrupt;
  std::string field;
  std::string message;
};

class BadGraphTest : public ::testing::TestWithParam<BadGraphCase> {};

TEST_P(BadGraphTest, IsInvalidArgumentNamingTheField) {
  v1::Graph proto = Diamond();
  GetParam().corrupt(proto);
  InputLimits limits;
  limits.max_nodes = 100;
  limits.max_values_per_node = 8;
  CancellationToken token;
  absl::StatusOr<CompactGraph> graph = ImportBothWays(proto, limits, token);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << graph.status();
  EXPECT_EQ(InvalidFieldPath(graph.status()).value_or("<none>"), GetParam().field)
      << graph.status();
  EXPECT_THAT(std::string(graph.status().message()), HasSubstr(GetParam().message));
}

v1::Node* NodeAt(v1::Graph& g, int i) { return g.mutable_nodes(i); }

INSTANTIATE_TEST_SUITE_P(
    AllChecks, BadGraphTest,
    ::testing::ValuesIn(std::vector<BadGraphCase>{
        {"Empty", [](v1::Graph& g) { g.clear_nodes(); }, "graph.nodes", "no nodes"},
        {"TooManyNodes",
         [](v1::Graph& g) {
           for (int i = 0; i < 100; ++i) *g.add_nodes() = g.nodes(0);
         },
         "graph.nodes", "above the limit of 100 (--max_nodes)"},
        {"NoName", [](v1::Graph& g) { NodeAt(g, 1)->clear_name(); }, "graph.nodes[1].name",
         "no name"},
        {"DuplicateName", [](v1::Graph& g) { NodeAt(g, 2)->set_name("a"); },
         "graph.nodes[2].name", "duplicate node name 'a' (first used by nodes[1])"},
        {"NoOp", [](v1::Graph& g) { NodeAt(g, 1)->set_op(v1::OP_UNSPECIFIED); },
         "graph.nodes[1].op", "no valid op"},
        {"UnknownOp", [](v1::Graph& g) { NodeAt(g, 1)->set_op(static_cast<v1::Op>(42)); },
         "graph.nodes[1].op", "no valid op (got 42)"},
        {"UnknownReference",
         [](v1::Graph& g) { NodeAt(g, 3)->mutable_args(1)->set_node("nope"); },
         "graph.nodes[3].args[1]", "unknown node 'nope'"},
        {"ForwardReference", [](v1::Graph& g) { NodeAt(g, 1)->mutable_args(0)->set_node("c"); },
         "graph.nodes[1].args[0]", "defined later (nodes[3]); nodes must be in topological order"},
        {"SelfReference", [](v1::Graph& g) { NodeAt(g, 1)->mutable_args(0)->set_node("a"); },
         "graph.nodes[1].args[0]", "refers to itself"},
        {"EmptyValue", [](v1::Graph& g) { NodeAt(g, 1)->add_args(); }, "graph.nodes[1].args[1]",
         "no kind set"},
        {"ListMissingElements", [](v1::Graph& g) { NodeAt(g, 1)->add_args()->set_list(3); },
         "graph.nodes[1].args", "missing 3 of its elements"},
        {"HugeListLength", [](v1::Graph& g) { NodeAt(g, 1)->add_args()->set_tuple(4000000000u); },
         "graph.nodes[1].args", "missing 4000000000 of its elements"},
        {"KwargWithoutName",
         [](v1::Graph& g) { NodeAt(g, 1)->add_kwargs()->add_value()->set_int_(1); },
         "graph.nodes[1].kwargs[0].name", "no name"},
        {"KwargWithoutValue", [](v1::Graph& g) { NodeAt(g, 1)->add_kwargs()->set_name("dim"); },
         "graph.nodes[1].kwargs[0].value", "has no value"},
        {"KwargWithTwoValues",
         [](v1::Graph& g) {
           v1::KeywordArgument* kwarg = NodeAt(g, 1)->add_kwargs();
           kwarg->set_name("dim");
           kwarg->add_value()->set_int_(1);
           kwarg->add_value()->set_int_(2);
         },
         "graph.nodes[1].kwargs[0].value[1]", "exactly one value"},
        {"DuplicateKwarg",
         [](v1::Graph& g) {
           for (int i = 0; i < 2; ++i) {
             v1::KeywordArgument* kwarg = NodeAt(g, 1)->add_kwargs();
             kwarg->set_name("dim");
             kwarg->add_value()->set_int_(1);
           }
         },
         "graph.nodes[1].kwargs[1].name", "duplicate keyword argument 'dim'"},
        {"TooManyValues",
         [](v1::Graph& g) {
           for (int i = 0; i < 8; ++i) NodeAt(g, 1)->add_args()->set_int_(i);
         },
         "graph.nodes[1]", "9 argument values, above the limit of 8"},
        {"NoOutput", [](v1::Graph& g) { g.mutable_nodes()->RemoveLast(); }, "graph.nodes",
         "no OUTPUT node"},
        {"NodeAfterOutput",
         [](v1::Graph& g) {
           v1::Node* late = g.add_nodes();
           late->set_name("late");
           late->set_op(v1::CALL_FUNCTION);
         },
         "graph.nodes[5]", "follows the OUTPUT node 'output'"},
        {"PlaceholderReadingANode",
         [](v1::Graph& g) {
           v1::Node* y = g.mutable_nodes()->Add();
           *y = g.nodes(0);
           y->set_name("y");
           y->add_args()->set_node("x");
           g.mutable_nodes()->SwapElements(4, 5);
         },
         "graph.nodes[4].args", "PLACEHOLDER node 'y' must not refer to other nodes"},
        {"NegativeTotal",
         [](v1::Graph& g) { NodeAt(g, 2)->mutable_size_bytes()->set_total_bytes(-1); },
         "graph.nodes[2].size_bytes.total_bytes", "must not be negative"},
        {"NegativeOutput",
         [](v1::Graph& g) { NodeAt(g, 2)->mutable_size_bytes()->set_output_bytes(-5); },
         "graph.nodes[2].size_bytes.output_bytes", "must not be negative"},
        {"OutputAboveTotal",
         [](v1::Graph& g) { NodeAt(g, 2)->mutable_size_bytes()->set_output_bytes(31); },
         "graph.nodes[2].size_bytes", "output_bytes 31 exceed total_bytes 30"},
        {"TotalOverflow",
         [](v1::Graph& g) {
           NodeAt(g, 2)->mutable_size_bytes()->set_total_bytes(
               std::numeric_limits<int64_t>::max() - 25);
         },
         "graph.nodes[2].size_bytes", "overflows 64 bits"},
        {"NegativeParameters", [](v1::Graph& g) { NodeAt(g, 1)->set_parameter_count(-3); },
         "graph.nodes[1].parameter_count", "must not be negative"},
        {"NegativeParameterBytes", [](v1::Graph& g) { NodeAt(g, 1)->set_parameter_bytes(-3); },
         "graph.nodes[1].parameter_bytes", "must not be negative"},
        // The module hierarchy is checked for every planner, not only
        // ShardGraph's FAIRSCALE, which reads it.
        {"NegativeModuleParameters",
         [](v1::Graph& g) {
           g.add_modules()->set_qualified_name("");
           g.add_modules()->set_qualified_name("fc");
           g.mutable_modules(1)->set_parameter_count(-4);
         },
         "graph.modules[1].parameter_count", "must not be negative"},
        {"NegativeModuleParameterBytes",
         [](v1::Graph& g) { g.add_modules()->set_parameter_bytes(-4); },
         "graph.modules[0].parameter_bytes", "must not be negative"},
        {"ModuleTwice",
         [](v1::Graph& g) {
           g.add_modules()->set_qualified_name("fc");
           g.add_modules()->set_qualified_name("fc");
         },
         "graph.modules[1].qualified_name", "module 'fc' is listed twice (first as modules[0])"},
        {"NanLatency",
         [](v1::Graph& g) {
           NodeAt(g, 1)->mutable_latency()->set_compute_latency_seconds(
               std::numeric_limits<double>::quiet_NaN());
         },
         "graph.nodes[1].latency.compute_latency_seconds", "finite"},
        {"InfiniteMemoryLatency",
         [](v1::Graph& g) {
           NodeAt(g, 1)->mutable_latency()->set_memory_latency_seconds(
               std::numeric_limits<double>::infinity());
         },
         "graph.nodes[1].latency.memory_latency_seconds", "finite"},
        {"NegativeFlops", [](v1::Graph& g) { NodeAt(g, 1)->set_flops(-1); },
         "graph.nodes[1].flops", "not negative"},
        {"NegativeDimension",
         [](v1::Graph& g) { NodeAt(g, 1)->add_outputs()->add_shape(-2); },
         "graph.nodes[1].outputs[0].shape[0]", "must not be negative"},
        {"UnknownDtypeWithoutSizes",
         [](v1::Graph& g) {
           NodeAt(g, 1)->clear_size_bytes();
           NodeAt(g, 1)->add_outputs()->set_dtype("torch.float42");
         },
         "graph.nodes[1].outputs[0].dtype", "unknown dtype 'torch.float42'"},
        {"ShapeOverflow",
         [](v1::Graph& g) {
           NodeAt(g, 1)->clear_size_bytes();
           v1::TensorMeta* meta = NodeAt(g, 1)->add_outputs();
           meta->set_dtype("torch.float64");
           for (int i = 0; i < 4; ++i) meta->add_shape(1 << 20);
         },
         "graph.nodes[1].outputs[0].shape", "overflows 64 bits"},
    }),
    [](const ::testing::TestParamInfo<BadGraphCase>& info) { return info.param.name; });

// What only the serialised import can meet: bytes that are not a graph.
TEST(ImportSerializedGraphTest, NamesTheNodeWhoseBytesDoNotParse) {
  v1::Graph proto = Diamond();
  proto.mutable_nodes(2)->set_target("target_to_corrupt");
  std::string bytes = proto.SerializeAsString();
  bytes[bytes.find("target_to_corrupt")] = '\xff';  // not UTF-8
  CancellationToken token;
  const absl::Status status =
      ImportGraph(GraphSource::Serialized(bytes), InputLimits(), token).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(InvalidFieldPath(status).value_or("<none>"), "graph.nodes[2]") << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("partplan.v1.Node"));
}

TEST(ImportSerializedGraphTest, TruncatedBytesAreTheGraphsError) {
  const std::string bytes = Diamond().SerializeAsString();
  CancellationToken token;
  for (size_t size : {size_t{1}, bytes.size() / 2, bytes.size() - 1}) {
    const absl::Status status =
        ImportGraph(GraphSource::Serialized(absl::string_view(bytes).substr(0, size)),
                    InputLimits(), token, "request.graph")
            .status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << size << ": " << status;
    EXPECT_EQ(InvalidFieldPath(status).value_or("<none>"), "request.graph") << status;
  }
}

TEST(ImportSerializedGraphTest, NodesInterleavedWithOtherFieldsKeepTheirOrder) {
  // Protobuf appends repeated fields in the order they come, wherever the
  // other fields are; the graph's name given twice keeps the last.
  v1::Graph first;
  first.set_name("first");
  *first.add_nodes() = Diamond().nodes(0);
  v1::Graph second;
  second.set_name("second");
  second.add_modules()->set_qualified_name("fc");
  for (int i = 1; i < Diamond().nodes_size(); ++i) *second.add_nodes() = Diamond().nodes(i);
  const std::string bytes = first.SerializeAsString() + second.SerializeAsString();
  v1::Graph merged;
  ASSERT_TRUE(merged.ParseFromString(bytes));
  ASSERT_EQ(merged.name(), "second");
  CancellationToken token;
  absl::StatusOr<CompactGraph> graph =
      ImportGraph(GraphSource::Serialized(bytes), InputLimits(), token);
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<CompactGraph> expected = ImportGraph(merged, InputLimits(), token);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ExpectSameGraph(*expected, *graph);
  ASSERT_EQ(graph->modules().size(), 1);
  EXPECT_EQ(graph->modules().Get(0).qualified_name(), "fc");
}

TEST(ImportSerializedGraphTest, CountsNodesBeyondTheLimitWithoutKeepingThem) {
  v1::Graph proto = Diamond();
  for (int i = 0; i < 50; ++i) *proto.add_nodes() = proto.nodes(0);
  const std::string bytes = proto.SerializeAsString();
  InputLimits limits;
  limits.max_nodes = 10;
  CancellationToken token;
  const absl::Status status = ImportGraph(GraphSource::Serialized(bytes), limits, token).status();
  EXPECT_THAT(std::string(status.message()), HasSubstr("the graph has 55 nodes"));
}

// The count is written once the nodes are found, whether or not they then
// pass the checks, from either source; bytes that are not a graph leave it.
TEST(ImportGraphTest, WritesTheNodeCountWhereTheSourceSays) {
  v1::Graph valid = Diamond();
  v1::Graph invalid = Diamond();
  invalid.mutable_nodes(2)->set_name(invalid.nodes(1).name());
  const std::string valid_bytes = valid.SerializeAsString();
  const std::string invalid_bytes = invalid.SerializeAsString();
  CancellationToken token;
  for (const auto& [graph, ok] :
       std::vector<std::pair<GraphSource, bool>>{{GraphSource(valid), true},
                                                 {GraphSource::Serialized(valid_bytes), true},
                                                 {GraphSource(invalid), false},
                                                 {GraphSource::Serialized(invalid_bytes), false}}) {
    GraphSource source = graph;
    int64_t count = -1;
    source.set_node_count_out(&count);
    EXPECT_EQ(ImportGraph(source, InputLimits(), token).ok(), ok);
    EXPECT_EQ(count, valid.nodes_size()) << (source.parsed() != nullptr ? "parsed" : "serialized");
  }
  int64_t count = -1;
  GraphSource truncated =
      GraphSource::Serialized(absl::string_view(valid_bytes).substr(0, valid_bytes.size() - 1));
  truncated.set_node_count_out(&count);
  EXPECT_FALSE(ImportGraph(truncated, InputLimits(), token).ok());
  EXPECT_EQ(count, -1);
}

TEST(ImportGraphTest, KeepsLatenciesAndFlopsOnlyWhenSomeNodeHasThem) {
  v1::Graph proto = Diamond();
  CancellationToken token;
  absl::StatusOr<CompactGraph> none = ImportBothWays(proto, InputLimits(), token);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_latencies());
  EXPECT_FALSE(none->has_flops());
  EXPECT_EQ(none->latency_seconds(2), -1.0);
  EXPECT_EQ(none->flops(2), 0.0);

  proto.mutable_nodes(2)->mutable_latency()->set_compute_latency_seconds(3);
  proto.mutable_nodes(2)->mutable_latency()->set_memory_latency_seconds(5);
  proto.mutable_nodes(3)->set_flops(7);
  absl::StatusOr<CompactGraph> some = ImportBothWays(proto, InputLimits(), token);
  ASSERT_TRUE(some.ok()) << some.status();
  EXPECT_TRUE(some->has_latencies());
  EXPECT_TRUE(some->has_flops());
  EXPECT_EQ(some->latency_seconds(1), -1.0);
  EXPECT_EQ(some->latency_seconds(2), 5.0);
  EXPECT_EQ(some->latency_seconds(4), -1.0);
  EXPECT_EQ(some->flops(2), 0.0);
  EXPECT_EQ(some->flops(3), 7.0);
  EXPECT_EQ(some->flops(4), 0.0);
}

TEST(ImportSerializedGraphTest, ReadsNodesWhoseLengthIsWrittenLong) {
  // Each node's length as a two-byte varint even when one would do: valid
  // protobuf, though no serialiser writes it; the import copies such nodes.
  const v1::Graph proto = Diamond();
  std::string bytes;
  for (const v1::Node& node : proto.nodes()) {
    const std::string payload = node.SerializeAsString();
    ASSERT_LT(payload.size(), 128u);
    bytes += '\x12';  // field 2 (nodes), length-delimited
    bytes += static_cast<char>(payload.size() | 0x80);
    bytes += '\x00';
    bytes += payload;
  }
  v1::Graph parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  CancellationToken token;
  absl::StatusOr<CompactGraph> expected = ImportGraph(parsed, InputLimits(), token);
  absl::StatusOr<CompactGraph> graph =
      ImportGraph(GraphSource::Serialized(bytes), InputLimits(), token);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(graph.ok()) << graph.status();
  ExpectSameGraph(*expected, *graph);
}

TEST(ImportSerializedGraphTest, KeepsNamesWhereverTheNodeHasThem) {
  // The import copies every name next to the one before it, with room
  // reserved for the names that lead their node's bytes. Here none leads
  // (each node's name comes last), one is given twice (protobuf keeps the
  // last), and one is long enough to outgrow any reservation.
  const std::string long_name(100000, 'n');
  const v1::Graph proto = TestGraph()
                              .Placeholder("x", 10)
                              .Op(long_name, {"x"}, 20, 20)
                              .Op("b", {"x", long_name}, 30, 30)
                              .Op("c", {long_name, "b"}, 40, 40)
                              .Output({"c"})
                              .Build();
  const auto name_field = [](const std::string& name) {
    v1::Node named;
    named.set_name(name);
    return named.SerializeAsString();
  };
  v1::Graph reordered;  // built from bytes, so that the fields keep their order
  std::string bytes;
  for (int i = 0; i < proto.nodes_size(); ++i) {
    v1::Node unnamed = proto.nodes(i);
    unnamed.clear_name();
    std::string payload = unnamed.SerializeAsString() + name_field(proto.nodes(i).name());
    if (i == 2) payload = name_field("overwritten") + payload;
    v1::Graph one_node;
    one_node.add_nodes();
    std::string graph_bytes = one_node.SerializeAsString();  // the tag and a zero length
    ASSERT_EQ(graph_bytes, std::string("\x12\x00", 2));
    graph_bytes.pop_back();
    for (size_t size = payload.size();; size >>= 7) {
      graph_bytes += static_cast<char>((size & 0x7f) | (size >= 0x80 ? 0x80 : 0));
      if (size < 0x80) break;
    }
    bytes += graph_bytes + payload;
  }
  ASSERT_TRUE(reordered.ParseFromString(bytes));
  ASSERT_EQ(reordered.nodes(2).name(), "b");
  ASSERT_EQ(reordered.SerializeAsString(), proto.SerializeAsString());
  CancellationToken token;
  const absl::StatusOr<CompactGraph> expected = ImportGraph(proto, InputLimits(), token);
  const absl::StatusOr<CompactGraph> graph =
      ImportGraph(GraphSource::Serialized(bytes), InputLimits(), token);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(graph.ok()) << graph.status();
  ExpectSameGraph(*expected, *graph);
  EXPECT_EQ(graph->name(1), long_name);
  EXPECT_THAT(graph->inputs(3), ElementsAre(1, 2));
}

TEST(NodeReaderTest, OwnFieldsOfBytesDecodeNodeLeavesToProtobuf) {
  // The middle node's size_bytes given twice, which protobuf merges (the
  // second's output_bytes, the first's total_bytes): DecodeNode declines
  // such bytes, and OwnFields reads them as protobuf parses them.
  v1::Graph proto = TestGraph().Placeholder("x", 10).Op("fc", {"x"}, 40, 20).Output({"fc"}).Build();
  proto.mutable_nodes(1)->set_op(v1::CALL_MODULE);
  proto.mutable_nodes(1)->set_target("layers.0.fc");
  proto.mutable_nodes(1)->set_parameter_count(7);
  v1::Node second_sizes;
  second_sizes.mutable_size_bytes()->set_output_bytes(30);
  const std::string doubled = proto.nodes(1).SerializeAsString() + second_sizes.SerializeAsString();
  NodeFields fields;
  ASSERT_FALSE(DecodeNode(doubled, &fields, NodeParts::kOwnFieldsOnly));
  std::string bytes;
  for (int i = 0; i < proto.nodes_size(); ++i) {
    const std::string payload = i == 1 ? doubled : proto.nodes(i).SerializeAsString();
    ASSERT_LT(payload.size(), 128u);
    bytes += '\x12';  // field 2 (nodes), length-delimited
    bytes += static_cast<char>(payload.size());
    bytes += payload;
  }
  v1::Graph parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  CancellationToken token;
  absl::StatusOr<CompactGraph> graph =
      ImportGraph(GraphSource::Serialized(bytes), InputLimits(), token);
  ASSERT_TRUE(graph.ok()) << graph.status();
  NodeReader nodes(*graph);
  const NodeFields& own = nodes.OwnFields(1);
  EXPECT_EQ(own.name, "fc");
  EXPECT_EQ(own.target, "layers.0.fc");
  EXPECT_EQ(own.parameter_count, 7);
  EXPECT_EQ(own.total_bytes, 40);
  EXPECT_EQ(own.output_bytes, 30);
  const absl::StatusOr<CompactGraph> from_parsed = ImportGraph(parsed, InputLimits(), token);
  ASSERT_TRUE(from_parsed.ok()) << from_parsed.status();
  NodeReader from_parsed_nodes(*from_parsed);
  EXPECT_EQ(OwnFieldsOf(nodes, 1), OwnFieldsOf(from_parsed_nodes, 1));
}

}  // namespace
}  // namespace partplan

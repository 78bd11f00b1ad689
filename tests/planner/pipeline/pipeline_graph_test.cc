// BuildPipelineGraphPlan: pipeline graphs worked out by hand and every
// invalid graph or worker list.
#include "planner/pipeline/pipeline_graph.h"

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "planner/api/entry_points.h"
#include "planner/base/status_util.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/pipeline/pipeline_test_graphs.h"

namespace partplan {
namespace {

using ::testing::HasSubstr;

// The BuildPipelineGraph entry point: BuildPipelineGraphPlan on the
// request's workers, and the response written from its PipelineGraph.
absl::StatusOr<v1::BuildPipelineGraphResponse> Build(const v1::BuildPipelineGraphRequest& request) {
  return BuildPipelineGraph(request, InputLimits(), CancellationToken());
}

void AddWorker(v1::BuildPipelineGraphRequest* request, const std::string& target,
               const std::string& worker) {
  v1::ModuleWorker* entry = request->add_workers();
  entry->set_target(target);
  entry->set_worker(worker);
}

// fairscale's auto_graph_extract test model: a Linear, a module splitting
// its input in two, a Linear on each half, a concatenation, a Linear.
v1::BuildPipelineGraphRequest ShardedLinearRequest() {
  TestGraphBuilder b;
  b.Placeholder("input");
  b.Module("_0", "0", {"input"});
  b.Module("_1_split", "1.split", {"_0"});
  b.Getitem("getitem", "_1_split", 0);
  b.Getitem("getitem_1", "_1_split", 1);
  b.Module("_1_linear_layers_2_0", "1.linear_layers_2.0", {"getitem"});
  b.Module("_1_linear_layers_2_1", "1.linear_layers_2.1", {"getitem_1"});
  b.Module("_1_concatenate", "1.concatenate", {"_1_linear_layers_2_0", "_1_linear_layers_2_1"});
  b.Module("_2", "2", {"_1_concatenate"});
  b.Output({"_2"});
  v1::BuildPipelineGraphRequest request;
  *request.mutable_graph() = b.graph();
  AddWorker(&request, "0", "worker0/cpu");
  AddWorker(&request, "1.split", "worker0/cpu");
  AddWorker(&request, "1.linear_layers_2.0", "worker0/cpu");
  AddWorker(&request, "1.linear_layers_2.1", "worker1/cpu");
  AddWorker(&request, "1.concatenate", "worker1/cpu");
  AddWorker(&request, "2", "worker0/cpu");
  return request;
}

void ExpectEqualProto(const google::protobuf::Message& expected,
                      const google::protobuf::Message& actual) {
  google::protobuf::util::MessageDifferencer differencer;
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(expected, actual)) << differences;
}

v1::BuildPipelineGraphResponse ParseResponse(const std::string& text) {
  v1::BuildPipelineGraphResponse response;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &response)) << text;
  return response;
}

TEST(PipelineGraphTest, ModulesWithTheirInputsWorkersAndCardinalities) {
  const absl::StatusOr<v1::BuildPipelineGraphResponse> response = Build(ShardedLinearRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  ExpectEqualProto(ParseResponse(R"pb(
                     modules {
                       node: "_0"
                       target: "0"
                       worker: "worker0/cpu"
                       inputs { forward_input: 0 }
                     }
                     modules {
                       node: "_1_split"
                       target: "1.split"
                       worker: "worker0/cpu"
                       inputs { module_output { module: 0 } }
                       output_count: 2
                     }
                     modules {
                       node: "_1_linear_layers_2_0"
                       target: "1.linear_layers_2.0"
                       worker: "worker0/cpu"
                       inputs { module_output { module: 1 output_index: 0 } }
                     }
                     modules {
                       node: "_1_linear_layers_2_1"
                       target: "1.linear_layers_2.1"
                       worker: "worker1/cpu"
                       inputs { module_output { module: 1 output_index: 1 } }
                     }
                     modules {
                       node: "_1_concatenate"
                       target: "1.concatenate"
                       worker: "worker1/cpu"
                       inputs { module_output { module: 2 } }
                       inputs { module_output { module: 3 } }
                     }
                     modules {
                       node: "_2"
                       target: "2"
                       worker: "worker0/cpu"
                       inputs { module_output { module: 4 } }
                     }
                     outputs { module_output { module: 5 } }
                   )pb"),
                   *response);
}

TEST(PipelineGraphTest, EachCallIsAModuleOfItsOwn) {
  // `enc` is called twice; fairscale would resolve the reader of the second
  // call to the first. Only module readers set a cardinality: the graph
  // returns element 2 of `pair`, which its reader never takes.
  TestGraphBuilder b;
  b.Placeholder("a");
  b.Placeholder("b");
  b.Module("enc", "enc", {"a"});
  b.Module("enc_1", "enc", {"b"});
  b.Module("pair", "pair", {"enc_1", "enc", "a"});
  b.Getitem("getitem", "pair", 0);
  b.Getitem("getitem_2", "pair", 2);
  b.Module("head", "head", {"getitem"});
  b.Output({"head", "getitem_2", "b"});
  v1::BuildPipelineGraphRequest request;
  *request.mutable_graph() = b.graph();
  AddWorker(&request, "enc", "w0");
  AddWorker(&request, "pair", "w1");
  AddWorker(&request, "head", "w2");
  const absl::StatusOr<v1::BuildPipelineGraphResponse> response = Build(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ExpectEqualProto(ParseResponse(R"pb(
                     modules {
                       node: "enc"
                       target: "enc"
                       worker: "w0"
                       inputs { forward_input: 0 }
                     }
                     modules {
                       node: "enc_1"
                       target: "enc"
                       worker: "w0"
                       inputs { forward_input: 1 }
                     }
                     modules {
                       node: "pair"
                       target: "pair"
                       worker: "w1"
                       inputs { module_output { module: 1 } }
                       inputs { module_output { module: 0 } }
                       inputs { forward_input: 0 }
                       output_count: 1
                     }
                     modules {
                       node: "head"
                       target: "head"
                       worker: "w2"
                       inputs { module_output { module: 2 output_index: 0 } }
                     }
                     outputs { module_output { module: 3 } }
                     outputs { module_output { module: 2 output_index: 2 } }
                     outputs { forward_input: 1 }
                   )pb"),
                   *response);
}

// A module may read one value more than once, and the graph may return one
// more than once: each argument is its own input, in order.
TEST(PipelineGraphTest, ValuesReadTwiceAreInputsTwice) {
  TestGraphBuilder b;
  b.Placeholder("a");
  b.Module("enc", "enc", {"a"});
  b.Module("mix", "mix", {"enc", "enc", "a", "enc"});
  b.Output({"mix", "mix", "enc"});
  v1::BuildPipelineGraphRequest request;
  *request.mutable_graph() = b.graph();
  AddWorker(&request, "mix", "w1");
  AddWorker(&request, "enc", "w0");
  const absl::StatusOr<v1::BuildPipelineGraphResponse> response = Build(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ExpectEqualProto(ParseResponse(R"pb(
                     modules {
                       node: "enc"
                       target: "enc"
                       worker: "w0"
                       inputs { forward_input: 0 }
                     }
                     modules {
                       node: "mix"
                       target: "mix"
                       worker: "w1"
                       inputs { module_output { module: 0 } }
                       inputs { module_output { module: 0 } }
                       inputs { forward_input: 0 }
                       inputs { module_output { module: 0 } }
                     }
                     outputs { module_output { module: 1 } }
                     outputs { module_output { module: 1 } }
                     outputs { module_output { module: 0 } }
                   )pb"),
                   *response);
}

struct BadPipelineCase {
  std::string name;
  std::function<void(v1::BuildPipelineGraphRequest*)> edit;
  std::string field;
  std::string message;
};

// Failure messages name the case instead of dumping its bytes.
void PrintTo(const BadPipelineCase& c, std::ostream* os) { *os << c.name; }

class BadPipelineTest : public ::testing::TestWithParam<BadPipelineCase> {};

TEST_P(BadPipelineTest, IsInvalidArgumentNamingTheField) {
  v1::BuildPipelineGraphRequest request = ShardedLinearRequest();
  GetParam().edit(&request);
  const absl::StatusOr<v1::BuildPipelineGraphResponse> response = Build(request);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_EQ(InvalidFieldPath(response.status()).value_or("<none>"), GetParam().field);
  EXPECT_THAT(std::string(response.status().message()), HasSubstr(GetParam().message));
}

v1::Node* NodeAt(v1::BuildPipelineGraphRequest* request, int i) {
  return request->mutable_graph()->mutable_nodes(i);
}

INSTANTIATE_TEST_SUITE_P(
    AllChecks, BadPipelineTest,
    ::testing::ValuesIn(std::vector<BadPipelineCase>{
        {"CallMethod",
         [](v1::BuildPipelineGraphRequest* r) { NodeAt(r, 8)->set_op(v1::CALL_METHOD); },
         "graph.nodes[8].op",
         "node '_2' (graph.nodes[8]) is a CALL_METHOD; a pipeline graph holds only"},
        {"GetAttr",
         [](v1::BuildPipelineGraphRequest* r) {
           NodeAt(r, 8)->set_op(v1::GET_ATTR);
           NodeAt(r, 8)->clear_args();
         },
         "graph.nodes[8].op", "is a GET_ATTR"},
        {"OtherFunction",
         [](v1::BuildPipelineGraphRequest* r) {
           NodeAt(r, 8)->set_op(v1::CALL_FUNCTION);
           NodeAt(r, 8)->set_target("torch.relu");
         },
         "graph.nodes[8].target", "calls 'torch.relu'"},
        {"ModuleKeyword",
         [](v1::BuildPipelineGraphRequest* r) {
           v1::KeywordArgument* kwarg = NodeAt(r, 8)->add_kwargs();
           kwarg->set_name("mask");
           kwarg->add_value()->set_node("input");
         },
         "graph.nodes[8].kwargs[0]", "takes keyword argument 'mask'"},
        {"ModuleConstant",
         [](v1::BuildPipelineGraphRequest* r) { NodeAt(r, 8)->add_args()->set_int_(3); },
         "graph.nodes[8].args[1]", "takes a constant, list or tuple argument"},
        {"ModuleList",
         [](v1::BuildPipelineGraphRequest* r) {
           v1::Node* node = NodeAt(r, 8);
           node->clear_args();
           node->add_args()->set_list(1);
           node->add_args()->set_node("_1_concatenate");
         },
         "graph.nodes[8].args[0]", "takes a constant, list or tuple argument"},
        {"GetitemOfInput",
         [](v1::BuildPipelineGraphRequest* r) { NodeAt(r, 3)->mutable_args(0)->set_node("input"); },
         "graph.nodes[3].args[0]",
         "reads 'input' (graph.nodes[0]), which is not a pipeline module's output"},
        {"GetitemOfGetitem",
         [](v1::BuildPipelineGraphRequest* r) {
           NodeAt(r, 4)->mutable_args(0)->set_node("getitem");
         },
         "graph.nodes[4].args[0]", "reads 'getitem' (graph.nodes[3]), which is not"},
        {"NegativeIndex",
         [](v1::BuildPipelineGraphRequest* r) { NodeAt(r, 4)->mutable_args(1)->set_int_(-1); },
         "graph.nodes[4].args[1]", "element index -1 out of range"},
        {"NonIntegerIndex",
         [](v1::BuildPipelineGraphRequest* r) {
           NodeAt(r, 4)->mutable_args(1)->set_string("first");
         },
         "graph.nodes[4].args", "an integer constant index"},
        {"WholeAfterElement",
         [](v1::BuildPipelineGraphRequest* r) {
           NodeAt(r, 6)->mutable_args(0)->set_node("_1_split");
         },
         "graph.nodes[6].args[0]",
         "reads the whole output of module '_1_split', whose elements '_1_linear_layers_2_0' "
         "(graph.nodes[5]) reads"},
        {"ElementAfterWhole",
         [](v1::BuildPipelineGraphRequest* r) {
           NodeAt(r, 5)->mutable_args(0)->set_node("_1_split");
         },
         "graph.nodes[6].args[0]",
         "reads element 1 of module '_1_split', whose whole output '_1_linear_layers_2_0' "
         "(graph.nodes[5]) reads"},
        {"NoWorker",
         [](v1::BuildPipelineGraphRequest* r) { r->mutable_workers()->DeleteSubrange(5, 1); },
         "workers", "no worker for module '2', called by '_2' (graph.nodes[8])"},
        {"TwoWorkers", [](v1::BuildPipelineGraphRequest* r) { AddWorker(r, "0", "worker1/cpu"); },
         "workers[6].target", "module '0' has a worker already (workers[0])"},
        {"EmptyWorker",
         [](v1::BuildPipelineGraphRequest* r) { r->mutable_workers(2)->clear_worker(); },
         "workers[2].worker", "no worker for module '1.linear_layers_2.0'"},
        {"EmptyTarget",
         [](v1::BuildPipelineGraphRequest* r) { r->mutable_workers(2)->clear_target(); },
         "workers[2].target", "no module target"},
        {"UnusedWorker", [](v1::BuildPipelineGraphRequest* r) { AddWorker(r, "3", "worker1/cpu"); },
         "workers[6].target", "no call_module node calls module '3'"},
    }),
    [](const ::testing::TestParamInfo<BadPipelineCase>& info) { return info.param.name; });

TEST(PipelineGraphTest, StopsWhenCancelled) {
  const v1::BuildPipelineGraphRequest request = ShardedLinearRequest();
  const CompactGraph graph = *ImportGraph(request.graph(), InputLimits(), CancellationToken());
  const std::vector<PipelineWorker> workers =
      *PipelineWorkersFromRequest(request, CancellationToken());
  CancellationToken token;
  token.Cancel();
  EXPECT_EQ(BuildPipelineGraphPlan(graph, workers, token).status().code(),
            absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace partplan

// Prints PlanDataParallel's answer to a request, for looking at plans while
// writing fixtures or tests:
//
//   bazel run //tests/planner/data_parallel:plan_json -- $PWD/request.json
//
// The file is a PlanDataParallelRequest in proto3 JSON, or a fixture of
// tests/fixtures/data_parallel (whose `request` is taken). Prints the
// response as JSON, or the error, and exits non-zero on error.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "data_parallel_fixture.pb.h"
#include "google/protobuf/util/json_util.h"
#include "planner/data_parallel/data_parallel_plan.h"
#include "planner/graph/graph_import.h"
#include "tests/planner/data_parallel/plan_request.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: plan_json REQUEST.json\n";
    return 2;
  }
  std::ifstream file(argv[1]);
  std::stringstream text;
  text << file.rdbuf();
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  partplan::testing::DataParallelFixture fixture;
  partplan::v1::PlanDataParallelRequest request;
  if (google::protobuf::util::JsonStringToMessage(text.str(), &fixture, options).ok() &&
      fixture.has_request()) {
    request = fixture.request();
  } else if (const auto status =
                 google::protobuf::util::JsonStringToMessage(text.str(), &request, options);
             !status.ok()) {
    std::cerr << argv[1] << ": " << status.ToString() << "\n";
    return 2;
  }
  partplan::CancellationToken token;
  auto graph = partplan::ImportGraph(request.graph(), partplan::InputLimits(), token);
  if (!graph.ok()) {
    std::cerr << graph.status() << "\n";
    return 1;
  }
  auto response = partplan::PlanRequest(*graph, request, token);
  if (!response.ok()) {
    std::cerr << response.status() << "\n";
    return 1;
  }
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(*response, &json, print);
  std::cout << json;
  return 0;
}

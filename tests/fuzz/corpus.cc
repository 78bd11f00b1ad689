#include "tests/fuzz/corpus.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "partplan/v1/planner_service.pb.h"
#include "tests/fuzz/fixture_requests.pb.h"

namespace partplan::fuzz {
namespace {

std::vector<std::string> JsonFiles(const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code error;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, error)) {
    if (entry.path().extension() == ".json") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

bool ParseJson(const std::string& path, google::protobuf::Message* message) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  return google::protobuf::util::JsonStringToMessage(text.str(), message, options).ok();
}

std::string Serialize(const google::protobuf::Message& message) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  message.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

// Every fixture and example, parsed.
struct Inputs {
  std::vector<v1::PartitionGraphRequest> partition;
  std::vector<v1::SplitGraphRequest> split;
  std::vector<v1::ShardGraphRequest> shard;
  std::vector<v1::BuildPipelineGraphRequest> pipeline;
  std::vector<v1::PlanDataParallelRequest> data_parallel;
  std::vector<v1::PlanRequest> plan;
  std::vector<v1::ValidateRequest> validate;
  std::vector<v1::PlanTrainingRequest> training;
};

template <typename Wrapper>
std::vector<Wrapper> Fixtures(const std::string& dir) {
  std::vector<Wrapper> out;
  for (const std::string& path : JsonFiles(dir)) {
    Wrapper wrapper;
    if (ParseJson(path, &wrapper)) out.push_back(std::move(wrapper));
  }
  return out;
}

template <typename Request>
void AddExample(const std::string& root, const std::string& file, std::vector<Request>* out) {
  Request request;
  if (ParseJson(root + "/client/examples/" + file, &request)) out->push_back(std::move(request));
}

Inputs ReadInputs(const std::string& root) {
  Inputs in;
  const std::string fixtures = root + "/tests/fixtures/";
  for (auto& f : Fixtures<PartitionerFixtureRequest>(fixtures + "partitioner")) {
    in.partition.push_back(f.request());
    // The expected assignment, split.
    if (f.expected().assignments_size() > 0) {
      v1::SplitGraphRequest split;
      *split.mutable_graph() = f.request().graph();
      *split.mutable_assignments() = f.expected().assignments();
      in.split.push_back(std::move(split));
    }
  }
  for (auto& f : Fixtures<SplitFixtureRequest>(fixtures + "split_module")) {
    in.split.push_back(f.request());
  }
  for (auto& f : Fixtures<ShardFixtureRequest>(fixtures + "pipeline/auto_shard")) {
    in.shard.push_back(f.request());
  }
  for (auto& f : Fixtures<PipelineFixtureRequest>(fixtures + "pipeline/create_graph")) {
    in.pipeline.push_back(f.request());
  }
  for (auto& f : Fixtures<DataParallelFixtureRequest>(fixtures + "data_parallel")) {
    in.data_parallel.push_back(f.request());
  }
  AddExample(root, "partition_graph.json", &in.partition);
  AddExample(root, "split_graph.json", &in.split);
  AddExample(root, "shard_graph.json", &in.shard);
  AddExample(root, "build_pipeline_graph.json", &in.pipeline);
  AddExample(root, "plan_data_parallel.json", &in.data_parallel);
  AddExample(root, "plan.json", &in.plan);
  AddExample(root, "validate.json", &in.validate);
  AddExample(root, "plan_training.json", &in.training);

  // Graphs (and devices) of every set, for the RPCs that take any graph.
  auto add_graph = [&in](const v1::Graph& graph, const v1::DeviceInventory* devices) {
    v1::ValidateRequest validate;
    *validate.mutable_graph() = graph;
    if (devices != nullptr) *validate.mutable_devices() = *devices;
    in.validate.push_back(validate);
    if (devices != nullptr && devices->devices_size() > 0) {
      v1::PlanTrainingRequest training;
      *training.mutable_graph() = graph;
      *training.mutable_devices() = *devices;
      training.mutable_config()->set_micro_batches(2 * devices->devices_size());
      // A few thousand search nodes: enough to plan, quick on any fixture.
      training.mutable_config()->set_max_search_nodes(2000);
      in.training.push_back(std::move(training));
    }
    v1::ShardGraphRequest shard;
    *shard.mutable_graph() = graph;
    shard.mutable_config()->set_mode(v1::ShardConfig::FAIRSCALE);
    shard.mutable_config()->set_shard_count(2);
    in.shard.push_back(std::move(shard));
  };
  // Every fourth plan asks for nodes by index (NODE_REFERENCES_INDICES).
  int seeds = 0;
  auto node_references = [&seeds] {
    return ++seeds % 4 == 0 ? v1::NODE_REFERENCES_INDICES : v1::NODE_REFERENCES_NAMES;
  };
  for (auto& r : in.partition) {
    add_graph(r.graph(), &r.devices());
    v1::PlanRequest plan;
    *plan.mutable_graph() = r.graph();
    *plan.mutable_devices() = r.devices();
    *plan.mutable_partitioner() = r.config();
    plan.set_node_references(node_references());
    in.plan.push_back(std::move(plan));
    r.set_node_references(node_references());
  }
  for (auto& r : in.shard) {
    v1::PlanRequest plan;
    *plan.mutable_graph() = r.graph();
    *plan.mutable_devices() = r.devices();
    *plan.mutable_shard() = r.config();
    plan.set_node_references(node_references());
    in.plan.push_back(std::move(plan));
    r.set_node_references(node_references());
  }
  for (const auto& r : in.split) add_graph(r.graph(), nullptr);
  for (const auto& r : in.pipeline) add_graph(r.graph(), nullptr);
  for (const auto& r : in.data_parallel) add_graph(r.graph(), &r.devices());
  return in;
}

template <typename Request>
std::vector<std::string> Unique(const std::vector<Request>& requests) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const Request& request : requests) {
    std::string bytes = Serialize(request);
    if (seen.insert(bytes).second) out.push_back(std::move(bytes));
  }
  return out;
}

}  // namespace

std::vector<std::string> SeedRequests(PlannerRpc rpc, const std::string& root) {
  const Inputs in = ReadInputs(root);
  switch (rpc) {
    case PlannerRpc::kPartitionGraph:
      return Unique(in.partition);
    case PlannerRpc::kSplitGraph:
      return Unique(in.split);
    case PlannerRpc::kShardGraph:
      return Unique(in.shard);
    case PlannerRpc::kBuildPipelineGraph:
      return Unique(in.pipeline);
    case PlannerRpc::kPlanDataParallel:
      return Unique(in.data_parallel);
    case PlannerRpc::kPlan:
      return Unique(in.plan);
    case PlannerRpc::kValidate:
      return Unique(in.validate);
    case PlannerRpc::kPlanTraining:
      return Unique(in.training);
    default:  // an RPC without a fuzzer of its own has no seeds
      return {};
  }
}

std::string FuzzerName(PlannerRpc rpc) { return SnakeCaseName(rpc); }

}  // namespace partplan::fuzz

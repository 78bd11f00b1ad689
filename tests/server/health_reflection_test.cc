// gRPC health (service "", "readiness" and the planner services' names) and server reflection, as
// Kubernetes probes and grpcurl use them.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

HealthCheckResponse::ServingStatus CheckHealth(Health::Stub& stub, const std::string& service) {
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  grpc::ClientContext context;
  const grpc::Status status = stub.Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << service << ": " << status.error_message();
  return response.status();
}

TEST(HealthTest, ServingUntilShutdownBeginsThenNotServing) {
  std::unique_ptr<PlannerServer> server = StartTestServer(std::make_unique<FakePlannerBackend>());
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Health::Stub> health = Health::NewStub(ConnectTo(*server));

  EXPECT_EQ(CheckHealth(*health, ""), HealthCheckResponse::SERVING);
  EXPECT_EQ(CheckHealth(*health, kReadinessServiceName), HealthCheckResponse::SERVING);
  EXPECT_EQ(CheckHealth(*health, "partplan.v1.PartitionPlanner"), HealthCheckResponse::SERVING);
  EXPECT_EQ(CheckHealth(*health, "partplan.v1.PartitionPlannerInParts"),
            HealthCheckResponse::SERVING);

  // Once shutdown begins the server takes no new calls, so the change is
  // observed on Watch streams opened before.
  struct Watch {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> stream;
  };
  Watch watches[3];
  const std::string services[3] = {"", kReadinessServiceName, "partplan.v1.PartitionPlanner"};
  for (int i = 0; i < 3; ++i) {
    HealthCheckRequest request;
    request.set_service(services[i]);
    watches[i].context.set_deadline(absl::ToChronoTime(absl::Now() + kTestTimeout));
    watches[i].stream = health->Watch(&watches[i].context, request);
    HealthCheckResponse response;
    ASSERT_TRUE(watches[i].stream->Read(&response)) << services[i];
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING) << services[i];
  }

  std::thread shutdown([&server] { server->Shutdown(); });
  for (int i = 0; i < 3; ++i) {
    HealthCheckResponse response;
    ASSERT_TRUE(watches[i].stream->Read(&response)) << services[i];
    EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING) << services[i];
    // Ends the stream so that the drain need not wait for it.
    watches[i].context.TryCancel();
    watches[i].stream->Finish();
  }
  shutdown.join();
}

// A client of grpc.reflection.v1alpha.ServerReflection. libgrpc++_reflection
// contains the generated reflection classes but Debian installs no header for
// them, and compiling a second copy would register the same protobuf types
// twice. So messages are dynamic, from the descriptor set protoc made of
// Debian's reflection.proto (see BUILD.bazel), and go over a GenericStub.
class ReflectionClient {
 public:
  explicit ReflectionClient(std::shared_ptr<grpc::Channel> channel)
      : channel_(std::move(channel)) {}

  // Loads the descriptor set; call first.
  absl::Status Init() {
    std::ifstream file("tests/server/reflection_v1alpha.desc", std::ios::binary);
    google::protobuf::FileDescriptorSet descriptor_set;
    if (!descriptor_set.ParseFromIstream(&file)) {
      return absl::NotFoundError("cannot read tests/server/reflection_v1alpha.desc");
    }
    for (const auto& file_proto : descriptor_set.file()) {
      if (pool_.BuildFile(file_proto) == nullptr) {
        return absl::InternalError("bad descriptor: " + file_proto.name());
      }
    }
    request_type_ = pool_.FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionRequest");
    response_type_ =
        pool_.FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionResponse");
    if (request_type_ == nullptr || response_type_ == nullptr) {
      return absl::NotFoundError("no ServerReflectionRequest/Response in the descriptor set");
    }
    return absl::OkStatus();
  }

  // Sends one ServerReflectionRequest, given in text format, on its own
  // stream and returns the response.
  absl::StatusOr<std::unique_ptr<google::protobuf::Message>> Call(const std::string& request_text) {
    std::unique_ptr<google::protobuf::Message> request(factory_.GetPrototype(request_type_)->New());
    if (!google::protobuf::TextFormat::ParseFromString(request_text, request.get())) {
      return absl::InvalidArgumentError("bad request text: " + request_text);
    }
    grpc::Slice request_slice(request->SerializeAsString());
    grpc::ByteBuffer request_bytes(&request_slice, 1);

    grpc::GenericStub stub(channel_);
    grpc::CompletionQueue queue;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kTestTimeout));
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(
        &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &queue);
    grpc::ByteBuffer response_bytes;
    grpc::Status status;
    // One step at a time; each completes with its own tag before the next.
    const bool steps_ok =
        Step(queue, [&](void* tag) { call->StartCall(tag); }) &&
        Step(queue,
             [&](void* tag) { call->WriteLast(request_bytes, grpc::WriteOptions(), tag); }) &&
        Step(queue, [&](void* tag) { call->Read(&response_bytes, tag); });
    Step(queue, [&](void* tag) { call->Finish(&status, tag); });
    if (!status.ok()) return absl::UnavailableError(status.error_message());
    if (!steps_ok) return absl::InternalError("the reflection stream failed");

    grpc::Slice response_slice;
    if (!response_bytes.TrySingleSlice(&response_slice).ok() &&
        !response_bytes.DumpToSingleSlice(&response_slice).ok()) {
      return absl::InternalError("cannot read the response bytes");
    }
    std::unique_ptr<google::protobuf::Message> response(
        factory_.GetPrototype(response_type_)->New());
    if (!response->ParseFromArray(response_slice.begin(),
                                  static_cast<int>(response_slice.size()))) {
      return absl::InternalError("cannot parse the response");
    }
    return response;
  }

 private:
  // Starts an operation with a tag and waits for it; true when it succeeded.
  template <typename Start>
  static bool Step(grpc::CompletionQueue& queue, Start start) {
    int tag_storage = 0;
    void* const tag = &tag_storage;
    start(tag);
    void* got_tag = nullptr;
    bool ok = false;
    return queue.Next(&got_tag, &ok) && got_tag == tag && ok;
  }

  std::shared_ptr<grpc::Channel> channel_;
  google::protobuf::DescriptorPool pool_;
  google::protobuf::DynamicMessageFactory factory_{&pool_};
  const google::protobuf::Descriptor* request_type_ = nullptr;
  const google::protobuf::Descriptor* response_type_ = nullptr;
};

// Fields of a dynamic message by name.
const google::protobuf::Message& SubMessage(const google::protobuf::Message& message,
                                            const std::string& field) {
  return message.GetReflection()->GetMessage(message,
                                             message.GetDescriptor()->FindFieldByName(field));
}

class ReflectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartTestServer(std::make_unique<FakePlannerBackend>());
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<ReflectionClient>(ConnectTo(*server_));
    const absl::Status status = client_->Init();
    ASSERT_TRUE(status.ok()) << status;
  }

  // The files the server returns for file_containing_symbol: `symbol`.
  std::vector<google::protobuf::FileDescriptorProto> FilesContaining(const std::string& symbol) {
    std::vector<google::protobuf::FileDescriptorProto> files;
    absl::StatusOr<std::unique_ptr<google::protobuf::Message>> response =
        client_->Call("file_containing_symbol: \"" + symbol + "\"");
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return files;
    const google::protobuf::Message& file_response =
        SubMessage(**response, "file_descriptor_response");
    const google::protobuf::FieldDescriptor* field =
        file_response.GetDescriptor()->FindFieldByName("file_descriptor_proto");
    const google::protobuf::Reflection* reflection = file_response.GetReflection();
    for (int i = 0; i < reflection->FieldSize(file_response, field); ++i) {
      files.emplace_back();
      EXPECT_TRUE(
          files.back().ParseFromString(reflection->GetRepeatedString(file_response, field, i)));
    }
    return files;
  }

  std::unique_ptr<PlannerServer> server_;
  std::unique_ptr<ReflectionClient> client_;
};

TEST_F(ReflectionTest, ListsThePlannerHealthAndReflectionServices) {
  absl::StatusOr<std::unique_ptr<google::protobuf::Message>> response =
      client_->Call("list_services: \"\"");
  ASSERT_TRUE(response.ok()) << response.status();

  const google::protobuf::Message& list = SubMessage(**response, "list_services_response");
  const google::protobuf::FieldDescriptor* services =
      list.GetDescriptor()->FindFieldByName("service");
  std::vector<std::string> names;
  for (int i = 0; i < list.GetReflection()->FieldSize(list, services); ++i) {
    const google::protobuf::Message& service =
        list.GetReflection()->GetRepeatedMessage(list, services, i);
    names.push_back(service.GetReflection()->GetString(
        service, service.GetDescriptor()->FindFieldByName("name")));
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "partplan.v1.PartitionPlanner"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "partplan.v1.PartitionPlannerInParts"),
            names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "grpc.health.v1.Health"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "grpc.reflection.v1alpha.ServerReflection"),
            names.end());
}

// What `grpcurl describe` needs: the file defining each service.
TEST_F(ReflectionTest, DescribesThePlannerAndHealthServices) {
  for (const auto& [symbol, file_name] :
       {std::pair<std::string, std::string>{"partplan.v1.PartitionPlanner",
                                            "partplan/v1/planner_service.proto"},
        {"grpc.health.v1.Health", "grpc/health/v1/health.proto"}}) {
    const std::vector<google::protobuf::FileDescriptorProto> files = FilesContaining(symbol);
    bool found = false;
    for (const auto& file : files) found = found || file.name() == file_name;
    EXPECT_TRUE(found) << symbol << " is not described by " << file_name;
  }
}

}  // namespace
}  // namespace partplan

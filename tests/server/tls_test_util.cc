#include "tests/server/tls_test_util.h"

#include <grpcpp/generic/generic_stub.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.grpc.pb.h"

namespace partplan {
namespace {

constexpr absl::Duration kCallDeadline = absl::Seconds(10);

// Single-quoted for the shell.
std::string Quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallDeadline));
}

}  // namespace

std::string FreshTestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  const int status = std::system(("rm -rf " + Quote(dir) + " && mkdir -p " + Quote(dir)).c_str());
  EXPECT_EQ(status, 0) << "cannot make an empty " << dir;
  return dir;
}

absl::Status MakeCertificate(const std::string& kind, const std::string& dir,
                             const std::string& name, const std::string& ca) {
  const std::string command = absl::StrCat("tests/server/make_cert.sh ", Quote(kind), " ",
                                           Quote(dir), " ", Quote(name), " ", Quote(ca));
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError("failed (is openssl installed?): " + command);
  }
  return absl::OkStatus();
}

std::string ReadTestFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream contents;
  contents << file.rdbuf();
  EXPECT_TRUE(file.good()) << "cannot read " << path;
  return contents.str();
}

absl::Status WriteTestFile(const std::string& path, const std::string& contents) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << contents;
  file.close();
  if (!file) return absl::InternalError("cannot write " + path);
  return absl::OkStatus();
}

SecretVolume::SecretVolume(std::string dir) : dir_(std::move(dir)) { mkdir(dir_.c_str(), 0755); }

absl::Status SecretVolume::Publish(const std::map<std::string, std::string>& files) {
  const std::string version = absl::StrCat("..v", ++version_);
  if (mkdir(path(version).c_str(), 0755) != 0) {
    return absl::InternalError("cannot create " + path(version));
  }
  for (const auto& [name, contents] : files) {
    if (absl::Status status = WriteTestFile(path(version) + "/" + name, contents); !status.ok()) {
      return status;
    }
    // ln -s ..data/<name> <name>, once (later versions find it there).
    if (symlink(("..data/" + name).c_str(), path(name).c_str()) != 0 && errno != EEXIST) {
      return absl::InternalError("cannot link " + path(name));
    }
  }
  // ln -s <version> ..data_tmp && rename: one atomic switch of every file.
  const std::string staged = path("..data_tmp");
  unlink(staged.c_str());
  if (symlink(version.c_str(), staged.c_str()) != 0 ||
      rename(staged.c_str(), path("..data").c_str()) != 0) {
    return absl::InternalError("cannot switch " + path("..data"));
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ChannelCredentials> TlsCredentials(const std::string& ca_pem,
                                                         const std::string& cert_pem,
                                                         const std::string& key_pem) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca_pem;
  options.pem_cert_chain = cert_pem;
  options.pem_private_key = key_pem;
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> ConnectTls(int port,
                                          std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments arguments;
  arguments.SetSslTargetNameOverride("localhost");
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), credentials, arguments);
}

std::shared_ptr<grpc::Channel> ConnectPlaintext(int port) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials(), arguments);
}

grpc::Status CallValidate(const std::shared_ptr<grpc::Channel>& channel, const std::string& token) {
  auto stub = v1::PartitionPlanner::NewStub(channel);
  grpc::ClientContext context;
  SetDeadline(context);
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  v1::ValidateRequest request;
  v1::ValidateResponse response;
  return stub->Validate(&context, request, &response);
}

grpc::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                         bool* serving) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  SetDeadline(context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  *serving = status.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  return status;
}

grpc::Status ListServicesByReflection(const std::shared_ptr<grpc::Channel>& channel,
                                      const std::string& token) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue queue;
  grpc::ClientContext context;
  SetDeadline(context);
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &queue);
  // ServerReflectionRequest{list_services: ""}: field 7, length 0.
  const char request[] = {0x3a, 0x00};
  grpc::Slice slice(request, sizeof(request));
  grpc::ByteBuffer request_bytes(&slice, 1);
  grpc::ByteBuffer response_bytes;
  grpc::Status status;
  // One operation at a time; a failed step is fine, Finish reports why.
  auto step = [&queue](auto start) {
    int tag_storage = 0;
    start(&tag_storage);
    void* tag = nullptr;
    bool ok = false;
    return queue.Next(&tag, &ok) && ok;
  };
  step([&](void* tag) { call->StartCall(tag); });
  step([&](void* tag) { call->WriteLast(request_bytes, grpc::WriteOptions(), tag); });
  const bool read = step([&](void* tag) { call->Read(&response_bytes, tag); });
  step([&](void* tag) { call->Finish(&status, tag); });
  queue.Shutdown();
  void* tag;
  bool ok;
  while (queue.Next(&tag, &ok)) {
  }
  if (status.ok() && !read) return grpc::Status(grpc::StatusCode::INTERNAL, "no response");
  return status;
}

}  // namespace partplan

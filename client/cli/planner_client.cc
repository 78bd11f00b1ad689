#include "client/cli/planner_client.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <iterator>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/cli/message_io.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/channel_arguments.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace cli {

const google::protobuf::ServiceDescriptor& PlannerService() {
  // Reaching the service through a message of its file also makes sure the
  // linker keeps that file's descriptors.
  return *v1::PartitionGraphRequest::descriptor()->file()->FindServiceByName(
      "PartitionPlanner");
}

absl::StatusOr<const google::protobuf::MethodDescriptor*> FindPlannerMethod(
    absl::string_view name) {
  const google::protobuf::ServiceDescriptor& service = PlannerService();
  absl::string_view method_name = name;
  absl::ConsumePrefix(&method_name, "/");
  absl::ConsumePrefix(&method_name, absl::StrCat(service.full_name(), "/"));
  const google::protobuf::MethodDescriptor* method =
      service.FindMethodByName(std::string(method_name));
  if (method == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("unknown method '", name, "' of ", service.full_name(),
                     "; one of ", absl::StrJoin(PlannerMethodNames(), ", ")));
  }
  return method;
}

std::vector<std::string> PlannerMethodNames() {
  const google::protobuf::ServiceDescriptor& service = PlannerService();
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(service.method_count()));
  for (int i = 0; i < service.method_count(); ++i) {
    names.push_back(service.method(i)->name());
  }
  return names;
}

std::shared_ptr<grpc::Channel> ConnectToPlanner(
    const ConnectionOptions& options) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(options.max_message_bytes);
  arguments.SetMaxReceiveMessageSize(options.max_message_bytes);
  if (!options.tls) {
    return grpc::CreateCustomChannel(
        options.target, grpc::InsecureChannelCredentials(), arguments);
  }
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = options.tls_root_certs;
  tls.pem_cert_chain = options.tls_cert_chain;
  tls.pem_private_key = options.tls_private_key;
  if (!options.tls_server_name.empty()) {
    arguments.SetSslTargetNameOverride(options.tls_server_name);
  }
  return grpc::CreateCustomChannel(options.target, grpc::SslCredentials(tls),
                                   arguments);
}

void SetUpCallContext(const ConnectionOptions& options, grpc::ClientContext* context) {
  if (options.deadline != absl::InfiniteDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + options.deadline));
  }
  if (!options.request_id.empty()) {
    context->AddMetadata("x-request-id", options.request_id);
  }
  if (!options.token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options.token);
  }
}

grpc::Status SerializeToByteBuffer(const google::protobuf::MessageLite& message,
                                   grpc::ByteBuffer* buffer) {
  const size_t size = message.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX)) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        absl::StrCat("a ", message.GetTypeName(), " of ", size,
                                     " bytes serialised; protobuf writes at most 2 GiB"));
  }
  grpc::Slice slice(grpc_slice_malloc(size), grpc::Slice::STEAL_REF);
  // The sizes just computed are cached in the message and its parts.
  message.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
  *buffer = grpc::ByteBuffer(&slice, 1);
  return grpc::Status::OK;
}

grpc::Status CallPlanner(std::shared_ptr<grpc::ChannelInterface> channel,
                         const google::protobuf::MethodDescriptor& method,
                         const google::protobuf::Message& request,
                         const ConnectionOptions& options,
                         google::protobuf::Message* response) {
  // The generic stub would send anything; a mismatch is a bug in the caller.
  if (request.GetDescriptor() != method.input_type() ||
      response->GetDescriptor() != method.output_type()) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat(method.full_name(), " takes ",
                     method.input_type()->full_name(), " and returns ",
                     method.output_type()->full_name(), ", not ",
                     request.GetDescriptor()->full_name(), " and ",
                     response->GetDescriptor()->full_name()));
  }
  grpc::ByteBuffer request_bytes;
  if (grpc::Status serialized = SerializeToByteBuffer(request, &request_bytes); !serialized.ok()) {
    return serialized;
  }
  grpc::ByteBuffer response_bytes;
  const grpc::Status result =
      CallPlannerBytes(std::move(channel), method, request_bytes, options, &response_bytes);
  if (!result.ok()) return result;
  grpc::ProtoBufferReader reader(&response_bytes);
  if (!reader.status().ok() || !response->ParseFromZeroCopyStream(&reader)) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        absl::StrCat("the response of ", method.full_name(),
                                     " does not parse as ",
                                     method.output_type()->full_name()));
  }
  return result;
}

grpc::Status CallPlannerBytes(std::shared_ptr<grpc::ChannelInterface> channel,
                              const google::protobuf::MethodDescriptor& method,
                              const grpc::ByteBuffer& request,
                              const ConnectionOptions& options,
                              grpc::ByteBuffer* response) {
  grpc::ClientContext context;
  SetUpCallContext(options, &context);
  const std::string path =
      absl::StrCat("/", method.service()->full_name(), "/", method.name());
  grpc::GenericStub stub(std::move(channel));
  grpc::Status result;
  absl::Notification done;
  stub.UnaryCall(&context, path, grpc::StubOptions(), &request, response,
                 [&result, &done](grpc::Status status) {
                   result = std::move(status);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!result.ok()) return result;
  if (!response->Valid()) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        absl::StrCat(method.full_name(), " ended OK without a response message"));
  }
  return result;
}

namespace {

// The file at `path` in one slice: a regular file read straight into a
// buffer of its size, anything else (a pipe, a device) through ReadFile.
absl::StatusOr<grpc::Slice> ReadFileSlice(absl::string_view path) {
  std::FILE* file = std::fopen(std::string(path).c_str(), "rb");
  if (file == nullptr) return FileReadError(path, errno);
  struct stat info;
  if (fstat(fileno(file), &info) != 0 || !S_ISREG(info.st_mode)) {
    std::fclose(file);
    absl::StatusOr<std::string> contents = ReadFile(path);
    if (!contents.ok()) return contents.status();
    return grpc::Slice(*contents);
  }
  const size_t size = static_cast<size_t>(info.st_size);
  grpc::Slice slice(grpc_slice_malloc(size), grpc::Slice::STEAL_REF);
  uint8_t* data = const_cast<uint8_t*>(slice.begin());
  size_t done = 0;
  while (done < size) {
    const size_t read = std::fread(data + done, 1, size - done, file);
    if (read == 0) break;
    done += read;
  }
  const int read_errno = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (read_errno != 0) return FileReadError(path, read_errno);
  if (done != size) return FileReadError(path, EIO);  // it shrank while read
  return slice;
}

}  // namespace

absl::StatusOr<grpc::ByteBuffer> ReadRequestBytes(absl::string_view path,
                                                  std::istream& standard_input,
                                                  const google::protobuf::Descriptor& type) {
  if (path.empty()) {
    return absl::InvalidArgumentError("no file given (use a path, or '-' for stdin)");
  }
  const std::string source = path == "-" ? "<stdin>" : std::string(path);
  grpc::Slice contents;
  if (path == "-") {
    const std::string read(std::istreambuf_iterator<char>(standard_input), {});
    if (standard_input.bad()) return FileReadError(source, errno);
    contents = grpc::Slice(read);
  } else {
    absl::StatusOr<grpc::Slice> read = ReadFileSlice(path);
    if (!read.ok()) return read.status();
    contents = *std::move(read);
  }
  const absl::string_view text(reinterpret_cast<const char*>(contents.begin()), contents.size());
  if (IsJsonSource(text, source)) {
    std::unique_ptr<google::protobuf::Message> message = NewMessage(&type);
    if (absl::Status status = ParseMessage(text, source, message.get()); !status.ok()) {
      return status;
    }
    grpc::ByteBuffer bytes;
    if (grpc::Status status = SerializeToByteBuffer(*message, &bytes); !status.ok()) {
      return absl::InvalidArgumentError(status.error_message());
    }
    return bytes;
  }
  google::protobuf::io::ArrayInputStream stream(contents.begin(), static_cast<int>(contents.size()));
  if (contents.size() > static_cast<size_t>(INT_MAX) || !WellFormedAtTopLevel(&stream)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a valid binary ", type.full_name(),
                     " (JSON files must end in .json or start with '{')"));
  }
  return grpc::ByteBuffer(&contents, 1);
}
}  // namespace cli
}  // namespace partplan

// One generic way to call any PartitionPlanner RPC: the service's protobuf
// descriptor is the table of methods and of their request/response types,
// and a generic stub sends whichever request message the method takes. The
// CLI thus has a single call path for all seven RPCs, and an RPC added to
// planner_service.proto is callable without touching this code.
//
//   absl::StatusOr<const google::protobuf::MethodDescriptor*> method =
//       partplan::cli::FindPlannerMethod("Validate");
//   std::unique_ptr<google::protobuf::Message> request =
//       partplan::cli::NewMessage((*method)->input_type());  // message_io.h
//   std::unique_ptr<google::protobuf::Message> response =
//       partplan::cli::NewMessage((*method)->output_type());
//   ConnectionOptions options;  // localhost:50051, 30 s deadline
//   grpc::Status status = partplan::cli::CallPlanner(
//       partplan::cli::ConnectToPlanner(options), **method, *request,
//       options, response.get());
#ifndef PARTPLAN_CLIENT_CLI_PLANNER_CLIENT_H_
#define PARTPLAN_CLIENT_CLI_PLANNER_CLIENT_H_

#include <istream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/byte_buffer.h"

namespace partplan {
namespace cli {

// Where and how to call the service.
struct ConnectionOptions {
  // gRPC target, e.g. "localhost:50051" or "dns:///planner.ns.svc:50051".
  std::string target = "localhost:50051";
  // Time allowed for the whole call; absl::InfiniteDuration() for none.
  absl::Duration deadline = absl::Seconds(30);
  // Sent as `x-request-id` metadata when not empty, to find the call in the
  // server's logs.
  std::string request_id;
  // Largest message sent or received. Plans of big graphs exceed gRPC's
  // 4 MiB default; the server has its own limit.
  int max_message_bytes = 256 << 20;
  // TLS instead of plaintext. The PEM contents below (not paths) are used
  // only with TLS.
  bool tls = false;
  // CAs to verify the server with; empty: gRPC's default roots.
  std::string tls_root_certs;
  // Client certificate chain and private key, for mutual TLS; both or none.
  std::string tls_cert_chain;
  std::string tls_private_key;
  // The name the server's certificate must carry, when it is not the host
  // of `target` (e.g. dialling an IP address).
  std::string tls_server_name;
  // Sent as `authorization: Bearer <token>` metadata when not empty.
  std::string token;
};

// partplan.v1.PartitionPlanner, from the descriptors compiled into this
// binary.
const google::protobuf::ServiceDescriptor& PlannerService();

// The method called `name`: "PartitionGraph", or grpcurl's spelling
// "partplan.v1.PartitionPlanner/PartitionGraph" (with or without a leading
// '/'). NOT_FOUND listing the methods otherwise.
absl::StatusOr<const google::protobuf::MethodDescriptor*> FindPlannerMethod(
    absl::string_view name);

// Names of all the service's methods, in declaration order.
std::vector<std::string> PlannerMethodNames();

// A channel to `options.target`, over TLS when `options.tls` (else
// plaintext), with the message size limits. Connection and handshake
// failures show up as UNAVAILABLE from CallPlanner.
std::shared_ptr<grpc::Channel> ConnectToPlanner(
    const ConnectionOptions& options);

// Sets up `context` for one call with the deadline, request id and token of
// `options`.
void SetUpCallContext(const ConnectionOptions& options, grpc::ClientContext* context);

// `message` serialised into `*buffer`, in one slice, its size computed once.
// gRPC's own protobuf serialisation (what generated stubs and a generic stub
// of messages use) asks the message for its size to choose a buffer, then
// protobuf asks again before writing: two walks of every field before the
// one that writes. On a large graph that extra walk is a noticeable part
// of the call (docs/performance.md). INTERNAL when the message is 2 GiB
// or more, which protobuf cannot write.
grpc::Status SerializeToByteBuffer(const google::protobuf::MessageLite& message,
                                   grpc::ByteBuffer* buffer);

// Calls `method` with `request` (of its input type) and blocks until the
// response (of its output type) is in `*response` or the call fails. Applies
// the deadline, request id and token of `options`. INVALID_ARGUMENT, without a
// call, when the messages are not of the method's types. The request is
// serialised by SerializeToByteBuffer, and the response parsed into
// `*response` as it is (on its arena, if it has one); INTERNAL when the
// response does not parse, or a call ends OK without one.
grpc::Status CallPlanner(std::shared_ptr<grpc::ChannelInterface> channel,
                         const google::protobuf::MethodDescriptor& method,
                         const google::protobuf::Message& request,
                         const ConnectionOptions& options,
                         google::protobuf::Message* response);

// CallPlanner on bytes: `request` must be a serialised message of the
// method's input type, sent as it is; `*response` receives the response's
// bytes unparsed. INTERNAL when a call ends OK without a response. What a
// large request costs the CLI: no parse and no second copy.
grpc::Status CallPlannerBytes(std::shared_ptr<grpc::ChannelInterface> channel,
                              const google::protobuf::MethodDescriptor& method,
                              const grpc::ByteBuffer& request,
                              const ConnectionOptions& options,
                              grpc::ByteBuffer* response);

// The request in the file at `path` ("-": `standard_input`) as bytes to send
// to a method taking `type`. A binary file is sent as read, into one buffer:
// it is checked only to be well-formed protobuf at its top level (each
// field's tag, and each length within the file), and the server reports
// what else is wrong, naming the field. A JSON file (message_io.h decides
// which) is parsed into `type` and serialised. Errors as ReadMessageFile's.
absl::StatusOr<grpc::ByteBuffer> ReadRequestBytes(absl::string_view path,
                                                  std::istream& standard_input,
                                                  const google::protobuf::Descriptor& type);

}  // namespace cli
}  // namespace partplan

#endif  // PARTPLAN_CLIENT_CLI_PLANNER_CLIENT_H_

// ByteBufferOf: an absl::Cord's bytes as a grpc::ByteBuffer, without a copy:
// a slice per piece of the Cord, which they share until gRPC lets go of the
// last of them. How the server hands gRPC a response (or a request joined
// from parts) built as a Cord.
//
//   grpc::ByteBuffer buffer = ByteBufferOf(std::move(response_bytes));
#ifndef PARTPLAN_SERVER_CORD_BYTE_BUFFER_H_
#define PARTPLAN_SERVER_CORD_BYTE_BUFFER_H_

#include <grpcpp/support/byte_buffer.h>

#include "absl/strings/cord.h"

namespace partplan {

grpc::ByteBuffer ByteBufferOf(absl::Cord bytes);

}  // namespace partplan

#endif  // PARTPLAN_SERVER_CORD_BYTE_BUFFER_H_

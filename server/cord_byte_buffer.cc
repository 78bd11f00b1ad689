#include "server/cord_byte_buffer.h"

#include <grpc/slice.h>
#include <grpcpp/support/slice.h>

#include <memory>
#include <utility>
#include <vector>

namespace partplan {

grpc::ByteBuffer ByteBufferOf(absl::Cord bytes) {
  using SharedBytes = std::shared_ptr<const absl::Cord>;
  const auto owned = std::make_shared<const absl::Cord>(std::move(bytes));
  std::vector<grpc::Slice> slices;
  for (const absl::string_view piece : owned->Chunks()) {
    slices.emplace_back(
        grpc_slice_new_with_user_data(
            const_cast<char*>(piece.data()), piece.size(),
            [](void* owner) { delete static_cast<SharedBytes*>(owner); }, new SharedBytes(owned)),
        grpc::Slice::STEAL_REF);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace partplan

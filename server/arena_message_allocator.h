// ArenaMessageAllocator: places each call's request and response on one
// protobuf Arena, freed in one go when the call is done.
//
// A 10^6-node graph is millions of small messages and strings; parsing it
// and building its plan on an arena turns each of those allocations into a
// pointer bump and makes freeing them nearly free (see docs in README's
// Performance section).
//
//   ArenaMessageAllocator<v1::ValidateRequest, v1::ValidateResponse> allocator;
//   service.SetMessageAllocatorFor_Validate(&allocator);  // outlives the server
#ifndef PARTPLAN_SERVER_ARENA_MESSAGE_ALLOCATOR_H_
#define PARTPLAN_SERVER_ARENA_MESSAGE_ALLOCATOR_H_

#include <google/protobuf/arena.h>
#include <grpcpp/support/message_allocator.h>

namespace partplan {

// The options of every call's arena: small calls fit the first block; large
// ones grow to big blocks fast.
inline google::protobuf::ArenaOptions CallArenaOptions() {
  google::protobuf::ArenaOptions options;
  options.start_block_size = 16 << 10;
  options.max_block_size = 8 << 20;
  return options;
}

template <typename Request, typename Response>
class ArenaMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder(); }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(CallArenaOptions()) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    google::protobuf::Arena arena_;
  };
};

}  // namespace partplan

#endif  // PARTPLAN_SERVER_ARENA_MESSAGE_ALLOCATOR_H_

// The protobuf Arena each call's request (its fields but the graph, which is
// read from its bytes) and response live on, freed in one go when gRPC is
// done with the call.
//
// A 10^6-node plan is millions of small messages and strings; building it
// on an arena turns each of those allocations into a pointer bump and makes
// freeing them nearly free (docs/performance.md).
//
//   google::protobuf::Arena arena(CallArenaOptions());
//   auto* request =
//   google::protobuf::Arena::CreateMessage<v1::ValidateRequest>(&arena);
#ifndef PARTPLAN_SERVER_CALL_ARENA_H_
#define PARTPLAN_SERVER_CALL_ARENA_H_

#include <google/protobuf/arena.h>

namespace partplan {

// Small calls fit the first block; large ones grow to big blocks fast.
inline google::protobuf::ArenaOptions CallArenaOptions() {
  google::protobuf::ArenaOptions options;
  options.start_block_size = 16 << 10;
  options.max_block_size = 8 << 20;
  return options;
}

}  // namespace partplan

#endif  // PARTPLAN_SERVER_CALL_ARENA_H_

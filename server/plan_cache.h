// PlanCache: the responses of recent planning calls, so that a repeated
// identical request is answered without parsing or planning it again.
//
// Keyed by the SHA-256 of the RPC name and the request's bytes as received
// (planners are deterministic: the same request always gets the same plan),
// it holds each response as the bytes sent, so a hit costs a hash of the
// request and a reference to those bytes. Bounded by the bytes of the
// responses it holds, least recently used first out. Thread-safe.
//
//   PlanCache cache(64 << 20);
//   const std::optional<std::string> key = PlanCache::Key("PartitionGraph", request_bytes);
//   PlanCache::Entry found;
//   if (key && cache.Lookup(*key, &found)) {
//     response_bytes->Swap(&found.response);
//   } else {
//     ... parse, plan and serialise into *response_bytes ...
//     if (key) cache.Insert(*key, {*response_bytes, nodes, devices});
//   }
//
// A cached response is returned as it was first made, its planner_seconds
// included. Requests that mean the same but are encoded differently (fields
// in another order, unknown fields) are different keys: clients that build
// requests with protobuf's serialiser send the same bytes each time.
#ifndef PARTPLAN_SERVER_PLAN_CACHE_H_
#define PARTPLAN_SERVER_PLAN_CACHE_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace partplan {

class PlanCache {
 public:
  // A cached answer: the serialised response, and the size of the request's
  // graph for the metrics and log line of a call answered without parsing.
  struct Entry {
    grpc::ByteBuffer response;
    int nodes = 0;
    int devices = 0;
  };

  // Holds at most `capacity_bytes` of serialised responses; a response
  // larger than that is never cached.
  explicit PlanCache(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // The key of `request` (its serialised bytes) sent to `rpc`: the
  // kKeyBytes of a SHA-256. Reads the buffer's slices in place. None for a
  // buffer that cannot be read (a call without a message).
  static constexpr size_t kKeyBytes = 32;
  static std::optional<std::string> Key(absl::string_view rpc, const grpc::ByteBuffer& request);

  // Copies the entry of `key` into `found` (the response's bytes are shared,
  // not copied); false, and `found` untouched, when `key` is not there.
  bool Lookup(const std::string& key, Entry* found);
  // Keeps `entry` unless its response is not a valid buffer, is larger than
  // the whole cache, or `key` is there already.
  void Insert(const std::string& key, Entry entry);

  int64_t bytes() const {
    absl::MutexLock lock(&mu_);
    return bytes_;
  }

 private:
  using KeyedEntry = std::pair<std::string, Entry>;

  static int64_t SizeOf(const KeyedEntry& entry) {
    return static_cast<int64_t>(entry.first.size() + entry.second.response.Length());
  }
  // Unlinks the least recently used entries until the cache fits its bound;
  // returns them, to be freed once the lock is released.
  std::list<KeyedEntry> EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t capacity_bytes_;
  mutable absl::Mutex mu_;
  std::list<KeyedEntry> entries_ ABSL_GUARDED_BY(mu_);  // most recently used first
  absl::flat_hash_map<std::string, std::list<KeyedEntry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace partplan

#endif  // PARTPLAN_SERVER_PLAN_CACHE_H_

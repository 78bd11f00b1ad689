// PlanCache: the responses of recent planning calls, so that a repeated
// identical request is answered without planning again.
//
// Keyed by the SHA-256 of the RPC name and the request's serialization
// (planners are deterministic: the same request always gets the same plan),
// bounded by the bytes of the serialized responses it holds, least recently
// used first out. Thread-safe.
//
//   PlanCache cache(64 << 20);
//   const std::string key = PlanCache::Key("PartitionGraph", request);
//   if (!cache.Lookup(key, &response)) {
//     ... plan into response ...
//     cache.Insert(key, response);
//   }
//
// A cached response is returned as it was first made, its planner_seconds
// included.
#ifndef PARTPLAN_SERVER_PLAN_CACHE_H_
#define PARTPLAN_SERVER_PLAN_CACHE_H_

#include <cstdint>
#include <list>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/message.h"

namespace partplan {

class PlanCache {
 public:
  // Holds at most `capacity_bytes` of serialized responses; a response
  // larger than that is never cached.
  explicit PlanCache(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // The key of `request` sent to `rpc`: 32 bytes of SHA-256.
  static std::string Key(absl::string_view rpc, const google::protobuf::Message& request);

  // Fills `response` from the cache; false (and `response` untouched) when
  // `key` is not there.
  bool Lookup(const std::string& key, google::protobuf::Message* response);
  void Insert(const std::string& key, const google::protobuf::Message& response);

  int64_t bytes() const {
    absl::MutexLock lock(&mu_);
    return bytes_;
  }

 private:
  using Entry = std::pair<std::string, std::string>;  // key, serialized response

  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t capacity_bytes_;
  mutable absl::Mutex mu_;
  std::list<Entry> entries_ ABSL_GUARDED_BY(mu_);  // most recently used first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace partplan

#endif  // PARTPLAN_SERVER_PLAN_CACHE_H_

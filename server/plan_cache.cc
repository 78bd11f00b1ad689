#include "server/plan_cache.h"

#include <openssl/sha.h>

namespace partplan {

std::string PlanCache::Key(absl::string_view rpc, const google::protobuf::Message& request) {
  std::string bytes(rpc);
  bytes.push_back('\0');
  request.AppendToString(&bytes);
  std::string digest(SHA256_DIGEST_LENGTH, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
         reinterpret_cast<unsigned char*>(digest.data()));
  return digest;
}

bool PlanCache::Lookup(const std::string& key, google::protobuf::Message* response) {
  std::string serialized;
  {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    entries_.splice(entries_.begin(), entries_, it->second);
    serialized = it->second->second;
  }
  return response->ParseFromString(serialized);
}

void PlanCache::Insert(const std::string& key, const google::protobuf::Message& response) {
  std::string serialized = response.SerializeAsString();
  const int64_t size = static_cast<int64_t>(key.size() + serialized.size());
  if (size > capacity_bytes_) return;
  absl::MutexLock lock(&mu_);
  if (index_.contains(key)) return;  // another call planned it meanwhile
  entries_.emplace_front(key, std::move(serialized));
  index_.emplace(key, entries_.begin());
  bytes_ += size;
  EvictLocked();
}

void PlanCache::EvictLocked() {
  while (bytes_ > capacity_bytes_ && !entries_.empty()) {
    const Entry& oldest = entries_.back();
    bytes_ -= static_cast<int64_t>(oldest.first.size() + oldest.second.size());
    index_.erase(oldest.first);
    entries_.pop_back();
  }
}

}  // namespace partplan

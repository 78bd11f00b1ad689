#include "server/plan_cache.h"

#include <openssl/evp.h>

#include <iterator>
#include <memory>
#include <vector>

namespace partplan {

std::optional<std::string> PlanCache::Key(absl::string_view rpc, const grpc::ByteBuffer& request) {
  std::vector<grpc::Slice> slices;
  if (!request.Valid() || !request.Dump(&slices).ok()) return std::nullopt;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                  &EVP_MD_CTX_free);
  EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr);
  // The RPC name and a separator, so that no request of one RPC can collide
  // with one of another.
  EVP_DigestUpdate(context.get(), rpc.data(), rpc.size());
  EVP_DigestUpdate(context.get(), "", 1);
  for (const grpc::Slice& slice : slices) {
    EVP_DigestUpdate(context.get(), slice.begin(), slice.size());
  }
  std::string digest(kKeyBytes, '\0');
  EVP_DigestFinal_ex(context.get(), reinterpret_cast<unsigned char*>(digest.data()), nullptr);
  return digest;
}

bool PlanCache::Lookup(const std::string& key, Entry* found) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  entries_.splice(entries_.begin(), entries_, it->second);
  *found = it->second->second;
  return true;
}

void PlanCache::Insert(const std::string& key, Entry entry) {
  if (!entry.response.Valid()) return;
  KeyedEntry keyed(key, std::move(entry));
  const int64_t size = SizeOf(keyed);
  if (size > capacity_bytes_) return;
  std::list<KeyedEntry> evicted;  // freed after the lock, outside it
  {
    absl::MutexLock lock(&mu_);
    if (index_.contains(key)) return;  // another call planned it meanwhile
    entries_.push_front(std::move(keyed));
    index_.emplace(key, entries_.begin());
    bytes_ += size;
    evicted = EvictLocked();
  }
}

std::list<PlanCache::KeyedEntry> PlanCache::EvictLocked() {
  std::list<KeyedEntry> evicted;
  while (bytes_ > capacity_bytes_ && !entries_.empty()) {
    const KeyedEntry& oldest = entries_.back();
    bytes_ -= SizeOf(oldest);
    index_.erase(oldest.first);
    evicted.splice(evicted.end(), entries_, std::prev(entries_.end()));
  }
  return evicted;
}

}  // namespace partplan

// NameIndex: node name -> NodeId for a graph of up to 2^31 nodes, compact
// enough to stay in cache where a general hash map would not.
//
// The index holds no strings: each slot is 4 bytes, the node id in its low
// bits (as many as the table has slots for: 21 for up to 2^20 names) and as
// many bits of the name's hash as are left above them, and a candidate's
// name is read from the caller's `names` (any random-access container of
// string-like values, indexed by NodeId) only when those bits match. Slots
// are at most half full, and a slot is 4 bytes where
// absl::flat_hash_map<string_view, NodeId> takes 24: on a large graph the
// index no longer stays in cache, and its size is most of why import time
// grows by more than the node count (tests/bench:name_index_bench;
// docs/performance.md). An id too large for
// the bits the table gives ids widens them for every slot, at the cost of
// hash bits.
//
// Inserting or looking up a sequence of names in order can prefetch each
// slot a few names ahead, since the names to come are known (HashAhead):
//
//   NameIndex index(graph.nodes_size());
//   HashAhead hashes(index, n, [&](int64_t v) { return names[v]; });
//   for (NodeId v = 0; v < n; ++v) {
//     NodeId earlier = index.Insert(names, v, hashes.Next(v));
//     if (earlier >= 0) ... duplicate name, first used by `earlier` ...
//   }
//   NodeId u = index.Find(names, "relu_3");   // -1 when absent
#ifndef PARTPLAN_PLANNER_GRAPH_NAME_INDEX_H_
#define PARTPLAN_PLANNER_GRAPH_NAME_INDEX_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace partplan {

class NameIndex {
 public:
  // How many nodes ahead of the one being inserted to prefetch: enough to
  // cover a cache miss with the work of importing the nodes in between.
  static constexpr int kLookahead = 8;

  NameIndex() = default;
  // Room for `capacity` names without growing.
  explicit NameIndex(int64_t capacity) { Reserve(capacity); }

  static uint64_t Hash(absl::string_view name) { return absl::Hash<absl::string_view>{}(name); }

  // Makes room for `capacity` names. Does nothing once a name is indexed
  // (growing then needs the names, which Insert has).
  void Reserve(int64_t capacity);

  // Hints that `hash` will be inserted or looked up soon.
  void Prefetch(uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & mask_], /*rw=*/1);
  }

  // Adds node `id` under `names[id]`, whose hash is `hash`. Returns -1, or
  // the id already indexed under that name (and then adds nothing). Grows
  // past the reserved capacity if need be.
  template <typename Names>
  int32_t Insert(const Names& names, int32_t id, uint64_t hash) {
    if (2 * (size_ + 1) > static_cast<int64_t>(slots_.size())) Grow(names);
    if (BitsFor(id) > id_bits_) Rebuild(names, slots_.size(), BitsFor(id));
    const absl::string_view name = names[id];
    for (uint64_t i = hash & mask_;; i = (i + 1) & mask_) {
      const uint32_t slot = slots_[i];
      if (slot == 0) {
        slots_[i] = MakeSlot(hash, id);
        ++size_;
        return -1;
      }
      if (SlotTag(slot) == HashTag(hash) && absl::string_view(names[Id(slot)]) == name) {
        return Id(slot);
      }
    }
  }

  // The id indexed under `name`, or -1.
  template <typename Names>
  int32_t Find(const Names& names, absl::string_view name, uint64_t hash) const {
    if (slots_.empty()) return -1;
    for (uint64_t i = hash & mask_;; i = (i + 1) & mask_) {
      const uint32_t slot = slots_[i];
      if (slot == 0) return -1;
      if (SlotTag(slot) == HashTag(hash) && absl::string_view(names[Id(slot)]) == name) {
        return Id(slot);
      }
    }
  }
  template <typename Names>
  int32_t Find(const Names& names, absl::string_view name) const {
    return Find(names, name, Hash(name));
  }

  int64_t size() const { return size_; }

 private:
  // A slot: the hash's top 32 - id_bits_ bits, then id + 1 in the low
  // id_bits_ bits (so that 0 means empty).
  uint32_t MakeSlot(uint64_t hash, int32_t id) const {
    return static_cast<uint32_t>((uint64_t{HashTag(hash)} << id_bits_) |
                                 (static_cast<uint64_t>(id) + 1));
  }
  uint32_t HashTag(uint64_t hash) const {
    return static_cast<uint32_t>(id_bits_ >= 32 ? 0 : hash >> (32 + id_bits_));
  }
  uint32_t SlotTag(uint32_t slot) const {
    return static_cast<uint32_t>(uint64_t{slot} >> id_bits_);
  }
  int32_t Id(uint32_t slot) const {
    return static_cast<int32_t>((uint64_t{slot} & ((uint64_t{1} << id_bits_) - 1)) - 1);
  }
  // The bits id + 1 needs.
  static int BitsFor(int32_t id) {
    return 64 - __builtin_clzll(static_cast<uint64_t>(static_cast<uint32_t>(id)) + 1);
  }

  // Doubles the table, rehashing every indexed name.
  template <typename Names>
  void Grow(const Names& names) {
    Rebuild(names, std::max<size_t>(2 * slots_.size(), 16), id_bits_);
  }

  // Lays the indexed names out again in `slots` slots (a power of two, more
  // than twice the names), with ids in at least `id_bits` bits.
  template <typename Names>
  void Rebuild(const Names& names, size_t slots, int id_bits) {
    std::vector<uint32_t> old;
    old.swap(slots_);
    std::vector<int32_t> ids;
    ids.reserve(static_cast<size_t>(size_));
    for (uint32_t slot : old) {
      if (slot != 0) ids.push_back(Id(slot));
    }
    std::vector<uint32_t>().swap(old);
    slots_.assign(slots, 0);
    mask_ = slots - 1;
    id_bits_ = std::max(id_bits, __builtin_ctzll(slots));
    for (int32_t id : ids) {
      const uint64_t hash = Hash(names[id]);
      uint64_t i = hash & mask_;
      while (slots_[i] != 0) i = (i + 1) & mask_;
      slots_[i] = MakeSlot(hash, id);
    }
  }

  std::vector<uint32_t> slots_;
  uint64_t mask_ = 0;
  int id_bits_ = 0;  // at least log2(slots); ids in the low bits
  int64_t size_ = 0;
};

// The hashes of `size` names visited in order 0, 1, 2, ..., each computed
// NameIndex::kLookahead visits early with its slot in `index` prefetched, so
// that the cache miss of a large index overlaps the work in between.
// `name_at(i)` gives the i-th name as something convertible to string_view.
template <typename NameAt>
class HashAhead {
 public:
  HashAhead(const NameIndex& index, int64_t size, NameAt name_at)
      : index_(index), size_(size), name_at_(std::move(name_at)) {
    for (int64_t i = 0; i < size_ && i < kAhead; ++i) Compute(i);
  }

  // The hash of name_at(i); `i` is one more than at the previous call.
  uint64_t Next(int64_t i) {
    const uint64_t hash = ring_[i % kAhead];
    if (i + kAhead < size_) Compute(i + kAhead);
    return hash;
  }

 private:
  static constexpr int kAhead = NameIndex::kLookahead;

  void Compute(int64_t i) {
    ring_[i % kAhead] = NameIndex::Hash(name_at_(i));
    index_.Prefetch(ring_[i % kAhead]);
  }

  const NameIndex& index_;
  const int64_t size_;
  NameAt name_at_;
  uint64_t ring_[kAhead] = {};
};

// Strings copied end to end into one buffer, read back by index as views: a
// million short strings without an allocation each. For names to index that
// are read from views that do not last (NodeReader::OwnFields'):
//
//   StringPool targets;
//   for (NodeId v : callers) targets.Add(reader.OwnFields(v).target);
//   HashAhead hashes(index, targets.size(), [&](int64_t i) { return targets[i]; });
class StringPool {
 public:
  void Add(absl::string_view text) {
    chars_.append(text.data(), text.size());
    ends_.push_back(chars_.size());
  }
  int64_t size() const { return static_cast<int64_t>(ends_.size()); }
  absl::string_view operator[](int64_t i) const {
    const size_t begin = i == 0 ? 0 : ends_[i - 1];
    return absl::string_view(chars_.data() + begin, ends_[i] - begin);
  }

 private:
  std::string chars_;
  std::vector<size_t> ends_;
};

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_GRAPH_NAME_INDEX_H_

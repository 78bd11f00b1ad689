#include "planner/fx/partition_merge.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <limits>
#include <utility>

#include "planner/base/status_util.h"

namespace partplan {
namespace {

// The level of a parent that is not there (before it was added, after it
// was removed): below every level, and one more than it is below them too.
constexpr int32_t kNoLevel = std::numeric_limits<int32_t>::min() / 2;

// A partition's level from its parents' levels, given one at a time: one
// more than the highest, and how many parents are at that highest level
// (its critical parents).
struct LevelOverParents {
  int32_t level = 0;
  int32_t critical = 0;
  void Add(int32_t parent_level) {
    if (parent_level + 1 > level) {
      level = parent_level + 1;
      critical = 1;
    } else if (parent_level + 1 == level) {
      ++critical;
    }
  }
};

}  // namespace

absl::StatusOr<PartitionMerger> PartitionMerger::Create(const CompactGraph& graph, PartitionSet set,
                                                        const CancellationToken& token) {
  PartitionMerger merger(graph, std::move(set), Unbuilt());
  PARTPLAN_RETURN_IF_ERROR(merger.Build(token));
  return merger;
}

absl::Status PartitionMerger::Build(const CancellationToken& token) {
  int64_t work = 0;  // nodes, edges and partitions seen, for the polls
  const int32_t num_parts = static_cast<int32_t>(built_.size());
  parts_.resize(num_parts);
  merged_into_.resize(num_parts);
  queued_.assign(num_parts, 0);
  waiting_.resize(num_parts);
  group_by_level_.resize(num_parts);
  for (int32_t h = 0; h < num_parts; ++h) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    merged_into_[h] = h;
    parts_[h].memory_bytes = built_[h].memory_bytes;
    for (NodeId v : built_[h].nodes) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      if (graph_.is_input_node(v) && parts_[h].inputs.insert(v).second) {
        parts_[h].shareable_bytes += graph_.total_bytes(v);
      }
    }
    Append(h);
  }
  // The partition DAG: only call_* nodes link partitions (inputs are copied
  // into each partition reading them).
  for (NodeId u = 0; u < graph_.num_nodes(); ++u) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    const int32_t from = built_of_[u];
    if (from < 0) continue;
    for (NodeId v : graph_.users(u)) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      const int32_t to = built_of_[v];
      if (to < 0 || to == from) continue;
      parts_[from].children[to] += graph_.output_bytes(u);
      parts_[to].parents[from] += graph_.output_bytes(u);
      parts_[from].shareable_bytes += graph_.output_bytes(u);
      parts_[to].shareable_bytes += graph_.output_bytes(u);
    }
  }
  // Levels in topological order (Kahn's), whatever order the ids are in.
  std::vector<int32_t> waiting(num_parts);
  std::vector<int32_t> ready;
  for (int32_t h = 0; h < num_parts; ++h) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    waiting[h] = static_cast<int32_t>(parts_[h].parents.size());
    if (waiting[h] == 0) ready.push_back(h);
  }
  while (!ready.empty()) {
    const int32_t h = ready.back();
    ready.pop_back();
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(1 + static_cast<int64_t>(parts_[h].children.size()), &work));
    for (const auto& [child, bytes] : parts_[h].children) {
      parts_[child].level = std::max(parts_[child].level, parts_[h].level + 1);
      if (--waiting[child] == 0) ready.push_back(child);
    }
  }
  for (int32_t h = 0; h < num_parts; ++h) {
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(1 + static_cast<int64_t>(parts_[h].parents.size()), &work));
    for (const auto& [parent, bytes] : parts_[h].parents) {
      if (parts_[parent].level + 1 == parts_[h].level) ++parts_[h].critical_parents;
    }
  }
  lowest_waiting_ = num_parts;
  return absl::OkStatus();
}

absl::Status PartitionMerger::CombineBySize(std::vector<int32_t>& group, int64_t device_memory,
                                            const CancellationToken& token) {
  int64_t next_place = 0;
  // Candidates tried and inputs compared, for the polls: one merge may try
  // many candidates, each compared by its inputs (OverlapOf).
  int64_t work = 0;
  for (int32_t h : group) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    AddToGroup(h, next_place++);
  }
  const int32_t num_levels = static_cast<int32_t>(group_by_level_.size());
  while (group_.size() > 1) {
    PARTPLAN_RETURN_IF_ERROR(token.Check());
    const int32_t smallest = std::get<2>(*group_.begin());
    const Part& small = parts_[smallest];
    // Candidates from the most memory down, among the levels within one of
    // the smallest's: a three-way merge of those levels' members. Those
    // with more memory than `most` cannot fit with it, however much they
    // share, and are not tried (torch.fx tries them).
    const int64_t room = device_memory - small.memory_bytes;
    const int64_t most = room > std::numeric_limits<int64_t>::max() - small.shareable_bytes
                             ? std::numeric_limits<int64_t>::max()
                             : room + small.shareable_bytes;
    const GroupKey above_most{most, std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int32_t>::max()};
    using Iterator = GroupSet::const_reverse_iterator;
    std::vector<std::pair<Iterator, Iterator>> ranges;
    for (int32_t l = std::max(small.level - 1, 0); l <= small.level + 1 && l < num_levels; ++l) {
      const GroupSet& members = group_by_level_[l];
      ranges.emplace_back(Iterator(members.upper_bound(above_most)), members.rend());
    }
    int32_t partner = -1;
    while (partner < 0) {
      std::pair<Iterator, Iterator>* next = nullptr;
      for (auto& range : ranges) {
        if (range.first != range.second && (next == nullptr || *next->first < *range.first)) {
          next = &range;
        }
      }
      if (next == nullptr) break;
      const int32_t candidate = std::get<2>(*next->first);
      ++next->first;
      PARTPLAN_RETURN_IF_ERROR(token.CheckWork(
          1 + static_cast<int64_t>(std::min(parts_[candidate].inputs.size(), small.inputs.size())),
          &work));
      if (candidate != smallest && MergedMemory(candidate, smallest) <= device_memory) {
        partner = candidate;
      }
    }
    if (partner < 0) break;
    RemoveFromGroup(partner);
    RemoveFromGroup(smallest);
    const int32_t merged = Merge(partner, smallest);
    AddToGroup(merged, next_place++);
  }
  group.clear();
  for (const auto& [memory, place, handle] : group_) group.push_back(handle);
  std::sort(group.begin(), group.end(),
            [&](int32_t a, int32_t b) { return parts_[a].group_place < parts_[b].group_place; });
  for (int32_t h : group) RemoveFromGroup(h);
  return absl::OkStatus();
}

PartitionMerger::Overlap PartitionMerger::OverlapOf(int32_t a, int32_t b) const {
  const Part& first = parts_[a];
  const Part& second = parts_[b];
  Overlap overlap;
  const bool first_smaller = first.inputs.size() < second.inputs.size();
  const absl::flat_hash_set<NodeId>& fewer = first_smaller ? first.inputs : second.inputs;
  const absl::flat_hash_set<NodeId>& more = first_smaller ? second.inputs : first.inputs;
  for (NodeId input : fewer) {
    if (more.contains(input)) overlap.shared_input_bytes += graph_.total_bytes(input);
  }
  for (const auto& [edges, other] :
       {std::pair{&first.children, b}, std::pair{&second.children, a}}) {
    const auto edge = edges->find(other);
    if (edge != edges->end()) overlap.edge_bytes += edge->second;
  }
  return overlap;
}

int64_t PartitionMerger::MergedMemory(int32_t a, int32_t b) const {
  // An input both hold is counted once; an edge between them is no longer
  // read from outside.
  const Overlap overlap = OverlapOf(a, b);
  return parts_[a].memory_bytes + parts_[b].memory_bytes - overlap.shared_input_bytes -
         overlap.edge_bytes;
}

int32_t PartitionMerger::Merge(int32_t a, int32_t b) {
  const auto degree = [&](int32_t h) {
    return parts_[h].children.size() + parts_[h].parents.size();
  };
  const int32_t kept = degree(a) >= degree(b) ? a : b;
  const int32_t dead = kept == a ? b : a;
  Part& keep = parts_[kept];
  Part& gone = parts_[dead];
  const Overlap overlap = OverlapOf(a, b);
  keep.memory_bytes += gone.memory_bytes - overlap.shared_input_bytes - overlap.edge_bytes;
  // The edges between the two were counted on both sides.
  keep.shareable_bytes +=
      gone.shareable_bytes - overlap.shared_input_bytes - 2 * overlap.edge_bytes;
  LevelTheUnion(kept, dead);
  MoveEdges(dead, kept);
  if (gone.inputs.size() > keep.inputs.size()) std::swap(gone.inputs, keep.inputs);
  keep.inputs.insert(gone.inputs.begin(), gone.inputs.end());
  absl::flat_hash_set<NodeId>().swap(gone.inputs);
  gone.list_position = -1;
  merged_into_[dead] = kept;
  Append(kept);
  UpdateLevels();
  return kept;
}

void PartitionMerger::LevelTheUnion(int32_t kept, int32_t dead) {
  Part& keep = parts_[kept];
  const Part& gone = parts_[dead];
  const int32_t kept_before = keep.level;
  const int32_t dead_before = gone.level;
  // The union's parents are kept's, but dead, and dead's, but kept: start
  // from what kept's give, without dead, and add the parents dead brings.
  LevelOverParents union_level{kept_before, keep.critical_parents};
  if (keep.parents.contains(dead) && dead_before + 1 == kept_before) --union_level.critical;
  for (const auto& [parent, bytes] : gone.parents) {
    if (parent != kept && !keep.parents.contains(parent)) union_level.Add(parts_[parent].level);
  }
  if (union_level.critical == 0) {
    // Dead was the last parent one level below kept (or neither has
    // parents): from every parent, once each.
    union_level = LevelOverParents();
    for (const auto& [parent, bytes] : keep.parents) {
      if (parent != dead) union_level.Add(parts_[parent].level);
    }
    for (const auto& [parent, bytes] : gone.parents) {
      if (parent != kept && !keep.parents.contains(parent)) union_level.Add(parts_[parent].level);
    }
  }
  const int32_t level = union_level.level;
  // The children: each of dead's loses it as a parent and has the union
  // instead (or, if kept was its parent too, kept at the union's level);
  // kept's others see kept's level change, if it does.
  for (const auto& [child, bytes] : gone.children) {
    if (child == kept) continue;
    NoteParentChange(child, dead_before, kNoLevel);
    if (!keep.children.contains(child)) {
      NoteParentChange(child, kNoLevel, level);
    } else if (level != kept_before) {
      NoteParentChange(child, kept_before, level);
    }
  }
  if (level != kept_before) {
    for (const auto& [child, bytes] : keep.children) {
      if (child != dead && !gone.children.contains(child)) {
        NoteParentChange(child, kept_before, level);
      }
    }
  }
  SetLevel(kept, level);
  keep.critical_parents = union_level.critical;
}

void PartitionMerger::NoteParentChange(int32_t child, int32_t before, int32_t after) {
  Part& part = parts_[child];
  part.parent_changes.emplace_back(before, after);
  if (queued_[child]) return;
  queued_[child] = 1;
  waiting_[part.level].push_back(child);
  lowest_waiting_ = std::min(lowest_waiting_, part.level);
  highest_waiting_ = std::max(highest_waiting_, part.level);
}

void PartitionMerger::MoveEdges(int32_t dead, int32_t kept) {
  Part& keep = parts_[kept];
  Part& gone = parts_[dead];
  for (const auto& [child, bytes] : gone.children) {
    parts_[child].parents.erase(dead);
    if (child == kept) continue;
    keep.children[child] += bytes;
    parts_[child].parents[kept] += bytes;
  }
  for (const auto& [parent, bytes] : gone.parents) {
    parts_[parent].children.erase(dead);
    if (parent == kept) continue;
    keep.parents[parent] += bytes;
    parts_[parent].children[kept] += bytes;
  }
  absl::flat_hash_map<int32_t, int64_t>().swap(gone.children);
  absl::flat_hash_map<int32_t, int64_t>().swap(gone.parents);
}

void PartitionMerger::LevelFromParents(int32_t handle) {
  Part& part = parts_[handle];
  LevelOverParents over;
  for (const auto& [parent, bytes] : part.parents) over.Add(parts_[parent].level);
  SetLevel(handle, over.level);
  part.critical_parents = over.critical;
}

void PartitionMerger::UpdateLevels() {
  // Only the union's descendants can move. Their levels before the merge
  // order them topologically (the two merged partitions' levels differed
  // by at most one, so no path of two edges or more ran between them and
  // the merge made no cycle; every edge but the union's existed before),
  // so visiting them by that level, lowest first, settles each after every
  // parent that moves: a bucket per level. A partition's level follows
  // from its changed parents and its count of parents one level below it,
  // unless that count falls to zero.
  for (int32_t level = lowest_waiting_; level <= highest_waiting_; ++level) {
    // Children go to higher buckets than their parent's, so this one should
    // not grow while it is read; indices keep that safe if it did.
    for (size_t i = 0; i < waiting_[level].size(); ++i) {
      const int32_t h = waiting_[level][i];
      queued_[h] = 0;
      Part& part = parts_[h];
      const int32_t before = part.level;
      int32_t critical = part.critical_parents;
      LevelOverParents changed;  // over the changed parents alone
      for (const auto& [was, now] : part.parent_changes) {
        if (was + 1 == before) --critical;
        if (now + 1 == before) ++critical;
        if (now != kNoLevel) changed.Add(now);
      }
      part.parent_changes.clear();
      if (changed.level > before) {
        // Parents that did not change are at most one level below.
        SetLevel(h, changed.level);
        part.critical_parents = changed.critical;
      } else if (critical > 0) {
        part.critical_parents = critical;
      } else {
        LevelFromParents(h);
      }
      if (part.level == before) continue;
      for (const auto& [child, bytes] : part.children) {
        NoteParentChange(child, before, part.level);
      }
    }
    waiting_[level].clear();
  }
  lowest_waiting_ = static_cast<int32_t>(waiting_.size());
  highest_waiting_ = -1;
}

void PartitionMerger::SetLevel(int32_t handle, int32_t level) {
  if (parts_[handle].grouped) {
    EraseFromLevel(handle);
    group_by_level_[level].insert(KeyOf(handle));
  }
  parts_[handle].level = level;
}

void PartitionMerger::AddToGroup(int32_t handle, int64_t place) {
  parts_[handle].grouped = true;
  parts_[handle].group_place = place;
  group_.insert(KeyOf(handle));
  group_by_level_[parts_[handle].level].insert(KeyOf(handle));
}

void PartitionMerger::RemoveFromGroup(int32_t handle) {
  group_.erase(KeyOf(handle));
  EraseFromLevel(handle);
  parts_[handle].grouped = false;
}

void PartitionMerger::EraseFromLevel(int32_t handle) {
  group_by_level_[parts_[handle].level].erase(KeyOf(handle));
}

void PartitionMerger::Append(int32_t handle) {
  parts_[handle].list_position = static_cast<int64_t>(order_.size());
  order_.push_back(handle);
}

int32_t PartitionMerger::Find(int32_t built) {
  int32_t root = built;
  while (merged_into_[root] != root) root = merged_into_[root];
  while (merged_into_[built] != root) built = std::exchange(merged_into_[built], root);
  return root;
}

int32_t PartitionMerger::IdOf(int32_t handle) const {
  int32_t id = 0;
  for (int64_t i = 0; i < parts_[handle].list_position; ++i) {
    if (parts_[order_[i]].list_position == i) ++id;
  }
  return id;
}

absl::StatusOr<PartitionSet> PartitionMerger::Finish(std::vector<int32_t>& index_of,
                                                     const CancellationToken& token) && {
  PartitionSet set;
  int64_t work = 0;  // partitions and nodes seen, for the polls
  index_of.assign(parts_.size(), -1);
  for (int64_t i = 0; i < static_cast<int64_t>(order_.size()); ++i) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    const int32_t h = order_[i];
    if (parts_[h].list_position != i) continue;
    index_of[h] = static_cast<int32_t>(set.partitions.size());
    set.partitions.emplace_back().memory_bytes = parts_[h].memory_bytes;
  }
  for (int32_t b = 0; b < static_cast<int32_t>(built_.size()); ++b) {
    PARTPLAN_RETURN_IF_ERROR(
        token.CheckWork(1 + static_cast<int64_t>(built_[b].nodes.size()), &work));
    std::vector<NodeId>& nodes = set.partitions[index_of[Find(b)]].nodes;
    if (nodes.empty()) {
      nodes = std::move(built_[b].nodes);
    } else {
      nodes.insert(nodes.end(), built_[b].nodes.begin(), built_[b].nodes.end());
    }
  }
  for (Partition& partition : set.partitions) {
    std::vector<NodeId>& nodes = partition.nodes;
    // A sort: n log n of the list at most.
    PARTPLAN_RETURN_IF_ERROR(token.CheckWork(1 + 2 * static_cast<int64_t>(nodes.size()), &work));
    if (!std::is_sorted(nodes.begin(), nodes.end())) std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  }
  set.partition_of.assign(graph_.num_nodes(), -1);
  for (NodeId v = 0; v < graph_.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
    if (built_of_[v] >= 0) set.partition_of[v] = index_of[Find(built_of_[v])];
  }
  PARTPLAN_RETURN_IF_ERROR(LinkPartitions(graph_, token, &set));
  return set;
}

}  // namespace partplan

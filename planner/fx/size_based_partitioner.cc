#include "planner/fx/size_based_partitioner.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"
#include "planner/fx/first_fit_index.h"

namespace partplan {
namespace {

// torch.fx's get_extra_size_of(v, set()): v with all of its inputs.
int64_t BytesAlone(const CompactGraph& graph, NodeId v) {
  int64_t bytes = graph.total_bytes(v);
  for (NodeId u : graph.inputs(v)) bytes += graph.output_bytes(u);
  return bytes;
}

}  // namespace

absl::StatusOr<PartitionSet> SizeBasedPartition(const CompactGraph& graph,
                                                const DeviceList& devices,
                                                const CancellationToken& token) {
  std::vector<int64_t> memory;
  memory.reserve(devices.size());
  for (const DeviceSpec& device : devices.devices()) memory.push_back(device.available_memory_bytes);
  FirstFitIndex unused_devices(memory);

  // Takes the first unused device that fits v on its own.
  auto take_device_for = [&](NodeId v) -> absl::StatusOr<int> {
    const int64_t need = BytesAlone(graph, v);
    const int d = unused_devices.FindFirst(need);
    if (d < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "node '", graph.name(v), "' is too large to fit any device: it needs ", need,
          " bytes with its inputs and no unused device has that much memory"));
    }
    unused_devices.Take(d);
    return d;
  };

  PartitionBuilder builder(graph);
  std::vector<int64_t> room;  // memory left, per device-filling partition
  const int32_t num_devices = devices.size();
  int32_t current = builder.NewPartition();
  room.push_back(0);
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(v));
    if (!graph.is_op_node(v)) continue;
    if (builder.num_partitions() > num_devices) {
      // Every device has a partition: leftovers go one per partition.
      builder.AddNode(v, builder.NewPartition());
      continue;
    }
    int64_t need = builder.ExtraBytes(v, current);
    // torch.fx asks whether the partition is still empty by its memory, so a
    // partition whose nodes so far need no memory takes another device too.
    if (builder.partition(current).memory_bytes == 0) {
      PARTPLAN_ASSIGN_OR_RETURN(const int d, take_device_for(v));
      room[current] = devices[d].available_memory_bytes;
      builder.partition(current).logical_device_ids.push_back(devices[d].logical_id);
    } else if (room[current] < need) {
      if (builder.num_partitions() == num_devices) {
        builder.AddNode(v, builder.NewPartition());
        continue;
      }
      PARTPLAN_ASSIGN_OR_RETURN(const int d, take_device_for(v));
      current = builder.NewPartition();
      room.push_back(devices[d].available_memory_bytes);
      builder.partition(current).logical_device_ids.push_back(devices[d].logical_id);
      need = builder.ExtraBytes(v, current);
    }
    builder.AddNode(v, current);
    room[current] -= need;
  }
  return std::move(builder).Finish(token);
}

}  // namespace partplan

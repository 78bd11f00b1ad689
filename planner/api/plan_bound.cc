#include "planner/api/plan_bound.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace partplan {
namespace {

std::string Bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", value, units[unit]);
}

std::string Seconds(double seconds) {
  if (seconds < 1e-3) return absl::StrFormat("%.1f us", seconds * 1e6);
  if (seconds < 1) return absl::StrFormat("%.2f ms", seconds * 1e3);
  return absl::StrFormat("%.3f s", seconds);
}

std::string Percent(double share) { return absl::StrFormat("%.1f%%", 100 * share); }

// How `then` differs from `now`, e.g. "4 partitions (3 now), critical path
// 1.80 ms (2.00 ms now)"; "the same plan's figures" when nothing differs.
std::string Change(const PlanFigures& now, const PlanFigures& then) {
  std::vector<std::string> parts;
  if (then.partitions != now.partitions) {
    parts.push_back(absl::StrCat(then.partitions, " partitions (", now.partitions, " now)"));
  }
  // Figures that read the same are the same, whatever their last digits.
  const std::string path_then = Seconds(then.critical_path_seconds);
  const std::string path_now = Seconds(now.critical_path_seconds);
  if (now.slowest_partition >= 0 && path_then != path_now) {
    parts.push_back(absl::StrCat("critical path ", path_then, " (", path_now, " now)"));
  }
  const std::string share_then = Percent(then.fullest_share);
  const std::string share_now = Percent(now.fullest_share);
  if (share_then != share_now) {
    parts.push_back(absl::StrCat("the fullest device at ", share_then, " (", share_now, " now)"));
  }
  if (parts.empty()) return "the same figures";
  std::string text = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    absl::StrAppend(&text, i + 1 == parts.size() ? " and " : ", ", parts[i]);
  }
  return text;
}

// The what-ifs as one sentence after `*text`: "One more ...; 10% more ...".
void AppendWhatIfs(const std::vector<std::string>& what_ifs, std::string* text) {
  if (what_ifs.empty()) return;
  std::string sentence = absl::StrJoin(what_ifs, "; ");
  sentence[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(sentence[0])));
  absl::StrAppend(text, " ", sentence, ".");
}

}  // namespace

PlanFigures FiguresOf(const PartitionerPlan& plan, const DeviceList& devices) {
  PlanFigures figures;
  const std::vector<Partition>& partitions = plan.set.partitions;
  figures.partitions = static_cast<int>(partitions.size());
  figures.critical_path_seconds = plan.latency.critical_path_seconds;
  for (int p = 0; p < figures.partitions; ++p) {
    const double seconds =
        p < static_cast<int>(plan.latency.partition_seconds.size()) ? plan.latency.partition_seconds[p]
                                                                    : 0.0;
    if (seconds > 0 && seconds > figures.slowest_seconds) {
      figures.slowest_seconds = seconds;
      figures.slowest_partition = p;
    }
    if (figures.largest_partition < 0 || partitions[p].memory_bytes > figures.largest_bytes) {
      figures.largest_bytes = partitions[p].memory_bytes;
      figures.largest_partition = p;
    }
  }
  for (int d = 0; d < devices.size() && d < static_cast<int>(plan.holdings.size()); ++d) {
    const int64_t available = devices[d].available_memory_bytes;
    const double share =
        available > 0 ? static_cast<double>(plan.holdings[d].used_bytes) / static_cast<double>(available)
                      : 0.0;
    if (figures.fullest_device.empty() || share > figures.fullest_share) {
      figures.fullest_share = share;
      figures.fullest_device = devices[d].name;
      figures.fullest_available = available;
    }
  }
  return figures;
}

std::string DescribeBound(const PlanFigures& now, const PlanFigures* one_more,
                          absl::string_view one_more_like, const PlanFigures* more_memory,
                          bool skipped_what_ifs) {
  std::string text;
  if (now.partitions <= 1) {
    text = absl::StrCat("The graph fits one device: ", now.fullest_device, " holds it at ",
                        Percent(now.fullest_share), " of its ", Bytes(now.fullest_available), ".");
    return text;
  }
  if (now.slowest_partition >= 0) {
    text = absl::StrCat("Partition ", now.slowest_partition, " takes longest (",
                        Seconds(now.slowest_seconds), "; the critical path takes ",
                        Seconds(now.critical_path_seconds), ")");
  } else {
    text = absl::StrCat("Partition ", now.largest_partition, " is the largest (",
                        Bytes(now.largest_bytes), "; no node has a latency)");
  }
  absl::StrAppend(&text, " and ", now.fullest_device, " is the fullest device, at ",
                  Percent(now.fullest_share), " of its ", Bytes(now.fullest_available), ".");
  if (skipped_what_ifs) {
    absl::StrAppend(&text, " (What more devices or memory would change is left out above ",
                    kMaxNodesForWhatIfs, " nodes.)");
    return text;
  }
  std::vector<std::string> what_ifs;
  if (one_more != nullptr) {
    what_ifs.push_back(absl::StrCat("one more device like ", one_more_like, " gives ",
                                    Change(now, *one_more)));
  }
  if (more_memory != nullptr) {
    what_ifs.push_back(absl::StrCat("10% more memory on every device gives ",
                                    Change(now, *more_memory)));
  }
  AppendWhatIfs(what_ifs, &text);
  return text;
}

std::string DescribeShardBound(const ShardPlan& plan, int64_t graph_total_bytes) {
  if (plan.shards.empty()) return "";
  size_t largest = 0, busiest = 0;
  for (size_t s = 0; s < plan.shards.size(); ++s) {
    if (plan.shards[s].memory_bytes > plan.shards[largest].memory_bytes) largest = s;
    if (plan.shards[s].cost > plan.shards[busiest].cost) busiest = s;
  }
  std::string text = absl::StrCat("Shard ", largest, " is the largest, ",
                                  Bytes(plan.shards[largest].memory_bytes), " of the graph's ",
                                  Bytes(graph_total_bytes));
  if (plan.shards[busiest].cost > 0) {
    absl::StrAppend(&text, "; shard ", busiest, " has the most work (",
                    absl::StrFormat("%.6g", plan.shards[busiest].cost), " of ",
                    plan.planner.substr(plan.planner.rfind('/') + 1), ")");
  }
  return text + ".";
}

std::string DescribeDataParallelBound(const CompactGraph& graph, const DataParallelPlan& plan) {
  std::string text = absl::StrCat("Each step moves ", Bytes(plan.communication_bytes_per_step),
                                  " between the devices in ", plan.redistributions.size(),
                                  plan.redistributions.size() == 1 ? " redistribution"
                                                                   : " redistributions");
  const DataParallelRedistribution* most = nullptr;
  for (const DataParallelRedistribution& move : plan.redistributions) {
    if (most == nullptr || move.bytes > most->bytes) most = &move;
  }
  if (most != nullptr) {
    absl::StrAppend(&text, "; the most is ", most->collective, " of '", graph.name(most->value),
                    "' for '", graph.name(most->consumer), "' (", Bytes(most->bytes),
                    " from each device)");
  }
  int ambiguous = 0;
  for (const DataParallelNode& node : plan.nodes) ambiguous += node.ambiguous ? 1 : 0;
  absl::StrAppend(&text, ".");
  if (ambiguous > 0) {
    absl::StrAppend(&text, " ", ambiguous, ambiguous == 1 ? " node was" : " nodes were",
                    " decided without a rule (`ambiguous`): check them first.");
  }
  return text;
}

std::string DescribeTrainingBound(const TrainingStagePlan& plan,
                                  const std::vector<TrainingDevice>& devices,
                                  const TrainingWhatIf* more_memory, const TrainingWhatIf* one_more,
                                  absl::string_view one_more_like, bool skipped_what_ifs) {
  const StageCosts& costs = plan.costs;
  int busiest = 0;
  double busiest_seconds = -1;
  for (size_t k = 0; k < costs.forward.size(); ++k) {
    const double seconds = costs.forward[k] + costs.backward[k] +
                           (k < costs.weight.size() ? costs.weight[k] : 0.0);
    if (seconds > busiest_seconds) {
      busiest_seconds = seconds;
      busiest = static_cast<int>(k);
    }
  }
  // Virtual stage k runs on device k mod P (schedule.h).
  const TrainingDevice& busiest_device = devices[static_cast<size_t>(busiest) % devices.size()];
  std::string text = absl::StrCat("Stage ", busiest, " (on ", busiest_device.name,
                                  ") is the busiest, ", Seconds(busiest_seconds),
                                  " of F + B + W per micro-batch");
  int tightest = -1;
  double tightest_share = 0;
  for (size_t d = 0; d < devices.size() && d < plan.memory.size(); ++d) {
    if (!std::isfinite(devices[d].memory_bytes) || devices[d].memory_bytes <= 0) continue;
    const double share = plan.memory[d].peak_bytes / devices[d].memory_bytes;
    if (tightest < 0 || share > tightest_share) {
      tightest = static_cast<int>(d);
      tightest_share = share;
    }
  }
  if (tightest >= 0) {
    absl::StrAppend(&text, "; ", devices[tightest].name, " is nearest its memory, at ",
                    Percent(tightest_share), " of ",
                    Bytes(static_cast<int64_t>(devices[tightest].memory_bytes)), " at its peak");
  }
  absl::StrAppend(&text, ".");
  if (skipped_what_ifs) {
    absl::StrAppend(&text, " (What more memory or devices would change is left out at this size.)");
    return text;
  }
  const auto what_if = [&](const TrainingWhatIf& result) {
    if (!result.found) return std::string("no plan found without a search");
    if (result.step_seconds < plan.step_seconds - 1e-9 * std::max(1.0, plan.step_seconds)) {
      return absl::StrCat("a step of at most ", Seconds(result.step_seconds), " (",
                          Seconds(plan.step_seconds), " now)");
    }
    return std::string("no faster plan found without a search");
  };
  std::vector<std::string> what_ifs;
  if (more_memory != nullptr) {
    what_ifs.push_back(absl::StrCat("10% more memory on every device gives ", what_if(*more_memory)));
  }
  if (one_more != nullptr) {
    what_ifs.push_back(
        absl::StrCat("one more device like ", one_more_like, " gives ", what_if(*one_more)));
  }
  AppendWhatIfs(what_ifs, &text);
  return text;
}

}  // namespace partplan

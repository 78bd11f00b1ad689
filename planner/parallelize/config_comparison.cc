#include "planner/parallelize/config_comparison.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace partplan {
namespace {

std::string Seconds(double seconds) {
  if (seconds >= 1) return absl::StrFormat("%.2f s", seconds);
  if (seconds >= 1e-3) return absl::StrFormat("%.1f ms", seconds * 1e3);
  return absl::StrFormat("%.1f us", seconds * 1e6);
}

std::string GiB(double bytes) { return absl::StrFormat("%.1f GiB", bytes / (1u << 30)); }

}  // namespace

std::string WhyFirstBeatsSecond(const ParallelConfigResult& first,
                                const ParallelConfigResult& second) {
  std::string why = absl::StrCat(DescribeConfig(first.candidate), " takes ",
                                 Seconds(first.step_seconds), " a step");
  const double gap = second.step_seconds - first.step_seconds;
  if (gap <= 0) {
    absl::StrAppend(&why, ", as ", DescribeConfig(second.candidate), " does");
    const double memory_first = first.plan.memory[first.fullest_rank].peak_bytes;
    const double memory_second = second.plan.memory[second.fullest_rank].peak_bytes;
    const int devices_first =
        first.candidate.tensor * first.candidate.pipeline * first.candidate.data;
    const int devices_second =
        second.candidate.tensor * second.candidate.pipeline * second.candidate.data;
    if (devices_first < devices_second) {
      absl::StrAppend(&why, ", on ", devices_first, " devices instead of ", devices_second);
    } else if (memory_first < memory_second) {
      absl::StrAppend(&why, ", with ", GiB(memory_first), " on its fullest device instead of ",
                      GiB(memory_second));
    }
    return why + ".";
  }
  absl::StrAppend(&why, ", ", Seconds(gap), " less than ", DescribeConfig(second.candidate), " (",
                  Seconds(second.step_seconds), ")");
  struct Part {
    const char* name;
    double first, second;
  };
  std::vector<Part> parts = {
      {"compute", first.parts.compute, second.parts.compute},
      {"tensor-parallel collectives", first.parts.tensor, second.parts.tensor},
      {"ZeRO's per-micro-batch exchanges", first.parts.zero, second.parts.zero},
      {"pipeline idle time", first.parts.idle, second.parts.idle},
      {"exposed gradient exchange", first.parts.data_parallel, second.parts.data_parallel},
  };
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) {
    return (a.second - a.first) > (b.second - b.first);
  });
  std::vector<std::string> clauses;
  for (const Part& part : parts) {
    if (part.second - part.first <= 0.05 * gap || clauses.size() == 2) break;
    clauses.push_back(
        absl::StrCat(part.name, " ", Seconds(part.first), " against ", Seconds(part.second)));
  }
  if (!clauses.empty()) {
    absl::StrAppend(&why, "; on the device that ends the step, ", clauses[0]);
    if (clauses.size() > 1) absl::StrAppend(&why, ", and ", clauses[1]);
  }
  return why + ".";
}

}  // namespace partplan

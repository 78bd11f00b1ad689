#include "planner/training/closest_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace stage_search_internal {
namespace {

absl::Status NoPlanMeetsThePins() {
  return absl::FailedPreconditionError(
      "no plan meets the pins: the nodes pinned to the first stage, the last stage or a stage "
      "of their own, and the tied parameters kept on one stage, leave no way to make the "
      "stages asked for");
}

}  // namespace

absl::StatusOr<bool> FitsWithAllowance(const StageSearchOptions& options, const StageTable& table,
                                       const std::vector<TrainingDevice>& devices, double allowance,
                                       const CancellationToken& token, std::vector<int>* cuts,
                                       std::vector<bool>* recompute) {
  int64_t work = 0;
  const int stages = table.stages();
  const int n = table.items();
  const std::vector<bool> choices = RecomputeChoices(options.recompute);
  // Per stage and end: the start and choice that reach it, or -1.
  std::vector<std::vector<int>> from(stages, std::vector<int>(n + 1, -1));
  std::vector<std::vector<bool>> chose(stages, std::vector<bool>(n + 1, false));
  std::vector<bool> reachable(n + 1, false);
  reachable[0] = true;
  for (int k = 0; k < stages; ++k) {
    const int device = table.device_of(k);
    const double cap = devices[device].memory_bytes + allowance;
    // Each reachable start b reaches the ends [low, reach] (reach the
    // furthest over its choices); listed where their interval begins.
    std::vector<std::vector<int>> begins_at(n + 1);
    std::vector<int> reach(n + 1, -1);
    std::vector<bool> reach_choice(n + 1, false);
    for (int b = 0; b < n; ++b) {
      PARTPLAN_RETURN_IF_ERROR(token.CheckEvery(work++));
      if (!reachable[b]) continue;
      int low = 0, high = 0;
      if (!table.EndRange(k, b, &low, &high)) continue;
      for (const bool choice : choices) {
        const auto fits = [&](int e) { return table.StagePeakOf(k, b, e, choice) <= cap; };
        const int good = LastFitting(low, high, fits);
        if (good < low) continue;
        if (good > reach[b]) {
          reach[b] = good;
          reach_choice[b] = choice;
        }
      }
      if (reach[b] >= 0) begins_at[low].push_back(b);
    }
    // Sweeping the ends: of the intervals begun, the one reaching furthest
    // covers every end any of them covers.
    std::vector<bool> next(n + 1, false);
    int best = -1;
    for (int e = 1; e <= n; ++e) {
      for (const int b : begins_at[e]) {
        if (best < 0 || reach[b] > reach[best]) best = b;
      }
      if (best >= 0 && reach[best] >= e && !table.Forbidden(e)) {
        next[e] = true;
        from[k][e] = best;
        chose[k][e] = reach_choice[best];
      }
    }
    reachable = std::move(next);
  }
  if (!reachable[n]) return false;
  cuts->assign(stages + 1, 0);
  recompute->assign(stages, false);
  (*cuts)[stages] = n;
  for (int k = stages - 1; k >= 0; --k) {
    (*recompute)[k] = chose[k][(*cuts)[k + 1]];
    (*cuts)[k] = from[k][(*cuts)[k + 1]];
  }
  return true;
}

Shortfall LargestShortfall(const StageTable& table, const std::vector<TrainingDevice>& devices,
                           const std::vector<int>& cuts, const std::vector<bool>& recompute) {
  std::vector<StageFootprint> footprints;
  for (int k = 0; k < table.stages(); ++k) {
    footprints.push_back(table.Footprint(cuts[k], cuts[k + 1], recompute[k]));
  }
  Shortfall worst;
  for (size_t d = 0; d < devices.size(); ++d) {
    const double peak = table.DevicePeak(static_cast<int>(d), footprints);
    if (peak - devices[d].memory_bytes > worst.bytes) {
      worst = {static_cast<int>(d), peak, peak - devices[d].memory_bytes};
    }
  }
  return worst;
}

absl::Status NoPlan(const StageSearchOptions& options, const StageTable& table,
                    const std::vector<TrainingDevice>& devices, const CancellationToken& token,
                    const ClosePlan* close) {
  const int stages = table.stages();
  std::vector<int> cuts(stages + 1, 0);
  cuts[stages] = table.items();
  bool even_split = true;  // the pins may leave none; the search said so
  for (int k = 0; k < stages && even_split; ++k) {
    int low = 0, high = 0;
    even_split = table.EndRange(k, cuts[k], &low, &high);
    const int even = static_cast<int>(static_cast<int64_t>(table.items()) * (k + 1) / stages);
    cuts[k + 1] = std::clamp(even, low, high);
  }
  if (!even_split && !table.one_chunk() && close == nullptr) {
    return absl::FailedPreconditionError(
        "no plan fits the devices' memory and meets the pins (the search tried every cut)");
  }
  const bool may_recompute = options.recompute != RecomputeChoice::kNever;
  std::vector<bool> recompute(stages, may_recompute);
  const char* how = may_recompute ? "with the nodes spread evenly and every stage recomputed"
                                  : "with the nodes spread evenly";
  if (table.one_chunk()) {
    // An allowance that fits any stage on any device: no stage needs more
    // than the whole chain would.
    double most = 0;
    for (int k = 0; k < stages; ++k) {
      for (const bool choice : RecomputeChoices(options.recompute)) {
        most = std::max(most, table.StagePeakOf(k, 0, table.items(), choice));
      }
    }
    double low = 0, high = most + 1;
    std::vector<int> best_cuts;
    std::vector<bool> best_recompute;
    bool fits = false;
    for (int grow = 0; grow < 8 && !fits; ++grow, high *= 4) {
      PARTPLAN_RETURN_IF_ERROR(token.Check());
      PARTPLAN_ASSIGN_OR_RETURN(fits, FitsWithAllowance(options, table, devices, high, token,
                                                        &best_cuts, &best_recompute));
      if (fits) break;
    }
    if (!fits) return NoPlanMeetsThePins();
    if (fits) {
      for (int round = 0; round < 64 && high - low > 0.5; ++round) {
        PARTPLAN_RETURN_IF_ERROR(token.Check());
        const double mid = (low + high) / 2;
        std::vector<int> mid_cuts;
        std::vector<bool> mid_recompute;
        PARTPLAN_ASSIGN_OR_RETURN(
            const bool mid_fits,
            FitsWithAllowance(options, table, devices, mid, token, &mid_cuts, &mid_recompute));
        if (mid_fits) {
          high = mid;
          best_cuts = std::move(mid_cuts);
          best_recompute = std::move(mid_recompute);
        } else {
          low = mid;
        }
      }
      cuts = std::move(best_cuts);
      recompute = std::move(best_recompute);
      how =
          "in the plan that comes closest (the least largest shortfall over every cut and "
          "recompute choice)";
    }
  }
  Shortfall chosen;
  if (even_split || table.one_chunk()) chosen = LargestShortfall(table, devices, cuts, recompute);
  if (close != nullptr && !table.one_chunk()) {
    const Shortfall closer = LargestShortfall(table, devices, close->cuts, close->recompute);
    if (!even_split || closer.bytes < chosen.bytes) {
      chosen = closer;
      how =
          "in the plan found to come closest (by bisection on a memory allowance; the "
          "least largest shortfall over every cut where each search finished)";
    }
  }
  const int worst = chosen.device;
  const double worst_short = chosen.bytes;
  const double worst_peak = chosen.peak;
  return absl::FailedPreconditionError(absl::StrCat(
      "no plan fits the devices' memory (the search tried every cut); ", how, ", device ",
      devices[worst].name.empty() ? absl::StrCat(worst)
                                  : absl::StrCat("'", devices[worst].name, "' (", worst, ")"),
      " needs ", static_cast<int64_t>(std::ceil(worst_peak)), " bytes, ",
      static_cast<int64_t>(std::ceil(std::max(0.0, worst_short))), " more than its ",
      static_cast<int64_t>(devices[worst].memory_bytes)));
}

}  // namespace stage_search_internal
}  // namespace partplan

// PlanTrainingStages against exhaustive search: on thousands of random small
// instances per schedule (heterogeneous devices, arbitrary bytes crossing
// each cut as skip connections make them, recompute on, off or chosen,
// tight memory, pins), the planner's plan is proven optimal and has the
// least simulated step and, among those, the fewest crossing bytes that
// trying every cut and every recompute choice finds; and when nothing fits
// it says so. Plus: DeepSpeed #4477 (balanced stages put the most memory on
// stage 0 under 1F1B), the search bound, and validation.
#include "planner/training/stage_search.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "tests/planner/training/schedule_options.h"

namespace partplan {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct Instance {
  StageSearchOptions options;
  TrainingChain chain;
  std::vector<TrainingDevice> devices;
};

struct Best {
  bool found = false;
  double step = kInfinity;
  int64_t bytes = 0;
};

bool PinsHold(const TrainingChain& chain, const std::vector<int>& cuts) {
  return CutsMeetPins(chain, static_cast<int>(cuts.size()) - 1, cuts);
}

// Every way to cut, every recompute choice the policy allows.
// Calls `each` with the plan of every way to cut that meets the pins and
// every recompute choice the policy allows, fitting or not.
template <typename Each>
void ForEveryPlan(const Instance& instance, Each each) {
  const int stages = instance.options.schedule.stages();
  const int n = static_cast<int>(instance.chain.items.size());
  std::vector<int> cuts(stages + 1, 0);
  cuts[stages] = n;
  const auto each_cut = [&](auto&& self, int k) -> void {
    if (k == stages) {
      if (!PinsHold(instance.chain, cuts)) return;
      const int combinations = 1 << stages;
      for (int mask = 0; mask < combinations; ++mask) {
        std::vector<bool> recompute(stages);
        for (int s = 0; s < stages; ++s) recompute[s] = (mask >> s) & 1;
        const RecomputeChoice policy = instance.options.recompute;
        if (policy == RecomputeChoice::kNever && mask != 0) continue;
        if (policy == RecomputeChoice::kAlways && mask != combinations - 1) continue;
        const absl::StatusOr<TrainingStagePlan> plan =
            EvaluateTrainingStages(instance.options, instance.chain, instance.devices, cuts,
                                   recompute, NoDeadline());
        ASSERT_TRUE(plan.ok()) << plan.status();
        each(*plan);
      }
      return;
    }
    for (int c = cuts[k - 1] + 1; c <= n - (stages - k); ++c) {
      cuts[k] = c;
      self(self, k + 1);
    }
  };
  each_cut(each_cut, 1);
}

Best Exhaustive(const Instance& instance) {
  Best best;
  ForEveryPlan(instance, [&](const TrainingStagePlan& plan) {
    for (size_t d = 0; d < instance.devices.size(); ++d) {
      if (plan.memory[d].peak_bytes > instance.devices[d].memory_bytes) return;
    }
    // Test instances are integers and powers of two: ties are exact.
    if (!best.found || plan.step_seconds < best.step ||
        (plan.step_seconds == best.step && plan.crossing_bytes < best.bytes)) {
      best = {true, plan.step_seconds, plan.crossing_bytes};
    }
  });
  return best;
}

// The most any device of `plan` needs beyond its memory (negative when all
// fit).
double LargestShortfall(const Instance& instance, const TrainingStagePlan& plan) {
  double most = -kInfinity;
  for (size_t d = 0; d < instance.devices.size(); ++d) {
    most = std::max(most, plan.memory[d].peak_bytes - instance.devices[d].memory_bytes);
  }
  return most;
}

Instance RandomInstance(PipelineSchedule schedule, std::mt19937& random) {
  const auto uniform = [&random](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(random);
  };
  Instance instance;
  const bool interleaved = schedule == PipelineSchedule::kInterleaved1F1B;
  const int devices = interleaved ? 2 : uniform(2, 4);
  const int chunks = interleaved ? 2 : 1;
  const int micro_batches = interleaved ? devices * uniform(1, 3) : uniform(1, 6);
  instance.options.schedule = Options(schedule, devices, micro_batches, chunks);
  const int stages = devices * chunks;
  const int n = stages + uniform(0, stages == 4 ? 3 : 5);
  instance.options.memory.weight_bytes = uniform(0, 2);
  instance.options.memory.gradient_bytes = uniform(0, 2);
  instance.options.memory.optimizer_bytes = uniform(0, 4);
  instance.options.memory.activations_until_weight = uniform(0, 1) == 1;
  const int policy = uniform(0, 5);
  instance.options.recompute = policy == 0   ? RecomputeChoice::kNever
                               : policy == 1 ? RecomputeChoice::kAlways
                                             : RecomputeChoice::kAuto;
  for (int i = 0; i < n; ++i) {
    TrainingItem item;
    item.forward = uniform(0, 6);
    item.backward_input = uniform(0, 8);
    item.backward_weight = uniform(0, 5);
    item.saved_activation_bytes = uniform(0, 64);
    item.parameters = uniform(0, 16);
    item.transient_bytes = uniform(0, 24);
    instance.chain.items.push_back(item);
  }
  // Any bytes at any cut: a skip connection keeps a value live across many.
  for (int c = 0; c <= n; ++c) instance.chain.live_bytes.push_back(uniform(0, 48));
  if (uniform(0, 4) == 0) {
    instance.chain.placement.assign(n, StagePlacement::kAny);
    const StagePlacement pins[] = {StagePlacement::kFirst, StagePlacement::kLast,
                                   StagePlacement::kAlone};
    instance.chain.placement[uniform(0, n - 1)] = pins[uniform(0, 2)];
  }
  if (uniform(0, 2) == 0) {
    // A storage two items save (a ReLU's output the next Linear saves).
    const int a = uniform(0, n - 2), b = uniform(a + 1, n - 1);
    const int64_t bytes = std::min(instance.chain.items[a].saved_activation_bytes,
                                   instance.chain.items[b].saved_activation_bytes);
    instance.chain.shared_saves.push_back({a, b, bytes / 2 + 1 > bytes ? bytes : bytes / 2 + 1});
  }
  if (uniform(0, 3) == 0) {
    // Tied parameters: two items, kept on one stage or all-reduced.
    TiedParameters group;
    const int a = uniform(0, n - 1), b = uniform(0, n - 1);
    group.items = a == b ? std::vector<int>{a} : std::vector<int>{std::min(a, b), std::max(a, b)};
    group.parameters = uniform(1, 16);
    group.same_stage = uniform(0, 2) == 0;
    instance.chain.tied.push_back(group);
  }
  for (int d = 0; d < devices; ++d) {
    TrainingDevice device;
    device.speed = uniform(0, 2) == 0 ? 2 : 1;
    const int link = uniform(0, 2);
    device.link_bytes_per_second = link == 0 ? kInfinity : link == 1 ? 16 : 32;
    instance.devices.push_back(device);
  }
  // Memory from tight to loose around what an even split needs.
  std::vector<int> even(stages + 1);
  for (int k = 0; k <= stages; ++k) even[k] = n * k / stages;
  const absl::StatusOr<TrainingStagePlan> plan =
      EvaluateTrainingStages(instance.options, instance.chain, instance.devices, even,
                             std::vector<bool>(stages, false), NoDeadline());
  EXPECT_TRUE(plan.ok()) << plan.status();
  for (int d = 0; d < devices; ++d) {
    const int kind = uniform(0, 3);
    const double peak = plan.ok() ? plan->memory[d].peak_bytes : 0;
    instance.devices[d].memory_bytes =
        kind == 0 ? kInfinity : std::floor(peak * uniform(60, 140) / 100.0);
  }
  return instance;
}

// Besides the search, the first plan alone (max_search_nodes 0): its lower
// bound must hold, and its gap to the optimum is printed (docs cite it).
void CompareWithExhaustive(PipelineSchedule schedule, int instances, uint32_t seed) {
  std::mt19937 random(seed);
  int feasible = 0;
  int recomputed = 0;
  int first_found = 0;
  int first_optimal = 0;
  double first_gap_sum = 0;
  double first_gap_most = 0;
  for (int i = 0; i < instances; ++i) {
    const Instance instance = RandomInstance(schedule, random);
    const Best best = Exhaustive(instance);
    const absl::StatusOr<TrainingStagePlan> plan =
        PlanTrainingStages(instance.options, instance.chain, instance.devices, NoDeadline());
    if (!best.found) {
      ASSERT_FALSE(plan.ok()) << "instance " << i << ": nothing fits, yet a plan of "
                              << plan->step_seconds;
      EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition) << plan.status();
      continue;
    }
    ASSERT_TRUE(plan.ok()) << "instance " << i << ": " << plan.status();
    ++feasible;
    EXPECT_TRUE(plan->proven_optimal) << "instance " << i;
    EXPECT_EQ(plan->step_seconds, best.step) << "instance " << i;
    EXPECT_EQ(plan->crossing_bytes, best.bytes) << "instance " << i;
    EXPECT_TRUE(PinsHold(instance.chain, plan->cuts)) << "instance " << i;
    for (size_t d = 0; d < instance.devices.size(); ++d) {
      EXPECT_LE(plan->memory[d].peak_bytes, instance.devices[d].memory_bytes) << "instance " << i;
    }
    if (std::count(plan->recompute.begin(), plan->recompute.end(), true) > 0) ++recomputed;

    StageSearchOptions first_only = instance.options;
    first_only.max_search_nodes = 0;
    const absl::StatusOr<TrainingStagePlan> first =
        PlanTrainingStages(first_only, instance.chain, instance.devices, NoDeadline());
    if (first.ok()) {
      ++first_found;
      EXPECT_FALSE(first->proven_optimal);
      EXPECT_GE(first->step_seconds, best.step) << "instance " << i;
      EXPECT_LE(first->lower_bound, best.step) << "instance " << i;
      const double gap = best.step > 0 ? first->step_seconds / best.step - 1 : 0;
      first_optimal += gap == 0;
      first_gap_sum += gap;
      first_gap_most = std::max(first_gap_most, gap);
    }
    if (::testing::Test::HasFailure()) return;
  }
  std::cout << ::testing::UnitTest::GetInstance()->current_test_info()->name()
            << ": the first plan without search: found for " << first_found << " of " << feasible
            << " feasible instances, optimal for " << first_optimal << ", mean gap "
            << 100 * first_gap_sum / std::max(1, first_found) << "%, largest "
            << 100 * first_gap_most << "%\n";
  // The instances exercise both sides of memory and recompute.
  EXPECT_GT(feasible, instances / 3);  // and some are infeasible:
  EXPECT_LT(feasible, instances);
  EXPECT_GT(recomputed, instances / 20);
}

TEST(StageSearchTest, GpipeMatchesExhaustiveSearch) {
  CompareWithExhaustive(PipelineSchedule::kGpipe, 3000, 11);
}
TEST(StageSearchTest, OneFOneBMatchesExhaustiveSearch) {
  CompareWithExhaustive(PipelineSchedule::k1F1B, 3000, 12);
}
TEST(StageSearchTest, InterleavedMatchesExhaustiveSearch) {
  CompareWithExhaustive(PipelineSchedule::kInterleaved1F1B, 3000, 13);
}
TEST(StageSearchTest, ZeroBubbleMatchesExhaustiveSearch) {
  CompareWithExhaustive(PipelineSchedule::kZeroBubbleH1, 3000, 14);
}

// DeepSpeed #4477: identical layers split evenly (as a parameter-balanced
// partitioner does) put the most memory on stage 0 under 1F1B, which holds
// P micro-batches in flight against the last stage's one. Under a memory cap
// that the even split overflows on stage 0, the planner moves layers off it.
TEST(StageSearchTest, MovesLayersOffTheFirstStageUnderOneFOneB) {
  Instance instance;
  instance.options.schedule = Options(PipelineSchedule::k1F1B, 4, 8);
  const int layers = 32;
  for (int i = 0; i < layers; ++i) {
    TrainingItem layer;
    layer.forward = 1;
    layer.backward_input = 1;
    layer.backward_weight = 1;
    layer.saved_activation_bytes = 100;
    layer.parameters = 10;
    instance.chain.items.push_back(layer);
  }
  instance.chain.live_bytes.assign(layers + 1, 10);
  instance.devices.assign(4, TrainingDevice{});
  std::vector<int> even = {0, 8, 16, 24, 32};
  const absl::StatusOr<TrainingStagePlan> balanced =
      EvaluateTrainingStages(instance.options, instance.chain, instance.devices, even,
                             std::vector<bool>(4, false), NoDeadline());
  ASSERT_TRUE(balanced.ok()) << balanced.status();
  for (int d = 1; d < 4; ++d) {
    EXPECT_GT(balanced->memory[0].peak_bytes, balanced->memory[d].peak_bytes);
  }
  // Stage 0 holds 4 micro-batches of 8 layers: 3,200 bytes of activations.
  EXPECT_EQ(balanced->memory[0].activations, 3200);
  const double cap = balanced->memory[0].peak_bytes - 1;
  for (TrainingDevice& device : instance.devices) device.memory_bytes = cap;
  instance.options.recompute = RecomputeChoice::kNever;
  const absl::StatusOr<TrainingStagePlan> plan =
      PlanTrainingStages(instance.options, instance.chain, instance.devices, NoDeadline());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->proven_optimal);
  EXPECT_LT(plan->cuts[1], 8);
  for (const DeviceMemory& memory : plan->memory) EXPECT_LE(memory.peak_bytes, cap);
}

// A tied embedding and head (Megatron-LM's GPT): split over the first and
// last stage, their gradients are all-reduced after the backward, which
// the step includes; kept together, no cut falls between them.
TEST(StageSearchTest, TiedParametersAreAllReducedOrKeptTogether) {
  Instance instance;
  instance.options.schedule = Options(PipelineSchedule::k1F1B, 2, 4);
  for (int i = 0; i < 6; ++i) {
    TrainingItem item;
    item.forward = 1;
    item.backward_input = 1;
    instance.chain.items.push_back(item);
  }
  instance.chain.live_bytes.assign(7, 0);
  TiedParameters embedding;
  embedding.items = {0, 5};
  embedding.parameters = 1000;  // 2,000 gradient bytes
  instance.chain.tied.push_back(embedding);
  TrainingDevice device;
  device.link_bytes_per_second = 100;  // 2 (n - 1) / n x 2,000 / 100 = 20 s
  instance.devices.assign(2, device);
  const absl::StatusOr<TrainingStagePlan> split =
      EvaluateTrainingStages(instance.options, instance.chain, instance.devices, {0, 3, 6},
                             {false, false}, NoDeadline());
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->tied_allreduce_seconds.size(), 1u);
  EXPECT_EQ(split->tied_allreduce_seconds[0], 20);
  EXPECT_EQ(split->step_seconds, split->timeline.step_seconds + 20);
  // Both devices keep a copy of the shared parameters.
  EXPECT_EQ(split->footprints[0].parameters, 1000);
  EXPECT_EQ(split->footprints[1].parameters, 1000);

  instance.chain.tied[0].same_stage = true;
  EXPECT_FALSE(CutsMeetPins(instance.chain, 2, {0, 3, 6}));
  instance.chain.tied[0].items = {0, 2};
  const absl::StatusOr<TrainingStagePlan> plan =
      PlanTrainingStages(instance.options, instance.chain, instance.devices, NoDeadline());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GE(plan->cuts[1], 3);
  EXPECT_EQ(plan->tied_allreduce_seconds[0], 0);
}

// A storage two items save counts once in a stage holding both, and on each
// stage when a cut falls between them.
TEST(StageSearchTest, SharedSavesCountOncePerStage) {
  Instance instance;
  instance.options.schedule = Options(PipelineSchedule::kGpipe, 2, 1);
  instance.chain.items.assign(4, TrainingItem{});
  for (TrainingItem& item : instance.chain.items) item.saved_activation_bytes = 100;
  instance.chain.shared_saves = {{1, 2, 60}};  // items 1 and 2 both save 60 bytes
  instance.chain.live_bytes.assign(5, 0);
  instance.devices.assign(2, TrainingDevice{});
  for (const auto& [cut, first, second] :
       std::vector<std::tuple<int, int64_t, int64_t>>{{1, 100, 240}, {2, 200, 200}, {3, 240, 100}}) {
    const absl::StatusOr<TrainingStagePlan> plan =
        EvaluateTrainingStages(instance.options, instance.chain, instance.devices, {0, cut, 4},
                               {false, false}, NoDeadline());
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->footprints[0].saved_activation_bytes, first) << "cut " << cut;
    EXPECT_EQ(plan->footprints[1].saved_activation_bytes, second) << "cut " << cut;
  }
}

TEST(StageSearchTest, NothingFitsNamesTheDeviceShort) {
  Instance instance;
  instance.options.schedule = Options(PipelineSchedule::k1F1B, 2, 4);
  for (int i = 0; i < 4; ++i) {
    TrainingItem item;
    item.forward = 1;
    item.parameters = 100;
    instance.chain.items.push_back(item);
  }
  instance.chain.live_bytes.assign(5, 0);
  TrainingDevice device;
  device.memory_bytes = 1000;  // two items' 16-byte states are 3,200
  instance.devices.assign(2, device);
  absl::StatusOr<TrainingStagePlan> plan =
      PlanTrainingStages(instance.options, instance.chain, instance.devices, NoDeadline());
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition) << plan.status();
  EXPECT_NE(plan.status().message().find("device 0 needs 3200 bytes, 2200 more than its 1000"),
            std::string::npos)
      << plan.status();

  // With room on device 1, the closest plan puts one item on device 0.
  instance.devices[1].memory_bytes = 5000;
  plan = PlanTrainingStages(instance.options, instance.chain, instance.devices, NoDeadline());
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition) << plan.status();
  EXPECT_NE(plan.status().message().find("device 0 needs 1600 bytes, 600 more than its 1000"),
            std::string::npos)
      << plan.status();
}

// Plans `instance` with each device's memory cut to a third (unbounded ones
// to 3 bytes): most such plans do not fit.
absl::StatusOr<TrainingStagePlan> PlanWithAThirdOfTheMemory(Instance& instance) {
  for (TrainingDevice& device : instance.devices) {
    if (std::isinf(device.memory_bytes)) device.memory_bytes = 10;
    device.memory_bytes = std::floor(device.memory_bytes / 3);
  }
  return PlanTrainingStages(instance.options, instance.chain, instance.devices, NoDeadline());
}

// The shortfall an infeasible request reports is the least largest one
// over every cut and recompute choice, as trying them all finds.
TEST(StageSearchTest, ShortfallIsTheLeastOverEveryCut) {
  std::mt19937 random(21);
  int checked = 0;
  for (int i = 0; i < 400; ++i) {
    Instance instance = RandomInstance(PipelineSchedule::k1F1B, random);
    const absl::StatusOr<TrainingStagePlan> plan = PlanWithAThirdOfTheMemory(instance);
    if (plan.ok()) continue;
    ASSERT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition) << plan.status();
    // Every cut and choice: the least over plans of the largest shortfall.
    double least = kInfinity;
    ForEveryPlan(instance, [&](const TrainingStagePlan& each) {
      least = std::min(least, LargestShortfall(instance, each));
    });
    if (std::isinf(least)) {
      EXPECT_NE(plan.status().message().find("pins"), std::string::npos) << plan.status();
      continue;
    }
    const std::string expected = absl::StrCat(static_cast<int64_t>(std::ceil(least)), " more than");
    EXPECT_NE(plan.status().message().find(expected), std::string::npos)
        << "instance " << i << ": " << plan.status() << " expected " << expected;
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

// With several chunks per device, on problems this small (the searches
// finish), the shortfall reported is the least largest one over every cut
// and recompute choice, as trying them all finds; and never above the even
// split's.
TEST(StageSearchTest, InterleavedShortfallIsTheLeastOverEveryCut) {
  std::mt19937 random(33);
  int checked = 0;
  for (int i = 0; i < 600; ++i) {
    Instance instance = RandomInstance(PipelineSchedule::kInterleaved1F1B, random);
    if (!instance.chain.placement.empty() || !instance.chain.tied.empty()) continue;
    const absl::StatusOr<TrainingStagePlan> plan = PlanWithAThirdOfTheMemory(instance);
    if (plan.ok()) continue;
    ASSERT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition) << plan.status();
    const std::string message(plan.status().message());
    const size_t at = message.find(" more than its ");
    if (at == std::string::npos) continue;  // not a memory shortfall
    const size_t start = message.rfind(' ', at - 1) + 1;
    const double reported = std::stod(message.substr(start, at - start));
    double least = kInfinity;
    ForEveryPlan(instance, [&](const TrainingStagePlan& each) {
      least = std::min(least, LargestShortfall(instance, each));
    });
    // The even split, every stage recomputing when allowed, as NoPlan makes it.
    const int stages = instance.options.schedule.stages();
    const int n = static_cast<int>(instance.chain.items.size());
    std::vector<int> cuts(stages + 1, 0);
    for (int k = 0; k < stages; ++k) cuts[k + 1] = n * (k + 1) / stages;
    const std::vector<bool> recompute(stages,
                                      instance.options.recompute != RecomputeChoice::kNever);
    auto evaluator = TrainingStagesEvaluator::Create(instance.options, instance.chain,
                                                     instance.devices, NoDeadline());
    ASSERT_TRUE(evaluator.ok()) << evaluator.status();
    const absl::StatusOr<TrainingStagePlan> even =
        (*evaluator)->Evaluate(cuts, recompute, NoDeadline());
    ASSERT_TRUE(even.ok()) << even.status();
    const double even_short = LargestShortfall(instance, *even);
    EXPECT_EQ(reported, std::ceil(least)) << "instance " << i << ": " << message;
    EXPECT_LE(reported, std::ceil(std::max(0.0, even_short)))
        << "instance " << i << ": " << message;
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST(StageSearchTest, ConflictingPinsAreAFailedPrecondition) {
  Instance instance;
  instance.options.schedule = Options(PipelineSchedule::kGpipe, 2, 2);
  instance.chain.items.assign(3, TrainingItem{});
  instance.chain.live_bytes.assign(4, 0);
  instance.chain.placement = {StagePlacement::kAny, StagePlacement::kLast, StagePlacement::kFirst};
  instance.devices.assign(2, TrainingDevice{});
  const absl::StatusOr<TrainingStagePlan> plan =
      PlanTrainingStages(instance.options, instance.chain, instance.devices, NoDeadline());
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition) << plan.status();
  EXPECT_NE(plan.status().message().find("pins"), std::string::npos) << plan.status();
}

// A search stopped by its node bound still returns a plan, not claimed
// optimal, with a lower bound at most its step.
TEST(StageSearchTest, BoundedSearchReportsItsLowerBound) {
  std::mt19937 random(7);
  int stopped = 0;
  for (int i = 0; i < 200; ++i) {
    Instance instance = RandomInstance(PipelineSchedule::k1F1B, random);
    instance.options.max_search_nodes = 1;
    const absl::StatusOr<TrainingStagePlan> plan =
        PlanTrainingStages(instance.options, instance.chain, instance.devices, NoDeadline());
    if (!plan.ok() || plan->proven_optimal) continue;
    ++stopped;
    EXPECT_LE(plan->lower_bound, plan->step_seconds);
    const Best best = Exhaustive(instance);
    ASSERT_TRUE(best.found);
    EXPECT_LE(plan->lower_bound, best.step + 1e-9);
  }
  EXPECT_GT(stopped, 10);
}

TEST(StageSearchTest, InvalidInputNamesTheField) {
  Instance instance;
  instance.options.schedule = Options(PipelineSchedule::k1F1B, 2, 2);
  instance.chain.items.assign(2, TrainingItem{});
  instance.chain.live_bytes.assign(3, 0);
  instance.devices.assign(2, TrainingDevice{});
  instance.chain.items[1].forward = -1;
  absl::StatusOr<TrainingStagePlan> plan =
      PlanTrainingStages(instance.options, instance.chain, instance.devices, NoDeadline());
  EXPECT_EQ(InvalidFieldPath(plan.status()).value_or(""), "chain.items[1].forward") << plan.status();
  instance.chain.items[1].forward = 0;
  instance.devices[1].speed = 0;
  plan = PlanTrainingStages(instance.options, instance.chain, instance.devices, NoDeadline());
  EXPECT_EQ(InvalidFieldPath(plan.status()).value_or(""), "devices[1].speed") << plan.status();
  instance.devices[1].speed = 1;
  instance.chain.live_bytes.pop_back();
  plan = PlanTrainingStages(instance.options, instance.chain, instance.devices, NoDeadline());
  EXPECT_EQ(InvalidFieldPath(plan.status()).value_or(""), "chain.live_bytes") << plan.status();
  instance.chain.live_bytes.push_back(0);
  instance.chain.items.pop_back();
  plan = PlanTrainingStages(instance.options, instance.chain, instance.devices, NoDeadline());
  EXPECT_EQ(InvalidFieldPath(plan.status()).value_or(""), "chain.items") << plan.status();
}

}  // namespace
}  // namespace partplan

// SimulateSchedule: the published closed forms where they hold (no transfer
// cost, uniform stages), the transfer-cost case where they do not, the
// activations each stage holds, and every timeline against an independent
// computation of the same model (longest paths over the ops' dependency graph
// in a topological order) on random heterogeneous instances.
#include "planner/training/schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <random>
#include <tuple>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "tests/planner/training/schedule_options.h"

namespace partplan {
namespace {

PipelineTimeline Simulate(const ScheduleOptions& options, const StageCosts& costs) {
  absl::StatusOr<PipelineTimeline> timeline = SimulateSchedule(options, costs, NoDeadline());
  EXPECT_TRUE(timeline.ok()) << timeline.status();
  return timeline.ok() ? *std::move(timeline) : PipelineTimeline();
}

// Uniform stages without transfer cost: GPipe and 1F1B both take
// (B + P - 1)(f + b) (Narayanan et al., SC'21); stage s of 1F1B holds
// min(P - s, B) micro-batches at once, GPipe's every stage all B.
TEST(ScheduleTest, UniformStagesMatchTheClosedForms) {
  for (const int p : {1, 2, 4, 5}) {
    for (const int b : {1, 3, 4, 8}) {
      for (const PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B}) {
        SCOPED_TRACE(testing::Message() << "P=" << p << " B=" << b << " schedule="
                                        << static_cast<int>(schedule));
        const ScheduleOptions options = Options(schedule, p, b);
        const PipelineTimeline timeline =
            Simulate(options, UniformStageCosts(options, 1.0, 2.0, 0.0));
        EXPECT_DOUBLE_EQ(timeline.step_seconds, (b + p - 1) * 3.0);
        for (int s = 0; s < p; ++s) {
          EXPECT_EQ(timeline.peak_in_flight[s],
                    schedule == PipelineSchedule::kGpipe ? b : std::min(p - s, b))
              << "stage " << s;
        }
        // Every device is idle (P - 1)(f + b) of the step.
        for (int d = 0; d < p; ++d) {
          EXPECT_NEAR(timeline.bubble_fraction[d], (p - 1) * 3.0 / timeline.step_seconds, 1e-12);
        }
      }
    }
  }
}

// With transfers the closed form (B + P - 1)(f + b) + 2(P - 1)c is wrong for
// 1F1B, whose steady state pays the transfers again: P = 4, B = 8, f = 1,
// b = 2, c = 0.5 gives 41 where GPipe gives 36 (shared/design/training.md).
TEST(ScheduleTest, TransfersCost1F1BMoreThanTheClosedForm) {
  const ScheduleOptions one_f_one_b = Options(PipelineSchedule::k1F1B, 4, 8);
  EXPECT_DOUBLE_EQ(Simulate(one_f_one_b, UniformStageCosts(one_f_one_b, 1, 2, 0.5)).step_seconds,
                   41.0);
  const ScheduleOptions gpipe = Options(PipelineSchedule::kGpipe, 4, 8);
  EXPECT_DOUBLE_EQ(Simulate(gpipe, UniformStageCosts(gpipe, 1, 2, 0.5)).step_seconds, 36.0);
}

// GPipe without transfer costs is a grid: its step time decomposes into
// sum(f) + (B - 1) max(f) + sum(b) + (B - 1) max(b) for any stage costs, so a
// planner may optimise those terms. 1F1B's does not decompose so (its order
// is not a grid): with P = B = 2, stage costs (f, b) = (2, 1) and (1, 1), it
// takes 7 where sum(f + b) + (B - 1) max(f + b) gives 8.
TEST(ScheduleTest, OnlyGpipeDecomposesWithoutTransfers) {
  std::mt19937 random(11);
  std::uniform_real_distribution<double> seconds(0.1, 3.0);
  for (int trial = 0; trial < 2000; ++trial) {
    const ScheduleOptions options =
        Options(PipelineSchedule::kGpipe, 1 + random() % 6, 1 + random() % 10);
    StageCosts costs = UniformStageCosts(options, 0, 0, 0);
    double sum = 0, most_forward = 0, most_backward = 0;
    for (int s = 0; s < options.stages(); ++s) {
      costs.forward[s] = seconds(random);
      costs.backward[s] = seconds(random);
      sum += costs.forward[s] + costs.backward[s];
      most_forward = std::max(most_forward, costs.forward[s]);
      most_backward = std::max(most_backward, costs.backward[s]);
    }
    EXPECT_NEAR(Simulate(options, costs).step_seconds,
                sum + (options.micro_batches - 1) * (most_forward + most_backward), 1e-9)
        << "trial " << trial;
  }
  const ScheduleOptions one_f_one_b = Options(PipelineSchedule::k1F1B, 2, 2);
  StageCosts costs = UniformStageCosts(one_f_one_b, 1, 1, 0);
  costs.forward[0] = 2;
  EXPECT_DOUBLE_EQ(Simulate(one_f_one_b, costs).step_seconds, 7.0);
}

// Interleaved 1F1B with v chunks of a uniform model (each chunk f/v and b/v)
// and no transfer cost: B(f + b) of work per device plus a bubble of
// (P - 1)(f + b)/v (Narayanan et al., SC'21).
TEST(ScheduleTest, InterleavingDividesTheBubbleByTheChunks) {
  for (const int p : {2, 4}) {
    for (const int v : {1, 2, 3}) {
      for (const int rounds : {1, 2, 3}) {
        const int b = rounds * p;
        SCOPED_TRACE(testing::Message() << "P=" << p << " v=" << v << " B=" << b);
        const ScheduleOptions options = Options(PipelineSchedule::kInterleaved1F1B, p, b, v);
        const PipelineTimeline timeline =
            Simulate(options, UniformStageCosts(options, 1.0 / v, 2.0 / v, 0.0));
        EXPECT_NEAR(timeline.step_seconds, b * 3.0 + (p - 1) * 3.0 / v, 1e-9);
      }
    }
  }
}

// ZB-H1 with uniform F, B and W and no transfer cost: B(F + B + W) of work
// per device plus a bubble of (P - 1)(F + B - W) while W <= B, and of
// (P - 1)F once W > B (Qi et al., ICLR 2024; shared/design/training.md). Until
// B ends stage s holds min(P - s, B) micro-batches, as under 1F1B; until W
// ends every stage holds min(P, B).
TEST(ScheduleTest, ZeroBubbleH1MatchesItsBubbleAndMemory) {
  for (const int p : {2, 3, 4}) {
    for (const int b : {1, 2, 4, 8}) {
      for (const auto& [f, bwd, w] :
           {std::tuple(1.0, 1.0, 1.0), std::tuple(2.0, 1.5, 0.5), std::tuple(1.0, 1.0, 2.0)}) {
        SCOPED_TRACE(testing::Message() << "P=" << p << " B=" << b << " F=" << f << " B=" << bwd
                                        << " W=" << w);
        const ScheduleOptions options = Options(PipelineSchedule::kZeroBubbleH1, p, b);
        StageCosts costs = UniformStageCosts(options, f, bwd, 0.0);
        costs.weight.assign(p, w);
        const PipelineTimeline timeline = Simulate(options, costs);
        if (b >= p) {
          const double bubble = w <= bwd ? (p - 1) * (f + bwd - w) : (p - 1) * f;
          EXPECT_DOUBLE_EQ(timeline.step_seconds, b * (f + bwd + w) + bubble);
        }
        for (int s = 0; s < p; ++s) {
          EXPECT_EQ(timeline.peak_in_flight[s], std::min(p - s, b)) << "stage " << s;
          EXPECT_EQ(timeline.peak_until_weight[s], std::min(p, b)) << "stage " << s;
        }
      }
    }
  }
}

// The other schedules run W inside B: their step is that of a backward of
// B + W.
TEST(ScheduleTest, WithoutASplitTheWeightGradientIsPartOfTheBackward) {
  const ScheduleOptions options = Options(PipelineSchedule::k1F1B, 4, 8);
  StageCosts split = UniformStageCosts(options, 1, 1.5, 0.5);
  split.weight.assign(4, 0.5);
  const PipelineTimeline timeline = Simulate(options, split);
  EXPECT_DOUBLE_EQ(timeline.step_seconds,
                   Simulate(options, UniformStageCosts(options, 1, 2, 0.5)).step_seconds);
  EXPECT_EQ(timeline.peak_until_weight, timeline.peak_in_flight);
}

// Every F and B of every stage and micro-batch, once, on the stage's device;
// each stage's F of a micro-batch before its B.
TEST(ScheduleTest, EveryOpOnceOnItsDevice) {
  for (const ScheduleOptions& options :
       {Options(PipelineSchedule::kGpipe, 3, 5), Options(PipelineSchedule::k1F1B, 4, 3),
        Options(PipelineSchedule::kInterleaved1F1B, 3, 6, 2),
        Options(PipelineSchedule::kZeroBubbleH1, 4, 6),
        Options(PipelineSchedule::kZeroBubbleH1, 4, 2)}) {
    const std::vector<std::vector<PipelineOp>> order = ScheduleOrder(options);
    std::map<std::tuple<int, int, int>, int> position;  // (kind, stage, micro-batch) -> index
    for (int d = 0; d < options.devices; ++d) {
      for (size_t i = 0; i < order[d].size(); ++i) {
        const PipelineOp& op = order[d][i];
        EXPECT_EQ(options.DeviceOf(op.stage), d);
        EXPECT_TRUE(
            position.emplace(std::tuple(static_cast<int>(op.kind), op.stage, op.micro_batch), i)
                .second);
      }
    }
    const bool split = options.schedule == PipelineSchedule::kZeroBubbleH1;
    EXPECT_EQ(position.size(),
              static_cast<size_t>((split ? 3 : 2) * options.stages() * options.micro_batches));
    for (int s = 0; s < options.stages(); ++s) {
      for (int m = 0; m < options.micro_batches; ++m) {
        EXPECT_LT((position[{0, s, m}]), (position[{1, s, m}]));
        if (split) {
          EXPECT_LT((position[{1, s, m}]), (position[{2, s, m}]));
        }
      }
    }
  }
}

// The model computed another way: the ops as a graph (each op after the one
// before it on its device, after its input plus the transfer), every start
// the longest path to it, in a topological order found by Kahn's algorithm.
double IndependentStepTime(const ScheduleOptions& options, const StageCosts& costs) {
  const std::vector<std::vector<PipelineOp>> order = ScheduleOrder(options);
  const int stages = options.stages();
  const int b = options.micro_batches;
  const bool split = options.schedule == PipelineSchedule::kZeroBubbleH1;
  const auto id = [&](PipelineOpKind kind, int stage, int m) {
    return static_cast<int>(kind) * stages * b + stage * b + m;
  };
  const int n = 3 * stages * b;
  std::vector<std::vector<std::pair<int, double>>> after(n);  // edges u -> (v, delay)
  std::vector<int> indegree(n, 0);
  std::vector<double> cost(n, 0);
  const auto edge = [&](int u, int v, double delay) {
    after[u].push_back({v, delay});
    ++indegree[v];
  };
  for (const std::vector<PipelineOp>& ops : order) {
    for (size_t i = 0; i < ops.size(); ++i) {
      const PipelineOp& op = ops[i];
      const int v = id(op.kind, op.stage, op.micro_batch);
      const double weight = costs.weight.empty() ? 0.0 : costs.weight[op.stage];
      cost[v] = op.kind == PipelineOpKind::kForward    ? costs.forward[op.stage]
                : op.kind == PipelineOpKind::kWeight   ? weight
                : split                                ? costs.backward[op.stage]
                                                       : costs.backward[op.stage] + weight;
      if (op.kind == PipelineOpKind::kWeight) {
        edge(id(PipelineOpKind::kBackward, op.stage, op.micro_batch), v, 0);
      }
      if (i > 0) edge(id(ops[i - 1].kind, ops[i - 1].stage, ops[i - 1].micro_batch), v, 0);
      if (op.kind == PipelineOpKind::kForward && op.stage > 0) {
        edge(id(PipelineOpKind::kForward, op.stage - 1, op.micro_batch), v,
             costs.transfer[op.stage - 1]);
      }
      if (op.kind == PipelineOpKind::kBackward) {
        if (op.stage == stages - 1) {
          edge(id(PipelineOpKind::kForward, op.stage, op.micro_batch), v, 0);
        } else {
          edge(id(PipelineOpKind::kBackward, op.stage + 1, op.micro_batch), v,
               costs.transfer[op.stage]);
        }
      }
    }
  }
  // Without a split there are no W ops: their ids stay out of the graph.
  std::vector<bool> present(n, false);
  for (const std::vector<PipelineOp>& ops : order) {
    for (const PipelineOp& op : ops) present[id(op.kind, op.stage, op.micro_batch)] = true;
  }
  std::vector<double> start(n, 0);
  std::queue<int> ready;
  for (int v = 0; v < n; ++v) {
    if (present[v] && indegree[v] == 0) ready.push(v);
  }
  int done = 0;
  double step = 0;
  while (!ready.empty()) {
    const int u = ready.front();
    ready.pop();
    ++done;
    const double end = start[u] + cost[u];
    step = std::max(step, end);
    for (const auto& [v, delay] : after[u]) {
      start[v] = std::max(start[v], end + delay);
      if (--indegree[v] == 0) ready.push(v);
    }
  }
  EXPECT_EQ(done, static_cast<int>(std::count(present.begin(), present.end(), true)))
      << "the dependency graph has a cycle";
  return step;
}

// Random heterogeneous stages, weight gradients and links, every schedule: the timeline agrees
// with the independent computation, each op starts once its device is free
// and its input has arrived, and no device runs two ops at once.
TEST(ScheduleTest, AgreesWithAnIndependentComputationOnRandomInstances) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> seconds(0.0, 3.0);
  int instances = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int p = 1 + static_cast<int>(random() % 5);
    const PipelineSchedule schedule = static_cast<PipelineSchedule>(random() % 4);
    const int v = schedule == PipelineSchedule::kInterleaved1F1B ? 1 + random() % 3 : 1;
    const int b = schedule == PipelineSchedule::kInterleaved1F1B ? p * (1 + random() % 3)
                                                                  : 1 + random() % 9;
    const ScheduleOptions options = Options(schedule, p, b, v);
    StageCosts costs;
    for (int s = 0; s < options.stages(); ++s) {
      costs.forward.push_back(seconds(random));
      costs.backward.push_back(seconds(random));
      costs.weight.push_back(seconds(random) / 2);
      if (s > 0) costs.transfer.push_back(random() % 3 == 0 ? 0.0 : seconds(random) / 2);
    }
    SCOPED_TRACE(testing::Message() << "trial " << trial << ": P=" << p << " B=" << b
                                    << " v=" << v << " schedule=" << static_cast<int>(schedule));
    const PipelineTimeline timeline = Simulate(options, costs);
    EXPECT_NEAR(timeline.step_seconds, IndependentStepTime(options, costs), 1e-9);
    for (const std::vector<PipelineOp>& ops : timeline.devices) {
      for (size_t i = 1; i < ops.size(); ++i) {
        EXPECT_GE(ops[i].start, ops[i - 1].end - 1e-12);
      }
    }
    ++instances;
  }
  EXPECT_EQ(instances, 600);
}

TEST(ScheduleTest, BadOptionsAndCostsNameTheirField) {
  const auto field_of = [](const ScheduleOptions& options, const StageCosts& costs) {
    const absl::Status status = SimulateSchedule(options, costs, NoDeadline()).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    return InvalidFieldPath(status).value_or("");
  };
  const ScheduleOptions good = Options(PipelineSchedule::k1F1B, 2, 2);
  const StageCosts costs = UniformStageCosts(good, 1, 2, 0);
  EXPECT_EQ(field_of(Options(PipelineSchedule::k1F1B, 0, 2), costs), "devices");
  EXPECT_EQ(field_of(Options(PipelineSchedule::k1F1B, 2, 0), costs), "micro_batches");
  EXPECT_EQ(field_of(Options(PipelineSchedule::k1F1B, 2, 2, 2), costs), "chunks_per_device");
  EXPECT_EQ(field_of(Options(PipelineSchedule::kInterleaved1F1B, 2, 3, 2), costs),
            "micro_batches");
  EXPECT_EQ(field_of(Options(PipelineSchedule::kInterleaved1F1B, 2, 2, 0), costs),
            "chunks_per_device");
  EXPECT_EQ(field_of(Options(PipelineSchedule::kGpipe, 1 << 14, 1 << 14), costs),
            "micro_batches");
  StageCosts bad = costs;
  bad.forward[1] = std::nan("");
  EXPECT_EQ(field_of(good, bad), "costs.forward[1]");
  bad = costs;
  bad.backward[0] = -1;
  EXPECT_EQ(field_of(good, bad), "costs.backward[0]");
  bad = costs;
  bad.weight = {0.5};
  EXPECT_EQ(field_of(good, bad), "costs.weight");
  bad = costs;
  bad.transfer.push_back(0);
  EXPECT_EQ(field_of(good, bad), "costs.transfer");
}

TEST(ScheduleTest, StopsWhenTheTokenFires) {
  const ScheduleOptions options = Options(PipelineSchedule::k1F1B, 64, 4096);
  CancellationToken token(absl::InfiniteFuture());
  token.Cancel();
  EXPECT_EQ(SimulateSchedule(options, UniformStageCosts(options, 1, 2, 0.1), token).status().code(),
            absl::StatusCode::kCancelled);
}

// The search's simulator gives SimulateSchedule's step, to the bit, over
// many cost vectors in a row (its buffers reused).
TEST(StepSimulatorTest, MatchesSimulateSchedule) {
  std::mt19937 random(5);
  std::uniform_real_distribution<double> cost(0, 3);
  for (const PipelineSchedule schedule :
       {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B,
        PipelineSchedule::kZeroBubbleH1}) {
    const ScheduleOptions options =
        Options(schedule, 3, 6, schedule == PipelineSchedule::kInterleaved1F1B ? 2 : 1);
    StepSimulator simulator(options);
    for (int i = 0; i < 50; ++i) {
      StageCosts costs;
      for (int s = 0; s < options.stages(); ++s) {
        costs.forward.push_back(cost(random));
        costs.backward.push_back(cost(random));
        if (schedule == PipelineSchedule::kZeroBubbleH1) costs.weight.push_back(cost(random));
        if (s > 0) costs.transfer.push_back(cost(random) / 4);
      }
      const absl::StatusOr<double> step = simulator.StepSeconds(costs, NoDeadline());
      const absl::StatusOr<PipelineTimeline> timeline =
          SimulateSchedule(options, costs, NoDeadline());
      ASSERT_TRUE(step.ok() && timeline.ok());
      EXPECT_EQ(*step, timeline->step_seconds);
    }
  }
}

}  // namespace
}  // namespace partplan

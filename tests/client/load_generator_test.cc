// Tests of the load generator (client/cli/load_generator.h) and of
// `partplan load` against an in-process fake PartitionPlanner: exact call
// counts and status codes (the fake picks codes from a server-side counter,
// so they do not depend on thread interleaving), percentiles on injected
// latencies, the no-op request built by descriptor, options and exit codes.
#include "client/cli/load_generator.h"

#include <atomic>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli/cli.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.grpc.pb.h"

namespace partplan {
namespace cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

constexpr char kPartitionRequestFile[] = "client/examples/partition_graph.json";

// PartitionGraph answers RESOURCE_EXHAUSTED on every `reject_every`-th call
// (counting from 1, the first call included) and OK otherwise, after
// sleeping `latency`. Validate answers OK and remembers its requests.
class FakePlanner final : public v1::PartitionPlanner::Service {
 public:
  grpc::Status PartitionGraph(grpc::ServerContext*,
                              const v1::PartitionGraphRequest* request,
                              v1::PartitionGraphResponse* response) override {
    const int64_t n = ++partition_calls_;
    if (latency_ > absl::ZeroDuration()) absl::SleepFor(latency_);
    if (reject_every_ > 0 && n % reject_every_ == 0) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "busy");
    }
    response->mutable_plan()->mutable_summary()->set_node_count(
        request->graph().nodes_size());
    return grpc::Status::OK;
  }

  grpc::Status Validate(grpc::ServerContext*, const v1::ValidateRequest* request,
                        v1::ValidateResponse* response) override {
    {
      absl::MutexLock lock(&mutex_);
      validate_requests_.push_back(*request);
    }
    response->set_node_count(request->graph().nodes_size());
    return grpc::Status::OK;
  }

  // Always INVALID_ARGUMENT.
  grpc::Status SplitGraph(grpc::ServerContext*, const v1::SplitGraphRequest*,
                          v1::SplitGraphResponse*) override {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "graph.nodes: empty");
  }

  int64_t partition_calls() const { return partition_calls_; }
  std::vector<v1::ValidateRequest> validate_requests() const {
    absl::MutexLock lock(&mutex_);
    return validate_requests_;
  }

  int reject_every_ = 0;
  absl::Duration latency_ = absl::ZeroDuration();

 private:
  std::atomic<int64_t> partition_calls_{0};
  mutable absl::Mutex mutex_;
  std::vector<v1::ValidateRequest> validate_requests_;
};

v1::PartitionGraphRequest SmallRequest() {
  v1::PartitionGraphRequest request;
  v1::Node* x = request.mutable_graph()->add_nodes();
  x->set_name("x");
  x->set_op(v1::PLACEHOLDER);
  v1::Node* output = request.mutable_graph()->add_nodes();
  output->set_name("output");
  output->set_op(v1::OUTPUT);
  output->add_args()->set_node("x");
  v1::Device* device = request.mutable_devices()->add_devices();
  device->set_name("gpu0");
  device->set_available_memory_bytes(1 << 20);
  request.mutable_config()->set_mode(v1::PartitionerConfig::SIZE_BASED);
  return request;
}

const google::protobuf::MethodDescriptor& Method(const char* name) {
  return **FindPlannerMethod(name);
}

class LoadGeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&planner_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override { server_->Shutdown(); }

  std::shared_ptr<grpc::Channel> Channel() {
    return server_->InProcessChannel(grpc::ChannelArguments());
  }

  FakePlanner planner_;
  std::unique_ptr<grpc::Server> server_;
  ConnectionOptions connection_;
};

TEST(LoadReportTest, NearestRankPercentilesOfInjectedLatencies) {
  LoadReport report;
  // 1..100 ms, out of order.
  for (int i = 100; i >= 1; --i) {
    report.Add(i % 10 == 0 ? grpc::StatusCode::DEADLINE_EXCEEDED
                           : grpc::StatusCode::OK,
               absl::Milliseconds(i));
  }
  report.elapsed = absl::Seconds(4);
  EXPECT_EQ(report.calls(), 100);
  EXPECT_EQ(report.Percentile(0.5), absl::Milliseconds(50));
  EXPECT_EQ(report.Percentile(0.9), absl::Milliseconds(90));
  EXPECT_EQ(report.Percentile(0.99), absl::Milliseconds(99));
  EXPECT_EQ(report.Percentile(0.001), absl::Milliseconds(1));
  EXPECT_EQ(report.Max(), absl::Milliseconds(100));
  EXPECT_DOUBLE_EQ(report.Throughput(), 25.0);
  EXPECT_THAT(report.codes(),
              ElementsAre(Pair(grpc::StatusCode::OK, 90),
                          Pair(grpc::StatusCode::DEADLINE_EXCEEDED, 10)));

  // A few calls: p90 and p99 of 3 are the largest.
  LoadReport few;
  for (int ms : {7, 3, 5}) few.Add(grpc::StatusCode::OK, absl::Milliseconds(ms));
  EXPECT_EQ(few.Percentile(0.5), absl::Milliseconds(5));
  EXPECT_EQ(few.Percentile(0.9), absl::Milliseconds(7));
  EXPECT_EQ(few.Percentile(0.99), absl::Milliseconds(7));

  LoadReport empty;
  EXPECT_EQ(empty.Percentile(0.5), absl::ZeroDuration());
  EXPECT_EQ(empty.Throughput(), 0);
}

TEST(LoadReportTest, MergeAddsCallsAndCodes) {
  LoadReport a;
  LoadReport b;
  a.Add(grpc::StatusCode::OK, absl::Milliseconds(4));
  b.Add(grpc::StatusCode::OK, absl::Milliseconds(2));
  b.Add(grpc::StatusCode::UNAVAILABLE, absl::Milliseconds(1));
  a.Merge(b);
  EXPECT_EQ(a.calls(), 3);
  EXPECT_EQ(a.Percentile(0.5), absl::Milliseconds(2));
  EXPECT_THAT(a.codes(), ElementsAre(Pair(grpc::StatusCode::OK, 2),
                                     Pair(grpc::StatusCode::UNAVAILABLE, 1)));
}

TEST(LoadReportTest, FormatsThroughputLatencyAndCodes) {
  LoadReport report;
  report.method = "PartitionGraph";
  report.concurrency = 16;
  report.request_bytes = 10240;
  report.elapsed = absl::Seconds(2);
  for (int i = 1; i <= 4; ++i) report.Add(grpc::StatusCode::OK, absl::Milliseconds(i));
  report.Add(grpc::StatusCode::RESOURCE_EXHAUSTED, absl::Microseconds(500));
  EXPECT_EQ(FormatLoadReport(report),
            "PartitionGraph: 16 clients on 1 channel, request 10.0 KiB\n"
            "  calls    5 in 2.00 s: 2.5 calls/s\n"
            "  latency  p50 2.000 ms  p90 4.000 ms  p99 4.000 ms  max 4.000 ms\n"
            "  codes    OK 4 RESOURCE_EXHAUSTED 1\n");

  LoadReport noop;
  noop.method = "Validate";
  noop.elapsed = absl::Seconds(1);
  for (int i = 0; i < 10; ++i) noop.Add(grpc::StatusCode::OK, absl::Milliseconds(1));
  EXPECT_EQ(FormatComparison(report, noop),
            "PartitionGraph / Validate throughput: 0.25 (2.5 / 10.0 calls/s)\n");
  EXPECT_THAT(FormatComparison(report, LoadReport()), HasSubstr("throughput: n/a"));
}

TEST(LoadOptionsTest, DefaultsToATimedRunAndParsesExpectedCodes) {
  LoadOptions options;
  options.expected_codes = "resource_exhausted, 4";
  ASSERT_TRUE(options.CheckAndSetup().ok());
  EXPECT_EQ(options.duration, kDefaultLoadDuration);
  EXPECT_EQ(options.requests, 0);
  EXPECT_EQ(options.expected,
            (std::set<grpc::StatusCode>{grpc::StatusCode::OK,
                                        grpc::StatusCode::DEADLINE_EXCEEDED,
                                        grpc::StatusCode::RESOURCE_EXHAUSTED}));

  LoadOptions counted;
  counted.requests = 100;
  ASSERT_TRUE(counted.CheckAndSetup().ok());
  EXPECT_EQ(counted.duration, absl::ZeroDuration());
  EXPECT_EQ(counted.expected, std::set<grpc::StatusCode>{grpc::StatusCode::OK});
}

TEST(LoadOptionsTest, RejectsBadValues) {
  struct Case {
    int concurrency;
    absl::Duration duration;
    int64_t requests;
    const char* codes;
    const char* error;
  };
  const Case cases[] = {
      {0, absl::ZeroDuration(), 0, "", "--concurrency: must be between 1"},
      {2000, absl::ZeroDuration(), 0, "", "--concurrency"},
      {1, absl::Seconds(1), 10, "", "give --duration or --requests, not both"},
      {1, -absl::Seconds(1), 0, "", "--duration"},
      {1, absl::InfiniteDuration(), 0, "", "--duration"},
      {1, absl::ZeroDuration(), -5, "", "--requests"},
      {1, absl::ZeroDuration(), 0, "OK,NOPE", "unknown status code 'NOPE'"},
      {1, absl::ZeroDuration(), 0, "17", "unknown status code '17'"},
  };
  for (const Case& c : cases) {
    LoadOptions options;
    options.concurrency = c.concurrency;
    options.duration = c.duration;
    options.requests = c.requests;
    options.expected_codes = c.codes;
    const absl::Status status = options.CheckAndSetup();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.error;
    EXPECT_THAT(status.message(), HasSubstr(c.error));
  }
}

TEST(NoopRequestTest, CopiesGraphAndDevicesByDescriptor) {
  const v1::PartitionGraphRequest request = SmallRequest();
  absl::StatusOr<v1::ValidateRequest> noop = NoopRequestFor(request);
  ASSERT_TRUE(noop.ok()) << noop.status();
  EXPECT_EQ(noop->graph().SerializeAsString(), request.graph().SerializeAsString());
  EXPECT_EQ(noop->devices().SerializeAsString(), request.devices().SerializeAsString());

  // SplitGraphRequest has a graph and no devices.
  v1::SplitGraphRequest split;
  *split.mutable_graph() = request.graph();
  noop = NoopRequestFor(split);
  ASSERT_TRUE(noop.ok()) << noop.status();
  EXPECT_EQ(noop->graph().nodes_size(), 2);
  EXPECT_FALSE(noop->has_devices());
}

TEST(NoopRequestTest, FailsWithoutAGraph) {
  absl::StatusOr<v1::ValidateRequest> noop = NoopRequestFor(v1::DeviceInventory());
  EXPECT_EQ(noop.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(noop.status().message(),
              HasSubstr("partplan.v1.DeviceInventory has no partplan.v1.Graph field 'graph'"));

  noop = NoopRequestFor(v1::PartitionGraphRequest());
  EXPECT_EQ(noop.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(noop.status().message(), HasSubstr("the request has no graph"));
}

TEST_F(LoadGeneratorTest, CountedRunMakesExactlyTheRequestedCalls) {
  planner_.reject_every_ = 4;
  LoadOptions options;
  options.concurrency = 3;
  options.requests = 40;
  options.expected_codes = "RESOURCE_EXHAUSTED";
  ASSERT_TRUE(options.CheckAndSetup().ok());
  LoadReport report;
  const grpc::Status first = RunLoad(Channel(), Method("PartitionGraph"),
                                     SmallRequest(), connection_, options, &report);
  ASSERT_TRUE(first.ok()) << first.error_message();
  // The uncounted first call was call 1, so calls 2..41 are counted; 4, 8,
  // ..., 40 of them were rejected.
  EXPECT_EQ(planner_.partition_calls(), 41);
  EXPECT_EQ(report.calls(), 40);
  EXPECT_THAT(report.codes(),
              ElementsAre(Pair(grpc::StatusCode::OK, 30),
                          Pair(grpc::StatusCode::RESOURCE_EXHAUSTED, 10)));
  EXPECT_EQ(report.method, "PartitionGraph");
  EXPECT_EQ(report.concurrency, 3);
  EXPECT_EQ(report.request_bytes,
            static_cast<int64_t>(SmallRequest().SerializeAsString().size()));
  EXPECT_GT(report.elapsed, absl::ZeroDuration());
  EXPECT_EQ(LoadExitCode({&report}, options.expected), 0);
  EXPECT_EQ(LoadExitCode({&report}, {grpc::StatusCode::OK}),
            static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
}

TEST_F(LoadGeneratorTest, LatenciesIncludeTheServersTime) {
  planner_.latency_ = absl::Milliseconds(20);
  LoadOptions options;
  options.concurrency = 2;
  options.requests = 6;
  ASSERT_TRUE(options.CheckAndSetup().ok());
  LoadReport report;
  ASSERT_TRUE(RunLoad(Channel(), Method("PartitionGraph"), SmallRequest(), connection_,
                      options, &report)
                  .ok());
  EXPECT_EQ(report.calls(), 6);
  EXPECT_GE(report.Percentile(0.01), absl::Milliseconds(20));
  // Two clients, three calls each, one after the other.
  EXPECT_GE(report.elapsed, absl::Milliseconds(60));
  EXPECT_LE(report.Throughput(), 6 / 0.06);
}

TEST_F(LoadGeneratorTest, TimedRunStopsAfterTheDuration) {
  planner_.latency_ = absl::Milliseconds(5);
  LoadOptions options;
  options.concurrency = 2;
  options.duration = absl::Milliseconds(200);
  ASSERT_TRUE(options.CheckAndSetup().ok());
  LoadReport report;
  ASSERT_TRUE(RunLoad(Channel(), Method("PartitionGraph"), SmallRequest(), connection_,
                      options, &report)
                  .ok());
  EXPECT_GE(report.elapsed, absl::Milliseconds(200));
  EXPECT_GT(report.calls(), 0);
  // At most one call per client started after the end, each taking >= 5 ms.
  EXPECT_LE(report.calls(), 2 * (200 / 5 + 1));
  EXPECT_EQ(planner_.partition_calls(), report.calls() + 1);
}

TEST_F(LoadGeneratorTest, UnexpectedFirstCallStopsTheRun) {
  LoadOptions options;
  options.requests = 10;
  ASSERT_TRUE(options.CheckAndSetup().ok());
  LoadReport report;
  v1::SplitGraphRequest request;
  const grpc::Status first =
      RunLoad(Channel(), Method("SplitGraph"), request, connection_, options, &report);
  EXPECT_EQ(first.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(report.calls(), 0);

  // Expected, the same code makes a run.
  options.expected_codes = "INVALID_ARGUMENT";
  ASSERT_TRUE(options.CheckAndSetup().ok());
  EXPECT_TRUE(
      RunLoad(Channel(), Method("SplitGraph"), request, connection_, options, &report).ok());
  EXPECT_EQ(report.calls(), 10);
}

// `partplan load` through RunCli.
class LoadCommandTest : public LoadGeneratorTest {
 protected:
  void SetUp() override {
    LoadGeneratorTest::SetUp();
    environment_.in = &in_;
    environment_.out = &out_;
    environment_.err = &err_;
    environment_.connect = [this](const ConnectionOptions&) { return Channel(); };
    options_.request_path = kPartitionRequestFile;
    options_.load.concurrency = 4;
    options_.load.requests = 20;
  }

  int Run(const std::vector<std::string>& args) { return RunCli(args, options_, environment_); }

  std::istringstream in_;
  std::ostringstream out_;
  std::ostringstream err_;
  CliEnvironment environment_;
  CliOptions options_;
};

TEST_F(LoadCommandTest, PrintsTheReportAndExitsZero) {
  ASSERT_EQ(Run({"load", "PartitionGraph"}), 0) << err_.str();
  EXPECT_THAT(err_.str(), IsEmpty());
  EXPECT_THAT(out_.str(), HasSubstr("PartitionGraph: 4 clients on 1 channel, request "));
  EXPECT_THAT(out_.str(), HasSubstr("  calls    20 in "));
  EXPECT_THAT(out_.str(), HasSubstr("  codes    OK 20\n"));
  EXPECT_EQ(planner_.partition_calls(), 21);
  EXPECT_THAT(planner_.validate_requests(), IsEmpty());
}

TEST_F(LoadCommandTest, UnexpectedCodesSetTheExitStatus) {
  planner_.reject_every_ = 2;
  EXPECT_EQ(Run({"load", "PartitionGraph"}), 8);  // RESOURCE_EXHAUSTED
  EXPECT_THAT(out_.str(), HasSubstr("  codes    OK 10 RESOURCE_EXHAUSTED 10\n"));

  options_.load.expected_codes = "resource_exhausted";
  out_.str("");
  EXPECT_EQ(Run({"load", "PartitionGraph"}), 0) << err_.str();
}

TEST_F(LoadCommandTest, FailedFirstCallIsPrintedAndExitsWithItsCode) {
  options_.request_path = "client/examples/split_graph.json";
  EXPECT_EQ(Run({"load", "SplitGraph"}), 3);  // INVALID_ARGUMENT
  EXPECT_THAT(err_.str(), HasSubstr("error: INVALID_ARGUMENT: graph.nodes: empty\n"));
  EXPECT_THAT(err_.str(), HasSubstr("first, uncounted call of SplitGraph failed"));
  EXPECT_THAT(out_.str(), IsEmpty());
}

TEST_F(LoadCommandTest, CompareNoopSendsTheGraphAndDevicesToValidate) {
  options_.load.compare_noop = true;
  ASSERT_EQ(Run({"load", "PartitionGraph"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("PartitionGraph: 4 clients"));
  EXPECT_THAT(out_.str(), HasSubstr("Validate: 4 clients"));
  EXPECT_THAT(out_.str(), HasSubstr("PartitionGraph / Validate throughput: "));

  const std::vector<v1::ValidateRequest> sent = planner_.validate_requests();
  ASSERT_EQ(sent.size(), 21u);
  EXPECT_EQ(sent[0].graph().name(), "mlp");
  EXPECT_EQ(sent[0].graph().nodes_size(), 12);
  EXPECT_EQ(sent[0].devices().devices_size(), 3);
  EXPECT_EQ(sent[20].SerializeAsString(), sent[0].SerializeAsString());
}

TEST_F(LoadCommandTest, BadInputExitsTwoWithoutCalling) {
  struct Case {
    std::vector<std::string> args;
    std::string request_path;
    absl::Duration duration;
    bool compare_noop;
    std::string stdin_text;
    std::string error;
  };
  const Case cases[] = {
      {{"load"}, kPartitionRequestFile, absl::ZeroDuration(), false, "",
       "load: expected one method name"},
      {{"load", "Nope"}, kPartitionRequestFile, absl::ZeroDuration(), false, "",
       "unknown method 'Nope'"},
      {{"load", "Validate"}, "", absl::ZeroDuration(), false, "",
       "load: --request is required: a file holding a partplan.v1.ValidateRequest"},
      {{"load", "PartitionGraph"}, kPartitionRequestFile, absl::Seconds(1), false, "",
       "give --duration or --requests, not both"},
      {{"load", "PartitionGraph"}, "missing.json", absl::ZeroDuration(), false, "",
       "--request: cannot read 'missing.json'"},
      {{"load", "PartitionGraph"}, "-", absl::ZeroDuration(), true, "{}",
       "--compare_noop: the request has no graph to send to Validate"},
  };
  for (const Case& c : cases) {
    options_.request_path = c.request_path;
    options_.load.duration = c.duration;
    options_.load.compare_noop = c.compare_noop;
    in_.clear();
    in_.str(c.stdin_text);
    err_.str("");
    EXPECT_EQ(Run(c.args), kBadInputExitCode) << c.error;
    EXPECT_THAT(err_.str(), HasSubstr(c.error));
  }
  EXPECT_EQ(planner_.partition_calls(), 0);
  EXPECT_THAT(planner_.validate_requests(), IsEmpty());
  EXPECT_THAT(out_.str(), IsEmpty());
}

TEST(LoadHelpTest, ListsTheLoadSubcommand) {
  EXPECT_THAT(SubcommandHelp(),
              HasSubstr("partplan load <Method> --request=FILE [--concurrency=16]"));
}

}  // namespace
}  // namespace cli
}  // namespace partplan

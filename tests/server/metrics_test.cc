// The Prometheus endpoint, scraped over loopback HTTP like Prometheus does.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "planner/base/status_util.h"
#include "server/server.h"
#include "tests/server/test_util.h"

namespace partplan {
namespace {

std::string ValidateLabels(const std::string& code) {
  return absl::StrCat("{", code.empty() ? "" : "grpc_code=\"" + code + "\",",
                      "grpc_method=\"Validate\",grpc_service=\"partplan.v1.PartitionPlanner\","
                      "grpc_type=\"unary\"}");
}

TEST(MetricsTest, ExposesGrpcAndPlannerMetricsOverHttp) {
  std::atomic<bool> fail{false};
  ServerOptions options = TestServerOptions();
  options.metrics_port = 0;
  std::unique_ptr<PlannerServer> server = StartTestServer(
      std::make_unique<FakePlannerBackend>([&fail](const CancellationToken&) {
        return fail ? InvalidFieldError("graph.nodes", "the graph has no nodes") : absl::OkStatus();
      }),
      options);
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->metrics_port(), 0);
  auto stub = NewPlannerStub(*server);

  for (const bool fails : {false, true}) {
    fail = fails;
    grpc::ClientContext context;
    v1::ValidateRequest request;
    request.mutable_graph()->add_nodes()->set_name("x");
    v1::ValidateResponse response;
    EXPECT_EQ(stub->Validate(&context, request, &response).ok(), !fails);
  }

  // Calls are counted before they are finished, so the scrape sees both.
  absl::StatusOr<std::string> metrics = HttpGet(server->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const std::string& text = *metrics;
  EXPECT_EQ(SampleValue(text, "grpc_server_started_total" + ValidateLabels("")), 2) << text;
  EXPECT_EQ(SampleValue(text, "grpc_server_handled_total" + ValidateLabels("OK")), 1);
  EXPECT_EQ(SampleValue(text, "grpc_server_handled_total" + ValidateLabels("InvalidArgument")), 1);
  EXPECT_EQ(SampleValue(text, "grpc_server_handled_total" + ValidateLabels("Internal")), 0);
  EXPECT_EQ(SampleValue(text, "grpc_server_handling_seconds_count" + ValidateLabels("")), 2);
  // Pre-created series of calls never made read zero instead of missing.
  EXPECT_EQ(SampleValue(text,
                        "grpc_server_handled_total{grpc_code=\"Unavailable\","
                        "grpc_method=\"Plan\",grpc_service=\"partplan.v1.PartitionPlanner\","
                        "grpc_type=\"unary\"}"),
            0);
  EXPECT_EQ(SampleValue(text, "partplan_planner_seconds_count{planner=\"Validate\"}"), 2);
  EXPECT_EQ(SampleValue(text, "partplan_graph_nodes_count"), 2);
  EXPECT_EQ(SampleValue(text, "partplan_graph_nodes_sum"), 2);
  EXPECT_EQ(SampleValue(text, "partplan_rejected_calls_total{reason=\"queue_full\"}"), 0);
  EXPECT_EQ(SampleValue(text, "partplan_planner_queue_depth"), 0);
  EXPECT_EQ(SampleValue(text, "partplan_planner_in_flight"), 0);
}

}  // namespace
}  // namespace partplan

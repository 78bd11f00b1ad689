// Tests of the CLI's report outputs: the HTML report page (its data filled
// in and escaped) and the Graphviz DOT of partition and stage plans. The
// page's drawing is tested in a browser by the Python suite
// (client/python/tests/test_report.py).

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "client/cli/output.h"
#include "client/cli/report_page.h"
#include "google/protobuf/text_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

template <typename Message>
Message Parse(const std::string& text) {
  Message message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

// Two partitions: a and b's output cross from 0 to 1.
v1::PartitionGraphResponse TwoPartitions() {
  return Parse<v1::PartitionGraphResponse>(R"pb(
    plan {
      partitions { id: 0 nodes: [ "x", "a", "b" ] outputs: [ "a", "b" ] memory_bytes: 100
                   logical_device_ids: 0 children: 1 }
      partitions { id: 1 nodes: [ "c" ] inputs: [ "a", "b" ] memory_bytes: 50
                   logical_device_ids: 1 parents: 0 }
    })pb");
}

v1::PartitionGraphRequest TwoPartitionsRequest() {
  return Parse<v1::PartitionGraphRequest>(R"pb(
    graph {
      nodes { name: "x" size_bytes { output_bytes: 8 } }
      nodes { name: "a" size_bytes { output_bytes: 1024 } }
      nodes { name: "b" size_bytes { output_bytes: 2048 } }
      nodes { name: "c" size_bytes { output_bytes: 4 } }
    })pb");
}

TEST(ReportOutputTest, ParsesTheNewFormats) {
  EXPECT_EQ(*ParseOutputFormat("html"), OutputFormat::kHtml);
  EXPECT_EQ(*ParseOutputFormat("DOT"), OutputFormat::kDot);
  const absl::StatusOr<OutputFormat> unknown = ParseOutputFormat("pdf");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("json, table, html, dot"));
}

TEST(ReportOutputTest, PartitionDotLabelsEdgesWithBytesOrValues) {
  const v1::PartitionGraphResponse response = TwoPartitions();
  const v1::PartitionGraphRequest request = TwoPartitionsRequest();
  const std::string with_graph = FormatDot(response, &request);
  EXPECT_THAT(with_graph, HasSubstr("digraph partitions {"));
  EXPECT_THAT(with_graph, HasSubstr("p0 [label=\"partition 0\\ndevices 0\\n3 nodes, 100 B\"];"));
  EXPECT_THAT(with_graph, HasSubstr("p0 -> p1 [label=\"3.0 KiB\"];"));
  EXPECT_THAT(FormatDot(response, nullptr), HasSubstr("p0 -> p1 [label=\"2 values\"];"));
  EXPECT_EQ(FormatResponse(response, OutputFormat::kDot, &request), with_graph);
}

TEST(ReportOutputTest, StageDotIsAChainLabelledWithWhatEachStageSends) {
  const auto response = Parse<v1::PlanTrainingResponse>(R"pb(
    plan {
      stages { device: "gpu0" first_node: "a" last_node: "b" node_count: 2 output_bytes: 4096 }
      stages { device: "gpu\"1" first_node: "c" last_node: "c" node_count: 1 recompute: true }
    })pb");
  const std::string dot = FormatDot(response, nullptr);
  EXPECT_THAT(dot, HasSubstr("digraph stages {"));
  EXPECT_THAT(dot, HasSubstr("s0 [label=\"stage 0 on gpu0\\n2 nodes: a..b\"];"));
  // Quotes in names are escaped.
  EXPECT_THAT(dot, HasSubstr("s1 [label=\"stage 1 on gpu\\\"1 (recompute)\\n1 nodes: c..c\"];"));
  EXPECT_THAT(dot, HasSubstr("s0 -> s1 [label=\"4.0 KiB\"];"));
  EXPECT_THAT(dot, Not(HasSubstr("s1 -> ")));
}

TEST(ReportOutputTest, DotOfAResponseWithoutAPlanIsJson) {
  const v1::ValidateResponse response;
  EXPECT_EQ(FormatDot(response, nullptr), "");
  EXPECT_EQ(FormatResponse(response, OutputFormat::kDot), FormatResponse(response, OutputFormat::kJson));
}

// The data goes into the template once, as JSON no value can break out of.
TEST(ReportOutputTest, ReportPageHoldsTheResponseEscaped) {
  v1::PartitionGraphResponse response = TwoPartitions();
  response.mutable_plan()->mutable_partitions(1)->add_nodes("</script><b>&");
  const v1::PartitionGraphRequest request = TwoPartitionsRequest();
  const std::string page = ReportPage(response, &request, "");
  EXPECT_THAT(page, Not(HasSubstr("__PARTPLAN_DATA__")));
  EXPECT_THAT(page, HasSubstr("{\"rpc\":\"PartitionGraph\",\"title\":\"\",\"response\":{\"plan\""));
  EXPECT_THAT(page, HasSubstr("\\u003c/script\\u003e\\u003cb\\u003e\\u0026"));
  EXPECT_THAT(page, Not(HasSubstr("</script><b>")));
  EXPECT_THAT(page, HasSubstr("\"request\":{\"graph\""));
  // One data element, then the renderer's script: the page ends as the
  // template does.
  EXPECT_TRUE(absl::EndsWith(page, "</html>\n"));
  const std::vector<std::string> data_elements = absl::StrSplit(page, "id=\"partplan-data\"");
  EXPECT_EQ(data_elements.size(), 2u);
}

TEST(ReportOutputTest, ReportPageNamesTheMethodGivenAndTheTitle) {
  const v1::PlanResponse response;
  const std::string page = ReportPage(response, nullptr, "Plan", "a \"title\"");
  EXPECT_THAT(page, HasSubstr("{\"rpc\":\"Plan\",\"title\":\"a \\\"title\\\"\",\"response\":{},"
                              "\"request\":null}"));
  EXPECT_EQ(FormatResponse(response, OutputFormat::kHtml), ReportPage(response, nullptr, "Plan"));
}

}  // namespace
}  // namespace cli
}  // namespace partplan

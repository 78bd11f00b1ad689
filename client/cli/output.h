// What the CLI prints: responses as JSON or as a readable plan table, and
// failed calls with their google.rpc.BadRequest field violations.
//
//   std::cout << partplan::cli::FormatResponse(response, OutputFormat::kTable);
//   // Partitions
//   //   ID  NODES  MEMORY   DEVICES  LATENCY
//   //   0   6      9.2 MiB  0        1.2ms
//   // ...
//   std::cerr << partplan::cli::FormatRpcError(status);
//   // error: INVALID_ARGUMENT: graph.nodes[3].args[0]: unknown node 'y'
//   //   field graph.nodes[3].args[0]: refers to unknown node 'y'
#ifndef PARTPLAN_CLIENT_CLI_OUTPUT_H_
#define PARTPLAN_CLIENT_CLI_OUTPUT_H_

#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "partplan/v1/parallelize.pb.h"
#include "partplan/v1/plan.pb.h"

namespace partplan {
namespace cli {

enum class OutputFormat {
  // Proto3 JSON, as grpcurl prints it.
  kJson,
  // A table for responses carrying a PartitionPlan, JSON for the others.
  kTable,
  // The self-contained HTML report (report_page.h).
  kHtml,
  // Graphviz: the partition DAG or the pipeline's stages; JSON for
  // responses with neither.
  kDot,
};

// Parses "json", "table", "html" or "dot".
absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view name);

// `response` in `format`, ending in a newline. `request` (may be null) lets
// the report and the DOT graph label edges with the bytes crossing them.
std::string FormatResponse(const google::protobuf::Message& response,
                           OutputFormat format,
                           const google::protobuf::Message* request = nullptr);

// What FormatResponse(kJson) prints for the message of type `type` whose
// bytes are `response`, written to `*out` as it converts: no message is
// built, so a large plan costs its JSON and little memory. INTERNAL when the
// bytes are not a `type`.
absl::Status WriteResponseJson(const grpc::ByteBuffer& response,
                               const google::protobuf::Descriptor& type, std::ostream* out);

// The partition DAG (PartitionPlan) or the stage chain (TrainingPlan) of
// `response` in Graphviz's DOT language; empty when it holds neither.
std::string FormatDot(const google::protobuf::Message& response,
                      const google::protobuf::Message* request);

// The plan as three tables: partitions, device usage and summary.
std::string FormatPlanTable(const v1::PartitionPlan& plan);

// The ranked configurations of a Parallelize response, one line each, then
// why the first wins and what the search tried.
std::string FormatParallelizeTable(const v1::ParallelizeResponse& response);

// A failed call for stderr: "error: <CODE_NAME>: <message>" and then, one
// per line, the field violations of a google.rpc.BadRequest detail and any
// other details the server attached.
std::string FormatRpcError(const grpc::Status& status);

}  // namespace cli
}  // namespace partplan

#endif  // PARTPLAN_CLIENT_CLI_OUTPUT_H_

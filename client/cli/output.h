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

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/status.h"
#include "partplan/v1/plan.pb.h"

namespace partplan {
namespace cli {

enum class OutputFormat {
  // Proto3 JSON, as grpcurl prints it.
  kJson,
  // A table for responses carrying a PartitionPlan, JSON for the others.
  kTable,
};

// Parses "json" or "table".
absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view name);

// `response` in `format`, ending in a newline.
std::string FormatResponse(const google::protobuf::Message& response,
                           OutputFormat format);

// The plan as three tables: partitions, device usage and summary.
std::string FormatPlanTable(const v1::PartitionPlan& plan);

// A failed call for stderr: "error: <CODE_NAME>: <message>" and then, one
// per line, the field violations of a google.rpc.BadRequest detail and any
// other details the server attached.
std::string FormatRpcError(const grpc::Status& status);

}  // namespace cli
}  // namespace partplan

#endif  // PARTPLAN_CLIENT_CLI_OUTPUT_H_

#include "client/cli/output.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli/byte_size.h"
#include "client/cli/message_io.h"
#include "client/cli/report_page.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver.h"
#include "google/protobuf/util/type_resolver_util.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "google/protobuf/descriptor.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/support/error_details.h"
#include "partplan/v1/graph.pb.h"
#include "partplan/v1/training.pb.h"

namespace partplan {
namespace cli {
namespace {

// Rows of cells printed as left-aligned columns, two spaces apart.
class TextTable {
 public:
  void AddRow(std::vector<std::string> cells) {
    if (cells.size() > widths_.size()) widths_.resize(cells.size(), 0);
    for (size_t i = 0; i < cells.size(); ++i) {
      widths_[i] = std::max(widths_[i], cells[i].size());
    }
    rows_.push_back(std::move(cells));
  }

  // Every row on its own line after `indent`.
  std::string Render(absl::string_view indent) const {
    std::string text;
    for (const std::vector<std::string>& row : rows_) {
      std::string line(indent);
      for (size_t i = 0; i < row.size(); ++i) {
        absl::StrAppend(&line, row[i]);
        if (i + 1 < row.size()) {
          line.append(widths_[i] - row[i].size() + 2, ' ');
        }
      }
      absl::StrAppend(&text, line, "\n");
    }
    return text;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> widths_;
};

// Latencies are 0 when the graph carries none; "-" says "unknown" better.
std::string FormatLatency(double seconds) {
  if (seconds == 0) return "-";
  return absl::FormatDuration(absl::Seconds(seconds));
}

std::string FormatIds(const google::protobuf::RepeatedField<int32_t>& ids) {
  if (ids.empty()) return "-";
  return absl::StrJoin(ids, ",");
}

std::string FormatShare(int64_t used, int64_t available) {
  if (available <= 0) return "-";
  return absl::StrFormat("%.0f%%", 100.0 * static_cast<double>(used) /
                                       static_cast<double>(available));
}

// The first `Field` field set on `message`, e.g. PartitionGraphResponse.plan
// or PlanResponse.plan for a PartitionPlan, PlanTrainingRequest.graph for a
// Graph.
template <typename Field>
const Field* FindField(const google::protobuf::Message& message) {
  const google::protobuf::Descriptor* type = message.GetDescriptor();
  const google::protobuf::Reflection* reflection = message.GetReflection();
  for (int i = 0; i < type->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = type->field(i);
    if (field->is_repeated() || field->message_type() != Field::descriptor() ||
        !reflection->HasField(message, field)) {
      continue;
    }
    return google::protobuf::DynamicCastToGenerated<Field>(
        &reflection->GetMessage(message, field));
  }
  return nullptr;
}

const v1::PartitionPlan* FindPlan(const google::protobuf::Message& response) {
  return FindField<v1::PartitionPlan>(response);
}

// A quoted DOT label of `lines`: quotes and backslashes escaped, the lines
// joined by DOT's line break.
std::string DotLabel(const std::vector<std::string>& lines) {
  std::string quoted = "\"";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) quoted += "\\n";
    for (const char c : lines[i]) {
      if (c == '"' || c == '\\') quoted.push_back('\\');
      quoted.push_back(c == '\n' ? ' ' : c);
    }
  }
  return quoted + "\"";
}

// The partitions as boxes and the DAG's edges, each labelled with the bytes
// of the values crossing it (with the graph) or their number.
std::string PartitionDot(const v1::PartitionPlan& plan, const v1::Graph* graph) {
  absl::flat_hash_map<std::string, int64_t> output_bytes;
  if (graph != nullptr) {
    for (const v1::Node& node : graph->nodes()) {
      output_bytes[node.name()] = node.size_bytes().output_bytes();
    }
  }
  absl::flat_hash_map<std::string, int32_t> producer;
  for (const v1::Partition& partition : plan.partitions()) {
    for (const std::string& value : partition.outputs()) producer[value] = partition.id();
  }
  std::string dot = "digraph partitions {\n  rankdir=LR;\n  node [shape=box];\n";
  for (const v1::Partition& partition : plan.partitions()) {
    absl::StrAppend(&dot, "  p", partition.id(), " [label=",
                    DotLabel({absl::StrCat("partition ", partition.id()),
                              absl::StrCat("devices ", FormatIds(partition.logical_device_ids())),
                              absl::StrCat(partition.nodes_size() + partition.node_indices_size(),
                                           " nodes, ", FormatByteSize(partition.memory_bytes()))}),
                    "];\n");
  }
  for (const v1::Partition& partition : plan.partitions()) {
    for (const int32_t parent : partition.parents()) {
      int values = 0;
      int64_t bytes = 0;
      for (const std::string& value : partition.inputs()) {
        const auto it = producer.find(value);
        if (it == producer.end() || it->second != parent) continue;
        ++values;
        const auto size = output_bytes.find(value);
        if (size != output_bytes.end()) bytes += size->second;
      }
      const std::string label =
          graph != nullptr ? FormatByteSize(bytes) : absl::StrCat(values, values == 1 ? " value" : " values");
      absl::StrAppend(&dot, "  p", parent, " -> p", partition.id(), " [label=", DotLabel({label}),
                      "];\n");
    }
  }
  return dot + "}\n";
}

// The stages as a chain, each edge labelled with the bytes a micro-batch
// sends on.
std::string StageDot(const v1::TrainingPlan& plan) {
  std::string dot = "digraph stages {\n  rankdir=LR;\n  node [shape=box];\n";
  for (int k = 0; k < plan.stages_size(); ++k) {
    const v1::TrainingStage& stage = plan.stages(k);
    absl::StrAppend(&dot, "  s", k, " [label=",
                    DotLabel({absl::StrCat("stage ", k, " on ", stage.device(),
                                           stage.recompute() ? " (recompute)" : ""),
                              absl::StrCat(stage.node_count(), " nodes: ", stage.first_node(),
                                           "..", stage.last_node())}),
                    "];\n");
  }
  for (int k = 0; k + 1 < plan.stages_size(); ++k) {
    absl::StrAppend(&dot, "  s", k, " -> s", k + 1, " [label=",
                    DotLabel({FormatByteSize(plan.stages(k).output_bytes())}), "];\n");
  }
  return dot + "}\n";
}

std::string StatusCodeName(grpc::StatusCode code) {
  // gRPC's and Abseil's status codes share their numbers and names.
  std::string name =
      absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? absl::StrCat("CODE_", static_cast<int>(code)) : name;
}

// A detail other than BadRequest: decoded when this binary knows its type.
std::string DescribeDetail(const google::protobuf::Any& detail) {
  const std::string& url = detail.type_url();
  const std::string type_name = url.substr(url.rfind('/') + 1);
  const google::protobuf::Descriptor* type =
      google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(
          type_name);
  if (type != nullptr) {
    std::unique_ptr<google::protobuf::Message> message = NewMessage(type);
    if (message->ParseFromString(detail.value())) {
      return absl::StrCat(type_name, ": ", message->ShortDebugString());
    }
  }
  return absl::StrCat(type_name, " (", detail.value().size(), " bytes)");
}

}  // namespace

absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "json") return OutputFormat::kJson;
  if (lower == "table") return OutputFormat::kTable;
  if (lower == "html") return OutputFormat::kHtml;
  if (lower == "dot") return OutputFormat::kDot;
  return absl::InvalidArgumentError(absl::StrCat(
      "--output: unknown format '", name, "'; one of json, table, html, dot"));
}

std::string FormatResponse(const google::protobuf::Message& response,
                           OutputFormat format,
                           const google::protobuf::Message* request) {
  switch (format) {
    case OutputFormat::kTable:
      if (const v1::PartitionPlan* plan = FindPlan(response)) {
        return FormatPlanTable(*plan);
      }
      if (response.GetDescriptor() == v1::ParallelizeResponse::descriptor()) {
        return FormatParallelizeTable(static_cast<const v1::ParallelizeResponse&>(response));
      }
      break;
    case OutputFormat::kHtml:
      return ReportPage(response, request, "");
    case OutputFormat::kDot:
      if (std::string dot = FormatDot(response, request); !dot.empty()) return dot;
      break;
    case OutputFormat::kJson:
      break;
  }
  return MessageToPrettyJson(response);
}

absl::Status WriteResponseJson(const grpc::ByteBuffer& response,
                               const google::protobuf::Descriptor& type, std::ostream* out) {
  static constexpr char kTypeUrlPrefix[] = "type.googleapis.com";
  static google::protobuf::util::TypeResolver* const resolver =
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          kTypeUrlPrefix, google::protobuf::DescriptorPool::generated_pool());
  grpc::ByteBuffer bytes = response;  // a reference to the same slices
  {
    // The converter stops quietly at bytes that end early: check first.
    grpc::ProtoBufferReader check(&bytes);
    if (!check.status().ok() || !WellFormedAtTopLevel(&check)) {
      return absl::InternalError(
          absl::StrCat("the response is not a well-formed ", type.full_name()));
    }
  }
  grpc::ProtoBufferReader reader(&bytes);
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  {
    // Large blocks: the JSON of a big plan is tens of MB, written in few calls.
    google::protobuf::io::OstreamOutputStream stream(out, /*block_size=*/1 << 20);
    const auto status = google::protobuf::util::BinaryToJsonStream(
        resolver, absl::StrCat(kTypeUrlPrefix, "/", type.full_name()), &reader, &stream,
        options);
    if (!status.ok()) {
      return absl::InternalError(absl::StrCat("the response does not convert to JSON as a ",
                                              type.full_name(), ": ",
                                              status.message().as_string()));
    }
  }
  return absl::OkStatus();
}

std::string FormatDot(const google::protobuf::Message& response,
                      const google::protobuf::Message* request) {
  if (const v1::PartitionPlan* plan = FindPlan(response)) {
    return PartitionDot(*plan, request != nullptr ? FindField<v1::Graph>(*request) : nullptr);
  }
  if (const v1::TrainingPlan* plan = FindField<v1::TrainingPlan>(response)) {
    return StageDot(*plan);
  }
  return "";
}

std::string FormatParallelizeTable(const v1::ParallelizeResponse& response) {
  TextTable table;
  table.AddRow({"#", "t", "p", "d", "b", "B", "schedule", "ZeRO", "recompute", "step",
                "tokens/s", "MFU", "peak memory", "fullest"});
  for (int i = 0; i < response.configurations_size(); ++i) {
    const v1::ParallelConfig& c = response.configurations(i);
    std::string schedule =
        c.pipeline_parallel() == 1 ? "-" : v1::PipelineScheduleKind_Name(c.schedule());
    if (c.chunks_per_device() > 1) absl::StrAppend(&schedule, " v=", c.chunks_per_device());
    table.AddRow({absl::StrCat(i + 1), absl::StrCat(c.tensor_parallel()),
                  absl::StrCat(c.pipeline_parallel()), absl::StrCat(c.data_parallel()),
                  absl::StrCat(c.micro_batch_size()), absl::StrCat(c.micro_batches()), schedule,
                  v1::ZeroStageKind_Name(c.zero()), v1::LayerRecompute_Name(c.recompute()),
                  absl::StrFormat("%.3f s", c.step_seconds()),
                  absl::StrFormat("%.0f", c.tokens_per_second()),
                  absl::StrFormat("%.1f%%", 100 * c.model_flops_utilization()),
                  FormatShare(static_cast<int64_t>(c.memory().peak()),
                              static_cast<int64_t>(c.memory().available())),
                  c.fullest_device()});
  }
  return absl::StrCat(
      "Configurations (best first):\n", table.Render("  "), "\n", response.why(), "\n",
      absl::StrFormat("%d configurations: %d that cannot fit by a memory bound, %d planned, "
                      "%d proven no better by a bound.\n",
                      response.candidates(), response.pruned_by_memory(), response.planned(),
                      response.pruned_by_bound()));
}

std::string FormatPlanTable(const v1::PartitionPlan& plan) {
  TextTable partitions;
  partitions.AddRow({"ID", "NODES", "MEMORY", "DEVICES", "LATENCY"});
  for (const v1::Partition& partition : plan.partitions()) {
    partitions.AddRow({absl::StrCat(partition.id()),
                       // One of the two is filled, as the request's
                       // node_references asked.
                       absl::StrCat(partition.nodes_size() + partition.node_indices_size()),
                       FormatByteSize(partition.memory_bytes()),
                       FormatIds(partition.logical_device_ids()),
                       FormatLatency(partition.latency_seconds())});
  }

  TextTable devices;
  devices.AddRow({"ID", "NAME", "USED", "AVAILABLE", "USE", "PARTITIONS"});
  for (const v1::DeviceUsage& usage : plan.device_usage()) {
    devices.AddRow({absl::StrCat(usage.logical_id()), usage.name(),
                    FormatByteSize(usage.used_bytes()),
                    FormatByteSize(usage.available_bytes()),
                    FormatShare(usage.used_bytes(), usage.available_bytes()),
                    FormatIds(usage.partitions())});
  }

  const v1::PlanSummary& summary = plan.summary();
  TextTable figures;
  figures.AddRow(
      {"planner", summary.planner().empty() ? "-" : summary.planner()});
  figures.AddRow({"nodes", absl::StrCat(summary.node_count(), " (",
                                        summary.op_node_count(), " call_*)")});
  figures.AddRow({"partitions", absl::StrCat(summary.partition_count())});
  figures.AddRow({"devices used", absl::StrCat(summary.devices_used(), " of ",
                                               plan.device_usage_size())});
  figures.AddRow({"graph size", FormatByteSize(summary.graph_total_bytes())});
  figures.AddRow(
      {"largest partition", FormatByteSize(summary.max_partition_bytes())});
  figures.AddRow({"cross-partition traffic",
                  FormatByteSize(summary.cross_partition_bytes())});
  figures.AddRow({"critical path latency",
                  FormatLatency(summary.critical_path_latency_seconds())});
  figures.AddRow({"planner time", absl::FormatDuration(absl::Seconds(
                                      summary.planner_seconds()))});

  std::string text = absl::StrCat("Partitions\n", partitions.Render("  "), "\nDevices\n",
                                  devices.Render("  "), "\nSummary\n", figures.Render("  "));
  if (!summary.bound().empty()) absl::StrAppend(&text, "\nBound\n  ", summary.bound(), "\n");
  if (!summary.notes().empty()) {
    absl::StrAppend(&text, "\nNotes\n");
    for (const std::string& note : summary.notes()) absl::StrAppend(&text, "  - ", note, "\n");
  }
  return text;
}

std::string FormatRpcError(const grpc::Status& status) {
  std::string text =
      absl::StrCat("error: ", StatusCodeName(status.error_code()));
  if (!status.error_message().empty()) {
    absl::StrAppend(&text, ": ", status.error_message());
  }
  absl::StrAppend(&text, "\n");
  google::rpc::Status rich_status;
  if (status.error_details().empty() ||
      !grpc::ExtractErrorDetails(status, &rich_status).ok()) {
    return text;
  }
  for (const google::protobuf::Any& detail : rich_status.details()) {
    google::rpc::BadRequest bad_request;
    if (!detail.UnpackTo(&bad_request)) {
      absl::StrAppend(&text, "  ", DescribeDetail(detail), "\n");
      continue;
    }
    for (const google::rpc::BadRequest::FieldViolation& violation :
         bad_request.field_violations()) {
      absl::StrAppend(&text, "  field ", violation.field(), ": ",
                      violation.description(), "\n");
    }
  }
  return text;
}

}  // namespace cli
}  // namespace partplan

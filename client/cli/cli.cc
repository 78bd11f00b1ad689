#include "client/cli/cli.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/message_io.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace cli {
namespace {

// A request ready to send, and the method to send it to. `bytes` is what is
// sent; `request`, the same parsed, only when the subcommand built it (a
// request file is sent as read, and parsed only if the output needs it).
struct PreparedCall {
  const google::protobuf::MethodDescriptor* method = nullptr;
  grpc::ByteBuffer bytes;
  std::unique_ptr<google::protobuf::Message> request;
};

// Builds the request of one subcommand from its operands and the options.
using PrepareFunction = absl::StatusOr<PreparedCall> (*)(
    absl::Span<const std::string> operands, const CliOptions& options,
    std::istream& in);

// The one operand of `call`, `load` and `report`: a method's name.
absl::StatusOr<const google::protobuf::MethodDescriptor*> MethodOperand(
    absl::string_view subcommand, absl::string_view example,
    absl::Span<const std::string> operands) {
  if (operands.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(subcommand, ": expected one method name, e.g. 'partplan ", subcommand, " ",
                     example, "'; methods: ", absl::StrJoin(PlannerMethodNames(), ", ")));
  }
  return FindPlannerMethod(operands[0]);
}

// `partplan call <Method> --request=FILE`: any method, request from a file.
absl::StatusOr<PreparedCall> PrepareRequestFileCall(
    absl::Span<const std::string> operands, const CliOptions& options,
    std::istream& in) {
  absl::StatusOr<const google::protobuf::MethodDescriptor*> method =
      MethodOperand("call", "Validate --request=FILE", operands);
  if (!method.ok()) return method.status();
  if (options.request_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("call: --request is required: a file holding a ",
                     (*method)->input_type()->full_name(),
                     " (JSON or binary; - for stdin)"));
  }
  PreparedCall call;
  call.method = *method;
  absl::StatusOr<grpc::ByteBuffer> bytes =
      ReadRequestBytes(options.request_path, in, *call.method->input_type());
  if (!bytes.ok()) return FlagError("request", bytes.status());
  call.bytes = *std::move(bytes);
  return call;
}

// The method taking `Request`, found through the descriptors so that the
// subcommand table below needs no method names.
template <typename Request>
const google::protobuf::MethodDescriptor& MethodTaking() {
  const google::protobuf::ServiceDescriptor& service = PlannerService();
  for (int i = 0; i < service.method_count(); ++i) {
    if (service.method(i)->input_type() == Request::descriptor()) {
      return *service.method(i);
    }
  }
  // Only instantiated with the service's request types.
  std::abort();
}

// `partplan parallelize --request=FILE`: Parallelize with a request file.
absl::StatusOr<PreparedCall> PrepareParallelizeCall(absl::Span<const std::string> operands,
                                                    const CliOptions& options, std::istream& in) {
  if (!operands.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", operands.front(),
                     "' (parallelize takes its input from --request)"));
  }
  if (options.request_path.empty()) {
    return absl::InvalidArgumentError(
        "--request is required: a file holding a partplan.v1.ParallelizeRequest (JSON or "
        "binary; - for stdin), e.g. client/examples/parallelize.json");
  }
  PreparedCall call;
  call.method = &MethodTaking<v1::ParallelizeRequest>();
  absl::StatusOr<grpc::ByteBuffer> bytes =
      ReadRequestBytes(options.request_path, in, *call.method->input_type());
  if (!bytes.ok()) return FlagError("request", bytes.status());
  call.bytes = *std::move(bytes);
  return call;
}

template <typename Request>
using RequestBuilder = absl::StatusOr<Request> (*)(const v1::Graph&,
                                                   const PlannerFlags&);

// `partplan partition|plan|validate --graph=FILE ...`: a request built by
// `kBuild` from the graph file and the planner flags.
template <typename Request, RequestBuilder<Request> kBuild>
absl::StatusOr<PreparedCall> PrepareGraphCall(
    absl::Span<const std::string> operands, const CliOptions& options,
    std::istream& in) {
  const google::protobuf::MethodDescriptor& method = MethodTaking<Request>();
  if (!operands.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", operands.front(), "' (",
                     method.name(), " takes its input from flags)"));
  }
  if (options.graph_path.empty()) {
    return absl::InvalidArgumentError(
        "--graph is required: a file holding a partplan.v1.Graph (JSON or "
        "binary; - for stdin)");
  }
  v1::Graph graph;
  const absl::Status status = ReadMessageFile(options.graph_path, in, &graph);
  if (!status.ok()) return FlagError("graph", status);
  absl::StatusOr<Request> request = kBuild(graph, options.planner);
  if (!request.ok()) return request.status();
  PreparedCall call;
  call.method = &method;
  call.request = std::make_unique<Request>(*std::move(request));
  if (grpc::Status serialized = SerializeToByteBuffer(*call.request, &call.bytes);
      !serialized.ok()) {
    return absl::InvalidArgumentError(serialized.error_message());
  }
  return call;
}

// `partplan load <Method> --request=FILE ...`: the load generator
// (load_generator.h) instead of one call.
int RunLoadSubcommand(absl::Span<const std::string> operands,
                      const CliOptions& options,
                      const CliEnvironment& environment) {
  std::ostream& err = *environment.err;
  absl::StatusOr<const google::protobuf::MethodDescriptor*> method =
      MethodOperand("load", "PartitionGraph --request=FILE", operands);
  if (!method.ok()) {
    err << "error: " << method.status().message() << "\n";
    return kBadInputExitCode;
  }
  if (options.request_path.empty()) {
    err << "error: load: --request is required: a file holding a "
        << (*method)->input_type()->full_name()
        << " (JSON or binary; - for stdin)\n";
    return kBadInputExitCode;
  }
  LoadOptions load = options.load;
  absl::Status status = load.CheckAndSetup();
  std::unique_ptr<google::protobuf::Message> request =
      NewMessage((*method)->input_type());
  if (status.ok()) {
    status = ReadMessageFile(options.request_path, *environment.in,
                             request.get());
    if (!status.ok()) status = FlagError("request", status);
  }
  absl::StatusOr<v1::ValidateRequest> noop = v1::ValidateRequest();
  if (status.ok() && load.compare_noop) {
    noop = NoopRequestFor(*request);
    status = noop.status();
  }
  if (!status.ok()) {
    err << "error: " << status.message() << "\n";
    return kBadInputExitCode;
  }
  return RunLoadCommand(environment.connect(options.connection), **method,
                        *request, load.compare_noop ? &*noop : nullptr,
                        options.connection, load, *environment.out, err);
}

// `partplan report <Method> --response=FILE [--request=FILE]`: a saved
// response as the report page, or as --output's table or dot,
// with the request's graph labelling the edges when given.
int RunReportSubcommand(absl::Span<const std::string> operands,
                        const CliOptions& options,
                        const CliEnvironment& environment) {
  std::ostream& err = *environment.err;
  absl::StatusOr<const google::protobuf::MethodDescriptor*> method =
      MethodOperand("report", "PlanTraining --response=FILE", operands);
  if (!method.ok()) {
    err << "error: " << method.status().message() << "\n";
    return kBadInputExitCode;
  }
  if (options.response_path.empty()) {
    err << "error: report: --response is required: a file holding a "
        << (*method)->output_type()->full_name() << " (JSON or binary; - for stdin)\n";
    return kBadInputExitCode;
  }
  std::unique_ptr<google::protobuf::Message> response = NewMessage((*method)->output_type());
  absl::Status status = ReadMessageFile(options.response_path, *environment.in, response.get());
  if (!status.ok()) status = FlagError("response", status);
  std::unique_ptr<google::protobuf::Message> request;
  if (status.ok() && !options.request_path.empty()) {
    request = NewMessage((*method)->input_type());
    status = ReadMessageFile(options.request_path, *environment.in, request.get());
    if (!status.ok()) status = FlagError("request", status);
  }
  if (!status.ok()) {
    err << "error: " << status.message() << "\n";
    return kBadInputExitCode;
  }
  // The JSON is what was read: the report is the default.
  const OutputFormat format =
      options.output == OutputFormat::kJson ? OutputFormat::kHtml : options.output;
  *environment.out << FormatResponse(*response, format, request.get());
  environment.out->flush();
  return 0;
}

// A subcommand either prepares one call (`prepare`), which RunCli sends and
// prints, or runs on its own (`run`).
using RunFunction = int (*)(absl::Span<const std::string> operands,
                            const CliOptions& options,
                            const CliEnvironment& environment);

struct Subcommand {
  absl::string_view name;
  absl::string_view synopsis;
  absl::string_view summary;
  PrepareFunction prepare;
  RunFunction run;
};

constexpr absl::string_view kPlannerFlagsSynopsis =
    "--graph=FILE --device_memory=SIZE[,SIZE...] [--devices=N] "
    "[--mode=MODE] [--transfer_rate=BYTES_PER_S] [--saturate_host] "
    "[--node_references=names|indices]";

const Subcommand kSubcommands[] = {
    {"call", "<Method> --request=FILE",
     "Calls any PartitionPlanner method with a request file (proto3 JSON or "
     "binary; - for stdin).",
     PrepareRequestFileCall, nullptr},
    {"partition", kPlannerFlagsSynopsis,
     "PartitionGraph: partitions the graph over devices gpu0, gpu1, ... "
     "described by the flags.",
     PrepareGraphCall<v1::PartitionGraphRequest, BuildPartitionGraphRequest>,
     nullptr},
    {"plan", kPlannerFlagsSynopsis,
     "Plan: like partition, through the one-call Plan RPC.",
     PrepareGraphCall<v1::PlanRequest, BuildPlanRequest>, nullptr},
    {"validate", "--graph=FILE [--device_memory=SIZE[,SIZE...]]",
     "Validate: checks the graph (and devices) without planning.",
     PrepareGraphCall<v1::ValidateRequest, BuildValidateRequest>, nullptr},
    {"parallelize", "--request=FILE [--output=table|json]",
     "Parallelize: ranks tensor x pipeline x data-parallel configurations of a transformer on "
     "a cluster (the request file holds the model, the cluster and the options); "
     "--output=table prints one line per configuration and why the first wins.",
     PrepareParallelizeCall, nullptr},
    {"load",
     "<Method> --request=FILE [--concurrency=16] [--duration=10s | "
     "--requests=N] [--compare_noop] [--expected_codes=CODE,...]",
     "Load generator: --concurrency closed-loop clients on one channel send "
     "the request for --duration (or --requests calls in all); prints "
     "calls/s, p50/p90/p99/max latency and status code counts, and with "
     "--compare_noop the same for Validate carrying the request's graph and "
     "devices, and the throughput ratio. Exits 0 when every call ended OK or "
     "in --expected_codes, else with the most frequent other code.",
     nullptr, RunLoadSubcommand},
    {"report", "<Method> --response=FILE [--request=FILE] [--output=html|dot|table]",
     "Prints a saved response of <Method> as the self-contained HTML report "
     "(or with --output=dot, Graphviz; --output=table, the plan table); "
     "--request (the call's request) labels edges with the bytes crossing them.",
     nullptr, RunReportSubcommand},
};

const Subcommand* FindSubcommand(absl::string_view name) {
  for (const Subcommand& subcommand : kSubcommands) {
    if (subcommand.name == name) return &subcommand;
  }
  return nullptr;
}

std::string SubcommandNames() {
  std::vector<absl::string_view> names;
  for (const Subcommand& subcommand : kSubcommands) {
    names.push_back(subcommand.name);
  }
  return absl::StrJoin(names, ", ");
}

}  // namespace

int RunCli(absl::Span<const std::string> args, const CliOptions& options,
           const CliEnvironment& environment) {
  std::ostream& err = *environment.err;
  if (args.empty()) {
    err << "error: no subcommand given; one of " << SubcommandNames()
        << " (see --help)\n";
    return kBadInputExitCode;
  }
  const Subcommand* subcommand = FindSubcommand(args.front());
  if (subcommand == nullptr) {
    err << "error: unknown subcommand '" << args.front() << "'; one of "
        << SubcommandNames() << " (see --help)\n";
    return kBadInputExitCode;
  }
  if (subcommand->run != nullptr) {
    return subcommand->run(args.subspan(1), options, environment);
  }
  absl::StatusOr<PreparedCall> call =
      subcommand->prepare(args.subspan(1), options, *environment.in);
  if (!call.ok()) {
    err << "error: " << call.status().message() << "\n";
    return kBadInputExitCode;
  }

  grpc::ByteBuffer response_bytes;
  const grpc::Status status =
      CallPlannerBytes(environment.connect(options.connection), *call->method,
                       call->bytes, options.connection, &response_bytes);
  if (!status.ok()) {
    err << FormatRpcError(status);
    return static_cast<int>(status.error_code());
  }
  if (options.output == OutputFormat::kJson) {
    // Converted as it is written: no response message is built.
    const absl::Status written =
        WriteResponseJson(response_bytes, *call->method->output_type(), environment.out);
    environment.out->flush();
    if (!written.ok()) {
      err << "error: " << written.message() << "\n";
      return static_cast<int>(grpc::StatusCode::INTERNAL);
    }
    return 0;
  }
  std::unique_ptr<google::protobuf::Message> response =
      NewMessage(call->method->output_type());
  grpc::ProtoBufferReader response_reader(&response_bytes);
  if (!response->ParseFromZeroCopyStream(&response_reader)) {
    err << "error: the response does not parse as "
        << call->method->output_type()->full_name() << "\n";
    return static_cast<int>(grpc::StatusCode::INTERNAL);
  }
  // The report and the DOT graph label edges from the request's graph.
  const bool needs_request =
      options.output == OutputFormat::kHtml || options.output == OutputFormat::kDot;
  if (needs_request && call->request == nullptr) {
    call->request = NewMessage(call->method->input_type());
    grpc::ProtoBufferReader request_reader(&call->bytes);
    if (!call->request->ParseFromZeroCopyStream(&request_reader)) call->request.reset();
  }
  *environment.out << FormatResponse(*response, options.output, call->request.get());
  environment.out->flush();
  return 0;
}

std::string SubcommandHelp() {
  std::string text;
  for (const Subcommand& subcommand : kSubcommands) {
    absl::StrAppend(&text, "  partplan ", subcommand.name, " ",
                    subcommand.synopsis, "\n      ", subcommand.summary, "\n");
  }
  return text;
}

}  // namespace cli
}  // namespace partplan

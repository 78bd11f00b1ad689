#include "client/cli/load_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "client/cli/byte_size.h"
#include "client/cli/output.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace partplan {
namespace cli {
namespace {

// gRPC's and Abseil's status codes share their numbers and names.
constexpr int kLastStatusCode = static_cast<int>(grpc::StatusCode::UNAUTHENTICATED);

std::string CodeName(grpc::StatusCode code) {
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? absl::StrCat("CODE_", static_cast<int>(code)) : name;
}

absl::StatusOr<grpc::StatusCode> ParseStatusCode(absl::string_view text) {
  int number = 0;
  if (absl::SimpleAtoi(text, &number)) {
    if (number >= 0 && number <= kLastStatusCode) {
      return static_cast<grpc::StatusCode>(number);
    }
  } else {
    const std::string upper = absl::AsciiStrToUpper(text);
    for (int code = 0; code <= kLastStatusCode; ++code) {
      if (CodeName(static_cast<grpc::StatusCode>(code)) == upper) {
        return static_cast<grpc::StatusCode>(code);
      }
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--expected_codes: unknown status code '", text,
                   "'; a name such as RESOURCE_EXHAUSTED or a number 0-",
                   kLastStatusCode));
}

// Milliseconds with three decimals: "3.712 ms".
std::string FormatMilliseconds(absl::Duration duration) {
  return absl::StrFormat("%.3f ms", absl::ToDoubleMilliseconds(duration));
}

// Sends pre-serialised requests and waits for each answer, unparsed.
class RawCaller {
 public:
  RawCaller(std::shared_ptr<grpc::ChannelInterface> channel, std::string path,
            const grpc::ByteBuffer& request, const ConnectionOptions& connection)
      : stub_(std::move(channel)),
        path_(std::move(path)),
        request_(request),
        connection_(connection) {}

  grpc::Status Call() {
    grpc::ClientContext context;
    SetUpCallContext(connection_, &context);
    grpc::ByteBuffer response;
    grpc::Status result;
    absl::Notification done;
    stub_.UnaryCall(&context, path_, grpc::StubOptions(), &request_, &response,
                    [&result, &done](grpc::Status status) {
                      result = std::move(status);
                      done.Notify();
                    });
    done.WaitForNotification();
    return result;
  }

 private:
  grpc::GenericStub stub_;
  const std::string path_;
  // This caller's own reference to the shared serialised request.
  const grpc::ByteBuffer request_;
  const ConnectionOptions& connection_;
};

}  // namespace

absl::Status LoadOptions::CheckAndSetup() {
  if (concurrency < 1 || concurrency > kMaxLoadConcurrency) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--concurrency: must be between 1 and ", kMaxLoadConcurrency, ", not ",
        concurrency));
  }
  if (requests < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--requests: must be positive, not ", requests));
  }
  if (duration < absl::ZeroDuration() || duration == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "--duration: must be positive and finite, e.g. 10s");
  }
  if (requests > 0 && duration > absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "give --duration or --requests, not both");
  }
  if (requests == 0 && duration == absl::ZeroDuration()) {
    duration = kDefaultLoadDuration;
  }
  expected = {grpc::StatusCode::OK};
  for (absl::string_view name :
       absl::StrSplit(expected_codes, ',', absl::SkipWhitespace())) {
    absl::StatusOr<grpc::StatusCode> code =
        ParseStatusCode(absl::StripAsciiWhitespace(name));
    if (!code.ok()) return code.status();
    expected.insert(*code);
  }
  return absl::OkStatus();
}

void LoadReport::Add(grpc::StatusCode code, absl::Duration latency) {
  if (!latencies_.empty() && latency < latencies_.back()) sorted_ = false;
  latencies_.push_back(latency);
  ++codes_[code];
}

void LoadReport::Merge(const LoadReport& other) {
  if (other.latencies_.empty()) return;
  latencies_.insert(latencies_.end(), other.latencies_.begin(),
                    other.latencies_.end());
  sorted_ = false;
  for (const auto& [code, count] : other.codes_) codes_[code] += count;
}

double LoadReport::Throughput() const {
  if (elapsed <= absl::ZeroDuration()) return 0;
  return static_cast<double>(calls()) / absl::ToDoubleSeconds(elapsed);
}

absl::Duration LoadReport::Percentile(double fraction) const {
  if (latencies_.empty()) return absl::ZeroDuration();
  if (!sorted_) {
    std::sort(latencies_.begin(), latencies_.end());
    sorted_ = true;
  }
  // Nearest rank: the ceil(fraction * n)-th smallest, 1-based. The small
  // tolerance keeps 0.9 * 100 from rounding up to rank 91.
  const double n = static_cast<double>(latencies_.size());
  const double rank = std::ceil(std::clamp(fraction, 0.0, 1.0) * n - 1e-9);
  const size_t index = static_cast<size_t>(std::max(rank, 1.0)) - 1;
  return latencies_[std::min(index, latencies_.size() - 1)];
}

std::string FormatLoadReport(const LoadReport& report) {
  std::string text = absl::StrCat(
      report.method, ": ", report.concurrency,
      report.concurrency == 1 ? " client" : " clients", " on 1 channel, request ",
      FormatByteSize(report.request_bytes), "\n");
  absl::StrAppend(
      &text, "  calls    ", report.calls(), " in ",
      absl::StrFormat("%.2f s", absl::ToDoubleSeconds(report.elapsed)), ": ",
      absl::StrFormat("%.1f", report.Throughput()), " calls/s\n");
  absl::StrAppend(&text, "  latency  p50 ",
                  FormatMilliseconds(report.Percentile(0.5)), "  p90 ",
                  FormatMilliseconds(report.Percentile(0.9)), "  p99 ",
                  FormatMilliseconds(report.Percentile(0.99)), "  max ",
                  FormatMilliseconds(report.Max()), "\n");
  absl::StrAppend(&text, "  codes   ");
  for (const auto& [code, count] : report.codes()) {
    absl::StrAppend(&text, " ", CodeName(code), " ", count);
  }
  if (report.codes().empty()) absl::StrAppend(&text, " none");
  absl::StrAppend(&text, "\n");
  return text;
}

std::string FormatComparison(const LoadReport& method, const LoadReport& noop) {
  const double noop_throughput = noop.Throughput();
  const std::string ratio =
      noop_throughput > 0
          ? absl::StrFormat("%.2f", method.Throughput() / noop_throughput)
          : std::string("n/a");
  return absl::StrCat(
      method.method, " / ", noop.method, " throughput: ", ratio, " (",
      absl::StrFormat("%.1f / %.1f", method.Throughput(), noop_throughput),
      " calls/s)\n");
}

absl::StatusOr<v1::ValidateRequest> NoopRequestFor(
    const google::protobuf::Message& request) {
  const google::protobuf::Descriptor* type = request.GetDescriptor();
  const google::protobuf::Reflection* reflection = request.GetReflection();
  const google::protobuf::FieldDescriptor* graph = type->FindFieldByName("graph");
  if (graph == nullptr || graph->is_repeated() ||
      graph->message_type() != v1::Graph::descriptor()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--compare_noop: ", type->full_name(),
        " has no partplan.v1.Graph field 'graph' to send to Validate"));
  }
  if (!reflection->HasField(request, graph)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--compare_noop: the request has no graph to send to Validate"));
  }
  v1::ValidateRequest noop;
  noop.mutable_graph()->CopyFrom(reflection->GetMessage(request, graph));
  const google::protobuf::FieldDescriptor* devices =
      type->FindFieldByName("devices");
  if (devices != nullptr && !devices->is_repeated() &&
      devices->message_type() == v1::DeviceInventory::descriptor() &&
      reflection->HasField(request, devices)) {
    noop.mutable_devices()->CopyFrom(reflection->GetMessage(request, devices));
  }
  return noop;
}

grpc::Status RunLoad(std::shared_ptr<grpc::ChannelInterface> channel,
                     const google::protobuf::MethodDescriptor& method,
                     const google::protobuf::Message& request,
                     const ConnectionOptions& connection,
                     const LoadOptions& options, LoadReport* report) {
  *report = LoadReport();
  report->method = method.name();
  grpc::ByteBuffer buffer;
  if (grpc::Status serialized = SerializeToByteBuffer(request, &buffer); !serialized.ok()) {
    return serialized;
  }
  report->request_bytes = static_cast<int64_t>(buffer.Length());
  const std::string path =
      absl::StrCat("/", method.service()->full_name(), "/", method.name());

  // The uncounted first call.
  {
    RawCaller caller(channel, path, buffer, connection);
    grpc::Status first = caller.Call();
    if (options.expected.count(first.error_code()) == 0) return first;
  }

  int threads = options.concurrency;
  if (options.requests > 0) {
    threads = static_cast<int>(
        std::min<int64_t>(threads, options.requests));
  }
  report->concurrency = threads;
  std::vector<LoadReport> shares(static_cast<size_t>(threads));
  std::vector<std::chrono::steady_clock::time_point> ends(shares.size());
  std::atomic<int64_t> issued{0};
  absl::Notification go;
  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::time_point stop;
  const auto duration = absl::ToChronoNanoseconds(options.duration);

  std::vector<std::thread> workers;
  workers.reserve(shares.size());
  for (size_t t = 0; t < shares.size(); ++t) {
    workers.emplace_back([&, t] {
      RawCaller caller(channel, path, buffer, connection);
      LoadReport& share = shares[t];
      go.WaitForNotification();
      auto end = start;
      while (true) {
        if (options.requests > 0) {
          if (issued.fetch_add(1, std::memory_order_relaxed) >= options.requests) {
            break;
          }
        } else if (std::chrono::steady_clock::now() >= stop) {
          break;
        }
        const auto call_start = std::chrono::steady_clock::now();
        const grpc::Status status = caller.Call();
        end = std::chrono::steady_clock::now();
        share.Add(status.error_code(), absl::FromChrono(end - call_start));
      }
      ends[t] = end;
    });
  }
  start = std::chrono::steady_clock::now();
  stop = start + duration;
  go.Notify();
  for (std::thread& worker : workers) worker.join();

  auto last = start;
  for (size_t t = 0; t < shares.size(); ++t) {
    report->Merge(shares[t]);
    last = std::max(last, ends[t]);
  }
  report->elapsed = absl::FromChrono(last - start);
  return grpc::Status::OK;
}

int LoadExitCode(const std::vector<const LoadReport*>& reports,
                 const std::set<grpc::StatusCode>& expected) {
  std::map<grpc::StatusCode, int64_t> unexpected;
  for (const LoadReport* report : reports) {
    for (const auto& [code, count] : report->codes()) {
      if (expected.count(code) == 0) unexpected[code] += count;
    }
  }
  grpc::StatusCode worst = grpc::StatusCode::OK;
  int64_t most = 0;
  for (const auto& [code, count] : unexpected) {  // in code order
    if (count > most) {
      worst = code;
      most = count;
    }
  }
  return static_cast<int>(worst);
}

int RunLoadCommand(std::shared_ptr<grpc::ChannelInterface> channel,
                   const google::protobuf::MethodDescriptor& method,
                   const google::protobuf::Message& request,
                   const v1::ValidateRequest* noop_request,
                   const ConnectionOptions& connection,
                   const LoadOptions& options, std::ostream& out,
                   std::ostream& err) {
  LoadReport report;
  grpc::Status first =
      RunLoad(channel, method, request, connection, options, &report);
  if (!first.ok()) {
    err << FormatRpcError(first) << "  (the first, uncounted call of "
        << method.name() << " failed; no load was run)\n";
    return static_cast<int>(first.error_code());
  }
  out << FormatLoadReport(report);
  out.flush();
  std::vector<const LoadReport*> reports = {&report};

  LoadReport noop;
  if (noop_request != nullptr) {
    const google::protobuf::MethodDescriptor* validate =
        method.service()->FindMethodByName("Validate");
    if (validate == nullptr ||
        validate->input_type() != v1::ValidateRequest::descriptor()) {
      err << "error: " << method.service()->full_name()
          << " has no Validate(partplan.v1.ValidateRequest) to compare with\n";
      return static_cast<int>(grpc::StatusCode::UNIMPLEMENTED);
    }
    first = RunLoad(channel, *validate, *noop_request, connection, options,
                    &noop);
    if (!first.ok()) {
      err << FormatRpcError(first)
          << "  (the first, uncounted call of Validate failed; no no-op load "
             "was run)\n";
      return static_cast<int>(first.error_code());
    }
    out << FormatLoadReport(noop) << FormatComparison(report, noop);
    reports.push_back(&noop);
  }
  return LoadExitCode(reports, options.expected);
}

}  // namespace cli
}  // namespace partplan

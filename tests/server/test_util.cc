#include "tests/server/test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace partplan {

void EventCounter::Increment() {
  absl::MutexLock lock(&mu_);
  ++count_;
}

bool EventCounter::WaitFor(int n) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), kTestTimeout);
}

int EventCounter::count() {
  absl::MutexLock lock(&mu_);
  return count_;
}

FakePlannerBackend::FakePlannerBackend(Hook hook) : hook_(std::move(hook)) {
  for (const PlannerRpcMethod& rpc : kPlannerRpcs) {
    canned_.emplace_back(rpc.response_prototype().New());
  }
}

absl::Status FakePlannerBackend::Answer(const PlannerRpcMethod& rpc, const PlannerRequest&,
                                        const CancellationToken& token, google::protobuf::Arena*,
                                        absl::Cord* response_bytes) {
  if (hook_) {
    if (absl::Status status = hook_(token); !status.ok()) return status;
  }
  *response_bytes = absl::Cord(response_bytes_.has_value()
                                   ? *response_bytes_
                                   : canned_[Index(rpc.rpc)]->SerializeAsString());
  return absl::OkStatus();
}

FakePlannerBackend::Hook BlockUntil(absl::Notification& release, EventCounter& started) {
  return [&release, &started](const CancellationToken&) {
    started.Increment();
    if (!release.WaitForNotificationWithTimeout(kTestTimeout)) {
      return absl::InternalError("test never released the planner");
    }
    return absl::OkStatus();
  };
}

FakePlannerBackend::Hook WaitForToken(TokenProbe& probe) {
  return [&probe](const CancellationToken& token) {
    probe.started.Increment();
    const absl::Time give_up = absl::Now() + kTestTimeout;
    absl::Status status = token.Check();
    while (status.ok() && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));  // A planner's work between polls.
      status = token.Check();
    }
    probe.stop_status = status.ok() ? absl::InternalError("the token never fired") : status;
    probe.stopped.Notify();
    return probe.stop_status;
  };
}

ServerOptions TestServerOptions() {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.metrics_port = -1;
  options.planner_threads = 2;
  options.queue_depth = 4;
  options.drain_deadline = absl::Seconds(10);
  return options;
}

std::unique_ptr<PlannerServer> StartTestServer(std::unique_ptr<PlannerBackend> backend,
                                               const ServerOptions& options) {
  absl::StatusOr<std::unique_ptr<PlannerServer>> server =
      PlannerServer::Start(options, std::move(backend));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::shared_ptr<grpc::Channel> ConnectTo(const PlannerServer& server) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port()),
                             grpc::InsecureChannelCredentials());
}

std::unique_ptr<v1::PartitionPlanner::Stub> NewPlannerStub(const PlannerServer& server) {
  return v1::PartitionPlanner::NewStub(ConnectTo(server));
}

std::unique_ptr<PendingValidate> StartValidate(v1::PartitionPlanner::Stub& stub,
                                               EventCounter* finished) {
  auto call = std::make_unique<PendingValidate>();
  // A call that cannot hang the test when the server misbehaves.
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + kTestTimeout));
  PendingValidate* pending = call.get();
  stub.async()->Validate(&pending->context, &pending->request, &pending->response,
                         [pending, finished](grpc::Status status) {
                           pending->status = std::move(status);
                           pending->done.Notify();
                           if (finished != nullptr) finished->Increment();
                         });
  return call;
}

bool WaitForCall(PendingValidate& call) {
  return call.done.WaitForNotificationWithTimeout(kTestTimeout);
}

// HTTP/1.0: the server closes the connection after the response.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to port ", port));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::InternalError("write failed");
  }
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (!absl::StartsWith(response, "HTTP/1.") || body == std::string::npos) {
    return absl::InternalError("not an HTTP response: " + response.substr(0, 100));
  }
  return response.substr(body + 4);
}

double SampleValue(const std::string& exposition, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " ")) continue;
    double value;
    // Drop a timestamp, if any.
    if (absl::SimpleAtod(line.substr(0, line.find(' ')), &value)) return value;
  }
  return -1;
}

bool WaitForSample(int metrics_port, const std::string& series, double value) {
  const absl::Time give_up = absl::Now() + kTestTimeout;
  while (absl::Now() < give_up) {
    absl::StatusOr<std::string> metrics = HttpGet(metrics_port, "/metrics");
    if (metrics.ok() && SampleValue(*metrics, series) == value) return true;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return false;
}

std::string PartsReply::Joined() const {
  std::string joined;
  for (const std::string& part : parts) joined += part;
  return joined;
}

PartsReply CallInParts(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                       const std::string& request, size_t part_bytes,
                       const std::string& later_method) {
  auto stub = v1::PartitionPlannerInParts::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kTestTimeout));
  auto stream = stub->Call(&context);
  size_t offset = 0;
  do {
    v1::MessagePart part;
    part.set_method(offset == 0 ? method : later_method);
    part.set_data(request.substr(offset, part_bytes));
    offset += part_bytes;
    if (!stream->Write(part)) break;  // the server has ended the call
  } while (offset < request.size());
  stream->WritesDone();
  PartsReply reply;
  v1::MessagePart part;
  while (stream->Read(&part)) {
    EXPECT_TRUE(part.method().empty());
    reply.parts.push_back(part.data());
  }
  reply.status = stream->Finish();
  return reply;
}

}  // namespace partplan

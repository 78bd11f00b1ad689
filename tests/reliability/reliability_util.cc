#include "tests/reliability/reliability_util.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/error_details.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "planner/api/entry_points.h"
#include "tests/server/test_util.h"
#include "planner/base/cancellation.h"

namespace partplan {
namespace {

// The most layers SlowPlanLayers gives (a request of about 4.5 MB).
constexpr int kMaxSlowLayers = 40000;

grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromByteBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return "";
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

}  // namespace

std::string MethodPath(PlannerRpc rpc) {
  return absl::StrCat("/", kPlannerServiceName, "/", RpcName(rpc));
}

std::shared_ptr<grpc::Channel> LoopbackChannel(int port) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetMaxSendMessageSize(-1);
  // A channel of its own: gRPC would otherwise share one connection between
  // channels with equal arguments, so one test's broken connection could
  // fail another's calls.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials(), arguments);
}

RawReply CallRaw(const std::shared_ptr<grpc::Channel>& channel, PlannerRpc rpc, const std::string& request,
                 absl::Duration timeout, absl::Duration cancel_after) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  const grpc::ByteBuffer request_buffer = ToByteBuffer(request);
  grpc::ByteBuffer response_buffer;
  RawReply reply;
  absl::Notification done;
  stub.UnaryCall(&context, MethodPath(rpc), grpc::StubOptions(), &request_buffer,
                 &response_buffer, [&reply, &done](grpc::Status status) {
                   reply.status = std::move(status);
                   done.Notify();
                 });
  if (!done.WaitForNotificationWithTimeout(cancel_after)) {
    context.TryCancel();
    done.WaitForNotification();
  }
  if (reply.status.ok()) reply.response = FromByteBuffer(response_buffer);
  return reply;
}

RawReply CallRawInParts(const std::shared_ptr<grpc::Channel>& channel, PlannerRpc rpc,
                        const std::string& request, size_t part_bytes) {
  const PartsReply parts = CallInParts(channel, std::string(RpcName(rpc)), request, part_bytes);
  RawReply reply;
  reply.status = parts.status;
  if (reply.status.ok()) reply.response = parts.Joined();
  return reply;
}

PendingRawCall::PendingRawCall(const std::shared_ptr<grpc::Channel>& channel, PlannerRpc rpc,
                               const std::string& request, absl::Duration timeout)
    : request_(ToByteBuffer(request)) {
  context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::GenericStub stub(channel);
  stub.UnaryCall(&context_, MethodPath(rpc), grpc::StubOptions(), &request_, &response_,
                 [this](grpc::Status status) {
                   reply_.status = std::move(status);
                   if (reply_.status.ok()) reply_.response = FromByteBuffer(response_);
                   answered_at_ = absl::Now();
                   done_.Notify();
                 });
}

PendingRawCall::~PendingRawCall() { done_.WaitForNotification(); }

bool PendingRawCall::Wait(absl::Duration timeout) {
  return done_.WaitForNotificationWithTimeout(timeout);
}

std::vector<std::string> FieldViolations(const grpc::Status& status) {
  std::vector<std::string> fields;
  google::rpc::Status details;
  if (status.error_details().empty() || !grpc::ExtractErrorDetails(status, &details).ok()) {
    return fields;
  }
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::BadRequest bad_request;
    if (!any.UnpackTo(&bad_request)) continue;
    for (const auto& violation : bad_request.field_violations()) {
      fields.push_back(violation.field());
    }
  }
  return fields;
}

std::string Describe(const grpc::Status& status) {
  std::string message = status.error_message();
  if (message.size() > 300) message = absl::StrCat(message.substr(0, 300), "...");
  return absl::StrCat(status.error_code(), ": ", message);
}

std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

std::string ReadWorkspaceFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

bool ParseJsonFile(const std::string& path, google::protobuf::Message* message) {
  const std::string text = ReadWorkspaceFile(path);
  return !text.empty() && google::protobuf::util::JsonStringToMessage(text, message).ok();
}

std::unique_ptr<google::protobuf::Message> RequestWithGraph(PlannerRpc rpc, const v1::Graph& graph,
                                                         const v1::DeviceInventory& devices) {
  std::unique_ptr<google::protobuf::Message> request(
      PlannerRpcOf(rpc).request_prototype().New());
  const google::protobuf::Descriptor& type = *request->GetDescriptor();
  const google::protobuf::Reflection& fields = *request->GetReflection();
  fields.MutableMessage(request.get(), type.FindFieldByName("graph"))->CopyFrom(graph);
  if (const google::protobuf::FieldDescriptor* field = type.FindFieldByName("devices");
      field != nullptr && field->message_type() == v1::DeviceInventory::descriptor()) {
    fields.MutableMessage(request.get(), field)->CopyFrom(devices);
  }
  return request;
}

std::string ExampleRequest(PlannerRpc rpc) {
  std::unique_ptr<google::protobuf::Message> request(
      PlannerRpcOf(rpc).request_prototype().New());
  if (ParseJsonFile(absl::StrCat("client/examples/", SnakeCaseName(rpc), ".json"),
                    request.get())) {
    return DeterministicBytes(*request);
  }
  // An RPC without an example of its own: the Validate example's graph (and
  // inventory, when the request takes one), which every request has room for.
  v1::ValidateRequest validate;
  if (!ParseJsonFile("client/examples/validate.json", &validate)) return "";
  return DeterministicBytes(*RequestWithGraph(rpc, validate.graph(), validate.devices()));
}

v1::PartitionGraphRequest InterleavedPartitionRequest(int layers) {
  v1::PartitionGraphRequest request;
  v1::Graph* graph = request.mutable_graph();
  graph->set_name(absl::StrCat("interleaved_", layers));
  auto add = [graph](const std::string& name, v1::Op op, const std::string& input) {
    v1::Node* node = graph->add_nodes();
    node->set_name(name);
    node->set_op(op);
    node->set_target(name);
    if (!input.empty()) node->add_args()->set_node(input);
    if (op != v1::OUTPUT) {
      node->mutable_size_bytes()->set_total_bytes(100);
      node->mutable_size_bytes()->set_output_bytes(10);
    }
    return node;
  };
  // x -> emb_i -> dense_i for every layer i, each dense_i also reading
  // dense_{i-1}, in the order emb_0, dense_0, emb_1, ...: every node starts
  // a new partition. sparse_nn then merges the dense ones, a chain, each
  // into the union of those before it, and every such merge shortens the
  // chain, moving the DAG level of every dense partition after it:
  // O(layers^2) level updates. The embedding ones (one DAG level) merge
  // likewise, but cheaply.
  add("x", v1::PLACEHOLDER, "");
  std::string previous;
  for (int i = 0; i < layers; ++i) {
    const std::string embedding = absl::StrCat("emb_", i);
    add(embedding, v1::CALL_MODULE, "x")->set_module_type("torch.nn.Embedding");
    const std::string dense = absl::StrCat("dense_", i);
    v1::Node* node = add(dense, v1::CALL_FUNCTION, embedding);
    if (!previous.empty()) node->add_args()->set_node(previous);
    previous = dense;
  }
  add("output", v1::OUTPUT, previous);
  // Two devices of 170 bytes per layer: less than the whole graph (about
  // 200 per layer), more than every merge tried. The plan then fails
  // (FAILED_PRECONDITION): the merged embedding and dense partitions do not
  // fit one device together.
  for (int d = 0; d < 2; ++d) {
    v1::Device* device = request.mutable_devices()->add_devices();
    device->set_name(absl::StrCat("gpu", d));
    device->set_logical_id(d);
    device->set_available_memory_bytes(170 * static_cast<int64_t>(layers));
  }
  request.mutable_config()->set_mode(v1::PartitionerConfig::SPARSE_NN);
  return request;
}

namespace {

// The CPU seconds one plan of InterleavedPartitionRequest(layers) takes, at
// best of two. CPU time, not wall time, so that other work on the machine
// (tests run side by side) does not make the fit steeper: a plan on a busy
// machine then takes longer than asked, never shorter.
double PlanSeconds(int layers) {
  const v1::PartitionGraphRequest request = InterleavedPartitionRequest(layers);
  const CancellationToken token;
  const auto thread_cpu_seconds = [] {
    timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
  };
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 2; ++i) {
    v1::PartitionGraphResponse response;
    const double start = thread_cpu_seconds();
    // FAILED_PRECONDITION, by design (InterleavedPartitionRequest).
    PartitionGraph(request, InputLimits(), token, &response).IgnoreError();
    best = std::min(best, thread_cpu_seconds() - start);
  }
  return best;
}

// Seconds per layer squared, from the first number of layers (doubling from
// 100) that plans in at least 50 ms: long enough to time, and to be
// dominated by the quadratic part.
double SecondsPerSquaredLayer() {
  int layers = 100;
  double seconds = PlanSeconds(layers);
  while (seconds < 0.05 && layers < kMaxSlowLayers) {
    layers *= 2;
    seconds = PlanSeconds(layers);
  }
  return seconds / (static_cast<double>(layers) * layers);
}

}  // namespace

int SlowPlanLayers(absl::Duration plan_time) {
  static const double seconds_per_squared_layer = SecondsPerSquaredLayer();
  const double layers = std::sqrt(absl::ToDoubleSeconds(plan_time) / seconds_per_squared_layer);
  return static_cast<int>(std::clamp(layers, 1.0, static_cast<double>(kMaxSlowLayers)));
}

v1::PartitionGraphRequest SlowPartitionRequest(absl::Duration plan_time) {
  return InterleavedPartitionRequest(SlowPlanLayers(plan_time));
}

int64_t ResidentKib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmRSS:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    rest = absl::StripSuffix(rest, "kB");
    int64_t kib;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kib)) return kib;
  }
  return -1;
}

RecordingBackend::RecordingBackend(const InputLimits& limits)
    : library_(NewLibraryPlannerBackend(limits)) {}

int RecordingBackend::started() {
  absl::MutexLock lock(&mu_);
  return started_;
}

int RecordingBackend::finished() {
  absl::MutexLock lock(&mu_);
  return finished_;
}

bool RecordingBackend::WaitForFinished(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

bool RecordingBackend::WaitForStarted(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return started_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

absl::Time RecordingBackend::last_finish() {
  absl::MutexLock lock(&mu_);
  return last_finish_;
}

std::vector<absl::StatusCode> RecordingBackend::codes() {
  absl::MutexLock lock(&mu_);
  return codes_;
}

absl::Status RecordingBackend::Answer(const PlannerRpcMethod& rpc, const PlannerRequest& request,
                                      const CancellationToken& token,
                                      google::protobuf::Arena* arena, absl::Cord* response_bytes) {
  {
    absl::MutexLock lock(&mu_);
    ++started_;
  }
  absl::Status status = library_->Answer(rpc, request, token, arena, response_bytes);
  absl::MutexLock lock(&mu_);
  ++finished_;
  last_finish_ = absl::Now();
  codes_.push_back(status.code());
  return status;
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::vector<std::string>& flags, const std::string& binary_in) {
  std::string binary = binary_in;
  if (binary.empty()) {
    const char* from_env = std::getenv("PARTPLAN_SERVER");
    binary = from_env != nullptr ? from_env : "server/partplan_server";
  }
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("no server binary at ", binary));
  }
  const char* tmpdir = std::getenv("TEST_TMPDIR");
  static int counter = 0;
  std::unique_ptr<ServerProcess> process(new ServerProcess());
  process->log_path_ = absl::StrCat(tmpdir != nullptr ? tmpdir : "/tmp", "/partplan_server.",
                                    getpid(), ".", counter++, ".log");

  std::vector<std::string> args = {binary, "--host=127.0.0.1", "--port=0", "--metrics_port=-1",
                                   "--log_format=json"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const int log_fd = open(process->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (log_fd < 0) return absl::InternalError("cannot create the server log");
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    // The child must not inherit a blocked SIGTERM mask from test threads.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log_fd);
  process->pid_ = pid;

  // The ports are in the "serving" line: "address":"127.0.0.1:<port>",
  // "metrics_port":<port>.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (absl::Now() < give_up) {
    const std::string log = process->Log();
    const size_t at = log.find("\"address\":\"127.0.0.1:");
    if (at != std::string::npos) {
      absl::string_view rest = absl::string_view(log).substr(at + 21);
      rest = rest.substr(0, rest.find('"'));
      int port;
      if (absl::SimpleAtoi(rest, &port) && port > 0) {
        process->port_ = port;
        const size_t metrics_at = log.find("\"metrics_port\":", at);
        if (metrics_at != std::string::npos) {
          absl::string_view value = absl::string_view(log).substr(metrics_at + 15);
          value = value.substr(0, value.find_first_of(",}"));
          int metrics_port;
          if (absl::SimpleAtoi(value, &metrics_port)) process->metrics_port_ = metrics_port;
        }
        return process;
      }
    }
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      process->exited_ = true;
      return absl::InternalError(absl::StrCat("the server exited at startup: ", log));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError("the server did not log its port within 60 s");
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
}

std::string ServerProcess::Log() const { return ReadWorkspaceFile(log_path_); }

void ServerProcess::Signal(int signal) {
  if (pid_ > 0 && !exited_) kill(pid_, signal);
}

absl::StatusOr<int> ServerProcess::WaitForExit(absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    int status;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exited_ = true;
      return status;
    }
    if (absl::Now() >= give_up) {
      return absl::DeadlineExceededError("the server did not exit in time");
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

}  // namespace partplan

// soak_client: minutes of mixed load against a partplan_server it starts,
// reporting the server's resident memory over time and every call's status.
// tools/soak.sh builds and runs it.
//
//   soak_client --seconds=300 --concurrency=8 [--server=bazel-bin/server/partplan_server]
//
// Each worker loops over a weighted mix:
//   valid      a fixture or example request of any RPC (corpus.h), its graph
//              renamed half the time so the plan cache does not answer it
//   hostile    the same, edited at random as the fuzzers do (fuzz_harness.h)
//   garbage    random or truncated bytes
//   cancel     a slow plan (SlowPartitionRequest) cancelled 50-500 ms in
//   deadline   a slow plan with a 200 ms deadline
//   slow       a shorter slow plan, left to finish
//   oversized  a request above the server's --max_receive_message_bytes
// The server runs with 2 planner threads, a queue of 16 and a 4 MiB plan
// cache (full early, then evicting), so RESOURCE_EXHAUSTED is part of the
// mix too.
//
// Lost calls: a call without a short deadline that ends DEADLINE_EXCEEDED
// (the server never answered) or UNAVAILABLE (it went away), any INTERNAL,
// UNKNOWN or DATA_LOSS, or a server that is not running at the end. RSS is
// sampled every --sample_seconds; "flat" means the last sample is within
// max(--rss_slack_mib, 10%) of the sample taken when warm-up ended (the
// first fifth of the run). Exit status 0 when nothing was lost and RSS was
// flat; the last line is `soak: ...` with the figures.
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "partplan/v1/planner_service.pb.h"
#include "tests/fuzz/corpus.h"
#include "tests/fuzz/fuzz_harness.h"
#include "tests/reliability/reliability_util.h"

ABSL_FLAG(int, seconds, 300, "How long to run the load.");
ABSL_FLAG(int, concurrency, 8, "Client threads, each with one call at a time.");
ABSL_FLAG(double, sample_seconds, 10, "Seconds between RSS samples.");
ABSL_FLAG(int, rss_slack_mib, 48, "RSS growth after warm-up still counted as flat, in MiB.");
ABSL_FLAG(std::string, server, "",
          "The partplan_server binary (default: $PARTPLAN_SERVER, else server/partplan_server).");

namespace partplan {
namespace {

constexpr int kMaxReceiveBytes = 8 << 20;
// How long the slow plans take uncancelled: the cancelled ones (50-500 ms
// in) and those with a 200 ms deadline, and the shorter ones left to finish.
constexpr absl::Duration kSlowPlan = absl::Seconds(1);
constexpr absl::Duration kShortSlowPlan = absl::Milliseconds(150);

enum class Kind { kValid, kHostile, kGarbage, kCancel, kDeadline, kSlow, kOversized };
constexpr const char* kKindNames[] = {"valid",    "hostile", "garbage",  "cancel",
                                      "deadline", "slow",    "oversized"};
// Weights of each kind, in that order.
constexpr int kWeights[] = {45, 25, 4, 10, 8, 5, 3};

struct Seed {
  PlannerRpc rpc;
  std::string bytes;
};

// A message edit of `bytes`, a request of `rpc` (fuzz_harness.h).
bool Mutate(PlannerRpc rpc, std::string* bytes, std::mt19937_64& random) {
  std::unique_ptr<google::protobuf::Message> request(
      PlannerRpcOf(rpc).request_prototype().New());
  if (!request->ParseFromString(*bytes) || !fuzz::MutateMessage(request.get(), random)) {
    return false;
  }
  *bytes = fuzz::Serialize(*request);
  return true;
}

// Every request message has its graph as field 1, and a Graph its name as
// field 1: appending graph {name: ...} renames the graph (protobuf merges a
// repeated singular message field), whatever the request's type.
std::string Renamed(const std::string& bytes, uint64_t n) {
  v1::Graph graph;
  graph.set_name(absl::StrCat("soak-", n));
  v1::ValidateRequest patch;
  *patch.mutable_graph() = graph;
  return bytes + patch.SerializeAsString();
}

class Stats {
 public:
  void Record(Kind kind, grpc::StatusCode code, bool lost) {
    absl::MutexLock lock(&mu_);
    ++counts_[{static_cast<int>(kind), static_cast<int>(code)}];
    ++calls_;
    if (lost) ++lost_;
  }
  int64_t calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  int64_t lost() {
    absl::MutexLock lock(&mu_);
    return lost_;
  }
  void Print() {
    absl::MutexLock lock(&mu_);
    std::map<int, std::vector<std::string>> by_kind;
    std::map<int, int64_t> by_code;
    for (const auto& [key, count] : counts_) {
      by_kind[key.first].push_back(absl::StrCat(CodeName(key.second), " ", count));
      by_code[key.second] += count;
    }
    for (const auto& [kind, codes] : by_kind) {
      std::printf("  %-10s %s\n", kKindNames[kind], absl::StrJoin(codes, ", ").c_str());
    }
    std::vector<std::string> codes;
    for (const auto& [code, count] : by_code) codes.push_back(absl::StrCat(CodeName(code), " ", count));
    std::printf("  all        %s\n", absl::StrJoin(codes, ", ").c_str());
  }

  static std::string CodeName(int code) {
    static const char* kNames[] = {"OK",
                                   "CANCELLED",
                                   "UNKNOWN",
                                   "INVALID_ARGUMENT",
                                   "DEADLINE_EXCEEDED",
                                   "NOT_FOUND",
                                   "ALREADY_EXISTS",
                                   "PERMISSION_DENIED",
                                   "RESOURCE_EXHAUSTED",
                                   "FAILED_PRECONDITION",
                                   "ABORTED",
                                   "OUT_OF_RANGE",
                                   "UNIMPLEMENTED",
                                   "INTERNAL",
                                   "UNAVAILABLE",
                                   "DATA_LOSS",
                                   "UNAUTHENTICATED"};
    return code >= 0 && code <= 16 ? kNames[code] : absl::StrCat(code);
  }

 private:
  absl::Mutex mu_;
  std::map<std::pair<int, int>, int64_t> counts_ ABSL_GUARDED_BY(mu_);
  int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t lost_ ABSL_GUARDED_BY(mu_) = 0;
};

bool IsLost(Kind kind, grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::DATA_LOSS:
    case grpc::StatusCode::UNAVAILABLE:
      return true;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return kind != Kind::kDeadline;
    default:
      return false;
  }
}

void Worker(int id, int port, absl::Time stop, const std::vector<Seed>& seeds, Stats& stats) {
  std::mt19937_64 random(0x50a4 + id);
  const std::shared_ptr<grpc::Channel> channel = LoopbackChannel(port);
  std::discrete_distribution<int> pick_kind(std::begin(kWeights), std::end(kWeights));
  std::string oversized;
  {
    v1::ValidateRequest request;
    request.mutable_graph()->set_name(std::string(kMaxReceiveBytes + 1024, 'o'));
    oversized = request.SerializeAsString();
  }
  uint64_t n = 0;
  while (absl::Now() < stop) {
    const Kind kind = static_cast<Kind>(pick_kind(random));
    const Seed& seed = seeds[random() % seeds.size()];
    PlannerRpc rpc = seed.rpc;
    std::string bytes;
    absl::Duration timeout = absl::Seconds(60);
    absl::Duration cancel_after = absl::InfiniteDuration();
    const uint64_t unique = (static_cast<uint64_t>(id) << 40) | n++;
    switch (kind) {
      case Kind::kValid:
        bytes = random() % 2 == 0 ? Renamed(seed.bytes, unique) : seed.bytes;
        break;
      case Kind::kHostile:
        bytes = seed.bytes;
        for (int i = 0; i <= static_cast<int>(random() % 3); ++i) Mutate(rpc, &bytes, random);
        break;
      case Kind::kGarbage:
        bytes = seed.bytes.substr(0, random() % (seed.bytes.size() + 1));
        for (int i = 0; i < 8 && !bytes.empty(); ++i) {
          bytes[random() % bytes.size()] = static_cast<char>(random());
        }
        break;
      case Kind::kCancel:
      case Kind::kDeadline:
      case Kind::kSlow: {
        v1::PartitionGraphRequest request =
            SlowPartitionRequest(kind == Kind::kSlow ? kShortSlowPlan : kSlowPlan);
        request.mutable_graph()->set_name(absl::StrCat("soak-slow-", unique));
        bytes = request.SerializeAsString();
        rpc = PlannerRpc::kPartitionGraph;
        if (kind == Kind::kCancel) {
          cancel_after = absl::Milliseconds(50 + static_cast<int>(random() % 450));
        }
        if (kind == Kind::kDeadline) timeout = absl::Milliseconds(200);
        break;
      }
      case Kind::kOversized:
        bytes = oversized;
        rpc = PlannerRpc::kValidate;
        break;
    }
    const RawReply reply = CallRaw(channel, rpc, bytes, timeout, cancel_after);
    const grpc::StatusCode code = reply.status.error_code();
    const bool lost = IsLost(kind, code);
    if (lost) {
      std::fprintf(stderr, "lost: %s %s -> %s\n", kKindNames[static_cast<int>(kind)],
                   std::string(RpcName(rpc)).c_str(), Describe(reply.status).c_str());
    }
    stats.Record(kind, code, lost);
  }
}

int Main() {
  std::vector<Seed> seeds;
  for (const PlannerRpcMethod& row : kPlannerRpcs) {
    const PlannerRpc rpc = row.rpc;
    for (std::string& bytes : fuzz::SeedRequests(rpc)) seeds.push_back({rpc, std::move(bytes)});
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "no seed requests: run from the workspace root\n");
    return 2;
  }
  // Timed here, before the load, once for every worker (SlowPlanLayers).
  const int slow_layers = SlowPlanLayers(kSlowPlan);
  const int short_slow_layers = SlowPlanLayers(kShortSlowPlan);
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      {"--planner_threads=2", "--queue_depth=16", "--plan_cache_bytes=4194304",
       absl::StrCat("--max_receive_message_bytes=", kMaxReceiveBytes), "--drain_deadline_seconds=5"},
      absl::GetFlag(FLAGS_server));
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start the server: %s\n", server.status().ToString().c_str());
    return 2;
  }
  const pid_t pid = (*server)->pid();
  const int seconds = absl::GetFlag(FLAGS_seconds);
  const absl::Time start = absl::Now();
  const absl::Time stop = start + absl::Seconds(seconds);
  std::printf(
      "soak: %d s, %d clients, %zu seed requests, slow plans of %d and %d layers, server pid %d "
      "(log %s)\n",
      seconds, absl::GetFlag(FLAGS_concurrency), seeds.size(), slow_layers, short_slow_layers, pid,
      (*server)->log_path().c_str());
  std::fflush(stdout);

  Stats stats;
  std::vector<std::thread> workers;
  for (int i = 0; i < absl::GetFlag(FLAGS_concurrency); ++i) {
    workers.emplace_back(Worker, i, (*server)->port(), absl::Time(stop), std::cref(seeds),
                         std::ref(stats));
  }

  // RSS over time.
  const absl::Duration sample = absl::Seconds(absl::GetFlag(FLAGS_sample_seconds));
  const absl::Time warm = start + absl::Seconds(seconds) / 5;
  int64_t warm_kib = -1, max_kib = 0, last_kib = 0, first_kib = ResidentKib(pid);
  std::printf("%8s %10s %10s %6s\n", "t", "rss_mib", "calls", "lost");
  for (absl::Time next = start; next <= stop; next += sample) {
    absl::SleepFor(next - absl::Now());
    const int64_t kib = ResidentKib(pid);
    if (kib < 0) break;  // the server is gone
    last_kib = kib;
    max_kib = std::max(max_kib, kib);
    if (warm_kib < 0 && absl::Now() >= warm) warm_kib = kib;
    std::printf("%7.0fs %10.1f %10lld %6lld\n", absl::ToDoubleSeconds(absl::Now() - start),
                kib / 1024.0, static_cast<long long>(stats.calls()),
                static_cast<long long>(stats.lost()));
    std::fflush(stdout);
  }
  for (std::thread& worker : workers) worker.join();
  const bool alive = ResidentKib(pid) >= 0 && kill(pid, 0) == 0;
  last_kib = alive ? ResidentKib(pid) : last_kib;

  std::printf("status codes by kind of call:\n");
  stats.Print();
  // A clean stop, too.
  (*server)->Signal(SIGTERM);
  absl::StatusOr<int> exit_status = (*server)->WaitForExit(absl::Seconds(30));
  const bool clean_exit =
      exit_status.ok() && WIFEXITED(*exit_status) && WEXITSTATUS(*exit_status) == 0;

  if (warm_kib < 0) warm_kib = first_kib;
  const int64_t slack_kib =
      std::max<int64_t>(absl::GetFlag(FLAGS_rss_slack_mib) * 1024, warm_kib / 10);
  const bool flat = last_kib - warm_kib <= slack_kib;
  const int64_t lost = stats.lost() + (alive ? 0 : 1);
  std::printf(
      "soak: %lld calls in %d s, %lld lost; server RSS %.1f MiB at start, %.1f after warm-up, "
      "%.1f max, %.1f at the end (%s); %s exit\n",
      static_cast<long long>(stats.calls()), seconds, static_cast<long long>(lost),
      first_kib / 1024.0, warm_kib / 1024.0, max_kib / 1024.0, last_kib / 1024.0,
      flat ? "flat" : "GROWING", clean_exit ? "clean" : "UNCLEAN");
  return lost == 0 && flat && clean_exit ? 0 : 1;
}

}  // namespace
}  // namespace partplan

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return partplan::Main();
}

// partplan_server: serves partplan.v1.PartitionPlanner until SIGTERM/SIGINT,
// then drains and exits 0. See --help for the flags.
#include <memory>

#include "absl/status/statusor.h"
#include "server/flags.h"
#include "server/heap_policy.h"
#include "server/logging.h"
#include "server/server.h"
#include "server/termination_signals.h"

int main(int argc, char** argv) {
  partplan::BlockTerminationSignals();
  partplan::ParseServerCommandLine(argc, argv);
  partplan::ConfigureLogging(partplan::LogFormatFromFlags());

  absl::StatusOr<partplan::ServerOptions> options = partplan::ServerOptionsFromFlags();
  if (!options.ok()) {
    partplan::LogError("bad flags", {{"error", options.status().message()}});
    return 2;
  }
  // glibc's malloc settings, for the whole process, set before other threads
  // start allocating.
  if (absl::Status heap = partplan::RetainFreedHeap(options->retained_heap_bytes); !heap.ok()) {
    // The options were checked: only an allocator other than glibc's gets here.
    partplan::LogWarning("freed memory is not retained", {{"error", heap.message()}});
  }
  absl::StatusOr<std::unique_ptr<partplan::PlannerServer>> server =
      partplan::PlannerServer::Start(*options);
  if (!server.ok()) {
    partplan::LogError("cannot start", {{"error", server.status().message()}});
    return 1;
  }

  partplan::TerminationSignalThread on_signal([&server](int signal) {
    partplan::LogInfo("signal received", {{"signal", signal}});
    (*server)->Shutdown();
  });
  (*server)->Wait();
  return 0;
}

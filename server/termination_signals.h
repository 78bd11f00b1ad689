// Graceful shutdown on SIGTERM/SIGINT without a signal handler.
//
// Shutting a gRPC server down takes locks, so it must not run in a signal
// handler (grpc/grpc#24884). Instead the signals are blocked in every thread
// and one dedicated thread collects them with sigwait():
//
//   int main(int argc, char** argv) {
//     partplan::BlockTerminationSignals();   // first, before any thread exists
//     ...
//     partplan::TerminationSignalThread on_signal([&](int signal) { server->Shutdown(); });
//     server->Wait();
//   }
#ifndef PARTPLAN_SERVER_TERMINATION_SIGNALS_H_
#define PARTPLAN_SERVER_TERMINATION_SIGNALS_H_

#include <functional>
#include <thread>

namespace partplan {

// Blocks SIGTERM and SIGINT in the calling thread; threads created later
// inherit the mask. Call at the top of main, before any library starts a
// thread, or a signal may land on a thread that does not block it.
void BlockTerminationSignals();

// A thread that waits for the first SIGTERM or SIGINT and calls `on_signal`
// with its number. The destructor joins the thread, so it returns only after
// a signal has arrived and `on_signal` has returned.
class TerminationSignalThread {
 public:
  explicit TerminationSignalThread(std::function<void(int signal)> on_signal);
  ~TerminationSignalThread();

  TerminationSignalThread(const TerminationSignalThread&) = delete;
  TerminationSignalThread& operator=(const TerminationSignalThread&) = delete;

 private:
  std::thread thread_;
};

}  // namespace partplan

#endif  // PARTPLAN_SERVER_TERMINATION_SIGNALS_H_

#include "server/termination_signals.h"

#include <pthread.h>
#include <signal.h>

#include <utility>

namespace partplan {
namespace {

sigset_t TerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

}  // namespace

void BlockTerminationSignals() {
  const sigset_t signals = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

TerminationSignalThread::TerminationSignalThread(std::function<void(int signal)> on_signal)
    : thread_([on_signal = std::move(on_signal)] {
        const sigset_t signals = TerminationSignals();
        int signal = 0;
        while (sigwait(&signals, &signal) != 0) {
        }
        on_signal(signal);
      }) {}

TerminationSignalThread::~TerminationSignalThread() { thread_.join(); }

}  // namespace partplan

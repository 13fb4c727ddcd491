#include "resil/train/preempt.hpp"

#include <csignal>
#include <cstring>

namespace resil::train {

namespace {
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_preempt_signal(int sig) { g_signal = sig; }
}  // namespace

void install_preempt_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_preempt_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking I/O and MPI progress polls continue after the handler
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}

int preempt_signal() noexcept { return static_cast<int>(g_signal); }

void clear_preempt() noexcept { g_signal = 0; }

const char* preempt_signal_name(int sig) noexcept {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

}  // namespace resil::train

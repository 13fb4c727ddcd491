// RESIL_MPI_CHECK: throw resil::MpiError with MPI's own error string when an MPI call fails.
// resil::train::mpi_wait: wait for a non-blocking MPI operation without holding a core others need.
// Include only from MPI-enabled code (RESIL_HAVE_MPI).
#pragma once

#include <mpi.h>

#include <sched.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <ctime>
#include <string>

#include "resil/core/error.hpp"
#include "resil/train/comm.hpp"

#define RESIL_MPI_CHECK(expr)                                                                                  \
  do {                                                                                                         \
    const int resil_mpi_rc_ = (expr);                                                                          \
    if (resil_mpi_rc_ != MPI_SUCCESS) {                                                                        \
      char resil_mpi_msg_[MPI_MAX_ERROR_STRING];                                                               \
      int resil_mpi_len_ = 0;                                                                                  \
      MPI_Error_string(resil_mpi_rc_, resil_mpi_msg_, &resil_mpi_len_);                                        \
      throw ::resil::MpiError(std::string(#expr) + ": " +                                                      \
                              std::string(resil_mpi_msg_, static_cast<std::size_t>(resil_mpi_len_)));          \
    }                                                                                                          \
  } while (0)

namespace resil::train {

/// Wait for `req` by polling MPI_Test (Comm::set_poll_us). MPICH's blocking calls spin, and with
/// more ranks than cores (a laptop, a CI machine, a shared node) a spinning rank holds the core
/// that the rank it waits for needs. Between polls: `poll_us` > 0 sleeps (with a 1 µs timer slack
/// for this thread: Linux's default 50 µs slack turned a 20 µs sleep into ~70 µs, a third of a
/// step's time with 4 ranks on 2 cores), poll_backoff sleeps 20 µs, then twice as long after each
/// poll up to 160 µs (a rank waiting milliseconds for a pipeline stage wakes far less often, and
/// each wake-up takes the core from a rank that computes), poll_yield (-1) yields the core to
/// whatever else is runnable (as fast as spinning when nothing is, and far faster than sleeping
/// when every rank has a core: docs/design/ec-train-protocol.md, "How ranks wait"), 0 spins.
inline void mpi_wait(MPI_Request& req, int poll_us = 20) {
  long sleep_us = poll_us == poll_backoff ? backoff_first_us : poll_us;
  for (;;) {
    int done = 0;
    RESIL_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (poll_us == poll_yield) {
      sched_yield();
    } else if (sleep_us > 0) {
#ifdef __linux__
      static thread_local const bool slack = prctl(PR_SET_TIMERSLACK, 1000UL) == 0;
      (void)slack;
#endif
      const timespec ts{0, sleep_us * 1000};
      nanosleep(&ts, nullptr);
      if (poll_us == poll_backoff) sleep_us = std::min(2 * sleep_us, backoff_cap_us);
    }
  }
}

}  // namespace resil::train

// RESIL_MPI_CHECK: throw resil::MpiError with MPI's own error string when an MPI call fails.
// resil::train::mpi_wait: wait for a non-blocking MPI operation without spinning.
// Include only from MPI-enabled code (RESIL_HAVE_MPI).
#pragma once

#include <mpi.h>

#include <ctime>
#include <string>

#include "resil/core/error.hpp"

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

/// Wait for `req` by polling MPI_Test with a `poll_us` sleep in between (0 = spin). MPICH's blocking
/// calls spin, and with more ranks than cores (a laptop, a CI machine, a shared node) a spinning
/// rank holds the core that the rank it waits for needs: a sleep between polls gives it back.
inline void mpi_wait(MPI_Request& req, int poll_us = 20) {
  for (;;) {
    int done = 0;
    RESIL_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (poll_us > 0) {
      const timespec ts{0, static_cast<long>(poll_us) * 1000};
      nanosleep(&ts, nullptr);
    }
  }
}

}  // namespace resil::train

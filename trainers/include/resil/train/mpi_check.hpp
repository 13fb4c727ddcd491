// RESIL_MPI_CHECK: throw resil::MpiError with MPI's own error string when an MPI call fails.
// Include only from MPI-enabled code (RESIL_HAVE_MPI).
#pragma once

#include <mpi.h>

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

// RESIL_NCCL_CHECK and the RAII owner of an ncclComm_t (internal to trainers/cuda).
#pragma once

#include <nccl.h>

#include <cstdio>
#include <exception>
#include <string>
#include <utility>

#include "resil/core/error.hpp"

namespace resil::train::cuda {

/// NCCL's own text for `rc` plus its last detailed message for this thread, when it has one.
inline std::string nccl_message(ncclResult_t rc) {
  std::string m = ncclGetErrorString(rc);
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) m += std::string(" (") + last + ")";
  return m;
}

}  // namespace resil::train::cuda

#define RESIL_NCCL_CHECK(expr)                                                                                \
  do {                                                                                                        \
    const ncclResult_t resil_nccl_rc_ = (expr);                                                               \
    if (resil_nccl_rc_ != ncclSuccess)                                                                        \
      throw ::resil::CudaError(std::string(#expr) + " failed: " + ::resil::train::cuda::nccl_message(resil_nccl_rc_) + \
                               " at " + __FILE__ + ":" + std::to_string(__LINE__));                          \
  } while (0)

namespace resil::train::cuda {

/// Move-only ncclComm_t. Destroyed normally (ncclCommDestroy waits for pending work); while an
/// exception unwinds, aborted instead (ncclCommAbort), since a failed peer may never complete it.
class NcclComm {
public:
  NcclComm() = default;
  explicit NcclComm(ncclComm_t c) noexcept : c_(c) {}
  NcclComm(NcclComm&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  NcclComm& operator=(NcclComm&& o) noexcept {
    if (this != &o) {
      reset();
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ~NcclComm() { reset(); }
  void reset() noexcept {
    if (!c_) return;
    const ncclResult_t rc = std::uncaught_exceptions() > 0 ? ncclCommAbort(c_) : ncclCommDestroy(c_);
    if (rc != ncclSuccess) std::fprintf(stderr, "resil: releasing the NCCL communicator failed: %s\n", ncclGetErrorString(rc));
    c_ = nullptr;
  }
  ncclComm_t get() const noexcept { return c_; }

private:
  ncclComm_t c_ = nullptr;
};

}  // namespace resil::train::cuda

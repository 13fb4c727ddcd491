// Check macros and RAII handles for the CUDA runtime, cuBLAS and NCCL (tiny-cuda-nn style):
// *_CHECK throws resil::CudaError with the library's own message and file:line; *_CHECK_PRINT logs
// instead, for destructors.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <utility>

#include "cublas_api.hpp"
#include "resil/core/error.hpp"

namespace resil::train::cuda {

inline std::string where(const char* file, int line) { return std::string(file) + ":" + std::to_string(line); }

#define RESIL_CUDA_CHECK(expr)                                                                                   \
  do {                                                                                                           \
    const cudaError_t resil_cuda_rc_ = (expr);                                                                   \
    if (resil_cuda_rc_ != cudaSuccess)                                                                           \
      throw ::resil::CudaError(std::string(#expr) + " failed: " + cudaGetErrorString(resil_cuda_rc_) + " at " + \
                               ::resil::train::cuda::where(__FILE__, __LINE__));                                 \
  } while (0)

#define RESIL_CUDA_CHECK_PRINT(expr)                                                                           \
  do {                                                                                                         \
    const cudaError_t resil_cuda_rc_ = (expr);                                                                 \
    if (resil_cuda_rc_ != cudaSuccess)                                                                         \
      std::fprintf(stderr, "resil: %s failed: %s at %s:%d\n", #expr, cudaGetErrorString(resil_cuda_rc_), __FILE__, __LINE__); \
  } while (0)

#define RESIL_CUBLAS_CHECK(expr)                                                                                 \
  do {                                                                                                           \
    const cublasStatus_t resil_cublas_rc_ = (expr);                                                              \
    if (resil_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                                               \
      throw ::resil::CudaError(std::string(#expr) + " failed: " + ::resil::train::cuda::cublas().status_string(resil_cublas_rc_) + " at " + \
                               ::resil::train::cuda::where(__FILE__, __LINE__));                                 \
  } while (0)

/// Move-only device allocation of n elements of T (cudaMalloc; never managed memory).
template <class T>
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n_) RESIL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n_ * sizeof(T)));
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }
  void reset() noexcept {
    if (p_) RESIL_CUDA_CHECK_PRINT(cudaFree(p_));
    p_ = nullptr;
    n_ = 0;
  }
  /// Grow (never shrink) to at least n elements; contents are not preserved.
  void ensure(std::size_t n) {
    if (n > n_) *this = DeviceBuffer(n);
  }
  T* data() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }

private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

class Stream {
public:
  Stream() { RESIL_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s_) RESIL_CUDA_CHECK_PRINT(cudaStreamDestroy(s_));
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const noexcept { return s_; }
  void sync() const { RESIL_CUDA_CHECK(cudaStreamSynchronize(s_)); }

private:
  cudaStream_t s_ = nullptr;
};

class CublasHandle {
public:
  explicit CublasHandle(cudaStream_t s) {
    const CublasApi& api = cublas();  // loads cuBLAS on the first handle (cublas_api.hpp)
    RESIL_CUBLAS_CHECK(api.create(&h_));
    RESIL_CUBLAS_CHECK(api.set_stream(h_, s));
    // Plain FP32 (no TF32 tensor-core rounding): results stay comparable with the CPU backend.
    RESIL_CUBLAS_CHECK(api.set_math_mode(h_, CUBLAS_PEDANTIC_MATH));
  }
  ~CublasHandle() {
    if (h_) cublas().destroy(h_);
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const noexcept { return h_; }

private:
  cublasHandle_t h_ = nullptr;
};

}  // namespace resil::train::cuda

#include <cuda_runtime.h>

#include <string>

#include "resil/train/cuda.hpp"

namespace resil::train {

int cuda_device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device"/"no driver" error
    return 0;
  }
  return n;
}

std::string cuda_device_description(int d) {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device: ") + cudaGetErrorString(rc);
  }
  if (d < 0 || d >= n) return "no CUDA device " + std::to_string(d) + " (" + std::to_string(n) + " present)";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, d) != cudaSuccess) return "device " + std::to_string(d) + ": properties unavailable";
  return std::string(p.name) + ", cc " + std::to_string(p.major) + "." + std::to_string(p.minor) + ", " +
         std::to_string(p.totalGlobalMem >> 30) + " GiB";
}

int cuda_device_for_local_rank(int local_rank) {
  const int n = cuda_device_count();
  return n > 0 ? local_rank % n : 0;
}

}  // namespace resil::train

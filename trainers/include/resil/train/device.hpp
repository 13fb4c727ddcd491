// Choosing the backend below the model code: `--device cpu|cuda|auto`. trainers/ never depends on
// CUDA; a program linked with resil::train_cuda (RESIL_HAVE_CUDA) registers the CUDA backend's
// entry points once at start-up, and the trainer asks for a backend by device name.
#pragma once

#include <memory>
#include <string>

#include "resil/train/backend.hpp"

namespace resil::train {

/// The CUDA backend's entry points (resil/train/cuda.hpp), as plain function pointers.
struct CudaProvider {
  int (*device_count)() noexcept = nullptr;
  std::string (*describe)(int device) = nullptr;
  int (*device_for_local_rank)(int local_rank) = nullptr;
  std::unique_ptr<Backend> (*make)(int device) = nullptr;
};

/// Make the CUDA backend available to resolve_device / make_backend (call once, before training).
void register_cuda_provider(const CudaProvider& p);

/// True when a CUDA provider is registered (this program was built and linked with CUDA).
bool cuda_built() noexcept;

/// "cpu" -> "cpu"; "cuda" -> "cuda" (UsageError when the build has no CUDA backend);
/// "auto" -> "cuda" when the CUDA backend is built and a device is present, else "cpu".
std::string resolve_device(const std::string& requested);

/// The backend for a resolved device: CPU with `threads` BLAS threads, or CUDA on the GPU chosen
/// from the node-local rank (several ranks may share one GPU). `description` receives e.g.
/// "cpu (openblas, 1 thread)" or "cuda:0 (NVIDIA H100 ..., cc 9.0, 79 GiB)". Throws UsageError
/// when CUDA is asked for but no device is usable.
std::unique_ptr<Backend> make_backend(const std::string& device, int threads, int local_rank, std::string* description = nullptr);

}  // namespace resil::train

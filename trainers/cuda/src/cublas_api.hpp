// cuBLAS, loaded on first use. Linking libcublas made every ckpt-train process pay its
// libcublasLt static initialisation (~70 ms and ~200 MB resident on the development machine)
// although only a CUDA backend calls it: a CPU campaign trial run as a command paid that per trial.
// The handful of entry points the backend uses are resolved with dlopen/dlsym when the first cuBLAS
// handle is made; their types come from cublas_v2.h, so a signature mismatch does not compile.
#pragma once

#include <cublas_v2.h>

#include <string>

namespace resil::train::cuda {

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  std::string path;  ///< the library that was loaded
};

/// The loaded entry points (dlopen of libcublas.so.<major>, then the CUDA toolkit's library
/// directory this was built against). Throws CudaError naming the library and dlerror() when it
/// cannot be loaded or lacks a symbol; thread-safe.
const CublasApi& cublas();

}  // namespace resil::train::cuda

// cuBLAS is dlopen'ed on first use (trainers/cuda/src/cublas_api.hpp). This runs without a GPU:
// loading the library and resolving every entry point the backend calls needs none, so a wrong
// symbol name or a library that cannot be found fails here, on every machine that builds CUDA.
#include <cstdio>

#include "cublas_api.hpp"
#include "resil/core/error.hpp"

int main() {
  try {
    const auto& api = resil::train::cuda::cublas();
    const bool all = api.create && api.destroy && api.set_stream && api.set_math_mode && api.status_string && api.sgemm;
    if (!all) {
      std::fprintf(stderr, "cublas_load: an entry point is null\n");
      return 1;
    }
    // The one call that needs no device: the library's own message for a status code.
    std::printf("cuBLAS loaded from %s; CUBLAS_STATUS_NOT_INITIALIZED reads \"%s\"\n", api.path.c_str(),
                api.status_string(CUBLAS_STATUS_NOT_INITIALIZED));
    return 0;
  } catch (const resil::Error& e) {
    std::fprintf(stderr, "cublas_load: %s\n", e.what());
    return 1;
  }
}

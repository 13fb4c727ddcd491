#include "cublas_api.hpp"

#include <dlfcn.h>

#include <string>

#include "resil/core/error.hpp"

namespace resil::train::cuda {

namespace {

template <class F>
void resolve(void* lib, const char* name, F& fn, const std::string& path) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) throw CudaError("cuBLAS library " + path + " has no symbol " + name);
}

CublasApi load() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::string path = soname, why;
  // RTLD_LOCAL: nothing else in the process resolves against cuBLAS. Never unloaded.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    why = dlerror();
    path = std::string(RESIL_CUDA_LIBRARY_DIR) + "/" + soname;
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!lib) throw CudaError("cannot load cuBLAS (" + soname + "): " + why + "; " + dlerror());
  CublasApi api;
  api.path = path;
  resolve(lib, "cublasCreate_v2", api.create, path);
  resolve(lib, "cublasDestroy_v2", api.destroy, path);
  resolve(lib, "cublasSetStream_v2", api.set_stream, path);
  resolve(lib, "cublasSetMathMode", api.set_math_mode, path);
  resolve(lib, "cublasGetStatusString", api.status_string, path);
  resolve(lib, "cublasSgemm_v2", api.sgemm, path);
  resolve(lib, "cublasSgemmStridedBatched", api.sgemm_strided_batched, path);
  return api;
}

}  // namespace

const CublasApi& cublas() {
  static const CublasApi api = load();  // a throw leaves it unset: the next call tries again
  return api;
}

}  // namespace resil::train::cuda

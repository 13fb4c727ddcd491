#include "resil/train/device.hpp"

#include "resil/core/error.hpp"

namespace resil::train {

namespace {
CudaProvider g_cuda;
}

void register_cuda_provider(const CudaProvider& p) { g_cuda = p; }

bool cuda_built() noexcept { return g_cuda.make != nullptr && g_cuda.device_count != nullptr; }

std::string resolve_device(const std::string& requested) {
  if (requested == "cpu" || requested.empty()) return "cpu";
  if (requested == "cuda") {
    if (!cuda_built()) throw UsageError("--device cuda: this build of resil has no CUDA backend (RESIL_HAVE_CUDA=0); use --device cpu");
    return "cuda";
  }
  if (requested == "auto") return cuda_built() && g_cuda.device_count() > 0 ? "cuda" : "cpu";
  throw UsageError("--device '" + requested + "' (expected cpu, cuda or auto)");
}

std::unique_ptr<Backend> make_backend(const std::string& device, int threads, int local_rank, std::string* description) {
  if (device == "cpu") {
    auto be = make_cpu_backend(threads);
    if (description) *description = "cpu (" + be->numeric().detail + ")";
    return be;
  }
  if (device != "cuda") throw UsageError("unknown device '" + device + "' (expected cpu or cuda)");
  if (!cuda_built()) throw UsageError("--device cuda: this build of resil has no CUDA backend (RESIL_HAVE_CUDA=0); use --device cpu");
  if (g_cuda.device_count() <= 0)
    throw UsageError("--device cuda: " + (g_cuda.describe ? g_cuda.describe(0) : std::string("no CUDA device")) + "; use --device cpu or auto");
  const int d = g_cuda.device_for_local_rank ? g_cuda.device_for_local_rank(local_rank) : 0;
  if (description) *description = "cuda:" + std::to_string(d) + " (" + (g_cuda.describe ? g_cuda.describe(d) : std::string("?")) + ")";
  return g_cuda.make(d);
}

}  // namespace resil::train

// LayerNorm over the last dimension (Ba, Kiros and Hinton 2016), eps 1e-5 as GPT-2 and PyTorch.
// Row statistics are float sums in index order; the backward pass is the closed form llm.c uses
// (dx from the row means of dnorm and dnorm * norm), parameter gradients summed in row order.
#include <cmath>
#include <cstddef>

#include "kernels.hpp"

namespace resil::train::cpu {

namespace {
constexpr float eps = 1e-5f;
}

void layernorm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, int rows, int C) {
  const float inv_c = 1.0f / static_cast<float>(C);
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * C;
    float* yr = y + static_cast<std::size_t>(r) * C;
    float s = 0.0f;
    for (int c = 0; c < C; ++c) s += xr[c];
    const float m = s * inv_c;
    float v = 0.0f;
    for (int c = 0; c < C; ++c) {
      const float d = xr[c] - m;
      v += d * d;
    }
    const float rs = 1.0f / std::sqrt(v * inv_c + eps);
    for (int c = 0; c < C; ++c) yr[c] = (xr[c] - m) * rs * w[c] + b[c];
    mean[r] = m;
    rstd[r] = rs;
  }
}

void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd, float* dx, float* dw,
                        float* db, int rows, int C) {
  const float inv_c = 1.0f / static_cast<float>(C);
  for (int r = 0; r < rows; ++r) {
    const float* dyr = dy + static_cast<std::size_t>(r) * C;
    const float* xr = x + static_cast<std::size_t>(r) * C;
    float* dxr = dx + static_cast<std::size_t>(r) * C;
    const float m = mean[r], rs = rstd[r];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int c = 0; c < C; ++c) {
      const float norm = (xr[c] - m) * rs;
      const float dnorm = w[c] * dyr[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean *= inv_c;
    dnorm_norm_mean *= inv_c;
    for (int c = 0; c < C; ++c) {
      const float norm = (xr[c] - m) * rs;
      const float dnorm = w[c] * dyr[c];
      db[c] += dyr[c];
      dw[c] += norm * dyr[c];
      dxr[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rs;
    }
  }
}

}  // namespace resil::train::cpu

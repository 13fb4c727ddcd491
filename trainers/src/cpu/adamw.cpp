// AdamW in torch.optim.AdamW's order of operations (decay first, then the moments, then the step
// with the bias corrections folded into a step size and a denominator), so a comparison with
// PyTorch differs by rounding only. The bias corrections are powers computed in double by
// resil::dmath::powi and rounded once.
#include <cmath>
#include <cstddef>

#include "kernels.hpp"
#include "resil/core/dmath.hpp"

namespace resil::train::cpu {

void adamw_update(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float beta1, float beta2, float eps,
                  float weight_decay, std::int64_t step) {
  const float bc1 = 1.0f - static_cast<float>(dmath::powi(static_cast<double>(beta1), step));
  const float bc2 = 1.0f - static_cast<float>(dmath::powi(static_cast<double>(beta2), step));
  const float step_size = lr / bc1;
  const float bc2_sqrt = std::sqrt(bc2);
  const float keep = 1.0f - lr * weight_decay;
  for (std::size_t i = 0; i < n; ++i) {
    const float gi = g[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
    v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    w[i] = w[i] * keep - step_size * (m[i] / denom);
  }
}

}  // namespace resil::train::cpu

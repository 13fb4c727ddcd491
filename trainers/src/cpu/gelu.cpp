// GELU in GPT-2's tanh form (Hendrycks and Gimpel 2016): computed in double through
// resil::dmath::tanh and rounded once, so every machine gives the same float.
#include <cstddef>

#include "kernels.hpp"
#include "resil/core/dmath.hpp"

namespace resil::train::cpu {

namespace {
constexpr double k0 = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double k1 = 0.044715;
}  // namespace

void gelu_forward(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double t = dmath::tanh(k0 * (v + k1 * v * v * v));
    y[i] = static_cast<float>(0.5 * v * (1.0 + t));
  }
}

void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double t = dmath::tanh(k0 * (v + k1 * v * v * v));
    const double dt = k0 * (1.0 + 3.0 * k1 * v * v);  // d/dv of tanh's argument
    const double grad = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * dt;
    dx[i] = static_cast<float>(grad * static_cast<double>(dy[i]));
  }
}

}  // namespace resil::train::cpu

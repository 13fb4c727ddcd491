// GELU in GPT-2's tanh form (Hendrycks and Gimpel 2016), written through the logistic function:
// x/2 (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3), which
// has no cancellation for negative x. e^z is resil::dmath::exp_fast: branch-free float arithmetic
// that the compiler vectorises lane by lane, so every machine gives the same floats (this kernel
// was 22 % of a GPT step with the double-precision tanh).
#include <cstddef>

#include "kernels.hpp"
#include "resil/core/dmath.hpp"

namespace resil::train::cpu {

namespace {
constexpr float k0 = 0.7978845608f;  // sqrt(2 / pi)
constexpr float k1 = 0.044715f;

[[gnu::always_inline]] inline void gelu_forward_loop(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = dmath::exp_fast(-2.0f * k0 * (v + k1 * v * v * v));
    y[i] = v / (1.0f + e);
  }
}
}  // namespace

namespace isa_base {
void gelu_forward(const float* x, float* y, std::size_t n) { gelu_forward_loop(x, y, n); }
}  // namespace isa_base
namespace isa_avx2 {
RESIL_TARGET_AVX2 void gelu_forward(const float* x, float* y, std::size_t n) { gelu_forward_loop(x, y, n); }
}  // namespace isa_avx2
void gelu_forward(const float* x, float* y, std::size_t n) {
  if (isa::avx2()) isa_avx2::gelu_forward(x, y, n);
  else isa_base::gelu_forward(x, y, n);
}

// d/dx x s(2u) = s + x * 2u' * s (1 - s) with s = 1 / (1 + e), 1 - s = e s, u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
// e is finite (exp_fast clamps), so s * s * e never meets 0 * inf.
namespace {
[[gnu::always_inline]] inline void gelu_backward_loop(const float* x, const float* dy, float* dx, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = dmath::exp_fast(-2.0f * k0 * (v + k1 * v * v * v));
    const float s = 1.0f / (1.0f + e);
    const float du = 2.0f * k0 * (1.0f + 3.0f * k1 * v * v);
    dx[i] = dy[i] * (s + v * du * (s * s * e));
  }
}
}  // namespace

namespace isa_base {
void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n) { gelu_backward_loop(x, dy, dx, n); }
}  // namespace isa_base
namespace isa_avx2 {
RESIL_TARGET_AVX2 void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n) { gelu_backward_loop(x, dy, dx, n); }
}  // namespace isa_avx2
void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n) {
  if (isa::avx2()) isa_avx2::gelu_backward(x, dy, dx, n);
  else isa_base::gelu_backward(x, dy, dx, n);
}

}  // namespace resil::train::cpu

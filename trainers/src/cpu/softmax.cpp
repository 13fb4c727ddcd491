// The causal softmax of attention scores: row i of each T x T matrix is a distribution over
// positions 0..i (later positions get exactly 0, so the product with V that follows sums exact
// zeros for them). Max, sum and dot products run in index order; e^x is resil::dmath::exp_fast.
#include <cstddef>

#include "kernels.hpp"
#include "resil/core/dmath.hpp"

namespace resil::train::cpu {

namespace {
[[gnu::always_inline]] inline void causal_softmax_forward_loop(const float* s, float* p, int mats, int T, float scale) {
  for (int mtx = 0; mtx < mats; ++mtx)
    for (int i = 0; i < T; ++i) {
      const std::size_t row = (static_cast<std::size_t>(mtx) * T + i) * T;
      const float* sr = s + row;
      float* pr = p + row;
      float mx = scale * sr[0];
      for (int j = 1; j <= i; ++j) {
        const float v = scale * sr[j];
        mx = v > mx ? v : mx;
      }
      float sum = 0.0f;
      for (int j = 0; j <= i; ++j) {
        pr[j] = dmath::exp_fast(scale * sr[j] - mx);
        sum += pr[j];
      }
      const float inv = 1.0f / sum;
      for (int j = 0; j <= i; ++j) pr[j] *= inv;
      for (int j = i + 1; j < T; ++j) pr[j] = 0.0f;
    }
}
}  // namespace

namespace isa_base {
void causal_softmax_forward(const float* s, float* p, int mats, int T, float scale) { causal_softmax_forward_loop(s, p, mats, T, scale); }
}  // namespace isa_base
namespace isa_avx2 {
RESIL_TARGET_AVX2 void causal_softmax_forward(const float* s, float* p, int mats, int T, float scale) { causal_softmax_forward_loop(s, p, mats, T, scale); }
}  // namespace isa_avx2
void causal_softmax_forward(const float* s, float* p, int mats, int T, float scale) {
  if (isa::avx2()) isa_avx2::causal_softmax_forward(s, p, mats, T, scale);
  else isa_base::causal_softmax_forward(s, p, mats, T, scale);
}

void causal_softmax_backward(const float* p, const float* dp, float* ds, int mats, int T, float scale) {
  for (int mtx = 0; mtx < mats; ++mtx)
    for (int i = 0; i < T; ++i) {
      const std::size_t row = (static_cast<std::size_t>(mtx) * T + i) * T;
      const float* pr = p + row;
      const float* dpr = dp + row;
      float* dsr = ds + row;
      float dot = 0.0f;
      for (int j = 0; j <= i; ++j) dot += pr[j] * dpr[j];
      for (int j = 0; j <= i; ++j) dsr[j] = scale * (pr[j] * (dpr[j] - dot));
      for (int j = i + 1; j < T; ++j) dsr[j] = 0.0f;
    }
}

}  // namespace resil::train::cpu

// Token and position embeddings: each output row is the sum of a token's row and a position's row.
#include <cstddef>

#include "kernels.hpp"

namespace resil::train::cpu {

void embedding_forward(const std::int32_t* tokens, const float* wte, const float* wpe, float* out, int B, int T, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const float* te = wte + static_cast<std::size_t>(tokens[b * T + t]) * C;
      const float* pe = wpe + static_cast<std::size_t>(t) * C;
      float* o = out + (static_cast<std::size_t>(b) * T + t) * C;
      for (int c = 0; c < C; ++c) o[c] = te[c] + pe[c];
    }
}

// A token's row gathers the gradient of every position it occurs at, in (b, t) order: the same
// order on every backend, so the sum is the same bits (a scatter with atomics would not be).
void embedding_backward(const float* dout, const std::int32_t* tokens, float* dwte, float* dwpe, int B, int T, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const float* d = dout + (static_cast<std::size_t>(b) * T + t) * C;
      float* te = dwte + static_cast<std::size_t>(tokens[b * T + t]) * C;
      float* pe = dwpe + static_cast<std::size_t>(t) * C;
      for (int c = 0; c < C; ++c) {
        te[c] += d[c];
        pe[c] += d[c];
      }
    }
}

}  // namespace resil::train::cpu

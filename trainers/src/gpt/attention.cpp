// Causal multi-head self-attention as batched GEMMs around a causal softmax. For head h, the
// GEMMs run over the B samples at once: sample b's Q is the T x hs block at row b*T, column h*hs
// of qkv (row stride 3C), its scores the T x T matrix (b, h) of scores_. Every product has the
// GEMM's fixed order; the masked (future) probabilities are exact zeros.
#include <cmath>

#include "layers.hpp"
#include "resil/core/error.hpp"

namespace resil::train::gpt {

CausalSelfAttention::CausalSelfAttention(Backend& be, int heads, int C, bool bf16) : be_(be), heads_(heads), C_(C), bf16_(bf16) {
  if (heads < 1 || C % heads != 0)
    throw UsageError("--heads " + std::to_string(heads) + " does not divide --width " + std::to_string(C));
}

const Tensor& CausalSelfAttention::forward(const Tensor& qkv, int B, int T) {
  qkv_ = &qkv;
  B_ = B;
  T_ = T;
  const int C = C_, hs = C / heads_, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  scores_.ensure(be_, {B, heads_, T, T});
  probs_.ensure(be_, {B, heads_, T, T});
  out_.ensure(be_, {B * T, C});
  const std::ptrdiff_t in_stride = static_cast<std::ptrdiff_t>(T) * C3, mat = static_cast<std::ptrdiff_t>(T) * T;
  for (int h = 0; h < heads_; ++h) {
    const float* q = qkv.data() + h * hs;
    const float* k = q + C;
    // S[b, h] = Q K^T
    be_.gemm_batched(false, true, T, T, hs, 1.0f, q, C3, in_stride, k, C3, in_stride, 0.0f, scores_.data() + h * mat, T, heads_ * mat, B);
  }
  round_if(be_, scores_, bf16_);
  be_.causal_softmax_forward(scores_.data(), probs_.data(), B * heads_, T, scale);
  round_if(be_, probs_, bf16_);
  for (int h = 0; h < heads_; ++h) {
    const float* v = qkv.data() + 2 * C + h * hs;
    // O[b, :, head h] = P V
    be_.gemm_batched(false, false, T, hs, T, 1.0f, probs_.data() + h * mat, T, heads_ * mat, v, C3, in_stride, 0.0f, out_.data() + h * hs, C,
                     static_cast<std::ptrdiff_t>(T) * C, B);
  }
  round_if(be_, out_, bf16_);
  return out_;
}

const Tensor& CausalSelfAttention::backward(const Tensor& dout) {
  const int B = B_, T = T_, C = C_, hs = C / heads_, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  dprobs_.ensure(be_, {B, heads_, T, T});
  dqkv_.ensure(be_, {B * T, C3});
  const std::ptrdiff_t in_stride = static_cast<std::ptrdiff_t>(T) * C3, out_stride = static_cast<std::ptrdiff_t>(T) * C,
                       mat = static_cast<std::ptrdiff_t>(T) * T;
  const float* qkv = qkv_->data();
  for (int h = 0; h < heads_; ++h) {
    const float* v = qkv + 2 * C + h * hs;
    const float* d = dout.data() + h * hs;
    // dP = dO V^T;  dV = P^T dO
    be_.gemm_batched(false, true, T, T, hs, 1.0f, d, C, out_stride, v, C3, in_stride, 0.0f, dprobs_.data() + h * mat, T, heads_ * mat, B);
    be_.gemm_batched(true, false, T, hs, T, 1.0f, probs_.data() + h * mat, T, heads_ * mat, d, C, out_stride, 0.0f,
                     dqkv_.data() + 2 * C + h * hs, C3, in_stride, B);
  }
  round_if(be_, dprobs_, bf16_);
  Tensor& dscores = scores_;  // the scores are not needed again: dS takes their place
  be_.causal_softmax_backward(probs_.data(), dprobs_.data(), dscores.data(), B * heads_, T, scale);
  round_if(be_, dscores, bf16_);
  for (int h = 0; h < heads_; ++h) {
    const float* q = qkv + h * hs;
    const float* k = q + C;
    // dQ = dS K;  dK = dS^T Q
    be_.gemm_batched(false, false, T, hs, T, 1.0f, dscores.data() + h * mat, T, heads_ * mat, k, C3, in_stride, 0.0f, dqkv_.data() + h * hs, C3,
                     in_stride, B);
    be_.gemm_batched(true, false, T, hs, T, 1.0f, dscores.data() + h * mat, T, heads_ * mat, q, C3, in_stride, 0.0f,
                     dqkv_.data() + C + h * hs, C3, in_stride, B);
  }
  round_if(be_, dqkv_, bf16_);
  return dqkv_;
}

}  // namespace resil::train::gpt

// The CUDA backend's transformer kernels (the Backend operations of backend.hpp's "transformer"
// section, AdamW, the gradient norm's sum of squares and scaling), launched on the backend's stream.
// Each output element is computed by one thread in the CPU backend's order wherever the CPU sums
// (embedding gradients, LayerNorm's statistics and parameter gradients, the softmax rows), with no
// floating-point atomics: those kernels give the CPU's bits where they use no elementary function
// (embeddings, LayerNorm); GELU and the softmax call CUDA's expf and agree within rounding.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace resil::train::cuda {

void embedding_forward(cudaStream_t s, const std::int32_t* tokens, const float* wte, const float* wpe, float* out, int B, int T, int C);
void embedding_backward(cudaStream_t s, const float* dout, const std::int32_t* tokens, float* dwte, float* dwpe, int B, int T, int C);
void layernorm_forward(cudaStream_t s, const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, int rows, int C);
void layernorm_backward(cudaStream_t s, const float* dy, const float* x, const float* w, const float* mean, const float* rstd, float* dx,
                        float* dw, float* db, int rows, int C);
void gelu_forward(cudaStream_t s, const float* x, float* y, std::size_t n);
void gelu_backward(cudaStream_t s, const float* x, const float* dy, float* dx, std::size_t n);
void causal_softmax_forward(cudaStream_t s, const float* scores, float* p, int mats, int T, float scale);
void causal_softmax_backward(cudaStream_t s, const float* p, const float* dp, float* ds, int mats, int T, float scale);
/// Sum of x^2 in double over a fixed grid of sum_squares_parts blocks (each thread's grid-stride
/// elements in order, a fixed tree per block), the blocks' sums added in order on the host:
/// repeatable, not the CPU's order.
double sum_squares(cudaStream_t s, const float* x, std::size_t n, double* partials_device);
inline constexpr int sum_squares_parts = 256;
void scale(cudaStream_t s, float* x, std::size_t n, float a);
/// Round to bfloat16, to nearest, ties to even (the CPU's bit operations: identical results).
void round_bf16(cudaStream_t s, float* x, std::size_t n);
/// bc1 = 1 - beta1^step and bc2 = 1 - beta2^step are computed by the caller (as the CPU does).
void adamw_update(cudaStream_t s, float* w, const float* g, float* m, float* v, std::size_t n, float lr, float beta1, float beta2, float eps,
                  float weight_decay, float bc1, float bc2);

}  // namespace resil::train::cuda

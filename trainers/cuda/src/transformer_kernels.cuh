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

#include "resil/train/backend.hpp"

namespace resil::train::cuda {

void embedding_forward(cudaStream_t s, const std::int32_t* tokens, const float* wte, const float* wpe, float* out, int B, int T, int C);
/// Device scratch of embedding_backward: count (V int32s), start (V + 1) and rows (B*T), the rows
/// of the batch bucketed by token.
struct TokenBuckets {
  std::int32_t* count = nullptr;
  std::int32_t* start = nullptr;
  std::int32_t* rows = nullptr;
};
void embedding_backward(cudaStream_t s, const float* dout, const std::int32_t* tokens, float* dwte, float* dwpe, int B, int T, int C, int V,
                        const TokenBuckets& scratch);
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
/// out[i] = sum_squares of xs_device[i] for `count` tensors (xs_device: device memory; partials_device:
/// count * sum_squares_parts doubles; totals_device: count; out: host memory of count), in two
/// launches, one copy and one synchronisation; each result has sum_squares' bits (the same blocks,
/// their sums added in the same order, on the device).
void sum_squares_many(cudaStream_t s, const ConstSpan* xs_device, std::size_t count, double* partials_device, double* totals_device,
                      double* out);
void scale(cudaStream_t s, float* x, std::size_t n, float a);
/// Round to bfloat16, to nearest, ties to even (the CPU's bit operations: identical results).
void round_bf16(cudaStream_t s, float* x, std::size_t n);
/// bc1 = 1 - beta1^step and bc2 = 1 - beta2^step are computed by the caller (as the CPU does).
void adamw_update(cudaStream_t s, float* w, const float* g, float* m, float* v, std::size_t n, float lr, float beta1, float beta2, float eps,
                  float weight_decay, float bc1, float bc2);

}  // namespace resil::train::cuda

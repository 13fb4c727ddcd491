// The CPU backend's transformer kernels, one concept per file (embedding.cpp, layernorm.cpp,
// gelu.cpp, softmax.cpp, bf16.cpp, adamw.cpp); Backend (backend.hpp) documents what each computes. Every
// loop runs in a fixed order and every elementary function is resil::dmath, so the bits depend on
// the inputs alone (docs/design/determinism.md). Private to the trainer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace resil::train::cpu {

void embedding_forward(const std::int32_t* tokens, const float* wte, const float* wpe, float* out, int B, int T, int C);
void embedding_backward(const float* dout, const std::int32_t* tokens, float* dwte, float* dwpe, int B, int T, int C);

void layernorm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, int rows, int C);
void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd, float* dx, float* dw,
                        float* db, int rows, int C);

void gelu_forward(const float* x, float* y, std::size_t n);
void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n);

void causal_softmax_forward(const float* s, float* p, int mats, int T, float scale);
void causal_softmax_backward(const float* p, const float* dp, float* ds, int mats, int T, float scale);

void round_bf16(float* x, std::size_t n);

void adamw_update(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float beta1, float beta2, float eps,
                  float weight_decay, std::int64_t step);

}  // namespace resil::train::cpu

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

/// GELU, the causal softmax's forward pass and bf16 rounding are built twice from one loop each: for
/// the baseline x86-64 (4 lanes) and for AVX2 (8 lanes, without FMA; -ffp-contract=off keeps every
/// multiply and add rounded on its own), the same operations in the same order per element, so both
/// builds give the same floats. The functions above run the AVX2 build where isa::avx2() says so
/// (a GPT step: 0.92x the CPU time).
namespace isa {
/// This CPU has AVX2 and FMA and RESIL_GEMM_PATH does not say scalar: the GEMM's choice (gemm.hpp),
/// made once.
bool avx2();
}  // namespace isa
// The two builds by name (tests compare them; isa_avx2 only where the CPU has AVX2).
namespace isa_base {
void gelu_forward(const float* x, float* y, std::size_t n);
void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n);
void causal_softmax_forward(const float* s, float* p, int mats, int T, float scale);
void round_bf16(float* x, std::size_t n);
}  // namespace isa_base
namespace isa_avx2 {
void gelu_forward(const float* x, float* y, std::size_t n);
void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n);
void causal_softmax_forward(const float* s, float* p, int mats, int T, float scale);
void round_bf16(float* x, std::size_t n);
}  // namespace isa_avx2

// The AVX2 build of a loop: a function with this attribute into which the loop (always_inline) is
// inlined; elsewhere (not x86-64 GCC or Clang) the same code as the baseline's.
#if defined(__x86_64__) && defined(__GNUC__)
#define RESIL_TARGET_AVX2 [[gnu::target("avx2")]]
#else
#define RESIL_TARGET_AVX2
#endif

void adamw_update(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float beta1, float beta2, float eps,
                  float weight_decay, std::int64_t step);

}  // namespace resil::train::cpu

// Rounding to bfloat16 (1 sign, 8 exponent, 7 mantissa bits: the upper half of a float) to nearest,
// ties to even, as hardware and PyTorch convert. The result stays a float holding a bf16 value, so
// a bf16 computation is emulated exactly: a product of two bf16 values is exact in float, and the
// float FMA chain of the GEMM is bf16 GEMM with fp32 accumulation.
#include <cstdint>
#include <cstring>

#include "../gemm.hpp"
#include "kernels.hpp"

namespace resil::train::cpu {

bool isa::avx2() {
  static const bool avx2 = gemm::select_path() == gemm::Path::avx2;
  return avx2;
}

namespace {
[[gnu::always_inline]] inline void round_bf16_loop(float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, x + i, 4);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    // Adding 0x7fff plus the lowest kept bit carries into the kept half exactly when the dropped
    // half is above one half, or equal to it with an odd kept half; finite values that round past
    // the largest bf16 become infinity, as they should.
    const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    u = nan ? ((u | 0x00400000u) & 0xffff0000u) : rounded;  // NaN stays a (quiet) NaN
    std::memcpy(x + i, &u, 4);
  }
}
}  // namespace

namespace isa_base {
void round_bf16(float* x, std::size_t n) { round_bf16_loop(x, n); }
}  // namespace isa_base
namespace isa_avx2 {
RESIL_TARGET_AVX2 void round_bf16(float* x, std::size_t n) { round_bf16_loop(x, n); }
}  // namespace isa_avx2
void round_bf16(float* x, std::size_t n) {
  if (isa::avx2()) isa_avx2::round_bf16(x, n);
  else isa_base::round_bf16(x, n);
}

}  // namespace resil::train::cpu

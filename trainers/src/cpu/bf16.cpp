// Rounding to bfloat16 (1 sign, 8 exponent, 7 mantissa bits: the upper half of a float) to nearest,
// ties to even, as hardware and PyTorch convert. The result stays a float holding a bf16 value, so
// a bf16 computation is emulated exactly: a product of two bf16 values is exact in float, and the
// float FMA chain of the GEMM is bf16 GEMM with fp32 accumulation.
#include <cstdint>
#include <cstring>

#include "kernels.hpp"

namespace resil::train::cpu {

void round_bf16(float* x, std::size_t n) {
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

}  // namespace resil::train::cpu

// Slow, obviously correct GF(2^8) arithmetic and Reed-Solomon encoding: test oracles only
// (ISA-L's `_base` functions play the same role). Nothing here is used by the codec itself.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "resil/ec/codec.hpp"

namespace resil::ec {

/// Product in GF(2^8) modulo x^8 + x^4 + x^3 + x^2 + 1 (0x11D, ISA-L's polynomial), by
/// shift-and-add: one conditional XOR per bit of b.
std::uint8_t gf_mul_reference(std::uint8_t a, std::uint8_t b) noexcept;

/// The b with a * b = 1, found by trying all 255 candidates; 0 for a = 0.
std::uint8_t gf_inv_reference(std::uint8_t a) noexcept;

/// The n x k systematic generator: identity rows, then row i, column j = 1 / (i xor j) scaled by
/// (k xor j) (= 1 / row k's entry), so that row k is all ones.
std::vector<std::uint8_t> cauchy_matrix_reference(int k, int m);

/// Byte-at-a-time parity computation from the generator above.
void encode_reference(int k, int m, std::span<const ConstBytes> data, std::span<const Bytes> parity);

}  // namespace resil::ec

#include "resil/ec/reference.hpp"

#include <cstddef>

namespace resil::ec {

std::uint8_t gf_mul_reference(std::uint8_t a, std::uint8_t b) noexcept {
  unsigned p = 0, x = a;
  for (int bit = 0; bit < 8; ++bit) {
    if (b & (1u << bit)) p ^= x;
    x <<= 1;
    if (x & 0x100u) x ^= 0x11Du;
  }
  return static_cast<std::uint8_t>(p);
}

std::uint8_t gf_inv_reference(std::uint8_t a) noexcept {
  for (unsigned b = 1; b < 256; ++b) {
    if (gf_mul_reference(a, static_cast<std::uint8_t>(b)) == 1) return static_cast<std::uint8_t>(b);
  }
  return 0;
}

std::vector<std::uint8_t> cauchy_matrix_reference(int k, int m) {
  const int n = k + m;
  std::vector<std::uint8_t> a(static_cast<std::size_t>(n) * k, 0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < k; ++j) {
      a[static_cast<std::size_t>(i) * k + j] =
          i < k ? (i == j ? 1 : 0) : gf_inv_reference(static_cast<std::uint8_t>(i ^ j));
    }
  }
  // Column i of the parity rows scaled by 1 / a[k][i], so that parity row 0 is all ones.
  for (int j = 0; j < k; ++j) {
    const auto inv = gf_inv_reference(a[static_cast<std::size_t>(k) * k + j]);
    for (int i = k; i < n; ++i) a[static_cast<std::size_t>(i) * k + j] = gf_mul_reference(a[static_cast<std::size_t>(i) * k + j], inv);
  }
  return a;
}

void encode_reference(int k, int m, std::span<const ConstBytes> data, std::span<const Bytes> parity) {
  const auto a = cauchy_matrix_reference(k, m);
  for (int j = 0; j < m; ++j) {
    for (std::size_t b = 0; b < parity[j].size(); ++b) {
      std::uint8_t acc = 0;
      for (int i = 0; i < k; ++i) {
        acc ^= gf_mul_reference(a[static_cast<std::size_t>(k + j) * k + i], static_cast<std::uint8_t>(data[i][b]));
      }
      parity[j][b] = static_cast<std::byte>(acc);
    }
  }
}

}  // namespace resil::ec

// Counter-based randomness (Philox4x32-10, Salmon et al., SC'11 / Random123).
// A stream is keyed by (seed, stream id); draw i of it is a pure function of (seed, stream, i),
// so trial t of a campaign, rank r of a run or epoch e of a shuffle is reproducible on its own.
// There is no global generator and nothing is seeded from the clock.
#pragma once

#include <array>
#include <cstdint>

#include "resil/core/dmath.hpp"
#include <limits>
#include <random>

namespace resil {

__extension__ typedef unsigned __int128 uint128_t;  // GCC/Clang extension, silenced for -Wpedantic

/// Philox4x32-10 block function: 128-bit counter, 64-bit key -> 128 random bits.
inline std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> ctr, std::array<std::uint32_t, 2> key) noexcept {
  constexpr std::uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{M0} * ctr[0];
    const std::uint64_t p1 = std::uint64_t{M1} * ctr[2];
    ctr = {static_cast<std::uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<std::uint32_t>(p1),
           static_cast<std::uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<std::uint32_t>(p0)};
    key[0] += W0;
    key[1] += W1;
  }
  return ctr;
}

/// A sequential view over a counter-based stream; satisfies UniformRandomBitGenerator.
/// Copying it forks the stream position; two Rng with equal (seed, stream) produce equal draws.
class Rng {
public:
  using result_type = std::uint64_t;
  Rng(std::uint64_t seed, std::uint64_t stream, std::uint64_t position = 0) noexcept
      : seed_(seed), stream_(stream), pos_(position) {}

  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return std::numeric_limits<result_type>::max(); }

  /// Draw number `i` of stream (seed, stream), independent of any state.
  static std::uint64_t at(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) noexcept {
    const auto r = philox4x32({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i >> 32),
                               static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)},
                              {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
    return (std::uint64_t{r[0]} << 32) | r[1];
  }

  result_type operator()() noexcept { return at(seed_, stream_, pos_++); }

  /// Uniform integer in [0, n) without modulo bias (Lemire's nearly-divisionless method).
  std::uint64_t below(std::uint64_t n) noexcept {
    if (n <= 1) return 0;
    for (;;) {
      const uint128_t m = static_cast<uint128_t>((*this)()) * n;
      const auto lo = static_cast<std::uint64_t>(m);
      if (lo >= n || lo >= (0 - n) % n) return static_cast<std::uint64_t>(m >> 64);
    }
  }

  /// Uniform double in [0, 1) with 53 random bits.
  double uniform() noexcept { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }

  /// Standard normal (Box-Muller with resil::dmath), the same bits on every machine given the stream.
  double normal() noexcept;

  std::uint64_t seed() const noexcept { return seed_; }
  std::uint64_t stream() const noexcept { return stream_; }
  std::uint64_t position() const noexcept { return pos_; }

private:
  std::uint64_t seed_, stream_, pos_;
};

inline double Rng::normal() noexcept {
  constexpr double two_pi = 6.283185307179586476925286766559;
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  return __builtin_sqrt(-2.0 * dmath::log(u1)) * dmath::cos(two_pi * u2);
}

/// Derive a child key from a parent seed and a label (e.g. trial number): used to give each
/// trial/rank/epoch its own independent seed that is still a pure function of the root seed.
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t label) noexcept {
  return Rng::at(seed, 0xD1B54A32D192ED03ull ^ label, label);
}

/// A fresh seed for runs where the user gave none: drawn once from the OS entropy source,
/// then printed and logged by the caller so the run can be repeated.
inline std::uint64_t draw_seed() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd();
}

}  // namespace resil

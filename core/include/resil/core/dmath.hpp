// Elementary functions whose results are the same bits on every machine.
//
// The C library's exp, log, cos, pow are free to differ between implementations, versions and
// the instruction set they dispatch to (glibc picks FMA variants at load time), so a result that
// goes through them can change between two machines running the same binary. These functions
// use only IEEE-754 double additions, multiplications, divisions and exact bit operations, in a
// fixed order, so their results are a pure function of their arguments. They need
// -ffp-contract=off (set for the whole project): a contracted a * b + c is a different function.
//
// Accuracy: within 2 ulp of the C library (tanh 3) over the whole domain (checked against the C
// library in tests/core/test_dmath.cpp); the float versions compute in double and round once.
// Special values follow C99 Annex F (NaN in, NaN out; exp(-inf) = 0; log(0) = -inf).
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace resil::dmath {

namespace detail {
inline constexpr double inf = std::numeric_limits<double>::infinity();
inline constexpr double nan = std::numeric_limits<double>::quiet_NaN();
// ln 2 split so that k * ln2_hi is exact for |k| < 2^11 (its low 21 bits are zero).
inline constexpr double ln2_hi = 0x1.62e42fee00000p-1;
inline constexpr double ln2_lo = 0x1.a39ef35793c76p-33;
inline constexpr double inv_ln2 = 0x1.71547652b82fep0;
// Adding and subtracting 1.5 * 2^52 rounds a double of magnitude below 2^51 to the nearest integer
// (ties to even) in the default rounding mode.
inline constexpr double round_shift = 0x1.8p52;

inline double round_to_int(double x) noexcept { return (x + round_shift) - round_shift; }

/// 2^k as a double, for k in [-1022, 1023].
inline double pow2(int k) noexcept { return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52); }

/// x * 2^k for k in [-2044, 2046], rounding once at most (the split keeps both factors normal).
inline double ldexp(double x, int k) noexcept {
  const int k1 = k / 2;
  return x * pow2(k1) * pow2(k - k1);
}

/// log(1 + f) for f = m - 1, m in [sqrt(1/2), sqrt(2)]: log(1 + f) = 2 atanh(s), s = f / (2 + f),
/// written as f - s (f - R(s^2)) so the leading term keeps f's bits; |s| <= 0.1716, s^2 <= 0.0295.
inline double log1p_reduced(double f) noexcept {
  const double s = f / (2.0 + f);
  const double z = s * s;
  // R(z) = sum_{n>=1} 2 z^n / (2n + 1); the z^12 term is below 2^-64 relative.
  double r = 2.0 / 25.0;
  r = 2.0 / 23.0 + z * r;
  r = 2.0 / 21.0 + z * r;
  r = 2.0 / 19.0 + z * r;
  r = 2.0 / 17.0 + z * r;
  r = 2.0 / 15.0 + z * r;
  r = 2.0 / 13.0 + z * r;
  r = 2.0 / 11.0 + z * r;
  r = 2.0 / 9.0 + z * r;
  r = 2.0 / 7.0 + z * r;
  r = 2.0 / 5.0 + z * r;
  r = 2.0 / 3.0 + z * r;
  return f - s * (f - z * r);
}
}  // namespace detail

/// e^x.
inline double exp(double x) noexcept {
  if (x != x) return x;
  if (x > 709.782712893384) return detail::inf;
  if (x < -745.1332191019412) return 0.0;
  const double kd = detail::round_to_int(x * detail::inv_ln2);
  const double r = (x - kd * detail::ln2_hi) - kd * detail::ln2_lo;  // |r| <= 0.347
  // Taylor series to r^14/14!: the remainder is below 2^-60 relative.
  double p = 1.0 / 87178291200.0;
  p = 1.0 / 6227020800.0 + r * p;
  p = 1.0 / 479001600.0 + r * p;
  p = 1.0 / 39916800.0 + r * p;
  p = 1.0 / 3628800.0 + r * p;
  p = 1.0 / 362880.0 + r * p;
  p = 1.0 / 40320.0 + r * p;
  p = 1.0 / 5040.0 + r * p;
  p = 1.0 / 720.0 + r * p;
  p = 1.0 / 120.0 + r * p;
  p = 1.0 / 24.0 + r * p;
  p = 1.0 / 6.0 + r * p;
  p = 0.5 + r * p;
  p = 1.0 + r * p;
  p = 1.0 + r * p;
  return detail::ldexp(p, static_cast<int>(kd));
}

/// e^x - 1, accurate near 0.
inline double expm1(double x) noexcept {
  if (x != x) return x;
  if (x > 0.5 || x < -0.5) return exp(x) - 1.0;
  // Taylor series to x^18/18!: below 2^-70 relative for |x| <= 0.5.
  double p = 1.0 / 6402373705728000.0;
  constexpr double inv_fact[] = {1.0 / 355687428096000.0, 1.0 / 20922789888000.0, 1.0 / 1307674368000.0,
                                 1.0 / 87178291200.0,     1.0 / 6227020800.0,     1.0 / 479001600.0,
                                 1.0 / 39916800.0,        1.0 / 3628800.0,        1.0 / 362880.0,
                                 1.0 / 40320.0,           1.0 / 5040.0,           1.0 / 720.0,
                                 1.0 / 120.0,             1.0 / 24.0,             1.0 / 6.0,
                                 0.5,                     1.0};
  for (const double c : inv_fact) p = c + x * p;
  return x * p;
}

/// Natural logarithm.
inline double log(double x) noexcept {
  if (x != x) return x;
  if (x < 0.0) return detail::nan;
  if (x == 0.0) return -detail::inf;
  if (x == detail::inf) return x;
  int e = 0;
  if (x < 0x1p-1022) {  // subnormal: make it normal first
    x *= 0x1p54;
    e = -54;
  }
  const auto bits = std::bit_cast<std::uint64_t>(x);
  e += static_cast<int>(bits >> 52) - 1023;
  double m = std::bit_cast<double>((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
  if (m > 1.4142135623730951) {
    m *= 0.5;
    ++e;
  }
  const double f = m - 1.0;  // exact (Sterbenz)
  const double ed = static_cast<double>(e);
  return ed * detail::ln2_hi + (detail::log1p_reduced(f) + ed * detail::ln2_lo);
}

/// log(1 + x), accurate near 0.
inline double log1p(double x) noexcept {
  if (x != x) return x;
  if (x < -1.0) return detail::nan;
  if (x == -1.0) return -detail::inf;
  if (x == detail::inf) return x;
  const double u = 1.0 + x;
  if (u == 1.0) return x;
  // log(u) * x / (u - 1) cancels the rounding of 1 + x (Goldberg, "What every computer scientist...", Theorem 4).
  return log(u) * (x / (u - 1.0));
}

/// Hyperbolic tangent.
inline double tanh(double x) noexcept {
  if (x != x) return x;
  const double a = x < 0.0 ? -x : x;
  if (a > 22.0) return x < 0.0 ? -1.0 : 1.0;  // 1 - tanh(22) < 2^-63
  const double t = expm1(2.0 * a);
  const double y = t / (t + 2.0);
  return x < 0.0 ? -y : y;
}

/// cos(x) for |x| <= 2^20 (Cody-Waite reduction by pi/2 in three parts; NaN outside).
inline double cos(double x) noexcept {
  if (!(x <= 0x1p20 && x >= -0x1p20)) return detail::nan;
  constexpr double two_over_pi = 0x1.45f306dc9c883p-1;
  // pi/2 in three parts of 33 significant bits each, so n * part is exact for n < 2^20.
  constexpr double pio2_1 = 0x1.921fb54400000p0, pio2_2 = 0x1.0b4611a600000p-34, pio2_3 = 0x1.3198a2e037073p-69;
  const double n = detail::round_to_int(x * two_over_pi);
  const double r = ((x - n * pio2_1) - n * pio2_2) - n * pio2_3;  // |r| <= pi/4 (a hair more at the rounding)
  const double z = r * r;
  // cos r = sum (-1)^i z^i / (2i)!, sin r = r sum (-1)^i z^i / (2i+1)!, to z^9: below 2^-60 for |r| <= pi/4.
  double c = 1.0 / 6402373705728000.0;
  c = -1.0 / 20922789888000.0 + z * c;
  c = 1.0 / 87178291200.0 + z * c;
  c = -1.0 / 479001600.0 + z * c;
  c = 1.0 / 3628800.0 + z * c;
  c = -1.0 / 40320.0 + z * c;
  c = 1.0 / 720.0 + z * c;
  c = -1.0 / 24.0 + z * c;
  c = 0.5 + z * c;  // c now holds (1 - cos r) / z
  const double cosr = 1.0 - z * c;
  double s = -1.0 / 121645100408832000.0;
  s = 1.0 / 355687428096000.0 + z * s;
  s = -1.0 / 1307674368000.0 + z * s;
  s = 1.0 / 6227020800.0 + z * s;
  s = -1.0 / 39916800.0 + z * s;
  s = 1.0 / 362880.0 + z * s;
  s = -1.0 / 5040.0 + z * s;
  s = 1.0 / 120.0 + z * s;
  s = -1.0 / 6.0 + z * s;
  const double sinr = r + r * (z * s);
  switch (static_cast<std::int64_t>(n) & 3) {
    case 0: return cosr;
    case 1: return -sinr;
    case 2: return -cosr;
    default: return sinr;
  }
}

/// base^n for an integer n >= 0 by binary powering (a fixed sequence of multiplications).
inline double powi(double base, std::int64_t n) noexcept {
  double result = 1.0;
  for (std::uint64_t k = n < 0 ? 0 : static_cast<std::uint64_t>(n); k; k >>= 1) {
    if (k & 1) result *= base;
    base *= base;
  }
  return result;
}

/// e^x in single precision without branches or double arithmetic, for loops the compiler
/// vectorises (every lane computes exactly the scalar's operations, so the bits do not depend on the
/// vector width): x is clamped to [-87, 88] (e^-87 and e^88 for anything beyond, finite and
/// normal), k = round(x / ln 2), r = x - k ln 2 in two parts, e^r by its Taylor series to r^7
/// (remainder below 2^-27 for |r| <= ln 2 / 2), scaled by 2^k through the exponent bits; NaN in,
/// NaN out. Within 2 ulp of the C library's expf over [-87, 88] (tests/core/test_dmath.cpp).
inline float exp_fast(float x) noexcept {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // 1.5 * 2^23 rounds |v| < 2^22 to the nearest integer (ties to even); |x / ln 2| <= 127.
  const float kf = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (x - kf * 0.693359375f) - kf * -2.12194440e-4f;  // ln 2 = 0.693359375 - 2.12194440e-4 (hi part exact)
  float p = 1.0f / 5040.0f;
  p = 1.0f / 720.0f + r * p;
  p = 1.0f / 120.0f + r * p;
  p = 1.0f / 24.0f + r * p;
  p = 1.0f / 6.0f + r * p;
  p = 0.5f + r * p;
  p = 1.0f + r * p;
  p = 1.0f + r * p;
  const auto k = static_cast<std::int32_t>(kf == kf ? kf : 0.0f);  // NaN in: p is NaN, NaN out
  return p * std::bit_cast<float>(static_cast<std::uint32_t>(k + 127) << 23);
}

// Single precision: computed in double, rounded once.
inline float exp(float x) noexcept { return static_cast<float>(exp(static_cast<double>(x))); }
inline float log(float x) noexcept { return static_cast<float>(log(static_cast<double>(x))); }
inline float log1p(float x) noexcept { return static_cast<float>(log1p(static_cast<double>(x))); }
inline float tanh(float x) noexcept { return static_cast<float>(tanh(static_cast<double>(x))); }

}  // namespace resil::dmath

#include "resil/ckpt/dtype.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace resil::ckpt {

std::optional<DType> dtype_from_name(std::string_view n) noexcept {
  struct Alias { std::string_view name; DType t; };
  static constexpr Alias aliases[] = {
      {"f64", DType::f64},  {"float64", DType::f64}, {"double", DType::f64},
      {"f32", DType::f32},  {"float32", DType::f32}, {"float", DType::f32},
      {"f16", DType::f16},  {"float16", DType::f16}, {"half", DType::f16},
      {"bf16", DType::bf16}, {"bfloat16", DType::bf16},
      {"i64", DType::i64},  {"int64", DType::i64},   {"i32", DType::i32}, {"int32", DType::i32},
      {"i16", DType::i16},  {"int16", DType::i16},   {"i8", DType::i8},   {"int8", DType::i8},
      {"u64", DType::u64},  {"uint64", DType::u64},  {"u32", DType::u32}, {"uint32", DType::u32},
      {"u16", DType::u16},  {"uint16", DType::u16},  {"u8", DType::u8},   {"uint8", DType::u8},
      {"f8_e4m3", DType::f8_e4m3}, {"float8_e4m3fn", DType::f8_e4m3},
      {"f8_e5m2", DType::f8_e5m2}, {"float8_e5m2", DType::f8_e5m2},
      {"f8_e8m0", DType::f8_e8m0}, {"float8_e8m0fnu", DType::f8_e8m0},
      {"f8_e4m3fnuz", DType::f8_e4m3fnuz}, {"float8_e4m3fnuz", DType::f8_e4m3fnuz},
      {"f8_e5m2fnuz", DType::f8_e5m2fnuz}, {"float8_e5m2fnuz", DType::f8_e5m2fnuz},
      {"bool", DType::boolean}};
  for (const auto& a : aliases)
    if (a.name == n) return a.t;
  return std::nullopt;
}

namespace {

double half_to_double(std::uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int man = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(man), -24);
  else if (exp == 31) v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(static_cast<double>(man | 0x400), exp - 25);
  return sign ? -v : v;
}

// Round-to-nearest-even conversion of a double to IEEE half; NaN stays NaN, overflow -> Inf.
std::uint16_t double_to_half(double d) {
  const std::uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  if (std::isnan(d)) return sign | 0x7e00;
  d = std::fabs(d);
  if (d >= 65520.0) return sign | 0x7c00;
  if (d < std::ldexp(1.0, -25)) return sign;  // rounds to zero (ties at 2^-25 round to even 0)
  int e;
  std::frexp(d, &e);  // d = f * 2^e, f in [0.5,1)
  int exp = e - 1 + 15;
  if (exp <= 0) {  // subnormal: units of 2^-24
    const double q = std::nearbyint(d * 16777216.0);
    return sign | static_cast<std::uint16_t>(q);
  }
  double man = std::nearbyint(std::ldexp(d, 10 - (e - 1)));  // in [1024, 2048]
  if (man >= 2048.0) { man /= 2; ++exp; }
  if (exp >= 31) return sign | 0x7c00;
  return sign | static_cast<std::uint16_t>(exp << 10) | (static_cast<std::uint16_t>(man) & 0x3ff);
}

std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  const std::uint32_t rounding = 0x7fff + ((u >> 16) & 1);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

// The fp8 encodings: OCP E4M3FN (bias 7, no infinity; S.1111.111 is NaN, the largest finite is
// 448), OCP E5M2 (bias 15, IEEE-like: the top byte of an f16), and the FNUZ pair E4M3FNUZ (bias 8,
// largest 240) and E5M2FNUZ (bias 16, largest 57344): no infinity, no negative zero, and 0x80,
// the code a negative zero would have, the only NaN.
enum class F8 : std::uint8_t { e4m3fn, e5m2, e4m3fnuz, e5m2fnuz };
struct F8Spec {
  unsigned mbits, ebits;
  int bias;
  bool fnuz;
};
constexpr F8Spec spec_of(F8 k) {
  switch (k) {
    case F8::e4m3fn: return {3, 4, 7, false};
    case F8::e5m2: return {2, 5, 15, false};
    case F8::e4m3fnuz: return {3, 4, 8, true};
    case F8::e5m2fnuz: return {2, 5, 16, true};
  }
  return {3, 4, 7, false};
}

double f8_to_double(std::uint8_t b, F8 k) {
  const F8Spec f = spec_of(k);
  const int sign = b >> 7;
  const int exp = (b >> f.mbits) & ((1 << f.ebits) - 1);
  const int man = b & ((1 << f.mbits) - 1);
  const int emax = (1 << f.ebits) - 1, mmax = (1 << f.mbits) - 1;
  if (f.fnuz && b == 0x80) return std::numeric_limits<double>::quiet_NaN();
  if (k == F8::e4m3fn && exp == emax && man == mmax) return std::numeric_limits<double>::quiet_NaN();
  double v;
  if (k == F8::e5m2 && exp == emax) v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0) v = std::ldexp(static_cast<double>(man), 1 - f.bias - static_cast<int>(f.mbits));
  else v = std::ldexp(static_cast<double>(man | (1 << f.mbits)), exp - f.bias - static_cast<int>(f.mbits));
  return sign ? -v : v;
}

// Nearest fp8 by search over the 128 magnitudes (ties to the even code); NaN stays NaN; beyond
// the largest finite: infinity in E5M2, NaN in the others (they have no infinity). FNUZ has no
// negative zero: a negative value that rounds to zero is +0 (0x80 is NaN there).
std::uint8_t double_to_f8(double d, F8 k) {
  const bool fnuz = spec_of(k).fnuz;
  const std::uint8_t sign = std::signbit(d) ? 0x80 : 0;
  if (std::isnan(d)) return fnuz ? 0x80 : sign | (k == F8::e4m3fn ? 0x7f : 0x7e);
  const double a = std::fabs(d);
  const std::uint8_t top = k == F8::e4m3fn ? 0x7e : k == F8::e5m2 ? 0x7b : 0x7f;  // largest finite code
  const double max = f8_to_double(top, k), ulp = max - f8_to_double(top - 1, k);
  if (a >= max + ulp / 2) return k == F8::e5m2 ? sign | 0x7c : fnuz ? 0x80 : sign | 0x7f;
  std::uint8_t best = 0;
  for (std::uint8_t c = 1; c <= top; ++c) {
    const double e = std::fabs(f8_to_double(c, k) - a), eb = std::fabs(f8_to_double(best, k) - a);
    if (e < eb || (e == eb && (c & 1) == 0)) best = c;
  }
  return fnuz && best == 0 ? 0 : sign | best;
}

// OCP E8M0: 2^(e-127) for e in 0..254, 0xFF NaN. Encoding: the nearest power of two (in value;
// a tie, at 1.5 x 2^k, goes to the even code), clamped to 2^-127 .. 2^127 (no zero, no sign).
double e8m0_to_double(std::uint8_t b) {
  return b == 0xFF ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, static_cast<int>(b) - 127);
}
std::uint8_t double_to_e8m0(double d) {
  if (std::isnan(d)) return 0xFF;
  if (!(d > 0)) return 0;
  if (std::isinf(d)) return 254;
  int e;
  const double f = std::frexp(d, &e);  // d = f x 2^e, f in [0.5, 1): between 2^(e-1) and 2^e
  int k = e - 1;
  if (f > 0.75 || (f == 0.75 && ((k + 127) & 1))) k = e;
  return static_cast<std::uint8_t>(std::clamp(k + 127, 0, 254));
}

template <class I> std::uint64_t saturate(double v) {
  if (std::isnan(v)) return 0;
  const double lo = static_cast<double>(std::numeric_limits<I>::min());
  const double hi = static_cast<double>(std::numeric_limits<I>::max());
  const I x = v <= lo ? std::numeric_limits<I>::min() : v >= hi ? std::numeric_limits<I>::max() : static_cast<I>(std::llround(v));
  using U = std::make_unsigned_t<I>;
  return static_cast<std::uint64_t>(static_cast<U>(x));
}

}  // namespace

double word_to_double(DType t, std::uint64_t w) noexcept {
  switch (t) {
    case DType::f64: return std::bit_cast<double>(w);
    case DType::f32: return std::bit_cast<float>(static_cast<std::uint32_t>(w));
    case DType::f16: return half_to_double(static_cast<std::uint16_t>(w));
    case DType::bf16: return std::bit_cast<float>(static_cast<std::uint32_t>(w & 0xffff) << 16);
    case DType::i64: return static_cast<double>(static_cast<std::int64_t>(w));
    case DType::i32: return static_cast<std::int32_t>(static_cast<std::uint32_t>(w));
    case DType::i16: return static_cast<std::int16_t>(static_cast<std::uint16_t>(w));
    case DType::i8: return static_cast<std::int8_t>(static_cast<std::uint8_t>(w));
    case DType::u64: return static_cast<double>(w);
    case DType::u32: return static_cast<std::uint32_t>(w);
    case DType::u16: return static_cast<std::uint16_t>(w);
    case DType::u8: return static_cast<std::uint8_t>(w);
    case DType::f8_e4m3: return f8_to_double(static_cast<std::uint8_t>(w), F8::e4m3fn);
    case DType::f8_e5m2: return f8_to_double(static_cast<std::uint8_t>(w), F8::e5m2);
    case DType::f8_e4m3fnuz: return f8_to_double(static_cast<std::uint8_t>(w), F8::e4m3fnuz);
    case DType::f8_e5m2fnuz: return f8_to_double(static_cast<std::uint8_t>(w), F8::e5m2fnuz);
    case DType::f8_e8m0: return e8m0_to_double(static_cast<std::uint8_t>(w));
    case DType::boolean: return static_cast<std::uint8_t>(w);  // the stored byte: 0, 1, or a flipped bit's value
  }
  return 0;
}

std::uint64_t double_to_word(DType t, double v) noexcept {
  switch (t) {
    case DType::f64: return std::bit_cast<std::uint64_t>(v);
    case DType::f32: return std::bit_cast<std::uint32_t>(static_cast<float>(v));
    case DType::f16: return double_to_half(v);
    case DType::bf16: return float_to_bf16(static_cast<float>(v));
    case DType::i64: return saturate<std::int64_t>(v);
    case DType::i32: return saturate<std::int32_t>(v);
    case DType::i16: return saturate<std::int16_t>(v);
    case DType::i8: return saturate<std::int8_t>(v);
    case DType::u64: return v <= 0 || std::isnan(v) ? 0 : v >= 18446744073709551615.0 ? ~0ull : static_cast<std::uint64_t>(std::llround(v));
    case DType::u32: return saturate<std::uint32_t>(v);
    case DType::u16: return saturate<std::uint16_t>(v);
    case DType::u8: return saturate<std::uint8_t>(v);
    case DType::f8_e4m3: return double_to_f8(v, F8::e4m3fn);
    case DType::f8_e5m2: return double_to_f8(v, F8::e5m2);
    case DType::f8_e4m3fnuz: return double_to_f8(v, F8::e4m3fnuz);
    case DType::f8_e5m2fnuz: return double_to_f8(v, F8::e5m2fnuz);
    case DType::f8_e8m0: return double_to_e8m0(v);
    case DType::boolean: return saturate<std::uint8_t>(v);
  }
  return 0;
}

}  // namespace resil::ckpt

// Element types resil stores and flips. Each is flipped in its own stored width; bit 0 is the
// least significant bit of the stored word everywhere (shared/DESIGN.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace resil::ckpt {

// f8_e4m3 (OCP E4M3FN: no infinity, NaN only at S.1111.111), f8_e5m2 (IEEE-like), f8_e8m0 (OCP
// E8M0, the MX formats' scale: 8 exponent bits, no sign, no mantissa, 2^(e-127), 0xFF is NaN; no
// zero, no infinity), f8_e4m3fnuz and f8_e5m2fnuz (the FNUZ fp8 of AMD and Graphcore: biases 8 and
// 16, no infinity, no negative zero, 0x80 the only NaN) and boolean (one byte, 0 or 1) come from the formats PyTorch users save
// (torch.save, safetensors, NumPy); HDF5 files hold them as raw bytes only (h5_native_type: uint8),
// so all_dtypes leaves them out.
enum class DType : std::uint8_t {
  f64, f32, f16, bf16, i64, i32, i16, i8, u64, u32, u16, u8, f8_e4m3, f8_e5m2, boolean, f8_e8m0, f8_e4m3fnuz, f8_e5m2fnuz
};

/// The dtypes HDF5 files store natively (listed, read and written by libckpt).
inline constexpr DType all_dtypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32,
                                       DType::i16, DType::i8,  DType::u64, DType::u32, DType::u16,  DType::u8};

constexpr std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::f64: case DType::i64: case DType::u64: return 8;
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::f16: case DType::bf16: case DType::i16: case DType::u16: return 2;
    case DType::i8: case DType::u8: case DType::f8_e4m3: case DType::f8_e5m2: case DType::f8_e8m0: case DType::f8_e4m3fnuz:
    case DType::f8_e5m2fnuz: case DType::boolean: return 1;
  }
  return 0;
}
constexpr unsigned dtype_bits(DType t) noexcept { return static_cast<unsigned>(dtype_size(t) * 8); }
constexpr bool dtype_is_float(DType t) noexcept {
  return t == DType::f64 || t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f8_e4m3 ||
         t == DType::f8_e5m2 || t == DType::f8_e8m0 || t == DType::f8_e4m3fnuz || t == DType::f8_e5m2fnuz;
}
constexpr bool dtype_is_signed(DType t) noexcept {
  return t == DType::i64 || t == DType::i32 || t == DType::i16 || t == DType::i8;
}
/// Whether the top bit is a sign: signed integers and every float but f8_e8m0 (all exponent).
constexpr bool dtype_has_sign(DType t) noexcept { return dtype_is_signed(t) || (dtype_is_float(t) && t != DType::f8_e8m0); }

constexpr std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::f64: return "f64";  case DType::f32: return "f32";
    case DType::f16: return "f16";  case DType::bf16: return "bf16";
    case DType::i64: return "i64";  case DType::i32: return "i32";
    case DType::i16: return "i16";  case DType::i8: return "i8";
    case DType::u64: return "u64";  case DType::u32: return "u32";
    case DType::u16: return "u16";  case DType::u8: return "u8";
    case DType::f8_e4m3: return "f8_e4m3";  case DType::f8_e5m2: return "f8_e5m2";
    case DType::f8_e8m0: return "f8_e8m0";  case DType::boolean: return "bool";
    case DType::f8_e4m3fnuz: return "f8_e4m3fnuz";  case DType::f8_e5m2fnuz: return "f8_e5m2fnuz";
  }
  return "?";
}

/// Accepts resil names (f32, i64, bf16...) and numpy-style aliases (float32, int64, uint8...).
std::optional<DType> dtype_from_name(std::string_view name) noexcept;

/// Float layout: exponent and mantissa widths (sign is the top bit, except in f8_e8m0, whose 8 bits
/// are all exponent: dtype_has_sign). Integers have none.
struct FloatLayout {
  unsigned mantissa_bits;
  unsigned exponent_bits;
};
constexpr std::optional<FloatLayout> float_layout(DType t) noexcept {
  switch (t) {
    case DType::f64: return FloatLayout{52, 11};
    case DType::f32: return FloatLayout{23, 8};
    case DType::f16: return FloatLayout{10, 5};
    case DType::bf16: return FloatLayout{7, 8};
    case DType::f8_e4m3: return FloatLayout{3, 4};
    case DType::f8_e5m2: return FloatLayout{2, 5};
    case DType::f8_e4m3fnuz: return FloatLayout{3, 4};
    case DType::f8_e5m2fnuz: return FloatLayout{2, 5};
    case DType::f8_e8m0: return FloatLayout{0, 8};
    default: return std::nullopt;
  }
}

/// Decode a stored word (little-endian numeric value of the word, not memory order) to double.
double word_to_double(DType t, std::uint64_t word) noexcept;
/// Encode a double into the stored word of dtype t (round to nearest even; saturate integers).
std::uint64_t double_to_word(DType t, double v) noexcept;

}  // namespace resil::ckpt

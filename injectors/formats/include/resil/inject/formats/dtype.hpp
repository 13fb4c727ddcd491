// The element types the format parsers report (safetensors' list; torch and NumPy map onto it).
// Separate from resil::ckpt::DType so the parsers stay HDF5-free; the adapters map one onto the
// other (fp8 and bool have no HDF5 counterpart). Every dtype tag of the safetensors format is here:
// the sub-byte floats F4 (E2M1), F6_E2M3, F6_E3M2 (packed) and the complex C64 are recognised and
// reported as opaque (dtype_opaque: their bytes are never flipped), the rest are flippable. One is
// not a safetensors tag: f4_x2, torch.float4_e2m1fn_x2, whose element is a byte holding two E2M1
// values (safetensors stores the same bytes as F4 with the last dimension doubled); opaque too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace resil::inject::formats {

enum class DType : std::uint8_t {
  f64, f32, f16, bf16, f8_e4m3, f8_e5m2, i64, i32, i16, i8, u8, boolean,
  f8_e8m0, u16, u32, u64, f4, f6_e2m3, f6_e3m2, c64, f8_e4m3fnuz, f8_e5m2fnuz, f4_x2
};

/// Bits per element (4 and 6 for the packed sub-byte floats).
constexpr unsigned dtype_bits(DType t) noexcept {
  switch (t) {
    case DType::f64: case DType::i64: case DType::u64: case DType::c64: return 64;
    case DType::f32: case DType::i32: case DType::u32: return 32;
    case DType::f16: case DType::bf16: case DType::i16: case DType::u16: return 16;
    case DType::f8_e4m3: case DType::f8_e5m2: case DType::f8_e8m0: case DType::f8_e4m3fnuz: case DType::f8_e5m2fnuz: case DType::f4_x2:
    case DType::i8: case DType::u8: case DType::boolean: return 8;
    case DType::f6_e2m3: case DType::f6_e3m2: return 6;
    case DType::f4: return 4;
  }
  return 0;
}
/// Bytes per element; 0 for the packed sub-byte floats.
constexpr std::size_t dtype_size(DType t) noexcept { return dtype_bits(t) % 8 ? 0 : dtype_bits(t) / 8; }
/// Recognised but not flipped: the packed sub-byte floats and complex numbers.
constexpr bool dtype_opaque(DType t) noexcept {
  return t == DType::f4 || t == DType::f6_e2m3 || t == DType::f6_e3m2 || t == DType::c64 || t == DType::f4_x2;
}
constexpr bool dtype_is_float(DType t) noexcept {
  return t == DType::f64 || t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f8_e4m3 ||
         t == DType::f8_e5m2 || t == DType::f8_e8m0 || t == DType::f8_e4m3fnuz || t == DType::f8_e5m2fnuz || t == DType::f4 ||
         t == DType::f6_e2m3 || t == DType::f6_e3m2 || t == DType::c64 || t == DType::f4_x2;
}
/// safetensors' spelling (F32, BF16, F8_E4M3, BOOL...), used in messages and docs for every format.
constexpr std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::f64: return "F64";  case DType::f32: return "F32";
    case DType::f16: return "F16";  case DType::bf16: return "BF16";
    case DType::f8_e4m3: return "F8_E4M3";  case DType::f8_e5m2: return "F8_E5M2";
    case DType::f8_e8m0: return "F8_E8M0";
    case DType::f8_e4m3fnuz: return "F8_E4M3FNUZ";  case DType::f8_e5m2fnuz: return "F8_E5M2FNUZ";
    case DType::i64: return "I64";  case DType::i32: return "I32";
    case DType::i16: return "I16";  case DType::i8: return "I8";
    case DType::u64: return "U64";  case DType::u32: return "U32";
    case DType::u16: return "U16";  case DType::u8: return "U8";
    case DType::boolean: return "BOOL";
    case DType::f4: return "F4";  case DType::f6_e2m3: return "F6_E2M3";
    case DType::f6_e3m2: return "F6_E3M2";  case DType::c64: return "C64";
    case DType::f4_x2: return "F4_E2M1FN_X2";
  }
  return "?";
}
/// Every DType, for lookups by name (dtype_is_safetensors_tag: all but f4_x2).
inline constexpr DType all_dtypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16, DType::f8_e4m3, DType::f8_e5m2, DType::f8_e8m0,
                                       DType::f8_e4m3fnuz, DType::f8_e5m2fnuz, DType::f4_x2,
                                       DType::i64, DType::i32, DType::i16, DType::i8, DType::u64, DType::u32, DType::u16, DType::u8,
                                       DType::boolean, DType::f4, DType::f6_e2m3, DType::f6_e3m2, DType::c64};

/// Whether dtype_name(t) is a dtype tag of the safetensors format.
constexpr bool dtype_is_safetensors_tag(DType t) noexcept { return t != DType::f4_x2; }

}  // namespace resil::inject::formats

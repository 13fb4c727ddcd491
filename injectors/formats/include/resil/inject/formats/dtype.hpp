// The element types the format parsers report (safetensors' list; torch and NumPy map onto it).
// Separate from resil::ckpt::DType so the parsers stay HDF5-free; the adapters map one onto the
// other (fp8 and bool have no HDF5 counterpart).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace resil::inject::formats {

enum class DType : std::uint8_t { f64, f32, f16, bf16, f8_e4m3, f8_e5m2, i64, i32, i16, i8, u8, boolean };

constexpr std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: case DType::i16: return 2;
    case DType::f8_e4m3: case DType::f8_e5m2: case DType::i8: case DType::u8: case DType::boolean: return 1;
  }
  return 0;
}
constexpr bool dtype_is_float(DType t) noexcept {
  return t == DType::f64 || t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f8_e4m3 ||
         t == DType::f8_e5m2;
}
/// safetensors' spelling (F32, BF16, F8_E4M3, BOOL...), used in messages and docs for every format.
constexpr std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::f64: return "F64";  case DType::f32: return "F32";
    case DType::f16: return "F16";  case DType::bf16: return "BF16";
    case DType::f8_e4m3: return "F8_E4M3";  case DType::f8_e5m2: return "F8_E5M2";
    case DType::i64: return "I64";  case DType::i32: return "I32";
    case DType::i16: return "I16";  case DType::i8: return "I8";
    case DType::u8: return "U8";  case DType::boolean: return "BOOL";
  }
  return "?";
}

}  // namespace resil::inject::formats

// Selection expressions, parsed without HDF5 (so they can be fuzzed on their own):
// globs on dataset paths and bit specifications resolved per dtype.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "resil/ckpt/dtype.hpp"

namespace resil::inject {

/// A glob on absolute dataset paths. `*` and `?` stay inside one path segment, `**` crosses
/// segments, `[abc]`, `[a-z]`, `[!x]` are character classes, `\` escapes, `\xHH` is the byte
/// 0xHH (for names that are not UTF-8, e.g. '/w\xff'). Paths and patterns are bytes. A pattern
/// without a leading '/' matches at any segment boundary ("*.weight" matches "/model/fc1.weight").
class Glob {
public:
  /// Throws UsageError (naming the pattern) on an unterminated class or a trailing escape.
  explicit Glob(std::string pattern);
  bool matches(std::string_view path) const;
  const std::string& pattern() const noexcept { return pattern_; }

private:
  std::string pattern_;
};

/// A bit specification: comma-separated names and numbers/ranges, e.g. "sign,exponent,0-3".
/// Names: all, sign, exponent, exponent-msb, mantissa, mantissa-high (upper half of the mantissa),
/// msb, lsb. Bit 0 is the least significant bit of the stored word.
class BitSpec {
public:
  BitSpec() = default;  // empty: every stored bit
  /// Throws UsageError naming the offending item.
  static BitSpec parse(std::string_view text);
  /// The allowed bits of a word of dtype `t` (bit i set = bit i may be hit). Fields that do not
  /// exist for the dtype (exponent of an integer) contribute nothing.
  std::uint64_t mask_for(ckpt::DType t) const noexcept;
  bool empty() const noexcept { return items_.empty(); }
  const std::string& text() const noexcept { return text_; }

private:
  enum class Kind : std::uint8_t { all, sign, exponent, exponent_msb, mantissa, mantissa_high, msb, lsb, range };
  struct Item {
    Kind kind;
    unsigned lo = 0, hi = 0;  // inclusive, for ranges
  };
  std::vector<Item> items_;
  std::string text_;
};

/// Mask of the low `width` bits.
constexpr std::uint64_t width_mask(unsigned width) noexcept {
  return width >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width) - 1;
}

}  // namespace resil::inject

// Bounds-checked little-endian reads from a byte span, shared by the format parsers. Every read
// past the end throws CorruptInputError naming the format, what was read and its offset, so a
// parser never reads outside its input whatever the length fields say.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "resil/core/error.hpp"

namespace resil::inject::formats {

using Bytes = std::span<const std::byte>;

/// A view of `n` bytes starting at `p` (e.g. a resil::Mapping's data() and size()).
inline Bytes bytes_of(const void* p, std::size_t n) noexcept { return {static_cast<const std::byte*>(p), n}; }
inline std::string_view as_chars(Bytes b) noexcept { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

/// `s` with control characters shown as '?': names quoted in one-line messages.
inline std::string printable(std::string_view s) {
  std::string out;
  for (const char c : s) out += (static_cast<unsigned char>(c) >= 0x20 && c != 0x7F) ? c : '?';
  return out;
}

/// "<format>: <what> at offset <off>": the one shape of every parser error.
[[noreturn]] inline void corrupt(std::string_view format, const std::string& what, std::uint64_t offset) {
  throw CorruptInputError(std::string(format) + ": " + what + " at offset " + std::to_string(offset));
}

template <class T>
T load_le(const std::byte* p) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

/// `[offset, offset + n)` lies inside a buffer of `size` bytes (no overflow whatever the values).
constexpr bool in_bounds(std::uint64_t offset, std::uint64_t n, std::uint64_t size) noexcept {
  return offset <= size && n <= size - offset;
}

/// A cursor over a span; `base` is added to offsets in messages (the span's place in its file).
class Reader {
public:
  Reader(Bytes b, std::string_view format, std::uint64_t base = 0) noexcept : b_(b), format_(format), base_(base) {}

  std::size_t pos() const noexcept { return pos_; }
  std::uint64_t offset() const noexcept { return base_ + pos_; }
  std::size_t left() const noexcept { return b_.size() - pos_; }
  bool done() const noexcept { return pos_ == b_.size(); }
  void seek(std::size_t pos, std::string_view what) {
    if (pos > b_.size()) fail(std::string(what) + " beyond the end (" + std::to_string(b_.size()) + " bytes)");
    pos_ = pos;
  }
  /// The next `n` bytes, or an error naming `what` when fewer are left.
  Bytes take(std::uint64_t n, std::string_view what) {
    if (n > left())
      fail("truncated " + std::string(what) + " (" + std::to_string(n) + " bytes needed, " + std::to_string(left()) + " left)");
    const Bytes r = b_.subspan(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return r;
  }
  template <class T>
  T le(std::string_view what) {
    return load_le<T>(take(sizeof(T), what).data());
  }
  std::uint8_t u8(std::string_view what) { return le<std::uint8_t>(what); }
  [[noreturn]] void fail(const std::string& what) const { corrupt(format_, what, offset()); }
  [[noreturn]] void fail_at(const std::string& what, std::uint64_t pos) const { corrupt(format_, what, base_ + pos); }

private:
  Bytes b_;
  std::string_view format_;
  std::uint64_t base_;
  std::size_t pos_ = 0;
};

}  // namespace resil::inject::formats

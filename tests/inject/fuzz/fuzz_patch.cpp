// libFuzzer target: token-level zlib patching (deflate_patch.cpp) faces the compressed chunks of
// user files. Input: 2 bytes that pick the changes, then a zlib stream. Any stream must either be
// declined or patched into one that inflates to exactly the changed data; garbage must never crash.
#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "resil/inject/deflate_patch.hpp"

namespace {
// Inflate with zlib (an independent inflater); nullopt-like: false when zlib rejects the stream.
bool zlib_inflate(const std::vector<std::byte>& s, std::size_t n, std::vector<std::byte>& out) {
  out.assign(n + 1, std::byte{0});
  uLongf got = out.size();
  if (uncompress(reinterpret_cast<Bytef*>(out.data()), &got, reinterpret_cast<const Bytef*>(s.data()), s.size()) != Z_OK) return false;
  out.resize(got);
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const unsigned pick = data[0] | data[1] << 8;
  const std::vector<std::byte> stream(reinterpret_cast<const std::byte*>(data + 2), reinterpret_cast<const std::byte*>(data + size));
  static libdeflate_decompressor* dec = libdeflate_alloc_decompressor();
  std::vector<std::byte> old(1 << 16), out;
  std::size_t got = 0;
  if (libdeflate_zlib_decompress(dec, stream.data(), stream.size(), old.data(), old.size(), &got) != LIBDEFLATE_SUCCESS) {
    // Not a stream libdeflate takes: the patcher must decline or stay within bounds, never crash.
    const std::vector<std::byte> any(pick % 5000);
    (void)resil::inject::patch_zlib(stream, any, {}, out, {false});
    (void)resil::inject::patch_zlib(stream, any, {}, out);
    return 0;
  }
  old.resize(got);
  // Up to 15 changed positions, each byte XORed with a nonzero value.
  std::vector<std::uint64_t> changed;
  unsigned x = pick * 2654435761u + 1;
  for (unsigned k = 0; got > 0 && k < (pick & 15); ++k) {
    x = x * 1103515245u + 12345u;
    changed.push_back(x % got);
  }
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  std::vector<std::byte> now = old;
  for (auto q : changed) now[q] ^= std::byte{static_cast<unsigned char>(1 + (pick >> 8) % 255)};
  std::vector<std::byte> back;
  // Without its own verification, a patched stream must still inflate to `now` (with zlib, when
  // zlib takes the original: libdeflate accepts a few streams zlib rejects).
  if (resil::inject::patch_zlib(stream, now, changed, out, {false}) && zlib_inflate(stream, got, back) &&
      (!zlib_inflate(out, got, back) || back != now))
    __builtin_trap();
  if (resil::inject::patch_zlib(stream, now, changed, out)) {
    back.assign(got + 1, std::byte{0});
    std::size_t n = 0;
    if (libdeflate_zlib_decompress(dec, out.data(), out.size(), back.data(), back.size(), &n) != LIBDEFLATE_SUCCESS || n != got ||
        !std::equal(now.begin(), now.end(), back.begin()))
      __builtin_trap();
  }
  return 0;
}

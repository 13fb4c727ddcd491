// Token-level patching of a zlib stream (RFC 1950/1951) after a few bytes of its data changed,
// instead of deflating the whole data again. The original stream is decoded into tokens
// (literal / match(length, distance)) without materialising its output; with D the old data, D'
// the new and F the changed positions, a match covering [a, a+L) at distance d stays valid at every
// q with q and q-d outside F (there D'[q] = D[q] = D[q-d] = D'[q-d]); every other position becomes
// the literal D'[q] (a match is split; pieces shorter than 3 become literals); a literal at q in F
// takes D'[q]. Only blocks whose tokens changed are encoded again: in their own Huffman codes
// where those express the new tokens (old bits copied between the changed tokens; a token the
// code lacks goes in a small fixed-Huffman block between two pieces of the block), else with
// fresh dynamic codes (lengths limited to 15 bits, code-length code to 7). Every other block's bits
// are copied verbatim (shifted when an earlier block changed size), BFINAL stays on the last
// block, stored blocks are written again from D', and the zlib trailer carries the Adler-32 of D'.
// The cost is about one decode of the stream instead of a new LZ77 parse, and the size stays
// about the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace resil::inject {

struct PatchOptions {
  // Inflate the patched stream (libdeflate) and compare it with new_data before returning true.
  // Only tests of the patcher itself turn this off.
  bool verify = true;
};

/// Patches `old_stream`, a zlib stream of some data D of new_data.size() bytes, into a zlib stream
/// of `new_data` (D'), which differs from D at most at the byte positions `changed` (strictly
/// ascending, each < new_data.size(); positions where D' equals D may be listed too). On success
/// `out` holds the new stream (resized to it) and the result is true. False, with `out`
/// unspecified, when the patcher does not take the input: not a zlib stream, damaged or truncated
/// anywhere (every read is bounds-checked), a preset dictionary, data of another size, `changed`
/// not ascending or out of range, or (with verify) a patched stream that does not inflate to
/// new_data; the caller then deflates new_data itself. Never throws except std::bad_alloc.
/// Thread-safe: scratch space is per thread and kept between calls.
bool patch_zlib(std::span<const std::byte> old_stream, std::span<const std::byte> new_data,
                std::span<const std::uint64_t> changed, std::vector<std::byte>& out, const PatchOptions& opt = {});

}  // namespace resil::inject

// Token-level zlib patching (see deflate_patch.hpp). Written from RFC 1950/1951.
// Decoding: a 64-bit little-endian bit buffer refilled 8 bytes at a time (bytes past the end read
// as zero and are counted, so a truncated stream is caught at the next block boundary), two-level
// Huffman tables (10-bit primary, 5-bit subtables), one refill per token (a litlen code, its extra
// bits, a distance code and its extra bits take at most 15+5+15+13 = 48 bits). The output is never
// materialised: only its position is tracked, against the sorted change list F. Tokens of a block
// are kept only if the block changed (at most one token per output byte, so the token buffer is
// bounded by the data size), with each changed token's bit range in the old stream (an Edit).
// Encoding a changed block, cheapest first: (1) in its own codes, old bits copied between edits;
// (2) the same, with edits its codes cannot express in small fixed-Huffman blocks between pieces
// of it; (3) afresh with dynamic codes fitted to its new tokens.
#include "resil/inject/deflate_patch.hpp"

#include <libdeflate.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>
#include <new>

namespace resil::inject {

namespace {

using u8 = std::uint8_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;

// ---- RFC 1951 3.2.5: length and distance codes --------------------------------------------------

struct CodeTables {
  std::array<std::uint16_t, 29> len_base{};  // litlen symbol 257 + k
  std::array<u8, 29> len_extra{};
  std::array<u32, 30> dist_base{};
  std::array<u8, 30> dist_extra{};
  std::array<u8, 259> len_sym{};  // match length 3..258 -> k
};

constexpr CodeTables make_code_tables() {
  CodeTables t;
  for (unsigned k = 0; k < 29; ++k) {
    if (k < 8) {
      t.len_base[k] = static_cast<std::uint16_t>(3 + k);
    } else if (k == 28) {
      t.len_base[k] = 258;
    } else {
      const unsigned j = k - 8;
      t.len_extra[k] = static_cast<u8>(j / 4 + 1);
      t.len_base[k] = static_cast<std::uint16_t>(3 + ((4 + (j & 3)) << (j / 4 + 1)));
    }
  }
  for (unsigned k = 0; k < 28; ++k)  // 258 has its own symbol (285), not 284's last value
    for (unsigned l = t.len_base[k]; l < t.len_base[k] + (1u << t.len_extra[k]) && l < 258; ++l) t.len_sym[l] = static_cast<u8>(k);
  t.len_sym[258] = 28;
  for (unsigned s = 0; s < 30; ++s) {
    if (s < 4) {
      t.dist_base[s] = s + 1;
    } else {
      t.dist_extra[s] = static_cast<u8>(s / 2 - 1);
      t.dist_base[s] = ((2 + (s & 1)) << (s / 2 - 1)) + 1;
    }
  }
  return t;
}

constexpr CodeTables kCodes = make_code_tables();

inline unsigned dist_sym(u32 d) {
  if (d <= 4) return d - 1;
  const u32 x = d - 1;
  const unsigned nb = static_cast<unsigned>(std::bit_width(x)) - 1;
  return 2 * nb + ((x >> (nb - 1)) & 1);
}

inline u32 reverse_bits(u32 code, unsigned len) {
  u32 r = 0;
  for (unsigned i = 0; i < len; ++i) r |= ((code >> i) & 1u) << (len - 1 - i);
  return r;
}

constexpr u8 kClenOrder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

// ---- decode tables ------------------------------------------------------------------------------
// Entry: symbol (or subtable offset) << 16 | flags | code length. A primary entry flagged kSub
// points at a 2^(15 - primary bits) entry subtable indexed by the next bits.

constexpr u32 kSub = 0x100, kBad = 0x200;
constexpr unsigned kPrimary = 10, kSubBits = 15 - kPrimary;
constexpr std::size_t kLitCap = (std::size_t{1} << kPrimary) + (std::size_t{288} << kSubBits);
constexpr std::size_t kDistCap = (std::size_t{1} << kPrimary) + (std::size_t{32} << kSubBits);

// Canonical decode table from code lengths (each <= 15). False when over-subscribed; an
// incomplete code leaves kBad entries, which fail when hit.
bool build_decode(const u8* lens, unsigned n, unsigned primary, u32* t, std::size_t cap) {
  unsigned count[16] = {};
  for (unsigned s = 0; s < n; ++s) ++count[lens[s]];
  count[0] = 0;
  int left = 1;
  for (unsigned l = 1; l < 16; ++l) {
    left = 2 * left - static_cast<int>(count[l]);
    if (left < 0) return false;
  }
  u32 next[16] = {};
  u32 code = 0;
  for (unsigned l = 1; l < 16; ++l) {
    code = (code + count[l - 1]) << 1;
    next[l] = code;
  }
  const std::size_t prim = std::size_t{1} << primary;
  const unsigned sub_bits = 15 - primary;
  std::fill(t, t + prim, kBad);
  std::size_t used = prim;
  for (unsigned s = 0; s < n; ++s) {
    const unsigned l = lens[s];
    if (!l) continue;
    const u32 r = reverse_bits(next[l]++, l);
    if (l <= primary) {
      for (std::size_t i = r; i < prim; i += std::size_t{1} << l) t[i] = s << 16 | l;
      continue;
    }
    const std::size_t lo = r & (prim - 1);
    if (!(t[lo] & kSub)) {
      if (used + (std::size_t{1} << sub_bits) > cap) return false;
      t[lo] = static_cast<u32>(used) << 16 | kSub | primary;
      std::fill(t + used, t + used + (std::size_t{1} << sub_bits), kBad);
      used += std::size_t{1} << sub_bits;
    }
    const std::size_t base = t[lo] >> 16;
    for (std::size_t i = r >> primary; i < (std::size_t{1} << sub_bits); i += std::size_t{1} << (l - primary))
      t[base + i] = s << 16 | l;
  }
  return true;
}

struct FixedTables {
  std::array<u32, kLitCap> lit;
  std::array<u32, kDistCap> dist;
  std::array<u8, 288 + 32> lens;  // litlen then distance code lengths (RFC 1951 3.2.6)
  FixedTables() {
    for (unsigned s = 0; s < 288; ++s) lens[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
    for (unsigned s = 288; s < 320; ++s) lens[s] = 5;
    build_decode(lens.data(), 288, kPrimary, lit.data(), lit.size());
    build_decode(lens.data() + 288, 30, kPrimary, dist.data(), dist.size());
  }
};

const FixedTables& fixed_tables() {
  static const FixedTables t;
  return t;
}

// ---- bit reader ---------------------------------------------------------------------------------

struct BitReader {
  const u8* begin = nullptr;
  const u8* p = nullptr;
  const u8* end = nullptr;
  u64 buf = 0;
  unsigned cnt = 0;
  u64 over = 0;  // zero bytes fed past the end

  void refill() {
    if (end - p >= 8) {
      u64 w;
      std::memcpy(&w, p, 8);
      if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
      buf |= w << cnt;
      p += (63 - cnt) >> 3;
      cnt |= 56;
    } else {
      while (cnt <= 56) {
        u64 b = 0;
        if (p < end) b = *p++;
        else ++over;
        buf |= b << cnt;
        cnt += 8;
      }
    }
  }
  u32 peek(unsigned n) const { return static_cast<u32>(buf & ((u64{1} << n) - 1)); }
  void drop(unsigned n) {
    buf >>= n;
    cnt -= n;
  }
  u32 take(unsigned n) {
    const u32 v = peek(n);
    drop(n);
    return v;
  }
  u64 bitpos() const { return static_cast<u64>(p - begin + static_cast<std::ptrdiff_t>(over)) * 8 - cnt; }
  bool past_end() const { return bitpos() > static_cast<u64>(end - begin) * 8; }
  void seek_byte(std::size_t at) {
    p = begin + at;
    buf = 0;
    cnt = 0;
  }
};

// ---- bit writer ---------------------------------------------------------------------------------

struct BitWriter {
  std::vector<std::byte>& v;
  std::size_t at = 0;
  u64 acc = 0;
  unsigned n = 0;  // pending bits in acc, < 8 between calls

  // Room for `more` bytes plus the 8-byte stores of put().
  void reserve(std::size_t more) {
    if (at + more + 16 > v.size()) v.resize(std::max(v.size() * 2, at + more + 16));
  }
  // `bits` holds exactly `cnt` (<= 56) significant bits.
  void put(u64 bits, unsigned cnt) {
    acc |= bits << n;
    n += cnt;
    u64 w = acc;
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    std::memcpy(v.data() + at, &w, 8);
    at += n >> 3;
    acc >>= (n & ~7u);
    n &= 7;
  }
  void align() {
    if (n) put(0, 8 - n);
  }
  void bytes(const u8* s, std::size_t len) {  // byte-aligned only
    if (len) std::memcpy(v.data() + at, s, len);  // s may be null when len is 0
    at += len;
  }
};

// Up to 56 bits of `src` from bit offset `off` (zeros past the end).
inline u64 load_bits(const u8* src, std::size_t size, u64 off, unsigned k) {
  const std::size_t byte = static_cast<std::size_t>(off >> 3);
  u64 w = 0;
  if (byte + 8 <= size) {
    std::memcpy(&w, src + byte, 8);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
  } else {
    for (std::size_t i = 0; byte + i < size && i < 8; ++i) w |= u64{src[byte + i]} << (8 * i);
  }
  return (w >> (off & 7)) & ((u64{1} << k) - 1);
}

// Bits [s, e) of src appended verbatim.
void copy_bits(BitWriter& bw, const u8* src, std::size_t size, u64 s, u64 e) {
  bw.reserve(static_cast<std::size_t>((e - s) / 8 + 16));
  if ((s & 7) == bw.n) {
    // Same phase: once the source is at a byte boundary so is the writer: whole bytes by memcpy.
    const unsigned lead = static_cast<unsigned>((8 - (s & 7)) & 7);
    if (lead <= e - s) {
      if (lead) bw.put(load_bits(src, size, s, lead), lead);
      s += lead;
      const std::size_t nb = static_cast<std::size_t>((e - s) >> 3);
      bw.bytes(src + (s >> 3), nb);
      s += u64{nb} * 8;
    }
  }
  while (e - s >= 56) {
    bw.put(load_bits(src, size, s, 56), 56);
    s += 56;
  }
  if (e > s) bw.put(load_bits(src, size, s, static_cast<unsigned>(e - s)), static_cast<unsigned>(e - s));
}

// ---- Huffman code construction ------------------------------------------------------------------

// Huffman code lengths for `freq` limited to `limit` bits; always a complete code of >= 2
// symbols (a lone used symbol gets a never-used partner), which every inflater accepts.
void huff_lengths(const u32* freq, unsigned n, unsigned limit, u8* lens) {
  std::fill(lens, lens + n, u8{0});
  std::uint16_t sym[288];
  unsigned m = 0;
  for (unsigned s = 0; s < n; ++s)
    if (freq[s]) sym[m++] = static_cast<std::uint16_t>(s);
  if (m < 2) {
    const unsigned a = m ? sym[0] : 0;
    lens[a] = 1;
    lens[a == 0 ? 1 : 0] = 1;
    return;
  }
  std::sort(sym, sym + m, [&](auto a, auto b) { return freq[a] != freq[b] ? freq[a] < freq[b] : a < b; });
  u64 w[576];
  std::uint16_t parent[576];
  for (unsigned i = 0; i < m; ++i) w[i] = freq[sym[i]];
  unsigned leaf = 0, inner = m;
  const unsigned root = 2 * m - 2;
  for (unsigned next = m; next <= root; ++next) {
    // Two smallest of the unused leaves and the built inner nodes [m, next).
    const unsigned a = (leaf < m && (inner >= next || w[leaf] <= w[inner])) ? leaf++ : inner++;
    const unsigned b = (leaf < m && (inner >= next || w[leaf] <= w[inner])) ? leaf++ : inner++;
    w[next] = w[a] + w[b];
    parent[a] = parent[b] = static_cast<std::uint16_t>(next);
  }
  unsigned depth[576];
  depth[root] = 0;
  for (unsigned i = root; i-- > 0;) depth[i] = depth[parent[i]] + 1;
  unsigned count[16] = {};
  for (unsigned i = 0; i < m; ++i) ++count[std::min(depth[i], limit)];
  // Clamping made the Kraft sum exceed 1: move leaves down until it is exactly 1 again.
  u64 total = 0;
  for (unsigned l = 1; l <= limit; ++l) total += u64{count[l]} << (limit - l);
  while (total > (u64{1} << limit)) {
    --count[limit];
    for (unsigned i = limit - 1; i > 0; --i) {
      if (count[i]) {
        --count[i];
        count[i + 1] += 2;
        break;
      }
    }
    --total;
  }
  unsigned idx = 0;  // least frequent symbols get the longest codes
  for (unsigned l = limit; l > 0; --l)
    for (unsigned k = 0; k < count[l]; ++k) lens[sym[idx++]] = static_cast<u8>(l);
}

void canonical_codes(const u8* lens, unsigned n, std::uint16_t* codes) {
  unsigned count[16] = {};
  for (unsigned s = 0; s < n; ++s) ++count[lens[s]];
  count[0] = 0;
  u32 next[16] = {};
  u32 code = 0;
  for (unsigned l = 1; l < 16; ++l) {
    code = (code + count[l - 1]) << 1;
    next[l] = code;
  }
  for (unsigned s = 0; s < n; ++s)
    codes[s] = lens[s] ? static_cast<std::uint16_t>(reverse_bits(next[lens[s]]++, lens[s])) : 0;
}

// ---- per-thread scratch -------------------------------------------------------------------------

// One changed token of a Huffman block: its bits in the old stream and its replacement tokens.
struct Edit {
  u64 bit_begin = 0, bit_end = 0;
  std::size_t tok_begin = 0, tok_end = 0;
};

struct Block {
  u64 bit_begin = 0, bit_end = 0;  // header's first bit .. after end-of-block
  u64 header_end = 0;              // after BTYPE (fixed) or the code lengths (dynamic)
  u64 out_begin = 0, out_end = 0;
  std::size_t tok_begin = 0, tok_end = 0;    // all its new tokens (dirty Huffman blocks only)
  std::size_t edit_begin = 0, edit_end = 0;  // its edits (dirty Huffman blocks only)
  std::size_t lens_at = 0;                   // its 288 litlen + 32 distance code lengths (dirty)
  u8 type = 0;
  bool final = false, dirty = false;
};

struct Work {
  std::vector<Block> blocks;
  std::vector<Edit> edits;
  std::vector<u8> lens;  // code lengths of the dirty blocks, 320 each
  std::unique_ptr<u32[]> tok;  // literal: byte; match: length << 16 | (distance - 1)
  std::size_t tok_cap = 0;
  std::unique_ptr<std::byte[]> check;
  std::size_t check_cap = 0;
  std::array<u32, kLitCap> lit;
  std::array<u32, kDistCap> dist;
  std::array<u32, 128> clen;
  libdeflate_decompressor* dec = nullptr;
  Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work() {
    if (dec) libdeflate_free_decompressor(dec);
  }
};

Work& work() {
  thread_local std::unique_ptr<Work> w = std::make_unique<Work>();
  return *w;
}

constexpr u64 kNone = std::numeric_limits<u64>::max();

// State of one decode pass over the stream.
struct Decoder {
  BitReader br;
  const u8* nd = nullptr;  // new data D'
  u64 total = 0;           // its size
  std::span<const u64> f;  // changed positions, ascending
  std::size_t fi = 0;      // first f >= pos
  u64 pos = 0;             // output position
  u32* tok = nullptr;
  std::size_t nt = 0;
  std::vector<Edit>* edits = nullptr;
  u8 block_lens[288 + 32] = {};  // the current block's litlen and distance code lengths

  u64 next_f() const { return fi < f.size() ? f[fi] : kNone; }
  bool hits(u64 s, u64 len) const {  // F meets [s, s + len)
    if (f.empty() || s + len <= f.front()) return false;
    const auto it = std::lower_bound(f.begin(), f.end(), s);
    return it != f.end() && *it < s + len;
  }

  // Match [pos, pos+len) at distance d touches F: keep the positions q where neither q nor q-d
  // changed as (shorter) matches, every other position becomes the literal D'[q].
  void split(u32 len, u32 d) {
    bool bad[258] = {};
    const u64 a = pos, src = pos - d;
    for (auto it = std::lower_bound(f.begin(), f.end(), a); it != f.end() && *it < a + len; ++it) bad[*it - a] = true;
    for (auto it = std::lower_bound(f.begin(), f.end(), src); it != f.end() && *it < src + len; ++it) bad[*it - src] = true;
    u32 i = 0;
    while (i < len) {
      if (bad[i]) {
        tok[nt++] = static_cast<u8>(nd[a + i]);
        ++i;
        continue;
      }
      u32 j = i;
      while (j < len && !bad[j]) ++j;
      if (j - i >= 3) {
        tok[nt++] = (j - i) << 16 | (d - 1);
      } else {
        for (u32 q = i; q < j; ++q) tok[nt++] = static_cast<u8>(nd[a + q]);
      }
      i = j;
    }
  }

  // Tokens of one Huffman block up to its end-of-block; sets `dirty` when any token changed.
  bool huffman_block(const u32* lit, const u32* dist, bool& dirty) {
    BitReader r = br;  // locals for the hot loop
    u64 p = pos, nf = next_f();
    const u64 ff = f.empty() ? kNone : f.front();
    bool ok = false;
    for (;;) {
      r.refill();
      u32 e = lit[r.buf & ((1u << kPrimary) - 1)];
      if (e & kSub) e = lit[(e >> 16) + ((r.buf >> kPrimary) & ((1u << kSubBits) - 1))];
      if (e & kBad) break;
      r.drop(e & 0xff);
      const u32 sym = e >> 16;
      if (sym < 256) {
        if (p >= total) break;
        u32 t = sym;
        if (p == nf) {
          t = static_cast<u8>(nd[p]);
          dirty = true;
          ++fi;
          nf = next_f();
          const u64 end = r.bitpos();
          edits->push_back({end - (e & 0xff), end, nt, nt + 1});
        }
        tok[nt++] = t;
        ++p;
        continue;
      }
      if (sym == 256) {
        ok = true;
        break;
      }
      const u32 k = sym - 257;
      if (k >= 29) break;
      const u32 len = kCodes.len_base[k] + r.take(kCodes.len_extra[k]);
      u32 de = dist[r.buf & ((1u << kPrimary) - 1)];
      if (de & kSub) de = dist[(de >> 16) + ((r.buf >> kPrimary) & ((1u << kSubBits) - 1))];
      if (de & kBad) break;
      r.drop(de & 0xff);
      const u32 ds = de >> 16;
      if (ds >= 30) break;
      const u32 d = kCodes.dist_base[ds] + r.take(kCodes.dist_extra[ds]);
      if (d > p || len > total - p) break;
      if (nf < p + len || (p - d + len > ff && hits(p - d, len))) {
        pos = p;
        const std::size_t t0 = nt;
        split(len, d);
        dirty = true;
        const u64 end = r.bitpos();
        edits->push_back({end - (e & 0xff) - kCodes.len_extra[k] - (de & 0xff) - kCodes.dist_extra[ds], end, t0, nt});
      } else {
        tok[nt++] = len << 16 | (d - 1);
      }
      p += len;
      while (nf < p) {
        ++fi;
        nf = next_f();
      }
    }
    br = r;
    pos = p;
    return ok;
  }

  // Dynamic block header (after BTYPE) into the work tables.
  bool dynamic_header(Work& w) {
    br.refill();
    const unsigned hlit = br.take(5) + 257, hdist = br.take(5) + 1, hclen = br.take(4) + 4;
    if (hlit > 286 || hdist > 30) return false;
    u8 cl[19] = {};
    for (unsigned i = 0; i < hclen; ++i) {
      br.refill();
      cl[kClenOrder[i]] = static_cast<u8>(br.take(3));
    }
    if (!build_decode(cl, 19, 7, w.clen.data(), w.clen.size())) return false;
    u8 lens[286 + 30];
    const unsigned n = hlit + hdist;
    unsigned i = 0;
    while (i < n) {
      br.refill();
      const u32 e = w.clen[br.peek(7)];
      if (e & kBad) return false;
      br.drop(e & 0xff);
      const u32 sym = e >> 16;
      if (sym < 16) {
        lens[i++] = static_cast<u8>(sym);
        continue;
      }
      u8 v = 0;
      unsigned rep = 0;
      if (sym == 16) {
        if (i == 0) return false;
        v = lens[i - 1];
        rep = 3 + br.take(2);
      } else if (sym == 17) {
        rep = 3 + br.take(3);
      } else {
        rep = 11 + br.take(7);
      }
      if (i + rep > n) return false;
      std::fill(lens + i, lens + i + rep, v);
      i += rep;
    }
    if (lens[256] == 0) return false;
    std::fill(block_lens, block_lens + 320, u8{0});
    std::copy(lens, lens + hlit, block_lens);
    std::copy(lens + hlit, lens + n, block_lens + 288);
    return build_decode(lens, hlit, kPrimary, w.lit.data(), w.lit.size()) &&
           build_decode(lens + hlit, hdist, kPrimary, w.dist.data(), w.dist.size());
  }
};

void put_tokens(BitWriter& bw, const u32* tok, std::size_t nt, const std::uint16_t* lc, const u8* ll,
                const std::uint16_t* dc, const u8* dl) {
  for (std::size_t i = 0; i < nt; ++i) {
    const u32 t = tok[i];
    if (t < 256) {
      bw.put(lc[t], ll[t]);
      continue;
    }
    const u32 len = t >> 16, d = (t & 0xffff) + 1;
    const unsigned k = kCodes.len_sym[len];
    bw.put(lc[257 + k] | u64{len - kCodes.len_base[k]} << ll[257 + k], ll[257 + k] + kCodes.len_extra[k]);
    const unsigned s = dist_sym(d);
    bw.put(dc[s] | u64{d - kCodes.dist_base[s]} << dl[s], dl[s] + kCodes.dist_extra[s]);
  }
}

// A changed block again, with dynamic codes fitted to its new tokens.
void encode_block(BitWriter& bw, const u32* tok, std::size_t nt, bool final) {
  u32 lf[286] = {}, df[30] = {};
  for (std::size_t i = 0; i < nt; ++i) {
    const u32 t = tok[i];
    if (t < 256) {
      ++lf[t];
    } else {
      ++lf[257 + kCodes.len_sym[t >> 16]];
      ++df[dist_sym((t & 0xffff) + 1)];
    }
  }
  lf[256] = 1;
  u8 ll[286], dl[30];
  huff_lengths(lf, 286, 15, ll);
  huff_lengths(df, 30, 15, dl);
  std::uint16_t lc[286], dc[30];
  canonical_codes(ll, 286, lc);
  canonical_codes(dl, 30, dc);

  unsigned hlit = 286, hdist = 30;
  while (hlit > 257 && ll[hlit - 1] == 0) --hlit;
  while (hdist > 1 && dl[hdist - 1] == 0) --hdist;
  u8 seq[286 + 30];
  std::copy(ll, ll + hlit, seq);
  std::copy(dl, dl + hdist, seq + hlit);
  const unsigned n = hlit + hdist;
  // Run-length coded lengths: 16 repeats the previous 3..6 times, 17 / 18 code 3..10 / 11..138 zeros.
  u8 item[286 + 30], extra[286 + 30];
  unsigned ni = 0;
  u32 cf[19] = {};
  for (unsigned i = 0; i < n;) {
    const u8 v = seq[i];
    unsigned run = 1;
    while (i + run < n && seq[i + run] == v) ++run;
    i += run;
    if (v == 0) {
      while (run >= 11) {
        const unsigned r = std::min(run, 138u);
        item[ni] = 18, extra[ni++] = static_cast<u8>(r - 11);
        run -= r;
      }
      if (run >= 3) {
        item[ni] = 17, extra[ni++] = static_cast<u8>(run - 3);
        run = 0;
      }
    } else {
      item[ni] = v, extra[ni++] = 0;
      --run;
      while (run >= 3) {
        const unsigned r = std::min(run, 6u);
        item[ni] = 16, extra[ni++] = static_cast<u8>(r - 3);
        run -= r;
      }
    }
    for (; run > 0; --run) item[ni] = v, extra[ni++] = 0;
  }
  for (unsigned i = 0; i < ni; ++i) ++cf[item[i]];
  u8 cl[19];
  huff_lengths(cf, 19, 7, cl);
  std::uint16_t cc[19];
  canonical_codes(cl, 19, cc);
  unsigned hclen = 19;
  while (hclen > 4 && cl[kClenOrder[hclen - 1]] == 0) --hclen;

  bw.reserve(nt * 6 + 1024);  // tokens <= 48 bits each; header <= 14 + 57 + 316 x 14 bits
  bw.put(final ? 1 : 0, 1);
  bw.put(2, 2);
  bw.put(hlit - 257, 5);
  bw.put(hdist - 1, 5);
  bw.put(hclen - 4, 4);
  for (unsigned i = 0; i < hclen; ++i) bw.put(cl[kClenOrder[i]], 3);
  for (unsigned i = 0; i < ni; ++i) {
    const u8 s = item[i];
    bw.put(cc[s], cl[s]);
    if (s == 16) bw.put(extra[i], 2);
    else if (s == 17) bw.put(extra[i], 3);
    else if (s == 18) bw.put(extra[i], 7);
  }
  put_tokens(bw, tok, nt, lc, ll, dc, dl);
  bw.put(lc[256], ll[256]);
}

// A changed block kept in its own codes: its old bits between edits are copied and each edit's
// tokens are encoded with the block's code. An edit with a token the block's code lacks (a literal
// or length the block never used) closes the block there (its end-of-block code), puts the edit in
// a small fixed-Huffman block and opens the block again (its header bits copied, BFINAL only on the
// last piece). False, with nothing written, when that would add more than ~3% to the block: the
// caller encodes it afresh.
bool encode_edits(BitWriter& bw, const u8* src, std::size_t size, const Block& b, const Work& w) {
  const u8* ll = w.lens.data() + b.lens_at;
  const u8* dl = ll + 288;
  auto representable = [&](const Edit& e) {
    for (std::size_t j = e.tok_begin; j < e.tok_end; ++j) {
      const u32 t = w.tok[j];
      if (t < 256 ? !ll[t] : (!ll[257 + kCodes.len_sym[t >> 16]] || !dl[dist_sym((t & 0xffff) + 1)])) return false;
    }
    return true;
  };
  std::size_t reopen = 0, last_reopen = b.edit_end;
  for (std::size_t i = b.edit_begin; i < b.edit_end; ++i)
    if (!representable(w.edits[i])) ++reopen, last_reopen = i;
  const u64 header = b.header_end - b.bit_begin;
  if (reopen && (header + 64) * reopen * 32 > b.bit_end - b.bit_begin) return false;

  struct Fixed {
    u8 ll[288], dl[32];
    std::uint16_t lc[288], dc[32];
    Fixed() {
      const auto& f = fixed_tables().lens;
      std::copy(f.begin(), f.begin() + 288, ll);
      std::copy(f.begin() + 288, f.end(), dl);
      canonical_codes(ll, 288, lc);
      canonical_codes(dl, 32, dc);
    }
  };
  static const Fixed fixed;
  std::uint16_t lc[288], dc[32];
  canonical_codes(ll, 288, lc);
  canonical_codes(dl, 32, dc);
  u64 at = b.bit_begin;
  if (reopen) {  // the first piece is never the last
    bw.put(0, 1);
    at = b.bit_begin + 1;
  }
  for (std::size_t i = b.edit_begin; i < b.edit_end; ++i) {
    const Edit& e = w.edits[i];
    copy_bits(bw, src, size, at, e.bit_begin);
    at = e.bit_end;
    bw.reserve((e.tok_end - e.tok_begin) * 6 + static_cast<std::size_t>(header / 8) + 32);
    if (representable(e)) {
      put_tokens(bw, w.tok.get() + e.tok_begin, e.tok_end - e.tok_begin, lc, ll, dc, dl);
      continue;
    }
    bw.put(lc[256], ll[256]);
    bw.put(0, 1);
    bw.put(1, 2);
    put_tokens(bw, w.tok.get() + e.tok_begin, e.tok_end - e.tok_begin, fixed.lc, fixed.ll, fixed.dc, fixed.dl);
    bw.put(fixed.lc[256], fixed.ll[256]);
    bw.put(b.final && i == last_reopen ? 1 : 0, 1);
    copy_bits(bw, src, size, b.bit_begin + 1, b.header_end);
  }
  copy_bits(bw, src, size, at, b.bit_end);
  return true;
}

}  // namespace

bool patch_zlib(std::span<const std::byte> old_stream, std::span<const std::byte> new_data,
                std::span<const std::uint64_t> changed, std::vector<std::byte>& out, const PatchOptions& opt) {
  const u8* src = reinterpret_cast<const u8*>(old_stream.data());
  const std::size_t size = old_stream.size();
  const u64 total = new_data.size();
  for (std::size_t i = 0; i < changed.size(); ++i)
    if (changed[i] >= total || (i && changed[i] <= changed[i - 1])) return false;
  // RFC 1950: CM 8, window <= 32 KiB, header check, no preset dictionary; 4-byte trailer.
  if (size < 2 + 1 + 4) return false;
  if ((src[0] & 15) != 8 || (src[0] >> 4) > 7 || (src[0] * 256u + src[1]) % 31 != 0 || (src[1] & 0x20)) return false;

  Work& w = work();
  if (w.tok_cap < total + 1) {
    w.tok = std::make_unique_for_overwrite<u32[]>(total + 1);
    w.tok_cap = total + 1;
  }
  w.blocks.clear();
  w.edits.clear();
  w.lens.clear();
  Decoder dc;
  dc.edits = &w.edits;
  dc.br.begin = src;
  dc.br.end = src + size;
  dc.br.seek_byte(2);
  dc.nd = reinterpret_cast<const u8*>(new_data.data());
  dc.total = total;
  dc.f = changed;
  dc.tok = w.tok.get();
  const FixedTables& fixed = fixed_tables();

  for (bool final = false; !final;) {
    Block b;
    b.bit_begin = dc.br.bitpos();
    b.out_begin = dc.pos;
    dc.br.refill();
    final = dc.br.take(1) != 0;
    b.final = final;
    b.type = static_cast<u8>(dc.br.take(2));
    if (b.type == 0) {
      dc.br.drop(dc.br.cnt & 7);
      dc.br.refill();
      const u32 len = dc.br.take(16), nlen = dc.br.take(16);
      if (len != (~nlen & 0xffff) || dc.br.past_end()) return false;
      const u64 at = dc.br.bitpos() / 8;
      if (at + len > size || len > total - dc.pos) return false;
      dc.br.seek_byte(static_cast<std::size_t>(at + len));
      dc.pos += len;
      while (dc.next_f() < dc.pos) ++dc.fi;
    } else if (b.type == 3) {
      return false;
    } else {
      const u32* lit = fixed.lit.data();
      const u32* dist = fixed.dist.data();
      if (b.type == 2) {
        if (!dc.dynamic_header(w)) return false;
        lit = w.lit.data();
        dist = w.dist.data();
      } else {
        std::copy(fixed.lens.begin(), fixed.lens.end(), dc.block_lens);
      }
      b.header_end = dc.br.bitpos();
      b.tok_begin = dc.nt;
      b.edit_begin = w.edits.size();
      if (!dc.huffman_block(lit, dist, b.dirty)) return false;
      if (!b.dirty) dc.nt = b.tok_begin;  // its bits are copied: its tokens are not needed
      b.tok_end = dc.nt;
      b.edit_end = w.edits.size();
      if (b.dirty) {
        b.lens_at = w.lens.size();
        w.lens.insert(w.lens.end(), dc.block_lens, dc.block_lens + 320);
      }
    }
    b.bit_end = dc.br.bitpos();
    b.out_end = dc.pos;
    if (dc.br.past_end()) return false;
    w.blocks.push_back(b);
  }
  if (dc.pos != total) return false;
  const u64 trailer = (dc.br.bitpos() + 7) / 8;
  if (trailer + 4 > size) return false;

  out.resize(std::max<std::size_t>(out.size(), size + size / 16 + 64));
  BitWriter bw{out};
  bw.reserve(2);
  bw.bytes(src, 2);
  for (const Block& b : w.blocks) {
    if (b.type == 0) {
      // Stored: written again from D' (its padding depends on where it now starts).
      const std::size_t len = static_cast<std::size_t>(b.out_end - b.out_begin);
      bw.reserve(len + 8);
      bw.put(b.final ? 1 : 0, 1);
      bw.put(0, 2);
      bw.align();
      bw.put(len | u64{~len & 0xffff} << 16, 32);
      bw.bytes(dc.nd + b.out_begin, len);
    } else if (b.dirty) {
      if (!encode_edits(bw, src, size, b, w)) encode_block(bw, w.tok.get() + b.tok_begin, b.tok_end - b.tok_begin, b.final);
    } else {
      copy_bits(bw, src, size, b.bit_begin, b.bit_end);
    }
  }
  bw.align();
  bw.reserve(4);
  const u32 adler = libdeflate_adler32(1, new_data.data(), new_data.size());
  const u8 tail[4] = {static_cast<u8>(adler >> 24), static_cast<u8>(adler >> 16), static_cast<u8>(adler >> 8),
                      static_cast<u8>(adler)};
  bw.bytes(tail, 4);
  out.resize(bw.at);

  if (opt.verify) {
    if (!w.dec && !(w.dec = libdeflate_alloc_decompressor())) throw std::bad_alloc();
    if (w.check_cap < total) {
      w.check = std::make_unique_for_overwrite<std::byte[]>(total);
      w.check_cap = total;
    }
    if (libdeflate_zlib_decompress(w.dec, out.data(), out.size(), w.check.get(), total, nullptr) != LIBDEFLATE_SUCCESS)
      return false;
    if (total && std::memcmp(w.check.get(), new_data.data(), total) != 0) return false;
  }
  return true;
}

}  // namespace resil::inject

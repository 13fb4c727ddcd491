// .npy headers (numpy/lib/format.py and NEP 1) and .npz archives of them.
#include "resil/inject/formats/npy.hpp"

#include <zlib.h>

#include <algorithm>
#include <optional>
#include <string_view>

namespace resil::inject::formats {
namespace {

constexpr std::string_view kFormat = "npy";
constexpr std::uint64_t kMaxHeader = 1 << 20;

std::optional<DType> dtype_from(std::string_view descr, bool& big_endian) {
  if (descr.size() != 3) return std::nullopt;
  const char order = descr[0];
  const std::string_view kind = descr.substr(1);
  struct Entry { std::string_view kind; DType dtype; };
  static constexpr Entry table[] = {{"f8", DType::f64}, {"f4", DType::f32}, {"f2", DType::f16}, {"i8", DType::i64},
                                    {"i4", DType::i32}, {"i2", DType::i16}, {"i1", DType::i8}, {"u8", DType::u64},
                                    {"u4", DType::u32}, {"u2", DType::u16}, {"u1", DType::u8}, {"b1", DType::boolean}};
  for (const auto& e : table) {
    if (e.kind != kind) continue;
    // One-byte types have no byte order ('|'); numpy also accepts '<' and '>' for them.
    if (order != '<' && order != '>' && !(order == '|' && dtype_size(e.dtype) == 1)) return std::nullopt;
    big_endian = order == '>' && dtype_size(e.dtype) > 1;
    return e.dtype;
  }
  return std::nullopt;
}

// The dict literal np.save writes: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class Literal {
public:
  Literal(std::string_view s, std::uint64_t base) : s_(s), base_(base) {}

  void parse(NpyHeader& h) {
    expect('{');
    bool descr = false, fortran = false, shape = false;
    for (;;) {
      if (peek() == '}') break;
      const std::size_t key_at = i_;
      const std::string key = string();
      expect(':');
      if (key == "descr" && !descr) {
        descr = true;
        if (peek() == '[') fail("structured dtype (a list descr) is not supported");
        const std::size_t at = i_;
        const std::string d = string();
        const auto t = dtype_from(d, h.big_endian);
        if (!t) i_ = at, fail("unsupported dtype '" + printable(d) + "'");
        h.dtype = *t;
      } else if (key == "fortran_order" && !fortran) {
        fortran = true;
        if (word("True")) h.fortran_order = true;
        else if (word("False")) h.fortran_order = false;
        else fail("fortran_order is not True or False");
      } else if (key == "shape" && !shape) {
        shape = true;
        tuple(h.shape);
      } else {
        i_ = key_at;
        fail("unexpected or repeated key '" + printable(key) + "'");
      }
      if (peek() == ',') ++i_;
      else if (peek() != '}') fail("expected ',' or '}'");
    }
    ++i_;
    if (!descr || !fortran || !shape) fail("header lacks descr, fortran_order or shape");
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
    if (i_ + 1 != s_.size() || s_[i_] != '\n') fail("header does not end with spaces and a newline");
  }

private:
  [[noreturn]] void fail(const std::string& what) const { corrupt(kFormat, what, base_ + i_); }
  char peek() {
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
    if (i_ == s_.size()) fail("truncated header");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool word(std::string_view w) {
    peek();
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  std::string string() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const std::size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\') fail("escape in a header string");
      ++i_;
    }
    if (i_ == s_.size()) fail("unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  void tuple(std::vector<std::uint64_t>& out) {
    expect('(');
    for (;;) {
      if (peek() == ')') break;
      if (s_[i_] < '0' || s_[i_] > '9') fail("shape entry is not a non-negative integer");
      std::uint64_t v = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9')
        if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, static_cast<unsigned>(s_[i_++] - '0'), &v))
          fail("shape entry overflows 64 bits");
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 longs
      out.push_back(v);
      if (peek() == ',') ++i_;
      else if (peek() != ')') fail("expected ',' or ')' in shape");
    }
    ++i_;
  }

  std::string_view s_;
  std::uint64_t base_;
  std::size_t i_ = 0;
};

// The first `n` bytes of a raw deflate stream (fewer when it ends first): enough for a header.
std::vector<std::byte> inflate_prefix(Bytes compressed, std::size_t n, const std::string& where) {
  std::vector<std::byte> out(n);
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw Error("zlib inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(compressed.data()));
  z.avail_in = static_cast<uInt>(std::min<std::size_t>(compressed.size(), 0xFFFFFFFFu));
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(n);
  int rc = Z_OK;
  while (z.avail_out > 0 && rc == Z_OK) rc = inflate(&z, Z_NO_FLUSH);
  inflateEnd(&z);
  if (rc != Z_OK && rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && z.avail_out == 0))
    throw CorruptInputError("npz: " + where + ": damaged deflate stream (" + (z.msg ? z.msg : "zlib error") + ")");
  out.resize(n - z.avail_out);
  return out;
}

std::uint64_t header_bytes(Bytes npy, std::uint64_t base) {
  Reader r(npy, kFormat, base);
  const Bytes magic = r.take(6, "magic");
  if (as_chars(magic) != std::string_view("\x93NUMPY", 6)) r.fail_at("bad magic (not a .npy)", 0);
  const auto major = r.u8("version");
  r.u8("version");
  if (major < 1 || major > 3) r.fail_at("unsupported version " + std::to_string(major), 6);
  const std::uint64_t len = major == 1 ? r.le<std::uint16_t>("header length") : r.le<std::uint32_t>("header length");
  if (len > kMaxHeader) r.fail_at("header length " + std::to_string(len) + " exceeds the 1 MiB limit", 8);
  return r.pos() + len;
}

}  // namespace

NpyHeader parse_npy_header(Bytes npy, std::uint64_t base) {
  const std::uint64_t end = header_bytes(npy, base);
  NpyHeader h;
  h.major = static_cast<unsigned>(npy[6]);
  h.minor = static_cast<unsigned>(npy[7]);
  const std::size_t start = h.major == 1 ? 10 : 12;
  if (end > npy.size()) corrupt(kFormat, "truncated header (" + std::to_string(end) + " bytes needed, " + std::to_string(npy.size()) + " there)", base + npy.size());
  Literal(as_chars(npy.subspan(start, static_cast<std::size_t>(end) - start)), base + start).parse(h);
  h.data_offset = end;
  h.data_size = dtype_size(h.dtype);
  for (const auto d : h.shape)
    if (__builtin_mul_overflow(h.data_size, d, &h.data_size)) corrupt(kFormat, "shape overflows 64 bits", base + start);
  return h;
}

NpyHeader parse_npy(Bytes file) {
  const NpyHeader h = parse_npy_header(file);
  if (file.size() - h.data_offset != h.data_size)
    corrupt(kFormat, std::to_string(file.size() - h.data_offset) + " data bytes for a shape and dtype of " + std::to_string(h.data_size), h.data_offset);
  return h;
}

Npz parse_npz(Bytes file) {
  Npz npz;
  npz.zip = parse_zip(file);
  for (std::size_t i = 0; i < npz.zip.entries.size(); ++i) {
    const ZipEntry& e = npz.zip.entries[i];
    const std::string where = "member '" + printable(e.name) + "'";
    if (e.name.size() < 4 || e.name.compare(e.name.size() - 4, 4, ".npy") != 0)
      corrupt("npz", where + " is not a .npy", e.header_offset);
    // Deflate expands at most 1032:1 (258 bytes per 2 bits): a member declaring more would size the
    // buffer its bytes are inflated into (a 185-byte file declaring 4 GiB took 4 GiB).
    if (e.method == ZipMethod::deflated && e.uncompressed_size / 1032 > e.compressed_size + 1)
      corrupt("npz", where + " declares " + std::to_string(e.uncompressed_size) + " bytes, more than its " +
                         std::to_string(e.compressed_size) + " deflated bytes can hold", e.header_offset);
    NpzMember m;
    m.name = e.name.substr(0, e.name.size() - 4);
    m.entry = i;
    try {
      if (e.method == ZipMethod::stored) {
        m.header = parse_npy_header(file.subspan(static_cast<std::size_t>(e.data_offset), static_cast<std::size_t>(e.compressed_size)), e.data_offset);
        m.file_offset = e.data_offset + m.header.data_offset;
      } else {
        const Bytes data = file.subspan(static_cast<std::size_t>(e.data_offset), static_cast<std::size_t>(e.compressed_size));
        const auto prefix = inflate_prefix(data, 12, where);
        const std::uint64_t need = header_bytes(prefix, 0);
        const auto head = inflate_prefix(data, static_cast<std::size_t>(need), where);
        m.header = parse_npy_header(head, 0);
      }
    } catch (const CorruptInputError& err) {
      throw CorruptInputError("npz: " + where + ": " + err.what());
    }
    if (e.uncompressed_size < m.header.data_offset || e.uncompressed_size - m.header.data_offset != m.header.data_size)
      corrupt("npz", where + " holds " + std::to_string(e.uncompressed_size) + " bytes, its header says " +
                         std::to_string(m.header.data_offset) + " + " + std::to_string(m.header.data_size), e.header_offset);
    npz.members.push_back(std::move(m));
  }
  return npz;
}

}  // namespace resil::inject::formats

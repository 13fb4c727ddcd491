#include "resil/data/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "resil/core/error.hpp"

namespace resil::data {

namespace {

struct GzCloser {
  void operator()(gzFile f) const noexcept { gzclose(f); }
};
using Gz = std::unique_ptr<gzFile_s, GzCloser>;

/// Reads exactly `n` bytes or explains why not, with the decompressed byte offset.
class Reader {
public:
  explicit Reader(const std::filesystem::path& p) : name_(p.string()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec)) throw IoError(name_ + ": no such file");
    f_.reset(gzopen(name_.c_str(), "rb"));
    if (!f_) throw IoError(name_ + ": cannot open: " + std::strerror(errno));
  }
  /// Returns the number of bytes read (< n only at end of stream).
  std::size_t read(void* dst, std::size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    std::size_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));
      const int r = gzread(f_.get(), out + done, chunk);
      if (r < 0) {
        int code = 0;
        const char* msg = gzerror(f_.get(), &code);
        throw CorruptInputError(name_ + ": broken compressed stream near byte " + std::to_string(offset_ + done) + ": " +
                                (msg ? msg : "unknown zlib error"));
      }
      if (r == 0) break;
      done += static_cast<std::size_t>(r);
    }
    offset_ += done;
    return done;
  }
  std::size_t offset() const noexcept { return offset_; }
  const std::string& name() const noexcept { return name_; }

private:
  std::string name_;
  Gz f_;
  std::size_t offset_ = 0;
};

std::uint32_t be32(const unsigned char* b) {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
}

}  // namespace

IdxArray read_idx_prefix(const std::filesystem::path& p, std::size_t max_items, std::uint32_t* declared_items) {
  Reader r(p);
  unsigned char magic[4];
  if (r.read(magic, 4) != 4) throw CorruptInputError(r.name() + ": truncated IDX header at byte " + std::to_string(r.offset()));
  if (magic[0] != 0 || magic[1] != 0)
    throw CorruptInputError(r.name() + ": not an IDX file (bad magic at byte 0)");
  if (magic[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02X", magic[2]);
    throw CorruptInputError(r.name() + ": unsupported IDX element type " + type + " at byte 2 (only unsigned bytes, 0x08)");
  }
  const int ndim = magic[3];
  if (ndim < 1 || ndim > 4) throw CorruptInputError(r.name() + ": IDX rank " + std::to_string(ndim) + " at byte 3 is not 1..4");
  IdxArray a;
  std::uint64_t total = 1;
  for (int d = 0; d < ndim; ++d) {
    unsigned char b[4];
    if (r.read(b, 4) != 4) throw CorruptInputError(r.name() + ": truncated IDX header at byte " + std::to_string(r.offset()));
    a.dims.push_back(be32(b));
    total *= a.dims.back();
    if (total > (std::uint64_t{1} << 34)) throw CorruptInputError(r.name() + ": IDX dimensions too large at byte " + std::to_string(r.offset() - 4));
  }
  if (declared_items) *declared_items = a.dims[0];
  // A prefix: only the bytes of the first max_items items are decompressed (an evaluation on 2,000
  // test samples need not inflate the rest; the training split is never read by eval).
  const bool prefix = max_items > 0 && max_items < a.dims[0];
  if (prefix) {
    total = total / a.dims[0] * max_items;
    a.dims[0] = static_cast<std::uint32_t>(max_items);
  }
  // The header alone must not set memory use (a 7.8 KB file claiming 2,000,000 images would make a
  // reader that trusts it allocate and zero 1.5 GB before its payload is found short): the payload
  // is read in chunks of at most 64 MiB, so memory follows the bytes the stream really holds (the
  // vector grows geometrically: at most twice them plus a chunk). Fashion-MNIST's 47 MB training
  // images are one chunk.
  constexpr std::uint64_t chunk = std::uint64_t{64} << 20;
  const std::size_t start = r.offset();
  std::size_t got = 0;
  while (got < total) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(total - got, chunk));
    a.data.resize(got + want);
    const std::size_t n = r.read(a.data.data() + got, want);
    got += n;
    if (n < want) break;
  }
  if (got != total)
    throw CorruptInputError(r.name() + ": truncated IDX payload: expected " + std::to_string(total) + " bytes after the header, file ends at byte " +
                            std::to_string(start + got));
  unsigned char extra;
  if (!prefix && r.read(&extra, 1) != 0)
    throw CorruptInputError(r.name() + ": trailing bytes after the IDX payload at byte " + std::to_string(start + total));
  return a;
}

IdxArray read_idx(const std::filesystem::path& p) { return read_idx_prefix(p, 0, nullptr); }

void write_idx(const std::filesystem::path& p, const IdxArray& a) {
  const bool gz = p.extension() == ".gz";
  Gz f(gzopen(p.string().c_str(), gz ? "wb6" : "wbT"));
  if (!f) throw IoError(p.string() + ": cannot create: " + std::strerror(errno));
  std::vector<unsigned char> hdr = {0, 0, 0x08, static_cast<unsigned char>(a.dims.size())};
  for (auto d : a.dims)
    for (int s = 24; s >= 0; s -= 8) hdr.push_back(static_cast<unsigned char>(d >> s));
  if (gzwrite(f.get(), hdr.data(), static_cast<unsigned>(hdr.size())) != static_cast<int>(hdr.size()) ||
      (!a.data.empty() && gzwrite(f.get(), a.data.data(), static_cast<unsigned>(a.data.size())) != static_cast<int>(a.data.size())))
    throw IoError(p.string() + ": write failed");
  if (gzclose(f.release()) != Z_OK) throw IoError(p.string() + ": close failed");
}

}  // namespace resil::data

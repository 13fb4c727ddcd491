// NumPy .npy (one array, named "/array") and .npz (one array per member, named by the member
// without ".npy"). A Fortran-ordered array is exposed with its shape reversed: its bytes are the C
// order of the transpose, so flat indices stay stored-word offsets. Stored .npz members are edited
// in place (ZipStorage keeps their CRC-32s right); deflated ones (np.savez_compressed) are staged:
// inflated on first use, and a rewrite re-deflates each changed member and rewrites the archive.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "format_storages.hpp"
#include "resil/inject/formats/npy.hpp"
#include "zip_storage.hpp"

namespace resil::inject {

namespace {

std::vector<std::uint64_t> stored_shape(const formats::NpyHeader& h) {
  auto shape = h.shape;
  if (h.fortran_order) std::reverse(shape.begin(), shape.end());
  return shape;
}

class NpyStorage final : public ExtentStorage {
public:
  NpyStorage(const std::string& path, Access access) : ExtentStorage(path, access) {
    const Mapping m = map_for_parsing(path);
    const auto h = parse_named(path, [&] { return formats::parse_npy(formats::bytes_of(m.data(), m.size())); });
    Item it;
    it.tensor = make_tensor("array", TensorRole::other, h.dtype, stored_shape(h), h.big_endian);
    it.extent = {h.data_offset, h.data_size};
    it.size = static_cast<unsigned>(formats::dtype_size(h.dtype));
    it.big_endian = h.big_endian;
    add(std::move(it));
  }
  Format format() const noexcept override { return Format::npy; }
};

class NpzStorage final : public ZipStorage {
public:
  NpzStorage(const std::string& path, Access access) : ZipStorage(path, access) {
    const Mapping m = map_for_parsing(path);
    auto npz = parse_named(path, [&] { return formats::parse_npz(formats::bytes_of(m.data(), m.size())); });
    zip_ = std::move(npz.zip);
    for (const auto& mem : npz.members) {
      const auto& e = zip_.entries[mem.entry];
      Item it;
      it.tensor = make_tensor(mem.name, TensorRole::other, mem.header.dtype, stored_shape(mem.header), mem.header.big_endian);
      it.size = static_cast<unsigned>(formats::dtype_size(mem.header.dtype));
      it.big_endian = mem.header.big_endian;
      it.part = mem.entry;
      if (e.method == formats::ZipMethod::deflated) {
        it.tensor.staged = true;
        it.tensor.info.filters = {"deflate"};
        it.tensor.info.stored_bytes = e.compressed_size;
        it.extent = {e.data_offset, 0};
        headers_[mem.entry] = mem.header.data_offset;
      } else {
        it.extent = {mem.file_offset, mem.header.data_size};
      }
      add(std::move(it));
    }
  }
  Format format() const noexcept override { return Format::npz; }

protected:
  std::vector<std::byte> load_staged(const Item& it) override {
    const auto npy = inflate_member(it.part);
    const std::uint64_t at = headers_.at(it.part);
    return {npy.begin() + static_cast<std::ptrdiff_t>(at), npy.end()};
  }
  void rewrite_staged() override;

private:
  std::vector<std::byte> inflate_member(std::size_t entry);
  std::map<std::size_t, std::uint64_t> headers_;  // deflated members: their .npy header's length
};

std::vector<std::byte> NpzStorage::inflate_member(std::size_t entry) {
  const auto& e = zip_.entries[entry];
  // Staged members are held in memory whole, and zlib counts in 32 bits.
  if (e.compressed_size >= 0xFFFFFFFF || e.uncompressed_size >= 0xFFFFFFFF)
    throw UsageError(path_ + ": npz member " + e.name + " is 4 GiB or larger: deflated members that large are not supported");
  std::vector<std::byte> in(e.compressed_size), out(e.uncompressed_size);
  raw_.read(in.data(), in.size(), e.data_offset, path_ + ": member " + e.name);
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw Error("zlib inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_FINISH);
  const bool whole = rc == Z_STREAM_END && z.avail_out == 0;
  inflateEnd(&z);
  if (!whole) throw CorruptInputError(path_ + ": npz: member " + e.name + ": damaged deflate stream or wrong size");
  if (formats::crc32(out) != e.crc32) throw CorruptInputError(path_ + ": npz: member " + e.name + ": CRC-32 mismatch");
  return out;
}

// zlib's raw deflate with the parameters of Python's zipfile (level 6, 32 KiB window, memLevel 8):
// with the same zlib, a member restored to its old bytes deflates to its old bytes.
std::vector<std::byte> deflate_raw(const std::vector<std::byte>& in, const std::string& where) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw Error("zlib deflateInit2 failed");
  std::vector<std::byte> out(deflateBound(&z, static_cast<uLong>(in.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw Error(where + ": zlib deflate failed");
  return out;
}

// Each changed deflated member: its .npy bytes with the edited data, deflated again; then the
// archive is written whole (this is a private copy: apply renames it over the file afterwards).
void NpzStorage::rewrite_staged() {
  std::map<std::size_t, ZipMember> repl;
  for (const auto& it : items()) {
    if (!it.tensor.staged || !staged_changed(it)) continue;
    auto npy = inflate_member(it.part);
    const auto& data = staged(it);
    std::copy(data.begin(), data.end(), npy.begin() + static_cast<std::ptrdiff_t>(headers_.at(it.part)));
    ZipMember m;
    m.size = npy.size();
    m.crc = formats::crc32(npy);
    m.data = deflate_raw(npy, where(it));
    repl.emplace(it.part, std::move(m));
  }
  if (repl.empty()) return;
  std::vector<std::byte> old(raw_.file_size());
  raw_.read(old.data(), old.size(), 0, path_);
  const auto out = rewrite_zip(old, zip_, repl, path_);
  raw_.close(false, path_);  // its words are in `out`; the file is written anew below
  const Fd fd{::open(path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC)};
  if (!fd) throw IoError(path_ + ": cannot open for writing: " + std::strerror(errno));
  for (std::size_t done = 0; done < out.size();) {
    const ssize_t w = ::write(fd.get(), out.data() + done, out.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw IoError(path_ + ": write failed: " + std::strerror(errno));
    done += static_cast<std::size_t>(w);
  }
  if (sync() && ::fsync(fd.get()) != 0) throw IoError(path_ + ": fsync failed: " + std::strerror(errno));
}

}  // namespace

std::unique_ptr<Storage> open_npy(const std::string& path, Access access) { return std::make_unique<NpyStorage>(path, access); }
std::unique_ptr<Storage> open_npz(const std::string& path, Access access) { return std::make_unique<NpzStorage>(path, access); }

}  // namespace resil::inject

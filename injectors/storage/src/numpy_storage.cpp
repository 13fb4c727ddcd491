// NumPy .npy (one array, named "/array") and .npz (one array per member, named by the member
// without ".npy"). A Fortran-ordered array is exposed with its shape reversed: its bytes are the C
// order of the transpose, so flat indices stay stored-word offsets. Stored .npz members are edited
// in place (ZipStorage keeps their CRC-32s right); deflated ones (np.savez_compressed) are staged:
// inflated on use (one unedited member at a time: reading another evicts it), and a rewrite
// re-deflates each changed member and rewrites the archive.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
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

// A Fortran-ordered array as numpy.load gives it (what diff compares): its own shape, read through
// column-major strides from the stored bytes, which the tensor exposes as the transpose.
void add_fortran_view(Tensor& t, const formats::NpyHeader& h) {
  if (!h.fortran_order || h.shape.size() < 2) return;
  View v;
  v.name = t.info.path;
  v.dtype = t.info.dtype;
  v.type_desc = t.info.type_desc;
  v.bits = static_cast<unsigned>(formats::dtype_size(h.dtype) * 8);
  v.big_endian = t.info.big_endian;
  v.shape = h.shape;
  std::int64_t step = 1;
  for (const auto d : h.shape) {
    v.stride.push_back(step);
    step *= static_cast<std::int64_t>(d);  // < numel, which the header's check keeps below 2^63
  }
  t.views.push_back(std::move(v));
}

class NpyStorage final : public ExtentStorage {
public:
  NpyStorage(const std::string& path, Access access) : ExtentStorage(path, access) {
    const Mapping m = map_for_parsing(path);
    const auto h = parse_named(path, [&] { return formats::parse_npy(formats::bytes_of(m.data(), m.size())); });
    Item it;
    it.tensor = make_tensor("array", TensorRole::other, h.dtype, stored_shape(h), h.big_endian);
    add_fortran_view(it.tensor, h);
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
      add_fortran_view(it.tensor, mem.header);
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
  // The member's array bytes, inflated straight into the vector returned (the .npy header apart,
  // kept for a rewrite): one buffer of the array's size, no copy. ExtentStorage holds one clean
  // member at a time.
  std::vector<std::byte> load_staged(const Item& it) override {
    std::vector<std::byte> header(headers_.at(it.part));
    auto data = inflate_member(it.part, header);
    npy_headers_[it.part] = std::move(header);
    return data;
  }
  void rewrite_staged() override;

private:
  std::vector<std::byte> inflate_member(std::size_t entry, std::vector<std::byte>& header);
  std::map<std::size_t, std::uint64_t> headers_;  // deflated members: their .npy header's length
  std::map<std::size_t, std::vector<std::byte>> npy_headers_;  // loaded members: their .npy header's bytes
};

// Inflates member `entry`: its first header.size() bytes (the .npy header) into `header`, the rest
// into the vector returned. The deflated bytes are read in slices, not whole; the CRC-32 is taken
// as the bytes come.
std::vector<std::byte> NpzStorage::inflate_member(std::size_t entry, std::vector<std::byte>& header) {
  const auto& e = zip_.entries[entry];
  // Staged members are held in memory whole, and zlib counts in 32 bits.
  if (e.compressed_size >= 0xFFFFFFFF || e.uncompressed_size >= 0xFFFFFFFF)
    throw UsageError(path_ + ": npz member " + e.name + " is 4 GiB or larger: deflated members that large are not supported");
  const std::string where = path_ + ": npz: member " + e.name;
  if (header.size() > e.uncompressed_size) throw CorruptInputError(where + ": damaged deflate stream or wrong size");
  std::vector<std::byte> out(e.uncompressed_size - header.size()), in(std::min<std::uint64_t>(e.compressed_size, std::uint64_t{1} << 20));
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw Error("zlib inflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  std::uint64_t got = 0;
  auto feed = [&] {
    if (z.avail_in != 0 || got == e.compressed_size) return;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(in.size(), e.compressed_size - got));
    raw_.read(in.data(), n, e.data_offset + got, path_ + ": member " + e.name);
    got += n;
    z.next_in = reinterpret_cast<Bytef*>(in.data());
    z.avail_in = static_cast<uInt>(n);
  };
  int rc = Z_OK;
  // The header, the array, then one byte more, which the stream must end before.
  std::byte extra{};
  for (std::span<std::byte> to : {std::span<std::byte>(header), std::span<std::byte>(out), std::span<std::byte>(&extra, 1)}) {
    z.next_out = reinterpret_cast<Bytef*>(to.data());
    z.avail_out = static_cast<uInt>(to.size());
    while (z.avail_out > 0 && rc == Z_OK) {
      feed();
      rc = inflate(&z, Z_NO_FLUSH);  // Z_BUF_ERROR: input used up short of the end
    }
  }
  if (rc != Z_STREAM_END || z.total_out != e.uncompressed_size) throw CorruptInputError(where + ": damaged deflate stream or wrong size");
  if (formats::crc32(out, formats::crc32(header)) != e.crc32) throw CorruptInputError(where + ": CRC-32 mismatch");
  return out;
}

// zlib's raw deflate with the parameters of Python's zipfile (level 6, 32 KiB window, memLevel 8)
// of `head` then `rest` as one stream: with the same zlib, a member restored to its old bytes
// deflates to its old bytes.
std::vector<std::byte> deflate_raw(std::span<const std::byte> head, std::span<const std::byte> rest, const std::string& where) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw Error("zlib deflateInit2 failed");
  std::vector<std::byte> out(deflateBound(&z, static_cast<uLong>(head.size() + rest.size())));
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(head.data()));
  z.avail_in = static_cast<uInt>(head.size());
  int rc = deflate(&z, Z_NO_FLUSH);
  if (rc == Z_OK) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(rest.data()));
    z.avail_in = static_cast<uInt>(rest.size());
    rc = deflate(&z, Z_FINISH);
  }
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw Error(where + ": zlib deflate failed");
  return out;
}

// Each changed deflated member: its .npy header and edited data deflated again (no copy of the
// member made); then the archive is written whole (this is a private copy: apply renames it over
// the file afterwards).
void NpzStorage::rewrite_staged() {
  std::map<std::size_t, ZipMember> repl;
  for (const auto& it : items()) {
    if (!it.tensor.staged || !staged_changed(it)) continue;
    const auto& header = npy_headers_.at(it.part);  // loaded: an edit changed it
    const auto& data = staged(it);
    ZipMember m;
    m.size = header.size() + data.size();
    m.crc = formats::crc32(data, formats::crc32(header));
    m.data = deflate_raw(header, data, where(it));
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

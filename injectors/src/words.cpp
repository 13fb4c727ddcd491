#include "resil/inject/words.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <vector>

namespace resil::inject {

namespace h5 = ckpt::h5;

std::uint64_t load_word(const std::byte* p, unsigned size, bool be) noexcept {
  std::uint64_t w = 0;
  for (unsigned i = 0; i < size; ++i) {
    const unsigned shift = 8 * (be ? size - 1 - i : i);
    w |= std::uint64_t(std::to_integer<unsigned>(p[i])) << shift;
  }
  return w;
}

void store_word(std::byte* p, unsigned size, bool be, std::uint64_t w) noexcept {
  for (unsigned i = 0; i < size; ++i) {
    const unsigned shift = 8 * (be ? size - 1 - i : i);
    p[i] = static_cast<std::byte>((w >> shift) & 0xff);
  }
}

WordFile::WordFile(const std::string& path, bool writable) : path_(path), writable_(writable) {
  file_ = h5::open_file(path, writable ? h5::Mode::read_write : h5::Mode::read);
  fd_ = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd_ < 0) throw IoError(path + ": cannot open: " + std::strerror(errno));
  h5::SilenceErrors quiet;
  h5::PropList fcpl(H5Fget_create_plist(file_));
  hsize_t ub = 0;
  if (fcpl.valid() && H5Pget_userblock(fcpl, &ub) >= 0) base_ = ub;
}

WordFile::~WordFile() {
  if (fd_ >= 0) ::close(fd_);
}

void WordFile::close() {
  if (file_.valid()) {
    h5::SilenceErrors quiet;
    if (writable_ && H5Fflush(file_, H5F_SCOPE_LOCAL) < 0) h5::throw_error(path_ + ": flush failed");
    const hid_t id = file_.release();
    if (H5Fclose(id) < 0) h5::throw_error(path_ + ": close failed");
  }
  if (fd_ >= 0) {
    const int fd = std::exchange(fd_, -1);
    if (writable_ && ::fsync(fd) != 0) {
      ::close(fd);
      throw IoError(path_ + ": fsync failed: " + std::strerror(errno));
    }
    ::close(fd);
  }
}

unsigned WordFile::width_of(const std::string& dataset) {
  h5::Dataset d = h5::open_dataset(file_, dataset, path_);
  h5::Datatype t(H5Dget_type(d));
  return static_cast<unsigned>(H5Tget_size(t) * 8);
}

namespace {

struct Geometry {
  std::vector<hsize_t> shape, chunk;
  unsigned size = 0;
  bool be = false;
};

std::vector<hsize_t> unravel(std::uint64_t flat, const std::vector<hsize_t>& shape) {
  std::vector<hsize_t> nd(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    nd[d] = flat % shape[d];
    flat /= shape[d];
  }
  return nd;
}

void pread_all(int fd, void* buf, std::size_t n, std::uint64_t off, const std::string& what) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw IoError(what + ": read failed" + (r < 0 ? std::string(": ") + std::strerror(errno) : " (short file)"));
    p += r;
    n -= static_cast<std::size_t>(r);
    off += static_cast<std::uint64_t>(r);
  }
}

void pwrite_all(int fd, const void* buf, std::size_t n, std::uint64_t off, const std::string& what) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t r = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw IoError(what + ": write failed: " + std::strerror(errno));
    p += r;
    n -= static_cast<std::size_t>(r);
    off += static_cast<std::uint64_t>(r);
  }
}

}  // namespace

void WordFile::edit(const std::string& dataset, std::vector<std::uint64_t> indices, const BlockFn& fn) {
  if (indices.empty()) return;
  const std::string where = path_ + ": dataset " + dataset;
  h5::Dataset d = h5::open_dataset(file_, dataset, path_);
  h5::SilenceErrors quiet;
  h5::Datatype ftype(H5Dget_type(d));
  const H5T_class_t cls = H5Tget_class(ftype);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) throw CorruptInputError(where + ": not an integer or float dataset");
  Geometry g;
  g.size = static_cast<unsigned>(H5Tget_size(ftype));
  if (g.size == 0 || g.size > 8) throw CorruptInputError(where + ": element size " + std::to_string(g.size) + " is not 1..8 bytes");
  g.be = H5Tget_order(ftype) == H5T_ORDER_BE;
  h5::Dataspace space(H5Dget_space(d));
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0) h5::throw_error(where + ": bad dataspace", ExitCode::corrupt_input);
  g.shape.resize(static_cast<std::size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space, g.shape.data(), nullptr);
  std::uint64_t numel = 1;
  for (auto s : g.shape) numel *= s;
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  if (indices.back() >= numel)
    throw MismatchError(where + ": element " + std::to_string(indices.back()) + " is beyond its " + std::to_string(numel) + " elements");

  h5::PropList dcpl(H5Dget_create_plist(d));
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  std::vector<std::byte> buf;
  std::vector<std::uint64_t> words;

  if (layout == H5D_CONTIGUOUS) {
    const haddr_t addr = H5Dget_offset(d);
    if (addr != HADDR_UNDEF) {
      // Raw data at a known file offset: touch exactly the touched elements' bytes.
      const std::uint64_t base = base_ + addr;
      words.resize(indices.size());
      buf.resize(g.size);
      for (std::size_t i = 0; i < indices.size(); ++i) {
        pread_all(fd_, buf.data(), g.size, base + indices[i] * g.size, where);
        words[i] = load_word(buf.data(), g.size, g.be);
      }
      const std::vector<std::uint64_t> before = words;
      fn(indices, words);
      if (writable_) {
        for (std::size_t i = 0; i < indices.size(); ++i) {
          if (words[i] == before[i]) continue;
          store_word(buf.data(), g.size, g.be, words[i]);
          pwrite_all(fd_, buf.data(), g.size, base + indices[i] * g.size, where);
        }
      }
      return;
    }
  }

  if (layout == H5D_CHUNKED && rank > 0) {
    g.chunk.resize(g.shape.size());
    RESIL_H5_CHECK(H5Pget_chunk(dcpl, rank, g.chunk.data()), where + ": chunk shape");
    // Chunk grid, row-major: group the touched elements by chunk.
    std::vector<hsize_t> grid(g.shape.size());
    for (std::size_t k = 0; k < grid.size(); ++k) grid[k] = (g.shape[k] + g.chunk[k] - 1) / g.chunk[k];
    std::vector<std::pair<std::uint64_t, std::uint64_t>> keyed(indices.size());  // (chunk id, flat index)
    for (std::size_t i = 0; i < indices.size(); ++i) {
      const auto nd = unravel(indices[i], g.shape);
      std::uint64_t id = 0;
      for (std::size_t k = 0; k < nd.size(); ++k) id = id * grid[k] + nd[k] / g.chunk[k];
      keyed[i] = {id, indices[i]};
    }
    std::sort(keyed.begin(), keyed.end());
    std::vector<std::uint64_t> blk_idx;
    std::vector<hsize_t> start(g.shape.size()), count(g.shape.size());
    for (std::size_t i = 0; i < keyed.size();) {
      std::size_t j = i;
      blk_idx.clear();
      while (j < keyed.size() && keyed[j].first == keyed[i].first) blk_idx.push_back(keyed[j++].second);
      // The chunk's region, clipped to the dataset extent.
      const auto nd0 = unravel(blk_idx.front(), g.shape);
      std::uint64_t region = 1;
      for (std::size_t k = 0; k < nd0.size(); ++k) {
        start[k] = nd0[k] / g.chunk[k] * g.chunk[k];
        count[k] = std::min<hsize_t>(g.chunk[k], g.shape[k] - start[k]);
        region *= count[k];
      }
      buf.resize(region * g.size);
      h5::Dataspace fsel(H5Scopy(space));
      RESIL_H5_CHECK(H5Sselect_hyperslab(fsel, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), where + ": select chunk");
      h5::Dataspace msel(H5Screate_simple(rank, count.data(), nullptr));
      if (H5Dread(d, ftype, msel, fsel, H5P_DEFAULT, buf.data()) < 0)
        h5::throw_error(where + ": cannot read chunk (damaged data or missing filter?)", ExitCode::corrupt_input);
      std::vector<std::uint64_t> offs(blk_idx.size());
      words.resize(blk_idx.size());
      for (std::size_t k = 0; k < blk_idx.size(); ++k) {
        const auto nd = unravel(blk_idx[k], g.shape);
        std::uint64_t o = 0;
        for (std::size_t q = 0; q < nd.size(); ++q) o = o * count[q] + (nd[q] - start[q]);
        offs[k] = o * g.size;
        words[k] = load_word(buf.data() + offs[k], g.size, g.be);
      }
      const std::vector<std::uint64_t> before = words;
      fn(blk_idx, words);
      if (writable_ && words != before) {
        for (std::size_t k = 0; k < blk_idx.size(); ++k) store_word(buf.data() + offs[k], g.size, g.be, words[k]);
        if (H5Dwrite(d, ftype, msel, fsel, H5P_DEFAULT, buf.data()) < 0) h5::throw_error(where + ": cannot write chunk");
      }
      i = j;
    }
    return;
  }

  // Compact, scalar, or not-yet-allocated contiguous data: a point selection of the touched elements.
  buf.resize(indices.size() * g.size);
  h5::Dataspace fsel(H5Scopy(space));
  if (rank > 0) {
    std::vector<hsize_t> coords(indices.size() * g.shape.size());
    for (std::size_t i = 0; i < indices.size(); ++i) {
      const auto nd = unravel(indices[i], g.shape);
      std::copy(nd.begin(), nd.end(), coords.begin() + static_cast<std::ptrdiff_t>(i * nd.size()));
    }
    RESIL_H5_CHECK(H5Sselect_elements(fsel, H5S_SELECT_SET, indices.size(), coords.data()), where + ": select elements");
  }
  const hsize_t n = indices.size();
  h5::Dataspace msel(rank > 0 ? H5Screate_simple(1, &n, nullptr) : H5Screate(H5S_SCALAR));
  if (H5Dread(d, ftype, msel, fsel, H5P_DEFAULT, buf.data()) < 0) h5::throw_error(where + ": cannot read elements", ExitCode::corrupt_input);
  words.resize(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) words[i] = load_word(buf.data() + i * g.size, g.size, g.be);
  const std::vector<std::uint64_t> before = words;
  fn(indices, words);
  if (writable_ && words != before) {
    for (std::size_t i = 0; i < indices.size(); ++i) store_word(buf.data() + i * g.size, g.size, g.be, words[i]);
    if (H5Dwrite(d, ftype, msel, fsel, H5P_DEFAULT, buf.data()) < 0) h5::throw_error(where + ": cannot write elements");
  }
}

}  // namespace resil::inject

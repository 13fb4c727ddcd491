// The HDF5 chunk index: where a dataset's touched elements are stored (a contiguous extent, an
// allocated chunk at its file address, or blocks only HDF5 can write), looked up once per chunk.
#include <algorithm>
#include <utility>

#include "hdf5_layout.hpp"

namespace resil::inject {

namespace h5 = ckpt::h5;

std::vector<hsize_t> unravel(std::uint64_t flat, const std::vector<hsize_t>& shape) {
  std::vector<hsize_t> nd(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    nd[d] = flat % shape[d];
    flat /= shape[d];
  }
  return nd;
}

Hdf5Storage::Layout Hdf5Storage::layout_of(const std::string& dataset) {
  Layout l;
  l.name = dataset;
  l.where = path_ + ": dataset " + dataset;
  l.d = h5::open_dataset(file_, dataset, path_);
  h5::SilenceErrors quiet;
  l.ftype = h5::Datatype(H5Dget_type(l.d));
  const H5T_class_t cls = H5Tget_class(l.ftype);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) throw CorruptInputError(l.where + ": not an integer or float dataset");
  l.size = static_cast<unsigned>(H5Tget_size(l.ftype));
  if (l.size == 0 || l.size > 8) throw CorruptInputError(l.where + ": element size " + std::to_string(l.size) + " is not 1..8 bytes");
  l.be = H5Tget_order(l.ftype) == H5T_ORDER_BE;
  l.space = h5::Dataspace(H5Dget_space(l.d));
  l.rank = H5Sget_simple_extent_ndims(l.space);
  if (l.rank < 0) h5::throw_error(l.where + ": bad dataspace", ExitCode::corrupt_input);
  l.shape.resize(static_cast<std::size_t>(l.rank));
  if (l.rank > 0) H5Sget_simple_extent_dims(l.space, l.shape.data(), nullptr);
  for (auto s : l.shape) l.numel *= s;
  h5::PropList dcpl(H5Dget_create_plist(l.d));
  l.layout = H5Pget_layout(dcpl);
  l.filtered = H5Pget_nfilters(dcpl) > 0;
  if (l.layout == H5D_CONTIGUOUS) l.contiguous = H5Dget_offset(l.d);
  if (l.layout == H5D_CHUNKED && l.rank > 0) {
    l.chunk.resize(l.shape.size());
    RESIL_H5_CHECK(H5Pget_chunk(dcpl, l.rank, l.chunk.data()), l.where + ": chunk shape");
  }
  return l;
}

std::uint64_t Hdf5Storage::chunk_offset(const Layout& l, const std::vector<hsize_t>& start, std::uint64_t addr, std::uint64_t bytes) {
  if (base_ == 0) return addr;
  // With a user block, HDF5 1.10 reports chunk addresses relative to it (H5Dget_offset is absolute);
  // other versions may not: settle it once per file against the chunk's bytes as HDF5 reads them.
  if (chunk_rebase_ < 0) {
    std::vector<std::byte> want(bytes), at(bytes);
    std::uint32_t filters = 0;
    if (H5Dread_chunk(l.d, H5P_DEFAULT, start.data(), &filters, want.data()) < 0) return hdf5_only_chunk_;
    auto matches = [&](std::uint64_t off) {
      if (off + bytes > raw_.file_size()) return false;
      raw_.read(at.data(), bytes, off, l.where);
      return at == want;
    };
    const bool rel = matches(addr + base_), abs = matches(addr);
    if (rel == abs) return hdf5_only_chunk_;  // undecided (e.g. equal bytes at both): leave it to HDF5
    chunk_rebase_ = rel ? 1 : 0;
  }
  return addr + (chunk_rebase_ ? base_ : 0);
}

std::vector<Hdf5Storage::Block> Hdf5Storage::blocks_of(const Layout& l, std::vector<std::uint64_t>& indices) {
  std::vector<Block> out;
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  if (indices.empty()) return out;
  if (indices.back() >= l.numel)
    throw MismatchError(l.where + ": element " + std::to_string(indices.back()) + " is beyond its " + std::to_string(l.numel) + " elements");

  if (l.layout == H5D_CONTIGUOUS && l.contiguous != HADDR_UNDEF) {
    Block b;
    b.kind = Block::Kind::raw;
    b.addr = l.contiguous;  // H5Dget_offset is absolute: it includes the user block
    b.idx = indices;
    b.offs.resize(indices.size());
    for (std::size_t i = 0; i < indices.size(); ++i) b.offs[i] = indices[i] * l.size;
    out.push_back(std::move(b));
    return out;
  }

  if (l.layout == H5D_CHUNKED && !l.chunk.empty()) {
    const std::size_t rank = l.shape.size();
    std::vector<hsize_t> grid(rank);
    for (std::size_t k = 0; k < rank; ++k) grid[k] = (l.shape[k] + l.chunk[k] - 1) / l.chunk[k];
    std::vector<std::pair<std::uint64_t, std::uint64_t>> keyed(indices.size());  // (chunk id, flat index)
    for (std::size_t i = 0; i < indices.size(); ++i) {
      const auto nd = unravel(indices[i], l.shape);
      std::uint64_t id = 0;
      for (std::size_t k = 0; k < rank; ++k) id = id * grid[k] + nd[k] / l.chunk[k];
      keyed[i] = {id, indices[i]};
    }
    std::sort(keyed.begin(), keyed.end());
    // In place, allocated chunks of unfiltered data are changed at their file address. HDF5 1.10
    // finds a chunk's address by walking the dataset's whole chunk index (H5Dget_chunk_info_by_coord),
    // so touched x allocated chunks bounds the lookups: beyond what copying the file would cost
    // (about 8 bytes per visited chunk entry), the chunks stay with HDF5 and the edit is staged.
    auto& known = chunk_addr_[l.name];
    std::uint64_t fresh = 0;  // touched chunks not looked up yet
    for (std::size_t i = 0; i < keyed.size(); ++i)
      if ((i == 0 || keyed[i].first != keyed[i - 1].first) && !known.contains(keyed[i].first)) ++fresh;
    bool look_up = access_ == Access::in_place && !l.filtered && fresh > 0;
    h5::SilenceErrors quiet;
    if (look_up) {
      hsize_t allocated = 0;
      look_up = H5Dget_num_chunks(l.d, l.space, &allocated) >= 0 &&
                fresh * allocated <= std::max<std::uint64_t>(100'000'000, raw_.file_size() / 8);
    }
    std::uint64_t full = l.size;  // bytes of a stored chunk: edge chunks are stored full-size too
    for (auto c : l.chunk) full *= c;
    for (std::size_t i = 0; i < keyed.size();) {
      Block b;
      const std::uint64_t id = keyed[i].first;
      std::size_t j = i;
      while (j < keyed.size() && keyed[j].first == id) b.idx.push_back(keyed[j++].second);
      i = j;
      const auto nd0 = unravel(b.idx.front(), l.shape);
      b.start.resize(rank);
      b.count.resize(rank);
      for (std::size_t k = 0; k < rank; ++k) {
        b.start[k] = nd0[k] / l.chunk[k] * l.chunk[k];
        b.count[k] = std::min<hsize_t>(l.chunk[k], l.shape[k] - b.start[k]);
      }
      if (access_ == Access::in_place && !l.filtered && !known.contains(id) && look_up) {
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t nbytes = 0;
        // Unallocated chunks report HADDR_UNDEF / size 0 (or fail): those stay with HDF5.
        const bool at = H5Dget_chunk_info_by_coord(l.d, b.start.data(), &mask, &addr, &nbytes) >= 0 &&
                        addr != HADDR_UNDEF && nbytes == full;
        known[id] = at ? chunk_offset(l, b.start, addr, full) : hdf5_only_chunk_;
      }
      const auto it = known.find(id);
      if (it != known.end() && it->second != hdf5_only_chunk_) {
        b.kind = Block::Kind::raw;
        b.addr = it->second;
      }
      // Raw chunks are addressed with the full chunk shape, HDF5 regions with the clipped one.
      const auto& dims = b.kind == Block::Kind::raw ? l.chunk : b.count;
      if (b.kind != Block::Kind::raw) b.kind = Block::Kind::chunk;
      b.offs.resize(b.idx.size());
      for (std::size_t k = 0; k < b.idx.size(); ++k) {
        const auto nd = unravel(b.idx[k], l.shape);
        std::uint64_t o = 0;
        for (std::size_t q = 0; q < rank; ++q) o = o * dims[q] + (nd[q] - b.start[q]);
        b.offs[k] = o * l.size;
      }
      out.push_back(std::move(b));
    }
    return out;
  }

  Block b;
  b.kind = Block::Kind::points;
  b.idx = indices;
  out.push_back(std::move(b));
  return out;
}

}  // namespace resil::inject

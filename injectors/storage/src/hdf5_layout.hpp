// Internal to the HDF5 adapter (hdf5_storage.cpp, hdf5_chunk_index.cpp): a dataset's layout and
// its touched elements grouped by where their bytes live.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "resil/inject/hdf5_storage.hpp"

namespace resil::inject {

// A dataset's element type, extent and storage, as edit() needs them.
struct Hdf5Storage::Layout {
  std::string name, where;
  ckpt::h5::Dataset d;
  ckpt::h5::Datatype ftype;
  ckpt::h5::Dataspace space;
  std::vector<hsize_t> shape, chunk;  // chunk: only for chunked layout
  int rank = 0;
  unsigned size = 0;
  bool be = false;
  std::uint64_t numel = 1;
  H5D_layout_t layout = H5D_LAYOUT_ERROR;
  bool filtered = false;
  haddr_t contiguous = HADDR_UNDEF;  // file address of contiguous raw data, if allocated
};

// Touched elements grouped by where their bytes live.
struct Hdf5Storage::Block {
  enum class Kind {
    raw,     // bytes at a known file offset: a contiguous dataset, or an allocated unfiltered chunk
    chunk,   // a chunk only HDF5 can write (filtered, or not allocated): a hyperslab of its region
    points,  // compact, unallocated contiguous, other layouts: a point selection
  } kind = Kind::points;
  std::uint64_t addr = 0;              // raw: absolute file offset of the block's first byte
  std::vector<hsize_t> start, count;   // chunk: the chunk's region, clipped to the extent
  std::vector<std::uint64_t> idx;      // flat C-order indices, ascending
  std::vector<std::uint64_t> offs;     // byte offsets of idx from addr (raw) / in the region (chunk)
};

/// Flat C-order index -> N-d index.
std::vector<hsize_t> unravel(std::uint64_t flat, const std::vector<hsize_t>& shape);

}  // namespace resil::inject

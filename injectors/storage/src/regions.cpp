#include "resil/inject/regions.hpp"

#include <algorithm>

#include "resil/ckpt/h5.hpp"
#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"
#include "resil/inject/counts.hpp"

namespace resil::inject {

namespace h5 = ckpt::h5;

bool StoredLayout::in_regions(const std::vector<hsize_t>& nd) const {
  if (chunk.empty() || ids.empty()) return false;
  std::uint64_t id = 0;
  for (std::size_t k = 0; k < chunk.size(); ++k) id = id * grid[k] + nd[k] / chunk[k];
  return ids.contains(id);
}

namespace {

std::vector<hsize_t> dims_of(hid_t space) {
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return dims;
}

// The stored bytes of element `nd` as H5Dread returns them (in an unallocated chunk: the fill value).
std::vector<std::byte> read_element(hid_t d, hid_t ftype, hid_t space, const std::vector<hsize_t>& nd, const std::string& where) {
  std::vector<std::byte> out(H5Tget_size(ftype));
  h5::Dataspace fsel(H5Scopy(space));
  if (!nd.empty()) RESIL_H5_CHECK(H5Sselect_elements(fsel, H5S_SELECT_SET, 1, nd.data()), where + ": select element");
  const hsize_t one = 1;
  h5::Dataspace msel(nd.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &one, nullptr));
  if (H5Dread(d, ftype, msel, fsel, H5P_DEFAULT, out.data()) < 0) h5::throw_error(where + ": cannot read the fill value", ExitCode::corrupt_input);
  return out;
}

}  // namespace

StoredLayout stored_layout(hid_t d, const std::string& where) {
  StoredLayout s;
  h5::SilenceErrors quiet;
  h5::Dataspace space(H5Dget_space(d));
  if (H5Sget_simple_extent_type(space) == H5S_NULL) return s;  // nothing to read either way
  const auto dims = dims_of(space);
  h5::Datatype ftype(H5Dget_type(d));
  const std::uint64_t elem = H5Tget_size(ftype);
  uint128_t numel = 1;
  for (const auto x : dims) numel *= x;  // callers pass supported datasets: at most max_elements
  if (numel == 0) return s;
  h5::PropList dcpl(H5Dget_create_plist(d));
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  const uint128_t logical = numel * elem;
  constexpr std::uint64_t small = std::uint64_t{64} << 20;
  if (layout == H5D_CONTIGUOUS) {
    // External raw data files are read where they are (never written); storage that was never
    // allocated holds only the fill value.
    H5D_space_status_t status{};
    if (H5Pget_external_count(dcpl) > 0 || H5Dget_space_status(d, &status) < 0 || status != H5D_SPACE_STATUS_NOT_ALLOCATED ||
        logical <= small)
      return s;
    s.sparse = true;
    s.fill = read_element(d, ftype, space, std::vector<hsize_t>(dims.size(), 0), where);
    return s;
  }
  if (layout != H5D_CHUNKED || logical <= small) return s;
  const std::size_t rank = dims.size();
  s.chunk.resize(rank);
  RESIL_H5_CHECK(H5Pget_chunk(dcpl, static_cast<int>(rank), s.chunk.data()), where + ": chunk shape");
  std::vector<hsize_t> grid(rank);
  uint128_t cells = 1;
  std::uint64_t chunk_elems = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    grid[k] = (dims[k] + s.chunk[k] - 1) / s.chunk[k];
    cells *= grid[k];
    chunk_elems *= s.chunk[k];
  }
  hsize_t allocated = 0;
  if (H5Dget_num_chunks(d, space, &allocated) < 0) h5::throw_error(where + ": cannot count its chunks", ExitCode::corrupt_input);
  // Chunks covering an eighth of the extent or more: the extent costs at most 8x the data there.
  if (static_cast<uint128_t>(allocated) * chunk_elems * elem * 8 >= logical) return s;
  s.sparse = true;
  s.grid = grid;
  auto start_of = [&](std::uint64_t id) {
    std::vector<hsize_t> nd(rank);
    for (std::size_t k = rank; k-- > 0;) {
      nd[k] = id % grid[k] * s.chunk[k];
      id /= grid[k];
    }
    return nd;
  };
  auto add = [&](std::uint64_t id) {
    StoredRegion r{start_of(id), std::vector<hsize_t>(rank)};
    std::uint64_t n = 1;
    for (std::size_t k = 0; k < rank; ++k) n *= r.count[k] = std::min<hsize_t>(s.chunk[k], dims[k] - r.start[k]);
    s.covered += n;
    s.ids.insert(id);
    s.regions.push_back(std::move(r));
  };
  // The cheaper search: a probe (an index lookup) costs about as much as 64 entries of a walk.
  const auto a = static_cast<uint128_t>(allocated);
  const bool probe = cells * 64 < a * a / 2;
  if (probe && cells <= max_chunk_probes) {
    // Probe the grid: one index lookup per chunk (stops after the last allocated one).
    for (std::uint64_t id = 0; id < static_cast<std::uint64_t>(cells) && s.ids.size() < allocated; ++id) {
      hsize_t bytes = 0;
      const auto nd = start_of(id);
      if (H5Dget_chunk_storage_size(d, nd.data(), &bytes) >= 0 && bytes > 0) add(id);
    }
  } else if (!probe && a * a / 2 <= max_chunk_index_visits) {
    std::vector<std::uint64_t> ids;
    for (hsize_t i = 0; i < allocated; ++i) {
      std::vector<hsize_t> off(rank);
      unsigned mask = 0;
      haddr_t addr = HADDR_UNDEF;
      hsize_t bytes = 0;
      if (H5Dget_chunk_info(d, space, i, off.data(), &mask, &addr, &bytes) < 0)
        h5::throw_error(where + ": cannot read its chunk index", ExitCode::corrupt_input);
      std::uint64_t id = 0;
      for (std::size_t k = 0; k < rank; ++k) {
        if (off[k] >= dims[k] || off[k] % s.chunk[k] != 0) throw CorruptInputError(where + ": chunk index entry outside the extent");
        id = id * grid[k] + off[k] / s.chunk[k];
      }
      ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (const auto id : ids) add(id);
  } else {
    throw CorruptInputError(where + ": " + std::to_string(allocated) + " allocated chunks in a grid of " + count_string(cells) +
                            " chunks: too sparse to find them in bounded time (HDF5 1.10 has no chunk iterator)");
  }
  // The first chunk of the grid that is not allocated holds the smallest flat index outside the
  // regions (a chunk's first element is its start corner, and corners grow with the grid order).
  std::uint64_t gap = 0;
  for (const auto& r : s.regions) {
    std::uint64_t id = 0;
    for (std::size_t k = 0; k < rank; ++k) id = id * grid[k] + r.start[k] / s.chunk[k];
    if (id != gap) break;
    ++gap;
  }
  const auto corner = start_of(gap);
  std::uint64_t flat = 0;
  for (std::size_t k = 0; k < rank; ++k) flat = flat * dims[k] + corner[k];
  s.first_fill = flat;
  s.fill = read_element(d, ftype, space, corner, where);
  return s;
}

void read_region(hid_t d, hid_t ftype, const StoredRegion& r, std::vector<std::byte>& buf, const std::string& where) {
  std::uint64_t n = 1;
  for (const auto c : r.count) n *= c;
  buf.resize(n * H5Tget_size(ftype));
  h5::Dataspace space(H5Dget_space(d));
  h5::Dataspace fsel(H5Scopy(space));
  RESIL_H5_CHECK(H5Sselect_hyperslab(fsel, H5S_SELECT_SET, r.start.data(), nullptr, r.count.data(), nullptr), where + ": select chunk");
  h5::Dataspace msel(H5Screate_simple(static_cast<int>(r.count.size()), r.count.data(), nullptr));
  if (H5Dread(d, ftype, msel, fsel, H5P_DEFAULT, buf.data()) < 0) h5::throw_error(where + ": read failed", ExitCode::corrupt_input);
}

}  // namespace resil::inject

// Where a dataset's elements are stored, so that reading all of them (scan, diff) costs what the
// file holds, not what the extent claims: a never-written chunked dataset of 10^12 f32 elements
// is a file of a few KB, and reading it through HDF5 would produce 4 TB of fill values.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

namespace resil::inject {

/// A block of a dataset's elements (an allocated chunk, clipped to the extent).
struct StoredRegion {
  std::vector<hsize_t> start, count;
};

struct StoredLayout {
  /// false: read the whole extent (in slabs). Chosen when the data is there anyway (contiguous
  /// storage, compact, external files, chunks covering >= 1/8 of the extent) or small (<= 64 MiB).
  bool sparse = false;
  // The rest only when sparse:
  std::vector<StoredRegion> regions;       // allocated chunks, in chunk-grid (row-major) order
  std::vector<hsize_t> chunk;              // chunk shape (empty: no chunks, e.g. contiguous never written)
  std::vector<hsize_t> grid;               // chunks per dimension
  std::unordered_set<std::uint64_t> ids;   // row-major chunk-grid ids of `regions`
  std::uint64_t covered = 0;               // elements inside `regions`
  std::vector<std::byte> fill;             // stored bytes of every element outside them, as H5Dread gives it
  std::uint64_t first_fill = 0;            // smallest flat index outside them (when covered < numel)
  /// Whether element `nd` lies in one of `regions`.
  bool in_regions(const std::vector<hsize_t>& nd) const;
};

/// Limits of the search for allocated chunks in a sparse dataset (HDF5 1.10 has no chunk
/// iterator): probing every chunk of the grid (an index lookup each) or fetching the i-th chunk
/// for each i (H5Dget_chunk_info walks the index from its start every time: quadratic). The
/// cheaper one is taken; each limit bounds the search to tens of seconds (costs per lookup in
/// docs/design/ckpt-flip-io.md, "Large extents, little data").
inline constexpr std::uint64_t max_chunk_probes = std::uint64_t{1} << 24;
inline constexpr std::uint64_t max_chunk_index_visits = std::uint64_t{1} << 31;

/// How to read dataset `d` (`where` names file and dataset in errors). Throws CorruptInputError
/// for a dataset whose allocated chunks cannot be found within those limits.
StoredLayout stored_layout(hid_t d, const std::string& where);

/// The stored bytes (file type, C order) of a region of `d` into `buf`.
void read_region(hid_t d, hid_t ftype, const StoredRegion& r, std::vector<std::byte>& buf, const std::string& where);

}  // namespace resil::inject

// Direct chunk editing of gzip datasets: chunks whose filter pipeline is exactly deflate, or
// shuffle then deflate (h5py's compression="gzip", shuffle=True), are read raw with
// H5Dread_chunk, inflated with libdeflate, edited in their (shuffled) byte layout, patched at the
// token level (deflate_patch.hpp: the stored stream's LZ77 parse is kept, only the blocks around
// the changed bytes are encoded again; the result is inflated and compared before it is used) or,
// when the patcher does not take the stream, deflated at the dataset's own level, and written back
// with H5Dwrite_chunk. HDF5 is not thread-safe: every HDF5
// call stays on the calling thread; the codec work runs on a small pool with a bounded window of
// chunks in flight, so memory is O(threads x chunk) and reads, callbacks and writes happen in task
// order whatever the thread count. Hdf5Storage::edit uses it for filtered chunked datasets; any other
// pipeline, and chunks this cannot take (not allocated, a filter skipped), stay with HDF5.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "resil/ckpt/h5.hpp"
#include "resil/inject/hdf5_storage.hpp"

namespace resil::inject {

/// A deflate pipeline this can edit directly.
struct DeflatePipeline {
  bool shuffle = false;  // shuffle (with the element size) before deflate
  unsigned level = 6;    // deflate level from the filter's cd_values[0], 0..9
};

/// The pipeline of dataset `dset` with `elem_size`-byte elements when it is exactly [deflate] or
/// [shuffle, deflate] (shuffle's element size matching); nullopt for anything else (fletcher32,
/// szip, lzf, scaleoffset, nbit, unknown filters, other orders, no filters).
std::optional<DeflatePipeline> deflate_pipeline(hid_t dset, unsigned elem_size);

/// Process-wide switches (tests compare with the HDF5 path; benchmarks pick thread counts).
struct ChunkCodecOptions {
  bool direct = true;    // false: every filtered chunk goes through HDF5's filters
  unsigned threads = 0;  // codec threads; 0: $RESIL_INJECT_THREADS, else the usable CPUs (affinity) up to 8
  bool patch = true;     // false (or $RESIL_INJECT_PATCH=0): every changed chunk is deflated in full
};
ChunkCodecOptions chunk_codec_options() noexcept;
void set_chunk_codec_options(const ChunkCodecOptions& opt) noexcept;

/// Counters since process start (for tests: which path ran).
struct ChunkCodecStats {
  std::uint64_t read = 0;     // chunks read and inflated here
  std::uint64_t written = 0;  // chunks written here (patched + deflated)
  std::uint64_t patched = 0;  // of those, patched at the token level
  std::uint64_t deflated = 0; // of those, deflated again in full (patch off, or the patcher declined)
};
ChunkCodecStats chunk_codec_stats() noexcept;

/// Element geometry of a chunked dataset.
struct ChunkGeometry {
  std::vector<hsize_t> shape, chunk;
  unsigned size = 0;  // bytes per element, 1..8
  bool big_endian = false;
};

/// One touched chunk: its first element's coordinates (chunk-aligned) and its touched elements
/// (flat C-order indices over the dataset, ascending).
struct ChunkTask {
  std::span<const hsize_t> start;
  std::span<const std::uint64_t> idx;
};

enum class ChunkWrite {
  none,    // read only: changes fn makes are dropped
  refuse,  // a change throws Error naming the element (in place: only a staged copy may change it)
  write,   // changed chunks are written back (H5Dwrite_chunk, filter mask 0)
};

/// fn(indices, words) per task, in task order, on the calling thread, as Hdf5Storage::edit does.
/// Returns per task whether it was done here; the others (chunk not allocated, or stored with a
/// filter skipped) are left to the caller untouched. An inflated size other than the chunk's
/// byte size, or a stream that does not inflate, throws CorruptInputError naming `where` and the
/// chunk. `threads` 0: chunk_codec_options().threads.
std::vector<bool> edit_deflate_chunks(hid_t dset, const std::string& where, const ChunkGeometry& geom,
                                      const DeflatePipeline& pipeline, std::span<const ChunkTask> tasks, ChunkWrite write,
                                      const Hdf5Storage::BlockFn& fn, unsigned threads = 0);

}  // namespace resil::inject

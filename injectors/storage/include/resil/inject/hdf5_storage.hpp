// The HDF5 adapter of the storage layer (storage.hpp). Stored words are read and written in their
// own width and byte order (the file type is the memory type: nothing is converted). I/O is
// proportional to what is touched: raw data at a known file offset (contiguous datasets, allocated
// chunks of unfiltered datasets: the chunk index, hdf5_chunk_index.cpp) goes through RawWords word
// by word; gzip chunks are patched directly (deflate_chunks.hpp); other touched chunks are read
// (and written) once through HDF5 as a hyperslab of the chunk region; nothing loads a whole dataset.
// In place, HDF5 opens the file read-only: no HDF5 metadata is ever written there.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "resil/ckpt/h5.hpp"
#include "resil/inject/storage.hpp"
#include "resil/inject/word_io.hpp"

namespace resil::inject {

class Hdf5Storage final : public Storage {
public:
  /// Open `path`. Throws IoError / CorruptInputError naming the file. Access::in_place: HDF5
  /// read-only, only raw data at a known file offset changes, so no HDF5 metadata (superblock
  /// status flags, chunk index) changes and a kill at any point leaves a file HDF5 opens.
  /// Access::rewrite: HDF5 read-write too (a private copy): filtered or unallocated blocks through HDF5.
  Hdf5Storage(const std::string& path, Access access);
  ~Hdf5Storage() override;

  Format format() const noexcept override { return Format::hdf5; }
  std::vector<Tensor> tensors() override;
  std::vector<OtherContent> other_content() override;
  std::vector<Extent> extents(const std::string& dataset) override;
  std::string unwritable(const std::string& dataset) override;
  void edit(const std::string& dataset, std::vector<std::uint64_t> indices, const BlockFn& fn) override;
  std::vector<std::uint64_t> staged_only(const std::string& dataset, std::vector<std::uint64_t> indices) override {
    return hdf5_only(dataset, std::move(indices));
  }
  unsigned width_of(const std::string& dataset) override;
  StoredLayout stored_layout(const std::string& dataset) override;
  void read_box(const std::string& dataset, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
                std::vector<std::byte>& buf) override;
  void for_each_slab(const std::string& dataset, std::size_t max_bytes,
                     const std::function<void(std::span<const std::byte>)>& fn) override;
  std::uint64_t checksum(const std::string& dataset) override;
  void close() override;

  /// The subset of `indices` (sorted, unique) that this file would not change at a file offset,
  /// i.e. with Access::in_place those stored where only HDF5 can write them: chunks of filtered
  /// datasets, chunks not allocated yet, contiguous data without storage, compact and other
  /// layouts. Reads no data, only the chunk index (addresses are kept for edit()).
  std::vector<std::uint64_t> hdf5_only(const std::string& dataset, std::vector<std::uint64_t> indices);
  /// The HDF5 file this Hdf5Storage opened (read-only unless Access::rewrite).
  const ckpt::h5::File& h5() const noexcept { return file_; }
  /// How edit() accesses a raw block of `words` words spanning `span_bytes` (never automatic).
  WordIo io_for(std::uint64_t words, std::uint64_t span_bytes) const noexcept {
    return raw_.io_for(words, span_bytes, sync_ && access_ != Access::read);
  }

  struct Layout;
  struct Block;

private:
  // The chunk index (hdf5_chunk_index.cpp): a dataset's layout, and its touched elements grouped
  // by where their bytes live.
  Layout layout_of(const std::string& dataset);
  std::vector<Block> blocks_of(const Layout& l, std::vector<std::uint64_t>& indices);
  std::uint64_t chunk_offset(const Layout& l, const std::vector<hsize_t>& start, std::uint64_t addr, std::uint64_t bytes);
  void edit_hdf5_block(const Layout& l, const Block& b, const BlockFn& fn);

  ckpt::h5::File file_;
  RawWords raw_;
  std::uint64_t base_ = 0;       // user block size: HDF5's internal addresses are relative to it
  int chunk_rebase_ = -1;        // chunk addresses + base_ (1) or not (0); -1: not settled yet
  // Per dataset: chunk id (row-major over the chunk grid) -> absolute file offset of its bytes, or
  // hdf5_only_chunk_ when only HDF5 can write it. HDF5 1.10 looks chunks up by walking the whole index.
  static constexpr std::uint64_t hdf5_only_chunk_ = ~std::uint64_t{0};
  std::map<std::string, std::map<std::uint64_t, std::uint64_t>> chunk_addr_;
};

}  // namespace resil::inject

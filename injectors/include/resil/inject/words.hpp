// Stored words of datasets, read and written in their own width and byte order (the file type is
// the memory type: nothing is converted). I/O is proportional to what is touched: each touched
// chunk is read (and written) once as a hyperslab of the chunk region; contiguous datasets are
// accessed element by element at their file offset; nothing loads a whole dataset.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "resil/ckpt/h5.hpp"

namespace resil::inject {

class WordFile {
public:
  /// Open `path` (read-only unless `writable`). Throws IoError / CorruptInputError naming the file.
  WordFile(const std::string& path, bool writable);
  ~WordFile();
  WordFile(const WordFile&) = delete;
  WordFile& operator=(const WordFile&) = delete;

  /// fn(indices, words) for each block (a chunk, or all touched elements of a contiguous
  /// dataset): `indices` are flat C-order element indices, `words` their stored words (bit 0 =
  /// LSB whatever the byte order). When the file is writable, fn's changes to `words` are written
  /// back (a block whose words did not change is not written). `indices` must be unique.
  using BlockFn = std::function<void(std::span<const std::uint64_t> indices, std::span<std::uint64_t> words)>;
  void edit(const std::string& dataset, std::vector<std::uint64_t> indices, const BlockFn& fn);

  /// Stored width in bits of a dataset's elements.
  unsigned width_of(const std::string& dataset);

  /// Flush and close (errors surface here rather than in the destructor).
  void close();
  const std::string& path() const noexcept { return path_; }

private:
  std::string path_;
  bool writable_;
  ckpt::h5::File file_;
  int fd_ = -1;
  std::uint64_t base_ = 0;  // user block size: HDF5 addresses are relative to it
};

/// Decode/encode a stored word from/to its bytes in file order.
std::uint64_t load_word(const std::byte* p, unsigned size, bool big_endian) noexcept;
void store_word(std::byte* p, unsigned size, bool big_endian, std::uint64_t w) noexcept;

}  // namespace resil::inject

// Stored words of datasets, read and written in their own width and byte order (the file type is
// the memory type: nothing is converted). I/O is proportional to what is touched: raw data at a
// known file offset (contiguous datasets, allocated chunks of unfiltered datasets) is accessed
// word by word (through a shared mapping of the file, or pread/pwrite: WordIo); other touched
// chunks are read (and written) once through HDF5 as a hyperslab of the chunk region; nothing loads a whole dataset.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "resil/ckpt/h5.hpp"

namespace resil::inject {

enum class Access {
  read,      // nothing is written
  in_place,  // HDF5 read-only: only raw data at a known file offset is changed (pwrite), so no
             // HDF5 metadata (superblock status flags, chunk index) changes and a kill at any
             // point leaves a file HDF5 opens. Blocks only HDF5 can write are refused.
  rewrite,   // HDF5 read-write too (a private copy): filtered or unallocated blocks through HDF5
};

/// How words at known file offsets (contiguous data, allocated unfiltered chunks) are read and
/// written. Process-wide, like ChunkCodecOptions (tests pin each way; benchmarks compare them).
///  - mapped: loads and one store instruction per changed word in a shared mapping of the file
///    (mapped on first use). No system call per word; each touched page faults in (the kernel maps
///    up to 16 neighbours per read fault, and tears them down at unmap). Stores go in file order,
///    and each 2 MiB region of the file is unmapped (MADV_DONTNEED) when a store goes elsewhere;
///    from a few thousand words on, a forked child process makes the stores of the upper half of
///    the regions while this process makes the lower half (see on_two_processes in words.cpp).
///  - syscalls: pread per word (one pread of the span when it is dense) and one pwrite per changed
///    word. No fault and no unmap cost; on ext4 with large page-cache folios (Linux >= 6.16) only the
///    written 4 KiB blocks become dirty, whereas a store through the mapping dirties the page's whole
///    folio (up to 2 MiB), so a final fsync writes back what changed rather than every touched folio.
///  - automatic (default): syscalls when close() syncs (set_sync(true)) a written file and the
///    words are sparse (their span covers more than sparse_pages_per_word pages per word: at 10,000
///    words, files beyond ~160 MB), else mapped. Why: with the sync, the bytes written back decide
///    (a store dirties a whole folio, a pwrite only its block), so pwrite wins on sparse words and
///    the mapping on dense ones, whose touched folios cover the file either way; without the sync,
///    a file freshly written or read (the common case, cached in 2 MiB folios) favours the mapping,
///    since each pwrite walks the folio's 512 buffer heads twice. The timings behind this choice
///    are in docs/performance.md, "Word I/O: mapping or pread/pwrite".
inline constexpr std::uint64_t sparse_pages_per_word = 4;
/// $RESIL_INJECT_WORD_IO=mapped|syscalls overrides automatic (read when a WordFile opens).
enum class WordIo { automatic, mapped, syscalls };
WordIo word_io() noexcept;
void set_word_io(WordIo io) noexcept;

class WordFile {
public:
  /// Open `path`. Throws IoError / CorruptInputError naming the file.
  WordFile(const std::string& path, Access access);
  ~WordFile();
  WordFile(const WordFile&) = delete;
  WordFile& operator=(const WordFile&) = delete;

  /// fn(indices, words) for each block (a chunk, or all touched elements of a contiguous
  /// dataset): `indices` are flat C-order element indices, `words` their stored words (bit 0 =
  /// LSB whatever the byte order). Unless the access is `read`, fn's changes to `words` are
  /// written back (only changed words; a block whose words did not change is not written).
  /// `indices` must be unique. With `Access::in_place`, a change in a block that only HDF5 can
  /// write (see hdf5_only) throws Error before that block is written: callers stage such edits.
  using BlockFn = std::function<void(std::span<const std::uint64_t> indices, std::span<std::uint64_t> words)>;
  void edit(const std::string& dataset, std::vector<std::uint64_t> indices, const BlockFn& fn);

  /// The subset of `indices` (sorted, unique) that this file would not change with pwrite, i.e.
  /// with `Access::in_place` those stored where only HDF5 can write them: chunks of filtered
  /// datasets, chunks not allocated yet, contiguous data without storage, compact and other
  /// layouts. Reads no data, only the chunk index (addresses are kept for edit()).
  std::vector<std::uint64_t> hdf5_only(const std::string& dataset, std::vector<std::uint64_t> indices);

  /// Stored width in bits of a dataset's elements.
  unsigned width_of(const std::string& dataset);

  /// Flush and close (errors surface here rather than in the destructor).
  void close();
  /// Whether close() makes the edits durable (msync + fsync). Default: yes.
  void set_sync(bool sync) noexcept { sync_ = sync; }
  const std::string& path() const noexcept { return path_; }
  Access access() const noexcept { return access_; }
  /// The HDF5 file this WordFile opened (read-only unless Access::rewrite): callers list datasets
  /// through it instead of opening the file once more.
  const ckpt::h5::File& h5() const noexcept { return file_; }
  /// How edit() accesses a raw block of `words` words spanning `span_bytes` (never automatic).
  WordIo io_for(std::uint64_t words, std::uint64_t span_bytes) const noexcept;

private:
  struct Block;
  struct Layout;
  Layout layout_of(const std::string& dataset);
  std::vector<Block> blocks_of(const Layout& l, std::vector<std::uint64_t>& indices);
  std::uint64_t chunk_offset(const Layout& l, const std::vector<hsize_t>& start, std::uint64_t addr, std::uint64_t bytes);

  std::string path_;
  Access access_;
  ckpt::h5::File file_;
  int fd_ = -1;
  std::byte* mapping();
  bool sync_ = true;
  WordIo io_ = WordIo::automatic;  // word_io() or the environment, at open
  // The whole file mapped (shared; writable unless Access::read) on first use by a mapped block:
  // raw words are read and written in memory instead of one system call each. map_failed_: mmap
  // refused (the syscalls way then). map_stored_: a store went through it (close() msyncs).
  bool map_failed_ = false, map_stored_ = false;
  std::byte* map_ = nullptr;
  std::size_t map_len_ = 0;
  // The 2 MiB region of the file this process last stored into through the mapping, still mapped
  // (released when a store goes elsewhere; see hold_region in words.cpp). ~0: none.
  std::uint64_t held_region_ = ~std::uint64_t{0};
  // Words read one by one with pread (sparse raw blocks), by file offset, kept current by this
  // WordFile's own writes: a second edit() of the same words (plan, then apply) reads none again.
  // Raw words are only written through this WordFile while it is open.
  std::unordered_map<std::uint64_t, std::uint64_t> known_;
  std::uint64_t base_ = 0;       // user block size: HDF5's internal addresses are relative to it
  std::uint64_t file_size_ = 0;
  int chunk_rebase_ = -1;        // chunk addresses + base_ (1) or not (0); -1: not settled yet
  // Per dataset: chunk id (row-major over the chunk grid) -> absolute file offset of its bytes, or
  // hdf5_only_ when only HDF5 can write it. HDF5 1.10 looks chunks up by walking the whole index.
  static constexpr std::uint64_t hdf5_only_chunk_ = ~std::uint64_t{0};
  std::map<std::string, std::map<std::uint64_t, std::uint64_t>> chunk_addr_;
};

/// Decode/encode a stored word from/to its bytes in file order.
std::uint64_t load_word(const std::byte* p, unsigned size, bool big_endian) noexcept;
void store_word(std::byte* p, unsigned size, bool big_endian, std::uint64_t w) noexcept;

}  // namespace resil::inject

// Word I/O: stored words at known file offsets (raw extents of any format: contiguous HDF5 data,
// allocated unfiltered chunks, a torch storage in a stored zip member, a safetensors tensor) read
// and written in their own width and byte order, each changed word one all-or-nothing store,
// through a shared mapping of the file or one pread/pwrite per word (WordIo). Adapters locate
// the words; RawWords moves them.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>

namespace resil::inject {

/// How words at known file offsets are read and written. Process-wide, like ChunkCodecOptions
/// (tests pin each way; benchmarks compare them).
///  - mapped: loads and one store instruction per changed word in a shared mapping of the file
///    (mapped on first use). No system call per word; each touched page faults in (the kernel maps
///    up to 16 neighbours per read fault, and tears them down at unmap). Stores go in file order,
///    and each 2 MiB region of the file is unmapped (MADV_DONTNEED) when a store goes elsewhere.
///  - syscalls: pread per word (one pread of the span when it is dense) and one pwrite per changed
///    word. No fault and no unmap cost; on ext4 with large page-cache folios (Linux >= 6.16) only the
///    written 4 KiB blocks become dirty, whereas a store through the mapping dirties the page's whole
///    folio (up to 2 MiB), so a final fsync writes back what changed rather than every touched folio.
///  - automatic (default): syscalls when close() syncs a written file and the words are sparse
///    (their span covers more than sparse_pages_per_word pages per word: at 10,000 words, files
///    beyond ~160 MB), else mapped. Why: with the sync, the bytes written back decide (a store
///    dirties a whole folio, a pwrite only its block), so pwrite wins on sparse words and the
///    mapping on dense ones, whose touched folios cover the file either way; without the sync, a
///    file freshly written or read (the common case, cached in 2 MiB folios) favours the mapping,
///    since each pwrite walks the folio's 512 buffer heads twice. The timings behind this choice
///    are in docs/design/ckpt-flip-io.md, "Word I/O: mapping or pread/pwrite".
inline constexpr std::uint64_t sparse_pages_per_word = 4;
/// $RESIL_INJECT_WORD_IO=mapped|syscalls overrides automatic (read when a file opens).
enum class WordIo { automatic, mapped, syscalls };
WordIo word_io() noexcept;
void set_word_io(WordIo io) noexcept;

/// Decode/encode a stored word from/to its bytes in file order.
std::uint64_t load_word(const std::byte* p, unsigned size, bool big_endian) noexcept;
void store_word(std::byte* p, unsigned size, bool big_endian, std::uint64_t w) noexcept;

/// The raw words of one open file. Not thread-safe; one per open Storage.
class RawWords {
public:
  using BlockFn = std::function<void(std::span<const std::uint64_t> indices, std::span<std::uint64_t> words)>;
  /// Open `path` (read-write when `writable`). Throws IoError naming the file.
  RawWords(const std::string& path, bool writable);
  ~RawWords();
  RawWords(const RawWords&) = delete;
  RawWords& operator=(const RawWords&) = delete;

  std::uint64_t file_size() const noexcept { return file_size_; }
  /// How a block of `words` words spanning `span_bytes` is accessed (never automatic); `sync`:
  /// whether the file is written and made durable at the end.
  WordIo io_for(std::uint64_t words, std::uint64_t span_bytes, bool sync) const noexcept;

  /// One way for all raw blocks of an edit, from their words and the file span [first, end) they cover.
  struct Way {
    bool map = false;        // stores (and maybe loads) through the mapping
    bool map_reads = false;  // loads through the mapping too (dense words)
  };
  Way way_for(std::uint64_t words, std::uint64_t first, std::uint64_t end, bool sync);

  /// One block: words of `size` bytes at addr + offs[k] (offs ascending), fn(idx, words), then the
  /// changed words stored back unless `write` is false. `where` names file and tensor in errors.
  void edit(const Way& way, std::uint64_t addr, std::span<const std::uint64_t> offs, std::span<const std::uint64_t> idx,
            unsigned size, bool big_endian, bool write, const std::string& where, const BlockFn& fn);
  /// `n` bytes at `offset` (throws IoError naming `where` on a short file).
  void read(void* buf, std::size_t n, std::uint64_t offset, const std::string& where) const;
  /// Unmap and close; with `sync`, msync (if stores went through the mapping) and fsync first.
  void close(bool sync, const std::string& path);

private:
  std::byte* mapping();
  int fd_ = -1;
  bool writable_ = false;
  std::uint64_t file_size_ = 0;
  WordIo io_ = WordIo::automatic;  // word_io() or the environment, at open
  // The whole file mapped (shared; writable when the file is) on first use by a mapped block.
  // map_failed_: mmap refused (the syscalls way then). map_stored_: a store went through it.
  bool map_failed_ = false, map_stored_ = false;
  std::byte* map_ = nullptr;
  std::size_t map_len_ = 0;
  // The 2 MiB region of the file last stored into through the mapping, still mapped (released when
  // a store goes elsewhere; see hold_region in word_io.cpp). ~0: none.
  std::uint64_t held_region_ = ~std::uint64_t{0};
  // Words read one by one with pread (sparse blocks), by file offset, kept current by this file's
  // own writes: a second edit of the same words (plan, then apply) reads none again. Raw words are
  // only written through this object while it is open.
  std::unordered_map<std::uint64_t, std::uint64_t> known_;
};

}  // namespace resil::inject

// RawWords: stored words at known file offsets, through a shared mapping or pread/pwrite (WordIo).
#include "resil/inject/word_io.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "resil/core/error.hpp"
#include "resil/inject/two_threads.hpp"

namespace resil::inject {

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

namespace {

// Per-word preads go on two threads from this many words on.
constexpr std::size_t two_threads_from = 2048;

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

// Stores through the shared mapping: the first store into a page-cache folio faults, and tearing
// the mapping down later visits each dirty folio again; on ext4 both walk the folio's buffer heads
// (512 per 2 MiB folio). Each store region (2 MiB, aligned in the file) is released with
// MADV_DONTNEED as soon as a store goes to another region (stores go in file order), while those
// buffer heads are still in the CPU's cache, instead of by the munmap at close() (which finds them
// evicted when thousands of folios were touched; docs/design/ckpt-flip-io.md, "Word I/O"). The last
// region stored into stays mapped across blocks and edits (small chunks and tensors share regions).
constexpr unsigned store_region_shift = 21;
constexpr std::uint64_t no_region = ~std::uint64_t{0};

// Before a store into `region`: release the region `held` (the last one stored into) if it is
// another one, and hold `region`.
void hold_region(std::byte* map, std::uint64_t len, std::uint64_t& held, std::uint64_t region) noexcept {
  if (region == held) return;
  const std::uint64_t at = held << store_region_shift;
  if (held != no_region && at < len)
    ::madvise(map + at, std::min<std::uint64_t>(len - at, std::uint64_t{1} << store_region_shift), MADV_DONTNEED);
  held = region;
}

std::atomic<WordIo> g_io{WordIo::automatic};

// $RESIL_INJECT_WORD_IO (benchmarks): mapped or syscalls; unset or empty: automatic.
WordIo io_from_env() {
  const char* v = std::getenv("RESIL_INJECT_WORD_IO");
  if (v == nullptr || *v == '\0') return WordIo::automatic;
  if (std::strcmp(v, "mapped") == 0) return WordIo::mapped;
  if (std::strcmp(v, "syscalls") == 0) return WordIo::syscalls;
  throw UsageError(std::string("RESIL_INJECT_WORD_IO=") + v + ": expected mapped or syscalls");
}

}  // namespace

WordIo word_io() noexcept { return g_io.load(); }
void set_word_io(WordIo io) noexcept { g_io.store(io); }

RawWords::RawWords(const std::string& path, bool writable) : writable_(writable) {
  io_ = word_io();
  if (io_ == WordIo::automatic) io_ = io_from_env();
  fd_ = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd_ < 0) throw IoError(path + ": cannot open" + (writable ? " for writing" : "") + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) == 0) file_size_ = static_cast<std::uint64_t>(st.st_size);
}

RawWords::~RawWords() {
  if (map_) ::munmap(map_, map_len_);
  if (fd_ >= 0) ::close(fd_);
}

WordIo RawWords::io_for(std::uint64_t words, std::uint64_t span_bytes, bool sync) const noexcept {
  if (io_ != WordIo::automatic) return io_;
  // Syncing sparse words: stores through the mapping would dirty whole page-cache folios, and the
  // sync would write back all of them (see WordIo). Dense words share their folios anyway; without
  // the sync the mapping is faster on files cached in large folios (see WordIo).
  const bool sparse = span_bytes / 4096 > sparse_pages_per_word * words;
  return sync && writable_ && sparse ? WordIo::syscalls : WordIo::mapped;
}

std::byte* RawWords::mapping() {
  if (map_ || map_failed_ || file_size_ == 0 || fd_ < 0) return map_;
  void* m = ::mmap(nullptr, file_size_, PROT_READ | (writable_ ? PROT_WRITE : 0), MAP_SHARED, fd_, 0);
  if (m == MAP_FAILED) {
    map_failed_ = true;
    return nullptr;
  }
  map_ = static_cast<std::byte*>(m);
  map_len_ = file_size_;
  return map_;
}

RawWords::Way RawWords::way_for(std::uint64_t words, std::uint64_t first, std::uint64_t end, bool sync) {
  Way w;
  // The mapping only if it covers every word of the edit.
  w.map = words > 0 && io_for(words, end - first, sync) == WordIo::mapped && mapping() && end <= map_len_;
  // Sparse words are read with pread even when they are written through the mapping: a read fault
  // maps (and munmap later unmaps) 16 pages around each word, and a store into a page that is not
  // mapped yet costs no more than one into a page mapped read-only (measured with bench_word_io:
  // docs/design/ckpt-flip-io.md, "Word I/O").
  w.map_reads = w.map && (end - first) / 4096 <= sparse_pages_per_word * words;
  return w;
}

void RawWords::read(void* buf, std::size_t n, std::uint64_t offset, const std::string& where) const {
  pread_all(fd_, buf, n, offset, where);
}

void RawWords::edit(const Way& way, std::uint64_t addr, std::span<const std::uint64_t> offs, std::span<const std::uint64_t> idx,
                    unsigned size, bool be, bool write, const std::string& where, const BlockFn& fn) {
  const std::size_t n = idx.size();
  std::vector<std::uint64_t> words(n);
  // Read: through the mapping (no system call per word), or one pread of the span when it is
  // dense enough, else one pread per word.
  const std::uint64_t lo = offs.front(), hi = offs.back() + size;  // offs ascend with idx
  if (way.map_reads) {
    for (std::size_t k = 0; k < n; ++k) words[k] = load_word(map_ + addr + offs[k], size, be);
  } else if (hi - lo <= std::max<std::uint64_t>(4096, 16 * n * size)) {
    std::vector<std::byte> buf(hi - lo);
    pread_all(fd_, buf.data(), buf.size(), addr + lo, where);
    for (std::size_t k = 0; k < n; ++k) words[k] = load_word(buf.data() + (offs[k] - lo), size, be);
  } else {
    // Sparse: one pread per word (on two threads when there are thousands: each is a page-cache
    // lookup and a cache miss, and reads take no inode lock), unless this file read or wrote the
    // word before (planning reads the words that applying then changes: one pread each, not two).
    const bool fresh = known_.empty();
    detail::on_two_threads(n, two_threads_from, [&](std::size_t from, std::size_t to) {
      std::byte w[8];
      for (std::size_t k = from; k < to; ++k) {
        const std::uint64_t at = addr + offs[k];
        if (!fresh)
          if (const auto hit = known_.find(at); hit != known_.end()) {
            words[k] = hit->second;
            continue;
          }
        pread_all(fd_, w, size, at, where);
        words[k] = load_word(w, size, be);
      }
    });
    for (std::size_t k = 0; k < n; ++k) known_.emplace(addr + offs[k], words[k]);
  }
  const std::vector<std::uint64_t> before = words;
  fn(idx, words);
  if (!write || words == before) return;
  // Write word by word, each all-or-nothing whenever the process dies: one store instruction into
  // the mapping (sizes 1, 2, 4, 8), else one pwrite. One thread, in file order: releasing a region
  // flushes the TLB of every CPU running the process, so a second thread storing alongside was no
  // faster (docs/design/ckpt-flip-io.md, "Word I/O").
  const bool stores = way.map && (size == 1 || size == 2 || size == 4 || size == 8);
  std::byte w[8];
  for (std::size_t k = 0; k < n; ++k) {
    if (words[k] == before[k]) continue;
    store_word(w, size, be, words[k]);
    const std::uint64_t at = addr + offs[k];
    if (stores) hold_region(map_, map_len_, held_region_, at >> store_region_shift);
    switch (stores ? size : 0) {  // constant sizes: one store instruction each
      case 1: std::memcpy(map_ + at, w, 1); break;
      case 2: std::memcpy(map_ + at, w, 2); break;
      case 4: std::memcpy(map_ + at, w, 4); break;
      case 8: std::memcpy(map_ + at, w, 8); break;
      default: pwrite_all(fd_, w, size, at, where);  // no mapping, or an odd width
    }
  }
  if (stores) map_stored_ = true;
  if (!known_.empty())
    for (std::size_t k = 0; k < n; ++k)
      if (const auto hit = known_.find(addr + offs[k]); hit != known_.end()) hit->second = words[k];
}

void RawWords::close(bool sync, const std::string& path) {
  if (map_) {
    const int rc = sync && map_stored_ ? ::msync(map_, map_len_, MS_SYNC) : 0;
    ::munmap(std::exchange(map_, nullptr), map_len_);
    if (rc != 0) throw IoError(path + ": msync failed: " + std::strerror(errno));
  }
  if (fd_ >= 0) {
    const int fd = std::exchange(fd_, -1);
    if (sync && ::fsync(fd) != 0) {
      ::close(fd);
      throw IoError(path + ": fsync failed: " + std::strerror(errno));
    }
    ::close(fd);
  }
}

}  // namespace resil::inject

#include "resil/inject/words.hpp"
#include "resil/inject/deflate_chunks.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "two_threads.hpp"

namespace resil::inject {

namespace h5 = ckpt::h5;

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

std::vector<hsize_t> unravel(std::uint64_t flat, const std::vector<hsize_t>& shape) {
  std::vector<hsize_t> nd(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    nd[d] = flat % shape[d];
    flat /= shape[d];
  }
  return nd;
}

// Per-word system calls go on two threads, stores through the mapping on two processes, from this
// many words on.
constexpr std::size_t two_threads_from = 2048;
template <class Fn>
void on_two_threads(std::size_t n, Fn&& fn) {
  detail::on_two_threads(n, two_threads_from, std::forward<Fn>(fn));
}

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
// evicted when thousands of folios were touched; docs/performance.md, "Word I/O"). The last
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

// fn(0, n, false) here when n < from. Else fn(split, n, true) in a child process (fork: the same
// shared mapping, its own page tables) while fn(0, split, false) runs here; both have finished when
// it returns.
// Two processes rather than two threads: releasing a region flushes the TLB of every CPU that runs
// the process, so two threads of one process interrupt each other on every release (two threads
// were no faster than one; docs/performance.md, "Word I/O"). fn must only store and release (the
// child runs it in a copy of a possibly multi-threaded process: no allocation, no lock, no throw).
// Stores are idempotent, so whatever keeps the child from finishing its half (fork refused, no death
// signal, SIGCHLD ignored so its status is gone, a signal) makes this process store that half again.
// The child dies with this thread (PR_SET_PDEATHSIG): a killed injection leaves no process storing
// behind it, so a revert started after a kill -9 is not raced.
template <class Fn>
void on_two_processes(std::size_t n, std::size_t from, std::size_t split, Fn&& fn) {
  if (n < from || split == 0 || split >= n) {
    fn(std::size_t{0}, n, false);
    return;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(3);
    fn(split, n, true);
    ::_exit(0);
  }
  fn(std::size_t{0}, split, false);
  int status = 0;
  pid_t waited = pid;
  while (pid > 0 && (waited = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (pid < 0 || waited != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) fn(split, n, false);
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

WordIo WordFile::io_for(std::uint64_t words, std::uint64_t span_bytes) const noexcept {
  if (io_ != WordIo::automatic) return io_;
  // Syncing sparse words: stores through the mapping would dirty whole page-cache folios, and the
  // sync would write back all of them (see WordIo). Dense words share their folios anyway; without
  // the sync the mapping is faster on files cached in large folios (see WordIo).
  const bool sparse = span_bytes / 4096 > sparse_pages_per_word * words;
  return sync_ && access_ != Access::read && sparse ? WordIo::syscalls : WordIo::mapped;
}

std::byte* WordFile::mapping() {
  if (map_ || map_failed_ || file_size_ == 0 || fd_ < 0) return map_;
  void* m = ::mmap(nullptr, file_size_, PROT_READ | (access_ == Access::read ? 0 : PROT_WRITE), MAP_SHARED, fd_, 0);
  if (m == MAP_FAILED) {
    map_failed_ = true;
    return nullptr;
  }
  map_ = static_cast<std::byte*>(m);
  map_len_ = file_size_;
  return map_;
}

WordFile::WordFile(const std::string& path, Access access) : path_(path), access_(access) {
  io_ = word_io();
  if (io_ == WordIo::automatic) io_ = io_from_env();
  // Only a private copy is opened read-write through HDF5: a read-write open writes the superblock
  // (status flags on version 2/3, which a kill leaves set), and an in-place edit must never do that.
  file_ = h5::open_file(path, access == Access::rewrite ? h5::Mode::read_write : h5::Mode::read);
  fd_ = ::open(path.c_str(), (access == Access::read ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (fd_ < 0) throw IoError(path + ": cannot open" + (access == Access::read ? "" : " for writing") + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) == 0) file_size_ = static_cast<std::uint64_t>(st.st_size);
  h5::SilenceErrors quiet;
  h5::PropList fcpl(H5Fget_create_plist(file_));
  hsize_t ub = 0;
  if (fcpl.valid() && H5Pget_userblock(fcpl, &ub) >= 0) base_ = ub;
}

WordFile::~WordFile() {
  if (map_) ::munmap(map_, map_len_);
  if (fd_ >= 0) ::close(fd_);
}

void WordFile::close() {
  const bool writes = access_ != Access::read && sync_;
  if (file_.valid()) {
    h5::SilenceErrors quiet;
    if (access_ == Access::rewrite && H5Fflush(file_, H5F_SCOPE_LOCAL) < 0) h5::throw_error(path_ + ": flush failed");
    const hid_t id = file_.release();
    if (H5Fclose(id) < 0) h5::throw_error(path_ + ": close failed");
  }
  if (map_) {
    const int rc = writes && map_stored_ ? ::msync(map_, map_len_, MS_SYNC) : 0;
    ::munmap(std::exchange(map_, nullptr), map_len_);
    if (rc != 0) throw IoError(path_ + ": msync failed: " + std::strerror(errno));
  }
  if (fd_ >= 0) {
    const int fd = std::exchange(fd_, -1);
    if (writes && ::fsync(fd) != 0) {
      ::close(fd);
      throw IoError(path_ + ": fsync failed: " + std::strerror(errno));
    }
    ::close(fd);
  }
}

unsigned WordFile::width_of(const std::string& dataset) {
  h5::Dataset d = h5::open_dataset(file_, dataset, path_);
  h5::Datatype t(H5Dget_type(d));
  return static_cast<unsigned>(H5Tget_size(t) * 8);
}

// A dataset's element type, extent and storage, as edit() needs them.
struct WordFile::Layout {
  std::string name, where;
  h5::Dataset d;
  h5::Datatype ftype;
  h5::Dataspace space;
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
struct WordFile::Block {
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

WordFile::Layout WordFile::layout_of(const std::string& dataset) {
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

std::uint64_t WordFile::chunk_offset(const Layout& l, const std::vector<hsize_t>& start, std::uint64_t addr, std::uint64_t bytes) {
  if (base_ == 0) return addr;
  // With a user block, HDF5 1.10 reports chunk addresses relative to it (H5Dget_offset is absolute);
  // other versions may not: settle it once per file against the chunk's bytes as HDF5 reads them.
  if (chunk_rebase_ < 0) {
    std::vector<std::byte> want(bytes), at(bytes);
    std::uint32_t filters = 0;
    if (H5Dread_chunk(l.d, H5P_DEFAULT, start.data(), &filters, want.data()) < 0) return hdf5_only_chunk_;
    auto matches = [&](std::uint64_t off) {
      if (off + bytes > file_size_) return false;
      pread_all(fd_, at.data(), bytes, off, l.where);
      return at == want;
    };
    const bool rel = matches(addr + base_), abs = matches(addr);
    if (rel == abs) return hdf5_only_chunk_;  // undecided (e.g. equal bytes at both): leave it to HDF5
    chunk_rebase_ = rel ? 1 : 0;
  }
  return addr + (chunk_rebase_ ? base_ : 0);
}

std::vector<WordFile::Block> WordFile::blocks_of(const Layout& l, std::vector<std::uint64_t>& indices) {
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
                fresh * allocated <= std::max<std::uint64_t>(100'000'000, file_size_ / 8);
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

std::vector<std::uint64_t> WordFile::hdf5_only(const std::string& dataset, std::vector<std::uint64_t> indices) {
  const Layout l = layout_of(dataset);
  std::vector<std::uint64_t> out;
  for (const auto& b : blocks_of(l, indices))
    if (b.kind != Block::Kind::raw) out.insert(out.end(), b.idx.begin(), b.idx.end());
  std::sort(out.begin(), out.end());
  return out;
}

void WordFile::edit(const std::string& dataset, std::vector<std::uint64_t> indices, const BlockFn& fn) {
  if (indices.empty()) return;
  const Layout l = layout_of(dataset);
  auto blocks = blocks_of(l, indices);
  // Chunks of a deflate or shuffle+deflate dataset: raw chunk I/O with libdeflate on a pool
  // (deflate_chunks.hpp). What it leaves (unallocated chunks, a skipped filter) goes on below.
  if (l.filtered && chunk_codec_options().direct &&
      std::all_of(blocks.begin(), blocks.end(), [](const Block& b) { return b.kind == Block::Kind::chunk; }))
    if (const auto pipeline = deflate_pipeline(l.d, l.size)) {
      std::vector<ChunkTask> tasks;
      for (const auto& b : blocks) tasks.push_back({b.start, b.idx});
      const auto mode = access_ == Access::rewrite    ? ChunkWrite::write
                        : access_ == Access::in_place ? ChunkWrite::refuse
                                                      : ChunkWrite::none;
      const auto done = edit_deflate_chunks(l.d, l.where, {l.shape, l.chunk, l.size, l.be}, *pipeline, tasks, mode, fn);
      std::vector<Block> rest;
      for (std::size_t i = 0; i < blocks.size(); ++i)
        if (!done[i]) rest.push_back(std::move(blocks[i]));
      blocks = std::move(rest);
    }
  // One way for all raw blocks of this edit, by their density over the file span they cover (the
  // mapping only if it covers them all).
  std::uint64_t raw_words = 0, first = ~std::uint64_t{0}, end = 0;
  for (const auto& b : blocks)
    if (b.kind == Block::Kind::raw) {
      raw_words += b.idx.size();
      first = std::min(first, b.addr + b.offs.front());
      end = std::max(end, b.addr + b.offs.back() + l.size);
    }
  const bool use_map = raw_words > 0 && io_for(raw_words, end - first) == WordIo::mapped && mapping() && end <= map_len_;
  // Sparse words are read with pread even when they are written through the mapping: a read fault
  // maps (and munmap later unmaps) 16 pages around each word, and a store into a page that is not
  // mapped yet costs no more than one into a page mapped read-only (measured with bench_word_io:
  // docs/performance.md, "Word I/O").
  const bool map_reads = use_map && (end - first) / 4096 <= sparse_pages_per_word * raw_words;
  h5::SilenceErrors quiet;
  std::vector<std::byte> buf;
  std::vector<std::uint64_t> words, before;
  for (const auto& b : blocks) {
    const std::size_t n = b.idx.size();
    words.resize(n);
    if (b.kind == Block::Kind::raw) {
      // Read: through the mapping (no system call per word), or one pread of the span when it is
      // dense enough, else one pread per word.
      const std::uint64_t lo = b.offs.front(), hi = b.offs.back() + l.size;  // offs ascend with idx
      if (map_reads) {
        for (std::size_t k = 0; k < n; ++k) words[k] = load_word(map_ + b.addr + b.offs[k], l.size, l.be);
      } else if (hi - lo <= std::max<std::uint64_t>(4096, 16 * n * l.size)) {
        buf.resize(hi - lo);
        pread_all(fd_, buf.data(), buf.size(), b.addr + lo, l.where);
        for (std::size_t k = 0; k < n; ++k) words[k] = load_word(buf.data() + (b.offs[k] - lo), l.size, l.be);
      } else {
        // Sparse: one pread per word (on two threads when there are thousands: each is a page-cache
        // lookup and a cache miss, and reads take no inode lock), unless this WordFile read or
        // wrote the word before (planning reads the words that applying then changes: one pread
        // each, not two).
        const bool fresh = known_.empty();
        on_two_threads(n, [&](std::size_t from, std::size_t to) {
          std::byte w[8];
          for (std::size_t k = from; k < to; ++k) {
            const std::uint64_t at = b.addr + b.offs[k];
            if (!fresh)
              if (const auto hit = known_.find(at); hit != known_.end()) {
                words[k] = hit->second;
                continue;
              }
            pread_all(fd_, w, l.size, at, l.where);
            words[k] = load_word(w, l.size, l.be);
          }
        });
        for (std::size_t k = 0; k < n; ++k) known_.emplace(b.addr + b.offs[k], words[k]);
      }
      before = words;
      fn(b.idx, words);
      if (access_ == Access::read || words == before) continue;
      // Write word by word, each all-or-nothing whenever the process dies: one store instruction
      // into the mapping (sizes 1, 2, 4, 8), else one pwrite.
      const bool stores = use_map && (l.size == 1 || l.size == 2 || l.size == 4 || l.size == 8);
      auto region_of = [&](std::size_t k) { return (b.addr + b.offs[k]) >> store_region_shift; };
      auto write_words = [&](std::size_t from, std::size_t to, bool child) {
        std::byte w[8];
        std::uint64_t child_held = no_region;  // a child's page tables start empty; exit unmaps its last region
        std::uint64_t& held = child ? child_held : held_region_;
        for (std::size_t k = from; k < to; ++k) {
          if (words[k] == before[k]) continue;
          store_word(w, l.size, l.be, words[k]);
          std::byte* dst = stores ? map_ + b.addr + b.offs[k] : nullptr;
          if (stores) hold_region(map_, map_len_, held, region_of(k));
          switch (stores ? l.size : 0) {  // constant sizes: one store instruction each
            case 1: std::memcpy(dst, w, 1); break;
            case 2: std::memcpy(dst, w, 2); break;
            case 4: std::memcpy(dst, w, 4); break;
            case 8: std::memcpy(dst, w, 8); break;
            default: pwrite_all(fd_, w, l.size, b.addr + b.offs[k], l.where);  // no mapping, or an odd width
          }
        }
      };
      // Many stores through the mapping go out in two processes, each on its own store regions:
      // each first store into a folio faults and walks its buffer heads, which two cores do side
      // by side (a pwrite holds the inode lock, so the syscall way stays on one thread).
      if (stores) {
        std::size_t split = n / 2;
        while (split > 0 && split < n && region_of(split) == region_of(split - 1)) ++split;
        on_two_processes(n, two_threads_from, split, write_words);
        map_stored_ = true;
      } else {
        write_words(0, n, false);
      }
      if (!known_.empty())
        for (std::size_t k = 0; k < n; ++k)
          if (const auto hit = known_.find(b.addr + b.offs[k]); hit != known_.end()) hit->second = words[k];
      continue;
    }

    h5::Dataspace fsel(H5Scopy(l.space));
    h5::Dataspace msel;
    if (b.kind == Block::Kind::chunk) {
      std::uint64_t region = 1;
      for (auto c : b.count) region *= c;
      buf.resize(region * l.size);
      RESIL_H5_CHECK(H5Sselect_hyperslab(fsel, H5S_SELECT_SET, b.start.data(), nullptr, b.count.data(), nullptr), l.where + ": select chunk");
      msel = h5::Dataspace(H5Screate_simple(l.rank, b.count.data(), nullptr));
      if (H5Dread(l.d, l.ftype, msel, fsel, H5P_DEFAULT, buf.data()) < 0)
        h5::throw_error(l.where + ": cannot read chunk (damaged data or missing filter?)", ExitCode::corrupt_input);
      for (std::size_t k = 0; k < n; ++k) words[k] = load_word(buf.data() + b.offs[k], l.size, l.be);
    } else {
      buf.resize(n * l.size);
      if (l.rank > 0) {
        std::vector<hsize_t> coords(n * l.shape.size());
        for (std::size_t i = 0; i < n; ++i) {
          const auto nd = unravel(b.idx[i], l.shape);
          std::copy(nd.begin(), nd.end(), coords.begin() + static_cast<std::ptrdiff_t>(i * nd.size()));
        }
        RESIL_H5_CHECK(H5Sselect_elements(fsel, H5S_SELECT_SET, n, coords.data()), l.where + ": select elements");
      }
      const hsize_t cnt = n;
      msel = h5::Dataspace(l.rank > 0 ? H5Screate_simple(1, &cnt, nullptr) : H5Screate(H5S_SCALAR));
      if (H5Dread(l.d, l.ftype, msel, fsel, H5P_DEFAULT, buf.data()) < 0)
        h5::throw_error(l.where + ": cannot read elements", ExitCode::corrupt_input);
      for (std::size_t k = 0; k < n; ++k) words[k] = load_word(buf.data() + k * l.size, l.size, l.be);
    }
    before = words;
    fn(b.idx, words);
    if (access_ == Access::read || words == before) continue;
    if (access_ == Access::in_place)
      throw Error(l.where + ": element " + std::to_string(b.idx.front()) +
                  " lies in a filtered or unallocated block, which only a staged copy may change (in-place edit refused)");
    for (std::size_t k = 0; k < n; ++k)
      store_word(buf.data() + (b.kind == Block::Kind::chunk ? b.offs[k] : k * l.size), l.size, l.be, words[k]);
    if (H5Dwrite(l.d, l.ftype, msel, fsel, H5P_DEFAULT, buf.data()) < 0) h5::throw_error(l.where + ": cannot write " + (b.kind == Block::Kind::chunk ? "chunk" : "elements"));
  }
}

}  // namespace resil::inject

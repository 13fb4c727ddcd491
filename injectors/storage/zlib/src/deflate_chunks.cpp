// Direct chunk I/O for deflate / shuffle+deflate datasets (see deflate_chunks.hpp). Per touched
// chunk: H5Dread_chunk (calling thread) -> inflate + gather touched words (pool) -> fn (calling
// thread, task order) -> scatter changed words + patch the stored stream, or deflate in full when
// the patcher declines (pool) -> H5Dwrite_chunk (calling thread, task order). Words are read and written at their positions in the shuffled layout (byte j of
// element e of an n-element chunk lies at j * n + e), which is what unshuffle, edit, shuffle
// would produce without the two passes over the chunk.
#include "resil/inject/deflate_chunks.hpp"

#include "resil/core/cpus.hpp"
#include "resil/inject/deflate_patch.hpp"

#include <libdeflate.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace resil::inject {

namespace h5 = ckpt::h5;

namespace {

std::atomic<bool> g_direct{true}, g_patch{true};
std::atomic<unsigned> g_threads{0};
std::atomic<std::uint64_t> g_read{0}, g_written{0}, g_patched{0}, g_deflated{0};

// One inflater and one deflater per thread (libdeflate objects are not shareable between threads).
struct Codec {
  libdeflate_decompressor* dec = nullptr;
  libdeflate_compressor* enc = nullptr;
  int level = -1;
  Codec() = default;
  Codec(const Codec&) = delete;
  Codec& operator=(const Codec&) = delete;
  ~Codec() {
    if (dec) libdeflate_free_decompressor(dec);
    if (enc) libdeflate_free_compressor(enc);
  }
  libdeflate_decompressor* inflater() {
    if (!dec && !(dec = libdeflate_alloc_decompressor())) throw std::bad_alloc();
    return dec;
  }
  libdeflate_compressor* deflater(int lvl) {
    if (enc && level != lvl) {
      libdeflate_free_compressor(enc);
      enc = nullptr;
    }
    if (!enc) {
      if (!(enc = libdeflate_alloc_compressor(lvl))) throw std::bad_alloc();
      level = lvl;
    }
    return enc;
  }
};

Codec& codec() {
  thread_local Codec c;
  return c;
}

// A byte buffer that keeps its capacity and does not zero what it grows into.
struct Buffer {
  std::unique_ptr<std::byte[]> p;
  std::size_t cap = 0, size = 0;
  void resize(std::size_t n) {
    if (n > cap) {
      p = std::make_unique_for_overwrite<std::byte[]>(n);
      cap = n;
    }
    size = n;
  }
  std::byte* data() noexcept { return p.get(); }
};

// Fixed worker threads over a FIFO of jobs; with no threads, submit() runs the job at once.
// The caller bounds how many jobs are queued (its window of slots).
class Pool {
public:
  explicit Pool(unsigned n) {
    for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { work(); });
  }
  ~Pool() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();  // running jobs finish; queued ones are dropped
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  void submit(std::function<void()> job) {
    if (threads_.empty()) {
      job();
      return;
    }
    {
      std::lock_guard lock(m_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (stop_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// A chunk in flight. `ready` (under the editor's mutex) is set when its current job is done.
struct Slot {
  std::size_t task = 0;
  Buffer comp, raw;
  std::vector<std::uint64_t> pos;  // element offset of each touched word in the full chunk
  std::vector<std::uint64_t> words, before;
  std::vector<std::uint64_t> bytes_changed;  // positions in raw, ascending
  std::vector<std::byte> patched;            // the patched stream when use_patched
  bool ready = false, changed = false, use_patched = false;
  std::exception_ptr error;
};

// RESIL_INJECT_THREADS=N (1..64) overrides the default thread count (benchmarks); 0 if unset.
unsigned env_threads() {
  const char* v = std::getenv("RESIL_INJECT_THREADS");
  if (!v || !*v) return 0;
  char* end = nullptr;
  const unsigned long n = std::strtoul(v, &end, 10);
  if (*end != '\0' || n < 1 || n > 64) throw UsageError(std::string("RESIL_INJECT_THREADS=") + v + ": expected 1..64");
  return static_cast<unsigned>(n);
}

// RESIL_INJECT_PATCH=0 turns token-level patching off (benchmarks compare the full deflate
// through the CLI); 1 or unset: on.
bool env_patch() {
  const char* v = std::getenv("RESIL_INJECT_PATCH");
  if (!v || !*v) return true;
  if (std::string(v) == "0") return false;
  if (std::string(v) == "1") return true;
  throw UsageError(std::string("RESIL_INJECT_PATCH=") + v + ": expected 0 or 1");
}

std::string chunk_name(std::span<const hsize_t> start) {
  std::string s = "chunk at [";
  for (std::size_t k = 0; k < start.size(); ++k) s += (k ? ", " : "") + std::to_string(start[k]);
  return s + "]";
}

}  // namespace

ChunkCodecOptions chunk_codec_options() noexcept { return {g_direct.load(), g_threads.load(), g_patch.load()}; }

void set_chunk_codec_options(const ChunkCodecOptions& opt) noexcept {
  g_direct = opt.direct;
  g_threads = opt.threads;
  g_patch = opt.patch;
}

ChunkCodecStats chunk_codec_stats() noexcept { return {g_read.load(), g_written.load(), g_patched.load(), g_deflated.load()}; }

std::optional<DeflatePipeline> deflate_pipeline(hid_t dset, unsigned elem_size) {
  h5::SilenceErrors quiet;
  h5::PropList dcpl(H5Dget_create_plist(dset));
  if (!dcpl.valid() || H5Pget_layout(dcpl) != H5D_CHUNKED) return std::nullopt;
  const int n = H5Pget_nfilters(dcpl);
  if (n != 1 && n != 2) return std::nullopt;
  DeflatePipeline p;
  for (int i = 0; i < n; ++i) {
    unsigned flags = 0, cd[8] = {};
    std::size_t ncd = 8;
    char name[64];
    unsigned config = 0;
    const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &ncd, cd, sizeof name, name, &config);
    if (n == 2 && i == 0) {
      if (id != H5Z_FILTER_SHUFFLE || ncd < 1 || cd[0] != elem_size) return std::nullopt;
      p.shuffle = true;
      continue;
    }
    if (id != H5Z_FILTER_DEFLATE || ncd < 1 || cd[0] > 9) return std::nullopt;
    p.level = cd[0];
  }
  return p;
}

std::vector<bool> edit_deflate_chunks(hid_t dset, const std::string& where, const ChunkGeometry& geom,
                                      const DeflatePipeline& pipeline, std::span<const ChunkTask> tasks, ChunkWrite write,
                                      const Hdf5Storage::BlockFn& fn, unsigned threads) {
  std::vector<bool> done(tasks.size(), false);
  if (tasks.empty()) return done;
  const std::size_t rank = geom.shape.size();
  const unsigned size = geom.size;
  std::uint64_t n = 1;  // elements of a stored chunk: edge chunks are stored full size
  for (auto c : geom.chunk) n *= c;
  const std::uint64_t chunk_bytes = n * size;
  const bool patch = g_patch.load() && env_patch();

  if (threads == 0) threads = g_threads.load();
  if (threads == 0) threads = env_threads();
  // By default at most 8: HDF5's calls on this thread keep up with about that many codecs, and
  // the window (2 chunks of buffers per slot) stays small with large chunks on large machines.
  if (threads == 0) threads = std::clamp(usable_cpus(), 1u, 8u);
  threads = static_cast<unsigned>(std::min<std::size_t>({threads, 64, tasks.size()}));
  // One thread: no pool, the codec runs on the calling thread between the HDF5 calls.
  const unsigned workers = threads > 1 ? threads : 0;
  const std::size_t window = workers ? 2 * std::size_t{workers} + 1 : 1;

  std::mutex m;
  std::condition_variable cv;
  std::vector<Slot> slots(window);
  auto finish = [&](Slot& s, std::exception_ptr e) {
    {
      std::lock_guard lock(m);
      s.error = e;
      s.ready = true;
    }
    cv.notify_all();
  };
  auto wait = [&](Slot& s) {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return s.ready; });
    if (s.error) std::rethrow_exception(s.error);
  };
  auto is_ready = [&](Slot& s) {
    std::lock_guard lock(m);
    return s.ready;
  };

  auto inflate = [&](Slot& s) {
    const ChunkTask& t = tasks[s.task];
    std::size_t got = 0, used = 0;
    const auto r = libdeflate_zlib_decompress_ex(codec().inflater(), s.comp.data(), s.comp.size, s.raw.data(), chunk_bytes,
                                                 &used, &got);
    if (r != LIBDEFLATE_SUCCESS || got != chunk_bytes) {
      const std::string why = r == LIBDEFLATE_BAD_DATA ? "is not a valid zlib stream"
                              : r == LIBDEFLATE_INSUFFICIENT_SPACE
                                  ? "inflates to more than the chunk's " + std::to_string(chunk_bytes) + " bytes"
                                  : "inflates to " + std::to_string(got) + " bytes, not the chunk's " + std::to_string(chunk_bytes);
      throw CorruptInputError(where + ": " + chunk_name(t.start) + ": stored " + std::to_string(s.comp.size) + " bytes " + why);
    }
    s.pos.resize(t.idx.size());
    s.words.resize(t.idx.size());
    std::byte w[8];
    for (std::size_t k = 0; k < t.idx.size(); ++k) {
      // Flat index -> offset in the full chunk shape (C order).
      std::uint64_t flat = t.idx[k], e = 0, stride = 1;
      for (std::size_t d = rank; d-- > 0;) {
        e += (flat % geom.shape[d] - t.start[d]) * stride;
        flat /= geom.shape[d];
        stride *= geom.chunk[d];
      }
      s.pos[k] = e;
      for (unsigned j = 0; j < size; ++j) w[j] = s.raw.data()[pipeline.shuffle ? j * n + e : e * size + j];
      s.words[k] = load_word(w, size, geom.big_endian);
    }
  };

  auto deflate = [&](Slot& s) {
    std::byte w[8];
    s.bytes_changed.clear();
    for (std::size_t k = 0; k < s.pos.size(); ++k) {
      if (s.words[k] == s.before[k]) continue;
      store_word(w, size, geom.big_endian, s.words[k]);
      const std::uint64_t e = s.pos[k];
      for (unsigned j = 0; j < size; ++j) {
        const std::uint64_t at = pipeline.shuffle ? j * n + e : e * size + j;
        if (s.raw.data()[at] == w[j]) continue;
        s.raw.data()[at] = w[j];
        s.bytes_changed.push_back(at);
      }
    }
    // The patcher checks its result by inflating it; anything it declines is deflated in full.
    std::sort(s.bytes_changed.begin(), s.bytes_changed.end());
    s.bytes_changed.erase(std::unique(s.bytes_changed.begin(), s.bytes_changed.end()), s.bytes_changed.end());
    s.use_patched = patch && patch_zlib({s.comp.data(), s.comp.size}, {s.raw.data(), chunk_bytes}, s.bytes_changed, s.patched);
    if (s.use_patched) {
      ++g_patched;
      return;
    }
    auto* enc = codec().deflater(static_cast<int>(pipeline.level));
    s.comp.resize(libdeflate_zlib_compress_bound(enc, chunk_bytes));
    const std::size_t got = libdeflate_zlib_compress(enc, s.raw.data(), chunk_bytes, s.comp.data(), s.comp.size);
    if (got == 0) throw Error(where + ": " + chunk_name(tasks[s.task].start) + ": deflate failed");
    s.comp.size = got;
    ++g_deflated;
  };

  auto job = [&](Slot& s, auto&& step) {
    return [&s, &finish, step] {
      std::exception_ptr e;
      try {
        step(s);
      } catch (...) {
        e = std::current_exception();
      }
      finish(s, e);
    };
  };

  h5::SilenceErrors quiet;
  Pool pool(workers);  // destroyed first: no job outlives the slots
  std::size_t next_task = 0;
  std::uint64_t n_read = 0, n_fn = 0, n_written = 0;  // sequence numbers of slots

  // Next allocated, unskipped chunk into a free slot (false: nothing left to read).
  auto read_next = [&]() -> bool {
    while (next_task < tasks.size()) {
      const std::size_t ti = next_task++;
      const ChunkTask& t = tasks[ti];
      hsize_t stored = 0;
      if (H5Dget_chunk_storage_size(dset, t.start.data(), &stored) < 0 || stored == 0) continue;  // not allocated
      Slot& s = slots[n_read % window];
      s.task = ti;
      s.comp.resize(stored);
      s.raw.resize(chunk_bytes);
      std::uint32_t mask = 0;
      if (H5Dread_chunk(dset, H5P_DEFAULT, t.start.data(), &mask, s.comp.data()) < 0)
        h5::throw_error(where + ": cannot read " + chunk_name(t.start), ExitCode::corrupt_input);
      if (mask != 0) continue;  // stored with a filter skipped: HDF5 knows how to read it
      done[ti] = true;
      ++g_read;
      s.ready = false;
      ++n_read;
      pool.submit(job(s, inflate));
      return true;
    }
    return false;
  };

  for (;;) {
    while (n_read - n_written < window && read_next()) {
    }
    if (n_fn < n_read) {
      Slot& s = slots[n_fn % window];
      wait(s);
      s.before = s.words;
      fn(tasks[s.task].idx, s.words);
      s.changed = s.words != s.before;
      if (s.changed && write == ChunkWrite::refuse)
        throw Error(where + ": element " + std::to_string(tasks[s.task].idx.front()) +
                    " lies in a filtered or unallocated block, which only a staged copy may change (in-place edit refused)");
      if (s.changed && write == ChunkWrite::write) {
        s.ready = false;  // no job runs on this slot now
        pool.submit(job(s, deflate));
      } else {
        s.changed = false;
      }
      ++n_fn;
    } else if (n_written < n_fn) {
      // Nothing left to read or decode: the oldest write blocks below.
    } else {
      break;
    }
    // Writes in task order: the oldest slot once it is deflated. Block only when no callback is
    // waiting to run (a full window of decoded chunks is fed to fn first, keeping the pool busy).
    while (n_written < n_fn) {
      Slot& s = slots[n_written % window];
      if (n_fn < n_read && !is_ready(s)) break;
      wait(s);
      if (s.changed) {
        const ChunkTask& t = tasks[s.task];
        const std::byte* data = s.use_patched ? s.patched.data() : s.comp.data();
        const std::size_t bytes = s.use_patched ? s.patched.size() : s.comp.size;
        if (H5Dwrite_chunk(dset, H5P_DEFAULT, 0, t.start.data(), bytes, data) < 0)
          h5::throw_error(where + ": cannot write " + chunk_name(t.start));
        ++g_written;
      }
      ++n_written;
      if (n_fn == n_read) break;  // room for the next read
    }
  }
  return done;
}

}  // namespace resil::inject

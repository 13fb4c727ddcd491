// The kernel's share of an in-place contiguous injection: N scattered word flips (sorted offsets,
// 4-byte words, fixed seed) applied to a warm file with nothing else around them: no HDF5, no
// plan, no log. Each way reads the N words, then writes each word back flipped:
//   pread+pwrite    one pread and one pwrite per word (ckpt-flip's syscalls word I/O)
//   mapping         loads and stores through a shared mapping, then munmap (its mapped word I/O)
//   pread+mapping   pread, then stores through the mapping, unmapped at the end
//   pread+release   pread, then stores through the mapping in two processes (a forked child takes
//                   the upper half), each 2 MiB region unmapped (MADV_DONTNEED) right after its
//                   last store (ckpt-flip stores on one thread: docs/design/ckpt-flip-io.md)
// Prints, per way, the read / write / munmap seconds and the total. bench_inject.py runs it on its
// own contiguous files right after ckpt-flip, so the tool's time can be read against the floor the
// page cache sets (ext4 with large folios: the first write to a page walks its folio's buffer heads).
// Every run flips the same words twice in a row (flip, then flip back), so the file ends as it began.
//   bench_word_io FILE [--words N] [--offset BYTES] [--way NAME]   (default: all four ways)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "resil/core/rng.hpp"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_word_io: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

struct Times {
  double read = 0, write = 0, unmap = 0;
};

Times run(const std::string& way, int fd, std::uint64_t size, const std::vector<std::uint64_t>& off) {
  Times t;
  std::vector<std::uint32_t> v(off.size());
  std::byte* map = nullptr;
  const bool mapped_read = way == "mapping", mapped_write = way != "pread+pwrite", release = way == "pread+release";
  const double t0 = now();
  if (mapped_write) {
    void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) die("mmap");
    map = static_cast<std::byte*>(m);
  }
  for (std::size_t i = 0; i < off.size(); ++i) {
    if (mapped_read) {
      std::memcpy(&v[i], map + off[i], 4);
    } else if (::pread(fd, &v[i], 4, static_cast<off_t>(off[i])) != 4) {
      die("pread");
    }
  }
  const double t1 = now();
  constexpr unsigned shift = 21;  // 2 MiB regions
  auto store = [&](std::size_t from, std::size_t to) {
    std::uint64_t region = ~std::uint64_t{0};
    auto drop = [&] {
      if (release && region != ~std::uint64_t{0})
        ::madvise(map + (region << shift), std::min<std::uint64_t>(size - (region << shift), std::uint64_t{1} << shift), MADV_DONTNEED);
    };
    for (std::size_t i = from; i < to; ++i) {
      const std::uint32_t w = v[i] ^ 1u;
      if (off[i] >> shift != region) {
        drop();
        region = off[i] >> shift;
      }
      if (mapped_write) {
        std::memcpy(map + off[i], &w, 4);
      } else if (::pwrite(fd, &w, 4, static_cast<off_t>(off[i])) != 4) {
        die("pwrite");
      }
    }
    drop();
  };
  if (release) {
    std::size_t split = off.size() / 2;
    while (split > 0 && split < off.size() && off[split] >> shift == off[split - 1] >> shift) ++split;
    const pid_t pid = ::fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
      store(split, off.size());
      ::_exit(0);
    }
    store(0, split);
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) die("child");
  } else {
    store(0, off.size());
  }
  const double t2 = now();
  if (map) ::munmap(map, size);
  const double t3 = now();
  t.read = t1 - t0;
  t.write = t2 - t1;
  t.unmap = t3 - t2;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_word_io FILE [--words N] [--offset BYTES] [--way pread+pwrite|mapping|pread+mapping|pread+release]\n");
    return 2;
  }
  const std::string path = argv[1];
  std::size_t words = 10000;
  std::uint64_t first = 0;
  std::vector<std::string> ways{"pread+pwrite", "mapping", "pread+mapping", "pread+release"};
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--words") words = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--offset") first = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--way") ways = {argv[i + 1]};
    else {
      std::fprintf(stderr, "bench_word_io: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) die(path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) die(path);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < first + 4 * words) {
    std::fprintf(stderr, "bench_word_io: %s: too small for %zu words after offset %llu\n", path.c_str(), words,
                 static_cast<unsigned long long>(first));
    return 2;
  }
  // Distinct 4-byte-aligned offsets in [first, size), ascending (as ckpt-flip applies them).
  std::vector<std::uint64_t> off;
  const std::uint64_t slots = (size - first) / 4;
  for (std::uint64_t i = 0; off.size() < words; ++i) off.push_back(first + 4 * (resil::Rng::at(11, 0, i) % slots));
  std::sort(off.begin(), off.end());
  off.erase(std::unique(off.begin(), off.end()), off.end());
  std::printf("bench_word_io: %s, %.1f MiB, %zu words\n", path.c_str(), static_cast<double>(size) / (1 << 20), off.size());
  for (const auto& way : ways) {
    if (way != "pread+pwrite" && way != "mapping" && way != "pread+mapping" && way != "pread+release") {
      std::fprintf(stderr, "bench_word_io: unknown way %s\n", way.c_str());
      return 2;
    }
    const Times a = run(way, fd, size, off);
    run(way, fd, size, off);  // flip back: the file ends as it began
    std::printf("  %-14s read %.4f s  write %.4f s  munmap %.4f s  total %.4f s\n", way.c_str(), a.read, a.write, a.unmap,
                a.read + a.write + a.unmap);
  }
  ::close(fd);
  return 0;
}

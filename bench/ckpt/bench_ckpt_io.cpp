// Checkpoint write/read throughput vs dd on the same disk and vs h5py writing the same arrays.
// Size: RESIL_BENCH_CKPT_MB (default 1024) in 64 MiB fp32 tensors; directory: RESIL_BENCH_DIR_OUT
// (default: the build tree, i.e. the same disk the project lives on). Prints GB/s and ratios.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/fs.hpp"

using namespace resil::ckpt;
namespace stdfs = std::filesystem;

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Evict a file from the page cache so the read measures the disk, not memory.
void evict(const stdfs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

double run_timed(const std::string& cmd) {
  const double t0 = now();
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "bench: command failed: %s\n", cmd.c_str());
    std::exit(1);
  }
  return now() - t0;
}

double best_of(int n, const std::function<double()>& f) {
  double best = 1e30;
  for (int i = 0; i < n; ++i) best = std::min(best, f());
  return best;
}
}  // namespace

int main() {
  const char* mb_env = std::getenv("RESIL_BENCH_CKPT_MB");
  const std::size_t mb = mb_env ? std::strtoull(mb_env, nullptr, 10) : 1024;
  const char* dir_env = std::getenv("RESIL_BENCH_DIR_OUT");
  const stdfs::path dir = dir_env ? stdfs::path(dir_env) : stdfs::current_path() / "bench-ckpt-io";
  stdfs::create_directories(dir);
  const std::size_t tensor_mb = std::min<std::size_t>(64, mb);
  const std::size_t n = mb / tensor_mb, elems = tensor_mb * (std::size_t{1} << 20) / 4;
  const double gb = static_cast<double>(n * elems * 4) / 1e9;
  std::printf("checkpoint: %zu tensors x %zu MiB fp32 = %.3f GB in %s\n", n, tensor_mb, gb, dir.c_str());

  Checkpoint c;
  for (std::size_t i = 0; i < n; ++i) {
    Tensor t(DType::f32, {elems});
    for (auto& v : t.as<float>()) v = static_cast<float>(i);
    c.model["p" + std::to_string(i)] = std::move(t);
  }
  const stdfs::path ours = dir / "resil.h5", ddf = dir / "dd.bin", pyf = dir / "h5py.h5";

  // Writes: resil and dd alternate (so drift in the machine's load hits both alike), and each writes
  // a new file: the previous one is removed and synced outside the timing (renaming over or
  // truncating a 1 GiB file frees its extents synchronously, which is not the cost of a write).
  const std::string count = std::to_string(n * tensor_mb);
  auto drop = [&](const stdfs::path& p) {
    std::error_code ec;
    stdfs::remove(p, ec);
    stdfs::remove(p.string() + ".done", ec);
    ::sync();
  };
  double t_write = 1e30, t_dd_write = 1e30;
  for (int i = 0; i < 3; ++i) {
    drop(ours);
    const double t0 = now();
    save(ours, c);  // includes fsync of file and directory and the commit marker
    t_write = std::min(t_write, now() - t0);
    drop(ddf);
    t_dd_write = std::min(t_dd_write, run_timed("dd if=/dev/zero of=" + ddf.string() + " bs=1M count=" + count +
                                                " conv=fsync status=none"));
  }
  double t_read = 1e30, t_dd_read = 1e30;
  for (int i = 0; i < 5; ++i) {
    evict(ours);
    const double t0 = now();
    const Checkpoint r = read(ours);
    t_read = std::min(t_read, now() - t0);
    if (r.model.size() != n) std::exit(1);
    evict(ddf);
    t_dd_read = std::min(t_dd_read, run_timed("dd if=" + ddf.string() + " of=/dev/null bs=1M status=none"));
  }
  const double t_py = best_of(3, [&] {
    drop(pyf);
    const std::string cmd = "/usr/bin/python3 " RESIL_BENCH_DIR "/h5py_write.py " + pyf.string() + " " + std::to_string(n) + " " +
                            std::to_string(elems) + " > " + (dir / "py.txt").string();
    run_timed(cmd);
    return std::stod(fs::read_file(dir / "py.txt"));
  });

  std::printf("%-28s %10s %10s\n", "", "seconds", "GB/s");
  std::printf("%-28s %10.3f %10.3f\n", "resil save (fsync+commit)", t_write, gb / t_write);
  std::printf("%-28s %10.3f %10.3f\n", "dd write (conv=fsync)", t_dd_write, gb / t_dd_write);
  std::printf("%-28s %10.3f %10.3f\n", "h5py write (+fsync)", t_py, gb / t_py);
  std::printf("%-28s %10.3f %10.3f\n", "resil read (cold cache)", t_read, gb / t_read);
  std::printf("%-28s %10.3f %10.3f\n", "dd read (cold cache)", t_dd_read, gb / t_dd_read);
  std::printf("ratio write resil/dd   = %.2f (goal >= 0.90)\n", t_dd_write / t_write);
  std::printf("ratio write resil/h5py = %.2f\n", t_py / t_write);
  std::printf("ratio read  resil/dd   = %.2f (goal >= 0.90)\n", t_dd_read / t_read);
  std::error_code ec;
  stdfs::remove_all(dir, ec);
  return 0;
}

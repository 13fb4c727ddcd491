// Per-chunk cost of the token-level zlib patch (deflate_patch.hpp, verification inflate included)
// against the baseline it replaces, a full libdeflate deflate at the same level, on the chunk
// ckpt-flip's gzip benchmark edits: 500x500 fp32 normals in HDF5's shuffled layout, deflated by
// zlib at level 4 (what HDF5's filter writes for h5py's compression="gzip"), with ~9 single-bit
// flips per chunk. Also from a libdeflate-made stream (a chunk an earlier fallback rewrote).
// Prints medians over --reps and the ratio; label perf.
//   bench_deflate_patch [--elems N] [--flips F] [--level L] [--reps R]
#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "resil/core/rng.hpp"
#include "resil/inject/deflate_patch.hpp"

using Bytes = std::vector<std::byte>;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Bytes zlib_compress(const Bytes& d, int level) {
  uLongf n = compressBound(static_cast<uLong>(d.size()));
  Bytes out(n);
  if (compress2(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(d.data()),
                static_cast<uLong>(d.size()), level) != Z_OK)
    throw std::runtime_error("compress2 failed");
  out.resize(n);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t elems = 250000, flips = 9, reps = 30;
  int level = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const std::uint64_t v = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--elems") elems = v;
    else if (a == "--flips") flips = v;
    else if (a == "--level") level = static_cast<int>(v);
    else if (a == "--reps") reps = v;
    else {
      std::fprintf(stderr, "bench_deflate_patch: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (elems == 0 || reps == 0 || level < 1 || level > 9) {
    std::fprintf(stderr, "bench_deflate_patch: --elems, --reps >= 1, --level 1..9\n");
    return 2;
  }
  const std::size_t n = elems * 4;
  Bytes d(n);
  resil::Rng rng(20261121, 0);
  for (std::uint64_t e = 0; e < elems; ++e) {
    const float f = static_cast<float>(rng.normal());
    std::uint32_t w;
    std::memcpy(&w, &f, 4);
    for (unsigned j = 0; j < 4; ++j) d[j * elems + e] = static_cast<std::byte>(w >> (8 * j));
  }
  auto* enc = libdeflate_alloc_compressor(level);
  auto* dec = libdeflate_alloc_decompressor();
  Bytes full(libdeflate_zlib_compress_bound(enc, n)), raw(n);

  std::printf("chunk: %llu fp32 (%.2f MB) shuffled, %llu single-bit flips, level %d, median of %llu\n",
              static_cast<unsigned long long>(elems), static_cast<double>(n) / 1e6, static_cast<unsigned long long>(flips),
              level, static_cast<unsigned long long>(reps));
  int bad = 0;
  for (const char* origin : {"zlib", "libdeflate"}) {
    Bytes stream;
    if (std::string(origin) == "zlib") {
      stream = zlib_compress(d, level);
    } else {
      stream.resize(full.size());
      stream.resize(libdeflate_zlib_compress(enc, d.data(), n, stream.data(), stream.size()));
    }
    std::vector<double> t_patch, t_deflate, t_inflate, t_unverified;
    std::size_t patched_size = 0, deflated_size = 0, declined = 0;
    Bytes out;
    for (std::uint64_t r = 0; r < reps; ++r) {
      Bytes nd = d;
      std::vector<std::uint64_t> f;
      for (std::uint64_t k = 0; k < flips; ++k) {
        const std::uint64_t e = rng.below(elems), bit = rng.below(32);
        const std::uint64_t at = (bit / 8) * elems + e;
        nd[at] ^= static_cast<std::byte>(1u << (bit % 8));
        f.push_back(at);
      }
      std::sort(f.begin(), f.end());
      f.erase(std::unique(f.begin(), f.end()), f.end());

      auto t0 = Clock::now();
      if (libdeflate_zlib_decompress(dec, stream.data(), stream.size(), raw.data(), n, nullptr) != LIBDEFLATE_SUCCESS) ++bad;
      auto t1 = Clock::now();
      const bool ok = resil::inject::patch_zlib(stream, nd, f, out);
      auto t2 = Clock::now();
      const std::size_t got = libdeflate_zlib_compress(enc, nd.data(), n, full.data(), full.size());
      auto t3 = Clock::now();
      Bytes unverified;
      (void)resil::inject::patch_zlib(stream, nd, f, unverified, {false});
      auto t4 = Clock::now();
      if (unverified != out) ++bad;
      if (!ok) ++declined;
      if (got == 0) ++bad;
      t_inflate.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      t_patch.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      t_deflate.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
      t_unverified.push_back(std::chrono::duration<double, std::milli>(t4 - t3).count());
      patched_size = out.size();
      deflated_size = got;
    }
    const double p = median(t_patch), df = median(t_deflate);
    std::printf("%-10s stream %zu B: inflate %.2f ms | baseline full deflate %.2f ms (%zu B) | patch+verify %.2f ms (%zu B) | "
                "speedup %.1fx | declined %zu/%llu (patch alone, unverified: %.2f ms)\n",
                origin, stream.size(), median(t_inflate), df, deflated_size, p, patched_size, df / p, declined,
                static_cast<unsigned long long>(reps), median(t_unverified));
    if (declined) ++bad;
  }
  libdeflate_free_compressor(enc);
  libdeflate_free_decompressor(dec);
  return bad ? 1 : 0;
}

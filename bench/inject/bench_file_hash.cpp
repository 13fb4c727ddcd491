// The file identity hashes of a flip log on one file, from the page cache: sample-sha256 (the
// default), SHA-256 of every byte, and XXH64 of every byte (a non-cryptographic hash at memory
// bandwidth: the least any whole-file hash costs here). Median of N runs each, after one untimed
// read of the whole file. usage: bench_file_hash FILE [N=9]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "resil/ckpt/hash.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_file_hash FILE [N]\n");
    return 2;
  }
  const std::string file = argv[1];
  const int n = argc > 2 ? std::atoi(argv[2]) : 9;
  (void)resil::ckpt::xxh64_file(file);  // warm
  const auto median_ms = [&](const std::function<void()>& fn) {
    std::vector<double> t;
    for (int i = 0; i < n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const double sample = median_ms([&] { (void)resil::ckpt::sample_sha256_file(file); });
  const double xxh = median_ms([&] { (void)resil::ckpt::xxh64_file(file); });
  const double sha = median_ms([&] { (void)resil::ckpt::sha256_file(file); });
  std::printf("%s: sample-sha256 %.3f ms, xxh64 (whole file) %.1f ms, sha256 (whole file) %.1f ms (median of %d)\n", file.c_str(),
              sample, xxh, sha, n);
  return 0;
}

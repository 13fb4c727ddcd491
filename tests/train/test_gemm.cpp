// resil's GEMM: every path gives exactly the bits of the order the contract in gemm.hpp states
// (a sequential FMA chain over k per output element), whatever the shapes, strides, transposes,
// alpha/beta, thread count or instruction path.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gemm.hpp"
#include "resil/core/rng.hpp"

namespace {
using namespace resil::train::gemm;

struct Case {
  bool ta, tb;
  int m, n, k, lda, ldb, ldc;
  float alpha, beta;
  std::vector<float> a, b, c;
};

Case make_case(resil::Rng& rng, int m, int n, int k) {
  Case x;
  x.ta = rng.below(2) != 0;
  x.tb = rng.below(2) != 0;
  x.m = m;
  x.n = n;
  x.k = k;
  x.lda = (x.ta ? m : k) + static_cast<int>(rng.below(3));
  x.ldb = (x.tb ? k : n) + static_cast<int>(rng.below(3));
  x.ldc = n + static_cast<int>(rng.below(3));
  const float alphas[] = {1.0f, 0.5f, -1.5f}, betas[] = {0.0f, 1.0f, 0.25f};
  x.alpha = alphas[rng.below(3)];
  x.beta = betas[rng.below(3)];
  auto fill = [&](std::vector<float>& v, std::size_t size) {
    v.resize(size + 1);  // one element past the last row: reading it would be a bug the sanitizer sees
    for (auto& e : v) e = static_cast<float>(rng.normal());
  };
  fill(x.a, static_cast<std::size_t>(x.ta ? k : m) * x.lda);
  fill(x.b, static_cast<std::size_t>(x.tb ? n : k) * x.ldb);
  fill(x.c, static_cast<std::size_t>(m) * x.ldc);
  return x;
}

std::vector<float> run(Case x, Path p, int threads) {
  sgemm(p, threads, x.ta, x.tb, x.m, x.n, x.k, x.alpha, x.a.data(), x.lda, x.b.data(), x.ldb, x.beta, x.c.data(), x.ldc);
  return x.c;
}

std::vector<float> reference(Case x) {
  sgemm_reference(x.ta, x.tb, x.m, x.n, x.k, x.alpha, x.a.data(), x.lda, x.b.data(), x.ldb, x.beta, x.c.data(), x.ldc);
  return x.c;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

bool have_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
}  // namespace

TEST_CASE("the reference GEMM is the stated FMA chain", "[gemm][unit]") {
  // s = fma(-1, 1 + 2^-11, 0) = -(1 + 2^-11), then fma(1 + 2^-12, 1 + 2^-12, s) = 2^-24 exactly: a
  // separate multiply would round (1 + 2^-12)^2 to 1 + 2^-11 and the sum to 0.
  const float a[2] = {-1.0f, 1.0f + 0x1p-12f}, b[2] = {1.0f + 0x1p-11f, 1.0f + 0x1p-12f};
  float c = 0.0f;
  sgemm_reference(false, false, 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, &c, 1);
  CHECK(c == 0x1p-24f);
  float nan_c = std::bit_cast<float>(0x7fc00000u);
  sgemm_reference(false, false, 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, &nan_c, 1);
  CHECK(nan_c == 0x1p-24f);  // beta 0: C is not read
  if (have_avx2()) {
    float v = 0.0f;
    sgemm(Path::avx2, 1, false, false, 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, &v, 1);
    CHECK(v == 0x1p-24f);
  }
}

TEST_CASE("the AVX2 path gives the reference's bits for every shape, transpose and stride", "[gemm][unit]") {
  if (!have_avx2()) {
    WARN("skipped: this CPU lacks AVX2 or FMA, so only the reference path runs here");
    return;
  }
  resil::Rng rng(3, 4);
  int checked = 0;
  // Sizes around the register tile (6 x 16) and its multiples, k from 0.
  for (int m : {1, 5, 6, 7, 13, 31})
    for (int n : {1, 15, 16, 17, 33, 70})
      for (int k : {0, 1, 7, 64, 300}) {
        const Case x = make_case(rng, m, n, k);
        const auto want = reference(x);
        INFO("m " << m << " n " << n << " k " << k << " ta " << x.ta << " tb " << x.tb << " alpha " << x.alpha << " beta " << x.beta);
        REQUIRE(same_bits(run(x, Path::avx2, 1), want));
        ++checked;
      }
  CHECK(checked == 180);
}

TEST_CASE("the thread count does not change a bit", "[gemm][unit]") {
  if (!have_avx2()) {
    WARN("skipped: this CPU lacks AVX2 or FMA");
    return;
  }
  resil::Rng rng(5, 6);
  for (int rep = 0; rep < 6; ++rep) {
    const Case x = make_case(rng, 64 + rep, 250 + 7 * rep, 200 + rep);  // above the threading threshold
    const auto one = run(x, Path::avx2, 1);
    for (int t : {2, 3, 8}) REQUIRE(same_bits(run(x, Path::avx2, t), one));
  }
}

TEST_CASE("special values propagate as the chain says", "[gemm][unit]") {
  const float inf = std::bit_cast<float>(0x7f800000u);
  const float a[3] = {inf, 1.0f, 2.0f}, b[3] = {0.0f, 1.0f, 1.0f};
  for (const Path p : {Path::scalar, have_avx2() ? Path::avx2 : Path::scalar}) {
    float c = 0.0f;
    sgemm(p, 1, false, false, 1, 1, 3, 1.0f, a, 3, b, 1, 0.0f, &c, 1);
    CHECK(c != c);  // inf * 0 is NaN, and NaN stays
  }
}

TEST_CASE("GEMM results are pinned bit for bit", "[gemm][unit]") {
  // A change here changes every training result of numeric configuration cpu-fma-seqk-1.
  resil::Rng rng(9, 10);
  const Case x = make_case(rng, 37, 53, 129);
  const auto out = reference(x);
  std::uint64_t h = 1469598103934665603ull;
  for (float v : out) h = (h ^ std::bit_cast<std::uint32_t>(v)) * 1099511628211ull;
  CHECK(h == 0x493635eea15e7f06ull);
}

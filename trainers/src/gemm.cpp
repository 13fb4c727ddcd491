// The blocking around gemm.hpp's register tile: op(B) in panels of nr columns (packed when it is
// transposed or the panel is partial, read in place otherwise), op(A) read in place with strides.
// Each output element is formed by exactly one tile call over the whole k, so neither the panel
// order nor the thread that computes it can change its bits.
#include "gemm.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "resil/core/error.hpp"

namespace resil::train::gemm {

namespace {
bool cpu_has_avx2() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/// Columns [j0, j0 + cols) of op(B) as a k x nr panel, zero past `cols`; returns the panel and its
/// row stride (AVX2 path only).
const float* panel(bool trans_b, int k, const float* b, int ldb, int j0, int cols, std::vector<float>& buf,
                   std::ptrdiff_t& stride) {
  if (!trans_b && cols == detail::nr) {
    stride = ldb;
    return b + j0;
  }
  stride = detail::nr;
  buf.resize(static_cast<std::size_t>(k) * detail::nr);
  if (trans_b) {
    detail::pack_transposed_avx2(k, b + static_cast<std::ptrdiff_t>(j0) * ldb, ldb, cols, buf.data());
    return buf.data();
  }
  for (int p = 0; p < k; ++p) {  // the last, partial panel of a row-major op(B)
    float* row = buf.data() + static_cast<std::size_t>(p) * detail::nr;
    std::memcpy(row, b + static_cast<std::ptrdiff_t>(p) * ldb + j0, sizeof(float) * static_cast<std::size_t>(cols));
    std::memset(row + cols, 0, sizeof(float) * static_cast<std::size_t>(detail::nr - cols));
  }
  return buf.data();
}

/// Output columns [first_panel * nr, end_panel * nr) of C = op(A) op(B), element (i, j) of C at
/// c[i * rsc + j * csc].
void columns_avx2(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                  float beta, float* c, std::ptrdiff_t rsc, std::ptrdiff_t csc, int first_panel, int end_panel) {
  thread_local std::vector<float> buf;
  const std::ptrdiff_t rsa = trans_a ? 1 : lda, csa = trans_a ? lda : 1;
  for (int q = first_panel; q < end_panel; ++q) {
    const int j0 = q * detail::nr, cols = std::min(detail::nr, n - j0);
    std::ptrdiff_t ldp = 0;
    const float* bp = panel(trans_b, k, b, ldb, j0, cols, buf, ldp);
    for (int i0 = 0; i0 < m; i0 += detail::mr)
      detail::tile_avx2(k, a + i0 * rsa, rsa, csa, std::min(detail::mr, m - i0), bp, ldp, cols, alpha, beta, c + i0 * rsc + j0 * csc,
                        rsc, csc);
  }
}

void run_avx2(int threads, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
              int ldb, float beta, float* c, std::ptrdiff_t rsc, std::ptrdiff_t csc) {
  const int panels = (n + detail::nr - 1) / detail::nr;
  // Threads pay off only when each gets enough multiply-adds to cover waking it (~10 us).
  const long long work = static_cast<long long>(m) * n * k;
  if (threads <= 1 || panels == 1 || work < 2'000'000) {
    columns_avx2(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, rsc, csc, 0, panels);
    return;
  }
  const int parts = std::min(threads, panels);
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int t = 0; t < parts; ++t)
    columns_avx2(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, rsc, csc, panels * t / parts, panels * (t + 1) / parts);
}
}  // namespace

Path select_path() {
  const bool avx2 = cpu_has_avx2();
  const char* env = std::getenv("RESIL_GEMM_PATH");
  if (!env || !*env) return avx2 ? Path::avx2 : Path::scalar;
  const std::string want = env;
  if (want == "scalar") return Path::scalar;
  if (want == "avx2") {
    if (!avx2) throw UsageError("RESIL_GEMM_PATH=avx2: this CPU lacks AVX2 or FMA");
    return Path::avx2;
  }
  throw UsageError("RESIL_GEMM_PATH=" + want + " is not one of scalar, avx2");
}

const char* path_name(Path p) noexcept { return p == Path::avx2 ? "avx2" : "scalar"; }

void sgemm_reference(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                     int ldb, float beta, float* c, int ldc) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float s = 0.0f;
      for (int p = 0; p < k; ++p) {
        const float x = trans_a ? a[static_cast<std::ptrdiff_t>(p) * lda + i] : a[static_cast<std::ptrdiff_t>(i) * lda + p];
        const float y = trans_b ? b[static_cast<std::ptrdiff_t>(j) * ldb + p] : b[static_cast<std::ptrdiff_t>(p) * ldb + j];
        s = std::fma(x, y, s);
      }
      float& out = c[static_cast<std::ptrdiff_t>(i) * ldc + j];
      float t = alpha * s;
      if (beta != 0.0f) {
        const float u = beta * out;
        t = t + u;
      }
      out = t;
    }
}

void sgemm(Path path, int threads, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (path == Path::scalar) {
    sgemm_reference(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // A transposed op(B) is packed, n x k floats. Computing C^T = op(B)^T op(A)^T instead reads
  // op(B)^T in place and packs op(A)^T, m x k floats (none when op(A) is transposed too), and
  // writes C transposed. Every element is the same FMA chain (fma(x, y, s) == fma(y, x, s)), so
  // the choice changes the speed only: the cheaper of the two by tile steps (~6 cycles per k step
  // of a 6 x 16 tile, partial tiles cost as full ones) plus packing (~0.4 cycles per float).
  const auto cost = [k](int rows, int cols, double packed) {
    return 6.0 * ((rows + detail::mr - 1) / detail::mr) * ((cols + detail::nr - 1) / detail::nr) * k + 0.4 * packed;
  };
  if (trans_b && cost(n, m, trans_a ? 0.0 : double(m) * k) < cost(m, n, double(n) * k)) {
    run_avx2(threads, false, !trans_a, n, m, k, alpha, b, ldb, a, lda, beta, c, 1, ldc);
    return;
  }
  run_avx2(threads, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 1);
}

}  // namespace resil::train::gemm

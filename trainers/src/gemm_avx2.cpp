// The AVX2 + FMA register tile of gemm.hpp. Compiled with -mavx2 -mfma and called only after
// select_path() saw both features; nothing else lives in this file, so no inline function built
// for AVX2 can be picked by the linker for code that runs on other CPUs.
#include <immintrin.h>

#include "gemm.hpp"

namespace resil::train::gemm::detail {

void tile_avx2(int k, const float* a, std::ptrdiff_t rsa, std::ptrdiff_t csa, int rows, const float* b, std::ptrdiff_t ldb,
               int cols, float alpha, float beta, float* c, std::ptrdiff_t rsc, std::ptrdiff_t csc) {
  // Rows past `rows` read row 0 again: their sums are computed and dropped.
  const float* a0 = a;
  const float* a1 = a + (rows > 1 ? rsa : 0);
  const float* a2 = a + (rows > 2 ? 2 * rsa : 0);
  const float* a3 = a + (rows > 3 ? 3 * rsa : 0);
  const float* a4 = a + (rows > 4 ? 4 * rsa : 0);
  const float* a5 = a + (rows > 5 ? 5 * rsa : 0);
  __m256 s00 = _mm256_setzero_ps(), s01 = _mm256_setzero_ps(), s10 = _mm256_setzero_ps(), s11 = _mm256_setzero_ps();
  __m256 s20 = _mm256_setzero_ps(), s21 = _mm256_setzero_ps(), s30 = _mm256_setzero_ps(), s31 = _mm256_setzero_ps();
  __m256 s40 = _mm256_setzero_ps(), s41 = _mm256_setzero_ps(), s50 = _mm256_setzero_ps(), s51 = _mm256_setzero_ps();
  std::ptrdiff_t off = 0;
  for (int p = 0; p < k; ++p, off += csa, b += ldb) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 t = _mm256_broadcast_ss(a0 + off);
    s00 = _mm256_fmadd_ps(t, b0, s00);
    s01 = _mm256_fmadd_ps(t, b1, s01);
    t = _mm256_broadcast_ss(a1 + off);
    s10 = _mm256_fmadd_ps(t, b0, s10);
    s11 = _mm256_fmadd_ps(t, b1, s11);
    t = _mm256_broadcast_ss(a2 + off);
    s20 = _mm256_fmadd_ps(t, b0, s20);
    s21 = _mm256_fmadd_ps(t, b1, s21);
    t = _mm256_broadcast_ss(a3 + off);
    s30 = _mm256_fmadd_ps(t, b0, s30);
    s31 = _mm256_fmadd_ps(t, b1, s31);
    t = _mm256_broadcast_ss(a4 + off);
    s40 = _mm256_fmadd_ps(t, b0, s40);
    s41 = _mm256_fmadd_ps(t, b1, s41);
    t = _mm256_broadcast_ss(a5 + off);
    s50 = _mm256_fmadd_ps(t, b0, s50);
    s51 = _mm256_fmadd_ps(t, b1, s51);
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  if (cols == nr && csc == 1) {
    auto emit = [&](int r, __m256 lo, __m256 hi) {
      if (r >= rows) return;
      float* cr = c + r * rsc;
      lo = _mm256_mul_ps(va, lo);
      hi = _mm256_mul_ps(va, hi);
      if (beta != 0.0f) {
        lo = _mm256_add_ps(lo, _mm256_mul_ps(vb, _mm256_loadu_ps(cr)));
        hi = _mm256_add_ps(hi, _mm256_mul_ps(vb, _mm256_loadu_ps(cr + 8)));
      }
      _mm256_storeu_ps(cr, lo);
      _mm256_storeu_ps(cr + 8, hi);
    };
    emit(0, s00, s01);
    emit(1, s10, s11);
    emit(2, s20, s21);
    emit(3, s30, s31);
    emit(4, s40, s41);
    emit(5, s50, s51);
    return;
  }
  // A partial tile, or C written transposed: the same operations one element at a time (scalar
  // IEEE operations round as the vector lanes do; -ffp-contract=off keeps them unfused).
  alignas(32) float sums[mr][nr];
  _mm256_store_ps(sums[0], s00);
  _mm256_store_ps(sums[0] + 8, s01);
  _mm256_store_ps(sums[1], s10);
  _mm256_store_ps(sums[1] + 8, s11);
  _mm256_store_ps(sums[2], s20);
  _mm256_store_ps(sums[2] + 8, s21);
  _mm256_store_ps(sums[3], s30);
  _mm256_store_ps(sums[3] + 8, s31);
  _mm256_store_ps(sums[4], s40);
  _mm256_store_ps(sums[4] + 8, s41);
  _mm256_store_ps(sums[5], s50);
  _mm256_store_ps(sums[5] + 8, s51);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < cols; ++j) {
      float t = alpha * sums[r][j];
      if (beta != 0.0f) {
        const float u = beta * c[r * rsc + j * csc];
        t = t + u;
      }
      c[r * rsc + j * csc] = t;
    }
}

void pack_transposed_avx2(int k, const float* b, std::ptrdiff_t ldb, int cols, float* out) {
  const __m256 zero = _mm256_setzero_ps();
  int p0 = 0;
  for (; p0 + 8 <= k; p0 += 8)
    for (int h = 0; h < 2; ++h) {
      const float* src = b + (8 * h) * ldb + p0;
      const int rows = cols - 8 * h;  // rows of `b` in this half; missing ones are zero columns
      auto row = [&](int r) { return r < rows ? _mm256_loadu_ps(src + r * ldb) : zero; };
      const __m256 r0 = row(0), r1 = row(1), r2 = row(2), r3 = row(3), r4 = row(4), r5 = row(5), r6 = row(6), r7 = row(7);
      const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
                   t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
                   t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)),
                   u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2)),
                   u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)), u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2)),
                   u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)), u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
      float* dst = out + static_cast<std::ptrdiff_t>(p0) * nr + 8 * h;
      _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(dst + nr, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(dst + 2 * nr, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(dst + 3 * nr, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(dst + 4 * nr, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(dst + 5 * nr, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(dst + 6 * nr, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(dst + 7 * nr, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
  for (int p = p0; p < k; ++p)
    for (int j = 0; j < nr; ++j) out[static_cast<std::ptrdiff_t>(p) * nr + j] = j < cols ? b[j * ldb + p] : 0.0f;
}

}  // namespace resil::train::gemm::detail

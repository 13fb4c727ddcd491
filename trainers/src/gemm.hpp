// Single-precision GEMM whose result bits are a property of the operands alone.
//
// The order of arithmetic is part of the contract: every output element is
//   s = 0;  for p = 0 .. k-1:  s = fma(op(A)[i,p], op(B)[p,j], s)      (one rounding per step)
//   C[i,j] = alpha * s                    when beta == 0 (C is not read)
//   C[i,j] = alpha * s + beta * C[i,j]    otherwise (two products, then one sum, each rounded)
// A BLAS is free to block k, split it over threads or pick a kernel by CPU model, and each of
// those changes the rounding; here the instruction path (AVX2 with FMA, or a portable scalar
// loop) and the thread count only change how fast the same sums are formed, never their bits.
// docs/design/determinism.md has the design and the measurements.
#pragma once

#include <cstddef>
#include <string>

namespace resil::train::gemm {

enum class Path { scalar, avx2 };

/// The fastest path this CPU runs (AVX2 and FMA present: avx2), unless the environment variable
/// RESIL_GEMM_PATH names one (scalar or avx2; avx2 on a CPU without it is a UsageError).
Path select_path();
const char* path_name(Path p) noexcept;

/// C = alpha * op(A) op(B) + beta * C, row-major; op(A) is m x k, op(B) is k x n (see above).
/// `threads` > 1 splits the output columns over OpenMP threads; the bits do not depend on it.
void sgemm(Path path, int threads, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc);

/// The contract above as three plain loops: the oracle the fast paths are tested against.
void sgemm_reference(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                     int ldb, float beta, float* c, int ldc);

namespace detail {
inline constexpr int mr = 6;   // rows of a register tile
inline constexpr int nr = 16;  // columns of a register tile (two 8-float vectors)

/// One mr x nr tile with AVX2 and FMA: rows [0, rows) of op(A) start at `a` (element (i, p) at
/// a[i * rsa + p * csa]), the k x nr panel of op(B) at `b` (row p at b + p * ldb, columns past
/// `cols` zero), written to C at `c` for the first `rows` x `cols` elements (element (i, j) at
/// c[i * rsc + j * csc]).
void tile_avx2(int k, const float* a, std::ptrdiff_t rsa, std::ptrdiff_t csa, int rows, const float* b, std::ptrdiff_t ldb,
               int cols, float alpha, float beta, float* c, std::ptrdiff_t rsc, std::ptrdiff_t csc);

/// Packs `cols` <= nr columns of a transposed op(B) (column j of op(B) is row j of `b`, starting
/// at `b`) into `out` as k rows of nr floats, zero past `cols`, with 8 x 8 AVX2 transposes: data
/// movement only.
void pack_transposed_avx2(int k, const float* b, std::ptrdiff_t ldb, int cols, float* out);
}  // namespace detail

}  // namespace resil::train::gemm

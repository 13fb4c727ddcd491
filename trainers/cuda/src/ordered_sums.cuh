// Sums in a fixed sequential order at memory speed, for kernels that must add in the CPU backend's
// order (one running sum per column or per row, element after element) without one thread per
// column waiting on every load in turn.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace resil::train::cuda {

/// Rows staged per tile by colsum_block.
inline constexpr int kColsumTileRows = 128;

/// acc[c] = (((acc[c] + src(0, c)) + src(1, c)) + ...) + src(rows - 1, c) for the 32 columns
/// [32 group, 32 group + 32): each column summed in row order, as one thread per column would. The
/// calling block of 32 x 8 threads stages kColsumTileRows rows of them in shared memory (coalesced
/// loads, src evaluated there), then its first warp adds them column by column in row order. Every
/// thread of the block must call it with the same arguments (it synchronises the block).
/// Src is a functor `float operator()(int r, int c) const` on the device.
template <class Src>
__device__ __forceinline__ void colsum_block(const Src& src, int rows, int cols, int group, float* acc) {
  __shared__ float tile[kColsumTileRows][33];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int c = group * 32 + tx;
  float a = (ty == 0 && c < cols) ? acc[c] : 0.0f;
  for (int r0 = 0; r0 < rows; r0 += kColsumTileRows) {
    const int tr = rows - r0 < kColsumTileRows ? rows - r0 : kColsumTileRows;
    for (int j = ty; j < tr; j += 8) tile[j][tx] = c < cols ? src(r0 + j, c) : 0.0f;
    __syncthreads();
    if (ty == 0) {
#pragma unroll 8
      for (int j = 0; j < tr; ++j) a = __fadd_rn(a, tile[j][tx]);
    }
    __syncthreads();
  }
  if (ty == 0 && c < cols) acc[c] = a;
}
/// colsum_block over all columns: launch with colsum_grid(cols), dim3(32, 8).
template <class Src>
__global__ void k_colsum(Src src, int rows, int cols, float* acc) {
  colsum_block(src, rows, cols, static_cast<int>(blockIdx.x), acc);
}
inline unsigned colsum_grid(int cols) { return static_cast<unsigned>((cols + 31) / 32); }

/// A row-major matrix as a k_colsum source.
struct RowMajor {
  const float* p;
  int cols;
  __device__ float operator()(int r, int c) const { return p[static_cast<std::size_t>(r) * cols + c]; }
};

/// acc + v[lane 0] + v[lane 1] + ... + v[lane count - 1], added in lane order by every lane of the
/// warp (all 32 lanes must call it with the same count): a sequential sum over 32 consecutive
/// elements that the lanes loaded side by side.
__device__ __forceinline__ float warp_ordered_sum(float acc, float v, int count) {
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const float x = __shfl_sync(0xffffffffu, v, j);
    if (j < count) acc = __fadd_rn(acc, x);
  }
  return acc;
}

}  // namespace resil::train::cuda

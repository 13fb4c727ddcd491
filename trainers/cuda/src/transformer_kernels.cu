// The CUDA backend's transformer kernels: one thread per output element; where the CPU sums along a
// row or a column, the sum keeps the CPU's order (ordered_sums.cuh). See transformer_kernels.cuh.
#include <algorithm>
#include <utility>
#include <vector>

#include "cuda_check.cuh"
#include "ordered_sums.cuh"
#include "transformer_kernels.cuh"

namespace resil::train::cuda {

namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxGridY = 65535;  // CUDA's limit on gridDim.y
inline int blocks_for(std::size_t n) { return static_cast<int>(std::min<std::size_t>((n + kThreads - 1) / kThreads, 65535 * 8)); }

#define GRID_STRIDE(i, n) \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<std::size_t>(blockDim.x) * gridDim.x)

// ---------------------------------------------------------------- kernels
__global__ void k_embedding_fwd(const std::int32_t* tokens, const float* wte, const float* wpe, float* out, int B, int T, int C) {
  GRID_STRIDE(i, static_cast<std::size_t>(B) * T * C) {
    const std::size_t row = i / C;
    const int c = static_cast<int>(i % C), t = static_cast<int>(row % T);
    out[i] = wte[static_cast<std::size_t>(tokens[row]) * C + c] + wpe[static_cast<std::size_t>(t) * C + c];
  }
}
__device__ __forceinline__ void warp_of(std::size_t& warp, std::size_t& warps) {
  warp = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) >> 5;
  warps = (static_cast<std::size_t>(gridDim.x) * blockDim.x) >> 5;
}
// The token embedding's gradient, dwte[v] += dout[r] over the rows r holding token v in increasing r
// (the CPU's order for each element), in three steps. Bucketing: count[v] = rows holding v (integer
// atomics: the counts do not depend on their order), start = the exclusive prefix sum of count, then
// one warp per token lists its rows in increasing order at rows[start[v] ..] (a stable counting sort).
// Summing: a block of 32 x 8 threads per (token, 32 columns) adds the token's rows column by column in
// list order (colsum_block). One thread per column walking every row keeps the order too, but as C
// threads of B*T dependent steps: 1.9 ms a step at B*T = 4096, C = 512 on an H200.
__global__ void k_token_count(const std::int32_t* tokens, std::size_t rows, std::int32_t* count) {
  GRID_STRIDE(r, rows) atomicAdd(count + tokens[r], 1);
}
// One block of kThreads: each thread sums a contiguous run of counts, thread 0 scans the runs' sums,
// then each thread writes its run's starts. start has V + 1 entries, start[V] = rows.
__global__ void k_token_start(const std::int32_t* count, int V, std::int32_t* start) {
  __shared__ std::int32_t part[kThreads];
  const int per = (V + kThreads - 1) / kThreads;
  const int lo = min(V, static_cast<int>(threadIdx.x) * per), hi = min(V, lo + per);
  std::int32_t sum = 0;
  for (int v = lo; v < hi; ++v) sum += count[v];
  part[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    std::int32_t run = 0;
    for (int i = 0; i < kThreads; ++i) {
      const std::int32_t x = part[i];
      part[i] = run;
      run += x;
    }
    start[V] = run;
  }
  __syncthreads();
  std::int32_t run = part[threadIdx.x];
  for (int v = lo; v < hi; ++v) {
    start[v] = run;
    run += count[v];
  }
}
// One warp per token v reads the tokens 32 at a time; the lanes holding v take consecutive slots
// in lane order (ballot and popcount), so the list is in increasing row order. A warp stops once it
// has placed count[v] rows.
__global__ void k_token_rows(const std::int32_t* tokens, int rows, int V, const std::int32_t* start, std::int32_t* bucket_rows) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  std::size_t first, step;
  warp_of(first, step);
  for (std::size_t v = first; v < static_cast<std::size_t>(V); v += step) {
    std::int32_t at = start[v];
    const std::int32_t end = start[v + 1];
    for (int r0 = 0; r0 < rows && at < end; r0 += 32) {
      const int r = r0 + lane;
      const bool mine = r < rows && tokens[r] == static_cast<std::int32_t>(v);
      const unsigned mask = __ballot_sync(0xffffffffu, mine);
      if (mine) bucket_rows[at + __popc(mask & ((1u << lane) - 1u))] = r;
      at += __popc(mask);
    }
  }
}
// Row j of a token's bucket as a colsum_block source: dout's row bucket_rows[j].
struct BucketRows {
  const float* dout;
  const std::int32_t* rows;
  int C;
  __device__ float operator()(int j, int c) const { return dout[static_cast<std::size_t>(rows[j]) * C + c]; }
};
// Grid (V, colsum_grid(C)) of 32 x 8 blocks: blockIdx.x is the token, blockIdx.y its 32 columns.
__global__ void k_embedding_bwd_wte(const float* dout, const std::int32_t* start, const std::int32_t* bucket_rows, int C, float* dwte) {
  const std::size_t v = blockIdx.x;
  const std::int32_t lo = start[v], n = start[v + 1] - lo;
  if (n == 0) return;  // the whole block: a token absent from the batch leaves its row as it was
  colsum_block(BucketRows{dout, bucket_rows + lo, C}, n, C, static_cast<int>(blockIdx.y), dwte + v * C);
}
// One thread per (t, column) of wpe walks b.
__global__ void k_embedding_bwd_wpe(const float* dout, float* dwpe, int B, int T, int C) {
  GRID_STRIDE(i, static_cast<std::size_t>(T) * C) {
    float acc = dwpe[i];
    for (int b = 0; b < B; ++b) acc += dout[static_cast<std::size_t>(b) * T * C + i];
    dwpe[i] = acc;
  }
}
// LayerNorm: one warp per row. The lanes load 32 consecutive elements at a time and every lane adds
// them in column order (warp_ordered_sum), so each holds the CPU's sequential sums; the outputs are
// written by the lanes side by side.
__global__ void k_layernorm_fwd(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, int rows, int C) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  std::size_t first, step;
  warp_of(first, step);
  const float inv_c = 1.0f / static_cast<float>(C);
  for (std::size_t r = first; r < static_cast<std::size_t>(rows); r += step) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    float s = 0.0f;
    for (int c0 = 0; c0 < C; c0 += 32) {
      const int c = c0 + lane;
      s = warp_ordered_sum(s, c < C ? xr[c] : 0.0f, C - c0);
    }
    const float m = s * inv_c;
    float v = 0.0f;
    for (int c0 = 0; c0 < C; c0 += 32) {
      const int c = c0 + lane;
      const float d = c < C ? xr[c] - m : 0.0f;
      v = warp_ordered_sum(v, __fmul_rn(d, d), C - c0);  // no contraction: the CPU's two roundings
    }
    const float rs = 1.0f / sqrtf(__fadd_rn(__fmul_rn(v, inv_c), 1e-5f));
    for (int c = lane; c < C; c += 32) yr[c] = __fadd_rn(__fmul_rn(__fmul_rn(xr[c] - m, rs), w[c]), b[c]);
    if (lane == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
  }
}
__global__ void k_layernorm_bwd_dx(const float* dy, const float* x, const float* w, const float* mean, const float* rstd, float* dx, int rows,
                                   int C) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  std::size_t first, step;
  warp_of(first, step);
  const float inv_c = 1.0f / static_cast<float>(C);
  for (std::size_t r = first; r < static_cast<std::size_t>(rows); r += step) {
    const float* dyr = dy + r * C;
    const float* xr = x + r * C;
    float* dxr = dx + r * C;
    const float m = mean[r], rs = rstd[r];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int c0 = 0; c0 < C; c0 += 32) {
      const int c = c0 + lane;
      float dnorm = 0.0f, prod = 0.0f;
      if (c < C) {
        const float norm = __fmul_rn(xr[c] - m, rs);
        dnorm = __fmul_rn(w[c], dyr[c]);
        prod = __fmul_rn(dnorm, norm);
      }
      dnorm_mean = warp_ordered_sum(dnorm_mean, dnorm, C - c0);
      dnorm_norm_mean = warp_ordered_sum(dnorm_norm_mean, prod, C - c0);
    }
    dnorm_mean = dnorm_mean * inv_c;
    dnorm_norm_mean = dnorm_norm_mean * inv_c;
    for (int c = lane; c < C; c += 32) {
      const float norm = __fmul_rn(xr[c] - m, rs);
      const float dnorm = __fmul_rn(w[c], dyr[c]);
      dxr[c] = __fadd_rn(dxr[c], __fmul_rn(__fsub_rn(dnorm - dnorm_mean, __fmul_rn(norm, dnorm_norm_mean)), rs));
    }
  }
}
// LayerNorm's weight gradient terms, norm * dy, as a k_colsum source (db sums dy itself).
struct LayerNormWeightGrad {
  const float *dy, *x, *mean, *rstd;
  int C;
  __device__ float operator()(int r, int c) const {
    const std::size_t i = static_cast<std::size_t>(r) * C + c;
    return __fmul_rn(__fmul_rn(x[i] - mean[r], rstd[r]), dy[i]);
  }
};
// GELU as the CPU writes it, x / (1 + e^(-2u)), with CUDA's expf on the CPU's clamped range.
__device__ __forceinline__ float gelu_exp(float v) {
  const float z = -2.0f * 0.7978845608f * (v + 0.044715f * v * v * v);
  return expf(fminf(fmaxf(z, -87.0f), 88.0f));
}
__global__ void k_gelu_fwd(const float* x, float* y, std::size_t n) {
  GRID_STRIDE(i, n) y[i] = x[i] / (1.0f + gelu_exp(x[i]));
}
__global__ void k_gelu_bwd(const float* x, const float* dy, float* dx, std::size_t n) {
  GRID_STRIDE(i, n) {
    const float v = x[i], e = gelu_exp(v);
    const float s = 1.0f / (1.0f + e);
    const float du = 2.0f * 0.7978845608f * (1.0f + 3.0f * 0.044715f * v * v);
    dx[i] = dy[i] * (s + v * du * (s * s * e));
  }
}
// One thread per row of a score matrix.
__global__ void k_causal_softmax_fwd(const float* s, float* p, int mats, int T, float scale) {
  GRID_STRIDE(row, static_cast<std::size_t>(mats) * T) {
    const int i = static_cast<int>(row % T);
    const float* sr = s + row * T;
    float* pr = p + row * T;
    float mx = scale * sr[0];
    for (int j = 1; j <= i; ++j) mx = fmaxf(mx, scale * sr[j]);
    float sum = 0.0f;
    for (int j = 0; j <= i; ++j) {
      pr[j] = expf(__fsub_rn(__fmul_rn(scale, sr[j]), mx));
      sum += pr[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j <= i; ++j) pr[j] *= inv;
    for (int j = i + 1; j < T; ++j) pr[j] = 0.0f;
  }
}
__global__ void k_causal_softmax_bwd(const float* p, const float* dp, float* ds, int mats, int T, float scale) {
  GRID_STRIDE(row, static_cast<std::size_t>(mats) * T) {
    const int i = static_cast<int>(row % T);
    const float* pr = p + row * T;
    const float* dpr = dp + row * T;
    float* dsr = ds + row * T;
    float dot = 0.0f;
    for (int j = 0; j <= i; ++j) dot = __fadd_rn(dot, __fmul_rn(pr[j], dpr[j]));
    for (int j = 0; j <= i; ++j) dsr[j] = __fmul_rn(scale, __fmul_rn(pr[j], dpr[j] - dot));
    for (int j = i + 1; j < T; ++j) dsr[j] = 0.0f;
  }
}
// Sum of squares in double: a fixed grid of sum_squares_parts blocks, each thread adding its
// grid-stride elements in order, then a fixed tree per block: the same bits on every run. The block
// index and the grid's width come from the x dimension only, so a grid (sum_squares_parts, k) runs
// k tensors' blocks side by side, each exactly as a grid of its own would.
__device__ __forceinline__ void sum_squares_block(const float* x, std::size_t n, double* partials) {
  __shared__ double part[kThreads];
  double acc = 0.0;
  GRID_STRIDE(i, n) acc = __dadd_rn(acc, __dmul_rn(x[i], x[i]));
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] = __dadd_rn(part[threadIdx.x], part[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = part[0];
}
__global__ void k_sum_squares(const float* x, std::size_t n, double* partials) { sum_squares_block(x, n, partials); }
// blockIdx.y picks the tensor; its blocks' sums go to partials[y * sum_squares_parts ..].
__global__ void k_sum_squares_many(const ConstSpan* xs, double* partials) {
  const ConstSpan x = xs[blockIdx.y];
  sum_squares_block(x.data, x.size, partials + static_cast<std::size_t>(blockIdx.y) * sum_squares_parts);
}
// One thread per tensor adds its blocks' sums in block order from 0.0, as sum_squares does on the host.
__global__ void k_sum_partials(const double* partials, std::size_t count, double* totals) {
  GRID_STRIDE(i, count) {
    double total = 0.0;
    for (int j = 0; j < sum_squares_parts; ++j) total = __dadd_rn(total, partials[i * sum_squares_parts + j]);
    totals[i] = total;
  }
}
__global__ void k_scale(float* x, std::size_t n, float a) { GRID_STRIDE(i, n) x[i] *= a; }
__global__ void k_round_bf16(float* x, std::size_t n) {
  GRID_STRIDE(i, n) {
    const unsigned u = __float_as_uint(x[i]);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    const unsigned rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    x[i] = __uint_as_float(nan ? ((u | 0x00400000u) & 0xffff0000u) : rounded);
  }
}
__global__ void k_adamw(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps, float wd,
                        float step_size, float bc2_sqrt) {
  GRID_STRIDE(i, n) {
    const float gi = g[i];
    m[i] = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(1.0f - b1, gi));
    v[i] = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(1.0f - b2, gi), gi));
    const float denom = __fadd_rn(__fdiv_rn(sqrtf(v[i]), bc2_sqrt), eps);
    w[i] = __fsub_rn(__fmul_rn(w[i], 1.0f - lr * wd), __fmul_rn(step_size, __fdiv_rn(m[i], denom)));
  }
}

#undef GRID_STRIDE

template <class... KArgs, class... Args>
void launch(cudaStream_t s, void (*kernel)(KArgs...), std::size_t n, Args&&... args) {
  if (n == 0) return;
  kernel<<<blocks_for(n), kThreads, 0, s>>>(std::forward<Args>(args)...);
  RESIL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

// ---------------------------------------------------------------- launchers
void embedding_forward(cudaStream_t s, const std::int32_t* tokens, const float* wte, const float* wpe, float* out, int B, int T, int C) {
  launch(s, k_embedding_fwd, static_cast<std::size_t>(B) * T * C, tokens, wte, wpe, out, B, T, C);
}
void embedding_backward(cudaStream_t s, const float* dout, const std::int32_t* tokens, float* dwte, float* dwpe, int B, int T, int C, int V,
                        const TokenBuckets& scratch) {
  const int rows = B * T;
  if (rows > 0 && C > 0 && V > 0) {
    RESIL_CUDA_CHECK(cudaMemsetAsync(scratch.count, 0, static_cast<std::size_t>(V) * sizeof(std::int32_t), s));
    launch(s, k_token_count, static_cast<std::size_t>(rows), tokens, static_cast<std::size_t>(rows), scratch.count);
    k_token_start<<<1, kThreads, 0, s>>>(scratch.count, V, scratch.start);
    RESIL_CUDA_CHECK(cudaGetLastError());
    launch(s, k_token_rows, static_cast<std::size_t>(V) * 32, tokens, rows, V, scratch.start, scratch.rows);
    k_embedding_bwd_wte<<<dim3(static_cast<unsigned>(V), colsum_grid(C)), dim3(32, 8), 0, s>>>(dout, scratch.start, scratch.rows, C, dwte);
    RESIL_CUDA_CHECK(cudaGetLastError());
  }
  launch(s, k_embedding_bwd_wpe, static_cast<std::size_t>(T) * C, dout, dwpe, B, T, C);
}
void layernorm_forward(cudaStream_t s, const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, int rows, int C) {
  launch(s, k_layernorm_fwd, static_cast<std::size_t>(rows) * 32, x, w, b, y, mean, rstd, rows, C);
}
void layernorm_backward(cudaStream_t s, const float* dy, const float* x, const float* w, const float* mean, const float* rstd, float* dx,
                        float* dw, float* db, int rows, int C) {
  launch(s, k_layernorm_bwd_dx, static_cast<std::size_t>(rows) * 32, dy, x, w, mean, rstd, dx, rows, C);
  if (rows <= 0 || C <= 0) return;
  k_colsum<<<colsum_grid(C), dim3(32, 8), 0, s>>>(LayerNormWeightGrad{dy, x, mean, rstd, C}, rows, C, dw);
  RESIL_CUDA_CHECK(cudaGetLastError());
  k_colsum<<<colsum_grid(C), dim3(32, 8), 0, s>>>(RowMajor{dy, C}, rows, C, db);
  RESIL_CUDA_CHECK(cudaGetLastError());
}
void gelu_forward(cudaStream_t s, const float* x, float* y, std::size_t n) { launch(s, k_gelu_fwd, n, x, y, n); }
void gelu_backward(cudaStream_t s, const float* x, const float* dy, float* dx, std::size_t n) { launch(s, k_gelu_bwd, n, x, dy, dx, n); }
void causal_softmax_forward(cudaStream_t s, const float* scores, float* p, int mats, int T, float scale) {
  launch(s, k_causal_softmax_fwd, static_cast<std::size_t>(mats) * T, scores, p, mats, T, scale);
}
void causal_softmax_backward(cudaStream_t s, const float* p, const float* dp, float* ds, int mats, int T, float scale) {
  launch(s, k_causal_softmax_bwd, static_cast<std::size_t>(mats) * T, p, dp, ds, mats, T, scale);
}
double sum_squares(cudaStream_t s, const float* x, std::size_t n, double* partials_device) {
  if (n == 0) return 0.0;
  k_sum_squares<<<sum_squares_parts, kThreads, 0, s>>>(x, n, partials_device);
  RESIL_CUDA_CHECK(cudaGetLastError());
  std::vector<double> h(sum_squares_parts);
  RESIL_CUDA_CHECK(cudaMemcpyAsync(h.data(), partials_device, h.size() * sizeof(double), cudaMemcpyDeviceToHost, s));
  RESIL_CUDA_CHECK(cudaStreamSynchronize(s));
  double total = 0.0;
  for (const double p : h) total += p;
  return total;
}
void sum_squares_many(cudaStream_t s, const ConstSpan* xs_device, std::size_t count, double* partials_device, double* totals_device,
                      double* out) {
  if (count == 0) return;
  for (std::size_t first = 0; first < count; first += kMaxGridY) {
    const std::size_t k = std::min<std::size_t>(kMaxGridY, count - first);
    k_sum_squares_many<<<dim3(sum_squares_parts, static_cast<unsigned>(k)), kThreads, 0, s>>>(xs_device + first,
                                                                                            partials_device + first * sum_squares_parts);
    RESIL_CUDA_CHECK(cudaGetLastError());
  }
  launch(s, k_sum_partials, count, partials_device, count, totals_device);
  RESIL_CUDA_CHECK(cudaMemcpyAsync(out, totals_device, count * sizeof(double), cudaMemcpyDeviceToHost, s));
  RESIL_CUDA_CHECK(cudaStreamSynchronize(s));
}
void scale(cudaStream_t s, float* x, std::size_t n, float a) { launch(s, k_scale, n, x, n, a); }
void round_bf16(cudaStream_t s, float* x, std::size_t n) { launch(s, k_round_bf16, n, x, n); }
void adamw_update(cudaStream_t s, float* w, const float* g, float* m, float* v, std::size_t n, float lr, float beta1, float beta2, float eps,
                  float weight_decay, float bc1, float bc2) {
  launch(s, k_adamw, n, w, g, m, v, n, lr, beta1, beta2, eps, weight_decay, lr / bc1, sqrtf(bc2));
}

}  // namespace resil::train::cuda

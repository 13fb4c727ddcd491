// The CUDA backend. GEMMs go to cuBLAS (FP32, pedantic math); every other op is a kernel written
// so that each output element is produced by one thread in a fixed order: no floating-point
// atomics anywhere, hence bit-identical results run after run on the same GPU. Where the CPU
// backend sums in a given order (bias gradients, col2im, embedding-bag gradients), the kernel sums
// in the same order (ordered_sums.cuh keeps that fast), so those ops agree with the CPU bit for bit;
// GEMMs, transcendental functions and the convolution's weight gradient (per-image cuBLAS products
// added in image order) agree within rounding (tests state the tolerances).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda_check.cuh"
#include "cuda_internal.hpp"
#include "ordered_sums.cuh"
#include "transformer_kernels.cuh"
#include "resil/train/cuda.hpp"

namespace resil::train {

namespace {

using cuda::DeviceBuffer;

constexpr int kThreads = 256;
inline int blocks_for(std::size_t n) {
  return static_cast<int>(std::min<std::size_t>((n + kThreads - 1) / kThreads, 65535 * 8));
}

#define GRID_STRIDE(i, n) \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<std::size_t>(blockDim.x) * gridDim.x)

// ---------------------------------------------------------------- elementwise kernels
__global__ void k_fill(float* x, std::size_t n, float v) { GRID_STRIDE(i, n) x[i] = v; }
__global__ void k_axpy(std::size_t n, float a, const float* x, float* y) { GRID_STRIDE(i, n) y[i] += a * x[i]; }
__global__ void k_relu_fwd(const float* x, float* y, std::size_t n) { GRID_STRIDE(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
__global__ void k_relu_bwd(const float* y, const float* dy, float* dx, std::size_t n) {
  GRID_STRIDE(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}
__global__ void k_nonfinite(const float* x, std::size_t n, int* flag) {
  GRID_STRIDE(i, n) {
    if ((__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u) *flag = 1;  // an idempotent flag, not a sum
  }
}
__global__ void k_add_bias(float* y, const float* b, int rows, int cols) {
  GRID_STRIDE(i, static_cast<std::size_t>(rows) * cols) y[i] += b[i % cols];
}
__global__ void k_add_channel_bias(float* y, const float* b, int n, int c, int plane) {
  GRID_STRIDE(i, static_cast<std::size_t>(n) * c * plane) y[i] += b[(i / plane) % c];
}
// The channel bias gradient in the CPU's order: each (image, channel) plane summed on its own, then
// the planes' sums added to db[channel] image after image.
__global__ void k_plane_sums(const float* dy, std::size_t planes, int plane, float* sums) {
  GRID_STRIDE(j, planes) {
    const float* p = dy + j * plane;
    float s = 0.0f;
    for (int q = 0; q < plane; ++q) s += p[q];
    sums[j] = s;
  }
}
__global__ void k_add_in_image_order(const float* parts, int n, std::size_t per, float* acc) {
  GRID_STRIDE(e, per) {
    float a = acc[e];
    for (int i = 0; i < n; ++i) a += parts[static_cast<std::size_t>(i) * per + e];
    acc[e] = a;
  }
}

// Rows of a row-major array by a device list of row indices.
__global__ void k_gather_rows(const float* src, std::size_t len, const std::int32_t* rows, std::size_t count, float* dst) {
  GRID_STRIDE(i, count * len) dst[i] = src[static_cast<std::size_t>(rows[i / len]) * len + i % len];
}
__global__ void k_scatter_rows(const float* src, std::size_t len, const std::int32_t* rows, std::size_t count, float* dst) {
  GRID_STRIDE(i, count * len) dst[static_cast<std::size_t>(rows[i / len]) * len + i % len] = src[i];
}
__global__ void k_fill_rows(float* x, std::size_t len, const std::int32_t* rows, std::size_t count, float v) {
  GRID_STRIDE(i, count * len) x[static_cast<std::size_t>(rows[i / len]) * len + i % len] = v;
}

// ---------------------------------------------------------------- convolution geometry and kernels
// ConvGeom's own oh()/ow() are host functions; the same formulas for device code.
__device__ __forceinline__ int geom_oh(const ConvGeom& g) { return (g.h + 2 * g.pad - g.kh) / g.stride + 1; }
__device__ __forceinline__ int geom_ow(const ConvGeom& g) { return (g.w + 2 * g.pad - g.kw) / g.stride + 1; }
__device__ __forceinline__ float im2col_at(const float* img, const ConvGeom& g, int oh, int ow, std::size_t i) {
  const int x = static_cast<int>(i % ow), y = static_cast<int>((i / ow) % oh);
  const int r = static_cast<int>(i / (static_cast<std::size_t>(oh) * ow));
  const int kj = r % g.kw, ki = (r / g.kw) % g.kh, c = r / (g.kw * g.kh);
  const int iy = y * g.stride - g.pad + ki, ix = x * g.stride - g.pad + kj;
  return (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) ? img[(static_cast<std::size_t>(c) * g.h + iy) * g.w + ix] : 0.0f;
}
// Gather per image pixel, contributions in (ki, kj) order: the CPU scatter's order per pixel.
__device__ __forceinline__ float col2im_at(const float* col, const ConvGeom& g, int oh, int ow, std::size_t i, float acc) {
  const int ix = static_cast<int>(i % g.w), iy = static_cast<int>((i / g.w) % g.h), c = static_cast<int>(i / (static_cast<std::size_t>(g.h) * g.w));
  for (int ki = 0; ki < g.kh; ++ki) {
    const int ty = iy + g.pad - ki;
    if (ty < 0 || ty % g.stride) continue;
    const int y = ty / g.stride;
    if (y >= oh) continue;
    for (int kj = 0; kj < g.kw; ++kj) {
      const int tx = ix + g.pad - kj;
      if (tx < 0 || tx % g.stride) continue;
      const int x = tx / g.stride;
      if (x >= ow) continue;
      acc += col[((static_cast<std::size_t>(c) * g.kh + ki) * g.kw + kj) * oh * ow + static_cast<std::size_t>(y) * ow + x];
    }
  }
  return acc;
}
__global__ void k_im2col(const float* img, ConvGeom g, float* col) {
  const int oh = geom_oh(g), ow = geom_ow(g);
  GRID_STRIDE(i, static_cast<std::size_t>(g.c) * g.kh * g.kw * oh * ow) col[i] = im2col_at(img, g, oh, ow, i);
}
__global__ void k_col2im(const float* col, ConvGeom g, float* img) {
  const int oh = geom_oh(g), ow = geom_ow(g);
  GRID_STRIDE(i, static_cast<std::size_t>(g.c) * g.h * g.w) img[i] = col2im_at(col, g, oh, ow, i, img[i]);
}
// The same for n images at once (cols: n matrices of kk x plane, imgs: n of c x h x w).
__global__ void k_im2col_n(const float* imgs, ConvGeom g, int n, float* cols) {
  const int oh = geom_oh(g), ow = geom_ow(g);
  const std::size_t per = static_cast<std::size_t>(g.c) * g.kh * g.kw * oh * ow, in_sz = static_cast<std::size_t>(g.c) * g.h * g.w;
  GRID_STRIDE(j, per * n) cols[j] = im2col_at(imgs + (j / per) * in_sz, g, oh, ow, j % per);
}
__global__ void k_col2im_n(const float* cols, ConvGeom g, int n, float* imgs) {
  const int oh = geom_oh(g), ow = geom_ow(g);
  const std::size_t per = static_cast<std::size_t>(g.c) * g.kh * g.kw * oh * ow, in_sz = static_cast<std::size_t>(g.c) * g.h * g.w;
  GRID_STRIDE(j, in_sz * n) imgs[j] = col2im_at(cols + (j / in_sz) * per, g, oh, ow, j % in_sz, imgs[j]);
}
__global__ void k_maxpool_fwd(const float* x, float* y, std::int32_t* argmax, int n, int c, int h, int w, int k) {
  const int oh = h / k, ow = w / k;
  GRID_STRIDE(o, static_cast<std::size_t>(n) * c * oh * ow) {
    const int j = static_cast<int>(o % ow), i = static_cast<int>((o / ow) % oh);
    const std::size_t p = o / (static_cast<std::size_t>(oh) * ow);
    const std::size_t base = p * h * w;
    std::size_t best = base + static_cast<std::size_t>(i * k) * w + j * k;
    for (int a = 0; a < k; ++a)
      for (int b = 0; b < k; ++b) {
        const std::size_t off = base + static_cast<std::size_t>(i * k + a) * w + (j * k + b);
        if (x[off] > x[best]) best = off;
      }
    y[o] = x[best];
    argmax[o] = static_cast<std::int32_t>(best);
  }
}
// Pooling windows do not overlap: each input has at most one output pointing at it, so a plain add is exact.
__global__ void k_maxpool_bwd(const float* dy, const std::int32_t* argmax, float* dx, std::size_t out_size) {
  GRID_STRIDE(o, out_size) dx[argmax[o]] += dy[o];
}

// ---------------------------------------------------------------- losses (per-row values, summed on the host in order)
__global__ void k_softmax_xent(const float* logits, const std::int32_t* labels, int n, int classes, float grad_scale,
                               float* dlogits, float* row_loss, std::int32_t* row_ok) {
  GRID_STRIDE(i, static_cast<std::size_t>(n)) {
    const float* z = logits + i * classes;
    int arg = 0;
    float mx = z[0];
    for (int c = 1; c < classes; ++c)
      if (z[c] > mx) { mx = z[c]; arg = c; }
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) sum += expf(z[c] - mx);
    const int y = labels[i];
    row_loss[i] = logf(sum) - (z[y] - mx);
    row_ok[i] = arg == y;
    if (dlogits) {
      const float inv = 1.0f / sum;
      for (int c = 0; c < classes; ++c) dlogits[i * classes + c] = grad_scale * (expf(z[c] - mx) * inv - (c == y ? 1.0f : 0.0f));
    }
  }
}
__global__ void k_bce(const float* x, const float* t, int n, float grad_scale, float* dx, float* row_loss) {
  GRID_STRIDE(i, static_cast<std::size_t>(n)) {
    const float xi = x[i], ti = t[i];
    row_loss[i] = fmaxf(xi, 0.0f) - xi * ti + log1pf(expf(-fabsf(xi)));
    if (dx) dx[i] = grad_scale * (1.0f / (1.0f + expf(-xi)) - ti);
  }
}

// ---------------------------------------------------------------- DLRM
__global__ void k_dot_fwd(const float* v, float* out, int n, int f, int d) {
  const int pairs = f * (f - 1) / 2, width = d + pairs;
  GRID_STRIDE(i, static_cast<std::size_t>(n) * width) {
    const std::size_t s = i / width;
    const int col = static_cast<int>(i % width);
    const float* vs = v + s * f * d;
    if (col < d) {
      out[i] = vs[col];
    } else {
      int k = col - d, a = 1;
      while (k >= a) { k -= a; ++a; }  // pair index -> (a, b) with b < a, row-major as on the CPU
      float acc = 0.0f;
      for (int e = 0; e < d; ++e) acc += vs[a * d + e] * vs[k * d + e];
      out[i] = acc;
    }
  }
}
// dv[s, a, e] = [a==0] dout[s, e] + sum over pairs containing a, in the CPU's pair order.
__global__ void k_dot_bwd(const float* v, const float* dout, float* dv, int n, int f, int d) {
  const int width = d + f * (f - 1) / 2;
  GRID_STRIDE(i, static_cast<std::size_t>(n) * f * d) {
    const std::size_t s = i / (static_cast<std::size_t>(f) * d);
    const int a = static_cast<int>((i / d) % f), e = static_cast<int>(i % d);
    const float* vs = v + s * f * d;
    const float* go = dout + s * width;
    float acc = a == 0 ? go[e] : 0.0f;
    int k = d;
    for (int p = 1; p < f; ++p)
      for (int q = 0; q < p; ++q, ++k) {
        if (p == a) acc += go[k] * vs[q * d + e];
        if (q == a) acc += go[k] * vs[p * d + e];
      }
    dv[i] = acc;
  }
}
__global__ void k_bag_fwd(const float* table, int dim, const std::int32_t* idx, const std::int32_t* off, int n, float* out,
                          int stride) {
  GRID_STRIDE(i, static_cast<std::size_t>(n) * dim) {
    const int b = static_cast<int>(i / dim), e = static_cast<int>(i % dim);
    float acc = 0.0f;
    for (std::int32_t j = off[b]; j < off[b + 1]; ++j) acc += table[static_cast<std::size_t>(idx[j]) * dim + e];
    out[static_cast<std::size_t>(b) * stride + e] = acc;
  }
}
// One thread per embedding column walks every index in bag order: the same order as the CPU, no atomics.
__global__ void k_bag_bwd(const float* dout, int stride, const std::int32_t* idx, const std::int32_t* off, int n, int dim,
                          float* grad) {
  GRID_STRIDE(e, static_cast<std::size_t>(dim)) {
    for (int b = 0; b < n; ++b) {
      const float g = dout[static_cast<std::size_t>(b) * stride + e];
      for (std::int32_t j = off[b]; j < off[b + 1]; ++j) grad[static_cast<std::size_t>(idx[j]) * dim + e] += g;
    }
  }
}

// ---------------------------------------------------------------- optimizers (same formulas as the CPU backend)
__global__ void k_sgd(float* w, const float* g, float* buf, std::size_t n, float lr, float mom, float wd) {
  GRID_STRIDE(i, n) {
    float gi = g[i] + wd * w[i];
    if (buf) gi = buf[i] = mom * buf[i] + gi;
    w[i] -= lr * gi;
  }
}
__global__ void k_adam(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps,
                       float wd, float c1, float c2) {
  GRID_STRIDE(i, n) {
    const float gi = g[i] + wd * w[i];
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    w[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
  }
}
__global__ void k_adagrad(float* w, const float* g, float* sum, std::size_t n, float lr, float eps, float wd) {
  GRID_STRIDE(i, n) {
    const float gi = g[i] + wd * w[i];
    sum[i] += gi * gi;
    w[i] -= lr * gi / (sqrtf(sum[i]) + eps);
  }
}

#undef GRID_STRIDE

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(int device) : device_(device) {
    RESIL_CUDA_CHECK(cudaSetDevice(device_));
    stream_ = std::make_unique<cuda::Stream>();
    blas_ = std::make_unique<cuda::CublasHandle>(stream_->get());
  }
  ~CudaBackend() override {
    if (stream_) RESIL_CUDA_CHECK_PRINT(cudaStreamSynchronize(stream_->get()));
  }
  std::string name() const override { return "cuda"; }
  int threads() const override { return 1; }
  NumericConfig numeric() const override {
    // cuBLAS picks its kernels by architecture and library version, so both are part of the id.
    int major = 0, minor = 0, runtime = 0;
    RESIL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_));
    RESIL_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_));
    RESIL_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    return {"cuda-sm" + std::to_string(major * 10 + minor) + "-cudart" + std::to_string(runtime),
            "cuBLAS sgemm and resil's kernels on device " + std::to_string(device_)};
  }
  cudaStream_t stream() const noexcept { return stream_->get(); }
  int device() const noexcept { return device_; }

  float* alloc(std::size_t n) override {
    float* p = nullptr;
    if (n) {
      RESIL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)));
      RESIL_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(float), s()));
    }
    return p;
  }
  void release(float* p) noexcept override {
    if (p) {
      RESIL_CUDA_CHECK_PRINT(cudaStreamSynchronize(s()));
      RESIL_CUDA_CHECK_PRINT(cudaFree(p));
    }
  }
  std::int32_t* alloc_i32(std::size_t n) override {
    std::int32_t* p = nullptr;
    if (n) {
      RESIL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(std::int32_t)));
      RESIL_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(std::int32_t), s()));
    }
    return p;
  }
  void release_i32(std::int32_t* p) noexcept override {
    if (p) {
      RESIL_CUDA_CHECK_PRINT(cudaStreamSynchronize(s()));
      RESIL_CUDA_CHECK_PRINT(cudaFree(p));
    }
  }
  void upload(float* dst, const float* host, std::size_t n) override { copy_sync(dst, host, n * sizeof(float), cudaMemcpyHostToDevice); }
  void upload_i32(std::int32_t* dst, const std::int32_t* host, std::size_t n) override {
    copy_sync(dst, host, n * sizeof(std::int32_t), cudaMemcpyHostToDevice);
  }
  void download(float* host, const float* src, std::size_t n) override { copy_sync(host, src, n * sizeof(float), cudaMemcpyDeviceToHost); }
  void fill(float* x, std::size_t n, float v) override { launch(k_fill, n, x, n, v); }
  void copy(float* dst, const float* src, std::size_t n) override {
    if (n) RESIL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, s()));
  }

  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb, float beta,
            float* c, int ldc) override {
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    RESIL_CUBLAS_CHECK(cuda::cublas().sgemm(blas_->get(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                                   b, ldb, a, lda, &beta, c, ldc));
  }
  void add_bias(float* y, const float* bias, int rows, int cols) override {
    launch(k_add_bias, static_cast<std::size_t>(rows) * cols, y, bias, rows, cols);
  }
  void accumulate_bias_grad(const float* dy, float* db, int rows, int cols) override {
    if (rows <= 0 || cols <= 0) return;
    cuda::k_colsum<<<cuda::colsum_grid(cols), dim3(32, 8), 0, s()>>>(cuda::RowMajor{dy, cols}, rows, cols, db);
    RESIL_CUDA_CHECK(cudaGetLastError());
  }
  void add_channel_bias(float* y, const float* bias, int n, int c, int plane) override {
    launch(k_add_channel_bias, static_cast<std::size_t>(n) * c * plane, y, bias, n, c, plane);
  }
  void accumulate_channel_bias_grad(const float* dy, float* db, int n, int c, int plane) override {
    const std::size_t planes = static_cast<std::size_t>(n) * c;
    grow(plane_sums_, std::max<std::size_t>(1, planes));
    launch(k_plane_sums, planes, dy, planes, plane, plane_sums_.data());
    launch(k_add_in_image_order, static_cast<std::size_t>(c), plane_sums_.data(), n, static_cast<std::size_t>(c), db);
  }
  void axpy(std::size_t n, float alpha, const float* x, float* y) override { launch(k_axpy, n, n, alpha, x, y); }

  void relu_forward(const float* x, float* y, std::size_t n) override { launch(k_relu_fwd, n, x, y, n); }
  void relu_backward(const float* y, const float* dy, float* dx, std::size_t n) override { launch(k_relu_bwd, n, y, dy, dx, n); }
  bool all_finite(const float* x, std::size_t n) override {
    flag_.ensure(1);
    RESIL_CUDA_CHECK(cudaMemsetAsync(flag_.data(), 0, sizeof(int), s()));
    launch(k_nonfinite, n, x, n, flag_.data());
    int h = 0;
    copy_sync(&h, flag_.data(), sizeof(int), cudaMemcpyDeviceToHost);
    return h == 0;
  }

  void im2col(const float* img, const ConvGeom& g, float* col) override {
    launch(k_im2col, static_cast<std::size_t>(g.c) * g.kh * g.kw * g.oh() * g.ow(), img, g, col);
  }
  void col2im(const float* col, const ConvGeom& g, float* img) override {
    launch(k_col2im, static_cast<std::size_t>(g.c) * g.h * g.w, col, g, img);
  }
  void gather_rows(const float* src, std::size_t len, const std::int32_t* rows, std::size_t count, float* dst) override {
    launch(k_gather_rows, count * len, src, len, stage_rows(rows, count), count, dst);
  }
  void scatter_rows(const float* src, std::size_t len, const std::int32_t* rows, std::size_t count, float* dst) override {
    launch(k_scatter_rows, count * len, src, len, stage_rows(rows, count), count, dst);
  }
  void fill_rows(float* x, std::size_t len, const std::int32_t* rows, std::size_t count, float v) override {
    launch(k_fill_rows, count * len, x, len, stage_rows(rows, count), count, v);
  }
  // Conv2d over the whole batch: one im2col launch and one strided-batched GEMM (w shared, stride 0)
  // instead of a pair per image. The weight gradient goes through per-image products added in image
  // order; dx through one batched GEMM into n column matrices and one col2im launch.
  void conv_forward(const float* x, const ConvGeom& g, int n, const float* w, int c_out, float* cols, float* y) override {
    const int kk = g.c * g.kh * g.kw, plane = g.oh() * g.ow();
    if (n <= 0) return;
    launch(k_im2col_n, static_cast<std::size_t>(n) * kk * plane, x, g, n, cols);
    gemm_batched(false, false, c_out, plane, kk, 1.0f, w, kk, 0, cols, plane, static_cast<std::ptrdiff_t>(kk) * plane, 0.0f, y, plane,
                 static_cast<std::ptrdiff_t>(c_out) * plane, n);
  }
  void conv_backward(const float* dy, const ConvGeom& g, int n, const float* w, int c_out, const float* cols, float* dw, float* dx,
                     float*) override {
    const int kk = g.c * g.kh * g.kw, plane = g.oh() * g.ow();
    if (n <= 0) return;
    const std::size_t per_w = static_cast<std::size_t>(c_out) * kk;
    grow(dw_parts_, per_w * n);
    gemm_batched(false, true, c_out, kk, plane, 1.0f, dy, plane, static_cast<std::ptrdiff_t>(c_out) * plane, cols, plane,
                 static_cast<std::ptrdiff_t>(kk) * plane, 0.0f, dw_parts_.data(), kk, static_cast<std::ptrdiff_t>(per_w), n);
    launch(k_add_in_image_order, per_w, dw_parts_.data(), n, per_w, dw);
    if (!dx) return;
    grow(dcols_, static_cast<std::size_t>(n) * kk * plane);
    gemm_batched(true, false, kk, plane, c_out, 1.0f, w, kk, 0, dy, plane, static_cast<std::ptrdiff_t>(c_out) * plane, 0.0f, dcols_.data(),
                 plane, static_cast<std::ptrdiff_t>(kk) * plane, n);
    launch(k_col2im_n, static_cast<std::size_t>(n) * g.c * g.h * g.w, dcols_.data(), g, n, dx);
  }
  void maxpool_forward(const float* x, float* y, std::int32_t* argmax, int n, int c, int h, int w, int k) override {
    launch(k_maxpool_fwd, static_cast<std::size_t>(n) * c * (h / k) * (w / k), x, y, argmax, n, c, h, w, k);
  }
  void maxpool_backward(const float* dy, const std::int32_t* argmax, float* dx, std::size_t in_size, std::size_t out_size) override {
    RESIL_CUDA_CHECK(cudaMemsetAsync(dx, 0, in_size * sizeof(float), s()));
    launch(k_maxpool_bwd, out_size, dy, argmax, dx, out_size);
  }

  double softmax_xent(const float* logits, const std::int32_t* labels, int n, int classes, float grad_scale, float* dlogits,
                      std::int64_t* correct) override {
    rows_.ensure(static_cast<std::size_t>(n));
    ok_.ensure(static_cast<std::size_t>(n));
    launch(k_softmax_xent, static_cast<std::size_t>(n), logits, labels, n, classes, grad_scale, dlogits, rows_.data(), ok_.data());
    host_rows_.resize(static_cast<std::size_t>(n));
    host_ok_.resize(static_cast<std::size_t>(n));
    copy_sync(host_rows_.data(), rows_.data(), static_cast<std::size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost);
    copy_sync(host_ok_.data(), ok_.data(), static_cast<std::size_t>(n) * sizeof(std::int32_t), cudaMemcpyDeviceToHost);
    double total = 0.0;  // summed in row order, as on the CPU
    std::int64_t ok = 0;
    for (int i = 0; i < n; ++i) {
      total += static_cast<double>(host_rows_[static_cast<std::size_t>(i)]);
      ok += host_ok_[static_cast<std::size_t>(i)];
    }
    if (correct) *correct += ok;
    return total;
  }
  double bce_logits(const float* logits, const float* targets, int n, float grad_scale, float* dlogits) override {
    rows_.ensure(static_cast<std::size_t>(n));
    launch(k_bce, static_cast<std::size_t>(n), logits, targets, n, grad_scale, dlogits, rows_.data());
    host_rows_.resize(static_cast<std::size_t>(n));
    copy_sync(host_rows_.data(), rows_.data(), static_cast<std::size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost);
    double total = 0.0;
    for (int i = 0; i < n; ++i) total += static_cast<double>(host_rows_[static_cast<std::size_t>(i)]);
    return total;
  }

  void dot_interaction_forward(const float* v, float* out, int n, int f, int d) override {
    launch(k_dot_fwd, static_cast<std::size_t>(n) * (d + f * (f - 1) / 2), v, out, n, f, d);
  }
  void dot_interaction_backward(const float* v, const float* dout, float* dv, int n, int f, int d) override {
    launch(k_dot_bwd, static_cast<std::size_t>(n) * f * d, v, dout, dv, n, f, d);
  }
  void embedding_bag_forward(const float* table, int dim, const std::int32_t* indices, const std::int32_t* offsets, int n,
                             float* out, int out_stride) override {
    stage_bags(indices, offsets, n);
    launch(k_bag_fwd, static_cast<std::size_t>(n) * dim, table, dim, idx_.data(), off_.data(), n, out, out_stride);
  }
  void embedding_bag_backward(const float* dout, int out_stride, const std::int32_t* indices, const std::int32_t* offsets, int n,
                              int dim, float* grad) override {
    stage_bags(indices, offsets, n);
    launch(k_bag_bwd, static_cast<std::size_t>(dim), dout, out_stride, idx_.data(), off_.data(), n, dim, grad);
  }

  void gemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, std::ptrdiff_t stride_a, const float* b,
                    int ldb, std::ptrdiff_t stride_b, float beta, float* c, int ldc, std::ptrdiff_t stride_c, int batch) override {
    // Row-major to column-major as in gemm(): C_i^T = op(B_i)^T op(A_i)^T.
    RESIL_CUBLAS_CHECK(cuda::cublas().sgemm_strided_batched(blas_->get(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                                            &alpha, b, ldb, stride_b, a, lda, stride_a, &beta, c, ldc, stride_c, batch));
  }
  void embedding_forward(const std::int32_t* tokens, const float* wte, const float* wpe, float* out, int B, int T, int C) override {
    cuda::embedding_forward(s(), tokens, wte, wpe, out, B, T, C);
  }
  void embedding_backward(const float* dout, const std::int32_t* tokens, float* dwte, float* dwpe, int B, int T, int C, int V) override {
    grow(tok_count_, static_cast<std::size_t>(std::max(V, 1)));
    grow(tok_start_, static_cast<std::size_t>(std::max(V, 0)) + 1);
    grow(tok_rows_, static_cast<std::size_t>(std::max(B * T, 1)));
    cuda::embedding_backward(s(), dout, tokens, dwte, dwpe, B, T, C, V, {tok_count_.data(), tok_start_.data(), tok_rows_.data()});
  }
  void layernorm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, int rows, int C) override {
    cuda::layernorm_forward(s(), x, w, b, y, mean, rstd, rows, C);
  }
  void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd, float* dx, float* dw,
                          float* db, int rows, int C) override {
    cuda::layernorm_backward(s(), dy, x, w, mean, rstd, dx, dw, db, rows, C);
  }
  void gelu_forward(const float* x, float* y, std::size_t n) override { cuda::gelu_forward(s(), x, y, n); }
  void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n) override { cuda::gelu_backward(s(), x, dy, dx, n); }
  void causal_softmax_forward(const float* sc, float* p, int mats, int T, float scale) override {
    cuda::causal_softmax_forward(s(), sc, p, mats, T, scale);
  }
  void causal_softmax_backward(const float* p, const float* dp, float* ds, int mats, int T, float scale) override {
    cuda::causal_softmax_backward(s(), p, dp, ds, mats, T, scale);
  }
  double sum_squares(const float* x, std::size_t n) override {
    partials_.ensure(cuda::sum_squares_parts);
    return cuda::sum_squares(s(), x, n, partials_.data());
  }
  std::vector<double> sum_squares_many(const std::vector<ConstSpan>& xs) override {
    std::vector<double> out(xs.size());
    if (xs.empty()) return out;
    // The list is staged on the device once and reused while it is the same (every step of a run).
    const bool same = xs.size() == staged_spans_.size() &&
                      std::equal(xs.begin(), xs.end(), staged_spans_.begin(), [](const ConstSpan& a, const ConstSpan& b) {
                        return a.data == b.data && a.size == b.size;
                      });
    if (!same) {
      grow(spans_dev_, xs.size());
      staged_spans_ = xs;
      copy_sync(spans_dev_.data(), staged_spans_.data(), xs.size() * sizeof(ConstSpan), cudaMemcpyHostToDevice);
    }
    grow(partials_, xs.size() * cuda::sum_squares_parts);
    grow(totals_, xs.size());
    cuda::sum_squares_many(s(), spans_dev_.data(), xs.size(), partials_.data(), totals_.data(), out.data());
    return out;
  }
  void scale(float* x, std::size_t n, float a) override { cuda::scale(s(), x, n, a); }
  void round_bf16(float* x, std::size_t n) override { cuda::round_bf16(s(), x, n); }

  void sgd_update(float* w, const float* g, float* buf, std::size_t n, float lr, float momentum, float wd) override {
    launch(k_sgd, n, w, g, buf, n, lr, momentum, wd);
  }
  void adam_update(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps, float wd,
                   std::int64_t step) override {
    // Bias corrections computed on the host exactly as the CPU backend computes them (dmath::powi's
    // binary powering: libm's pow may round differently).
    const float c1 = 1.0f - static_cast<float>(powi(static_cast<double>(b1), step));
    const float c2 = 1.0f - static_cast<float>(powi(static_cast<double>(b2), step));
    launch(k_adam, n, w, g, m, v, n, lr, b1, b2, eps, wd, c1, c2);
  }
  void adagrad_update(float* w, const float* g, float* sum, std::size_t n, float lr, float eps, float wd) override {
    launch(k_adagrad, n, w, g, sum, n, lr, eps, wd);
  }
  void adamw_update(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps, float wd,
                    std::int64_t step) override {
    // The bias corrections as the CPU backend computes them (binary powering in double, rounded once).
    const float bc1 = 1.0f - static_cast<float>(powi(static_cast<double>(b1), step));
    const float bc2 = 1.0f - static_cast<float>(powi(static_cast<double>(b2), step));
    cuda::adamw_update(s(), w, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
  }

private:
  cudaStream_t s() const noexcept { return stream_->get(); }
  static double powi(double base, std::int64_t n) {  // dmath::powi (core/include/resil/core/dmath.hpp), for C++17
    double result = 1.0;
    for (std::uint64_t k = n < 0 ? 0 : static_cast<std::uint64_t>(n); k; k >>= 1) {
      if (k & 1) result *= base;
      base *= base;
    }
    return result;
  }

  template <class... KArgs, class... Args>
  void launch(void (*kernel)(KArgs...), std::size_t n, Args&&... args) {
    if (n == 0) return;
    kernel<<<blocks_for(n), kThreads, 0, s()>>>(std::forward<Args>(args)...);
    RESIL_CUDA_CHECK(cudaGetLastError());
  }
  void copy_sync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    if (!bytes) return;
    RESIL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s()));
    RESIL_CUDA_CHECK(cudaStreamSynchronize(s()));
  }
  // A scratch buffer grown only once the kernels queued on the stream (which may read it) are done.
  template <class T>
  void grow(DeviceBuffer<T>& b, std::size_t n) {
    if (n <= b.size()) return;
    RESIL_CUDA_CHECK(cudaStreamSynchronize(s()));
    b.ensure(n);
  }
  // A row list on the device: the last one staged is reused while the host list is the same (an
  // update gathers and scatters the same rows several times).
  const std::int32_t* stage_rows(const std::int32_t* rows, std::size_t count) {
    if (count == 0) return nullptr;
    if (!std::equal(rows, rows + count, staged_rows_.begin(), staged_rows_.end())) {
      if (count > rows_dev_.size()) {
        RESIL_CUDA_CHECK(cudaStreamSynchronize(s()));  // queued kernels may still read the old list
        rows_dev_.ensure(count);
      }
      staged_rows_.assign(rows, rows + count);
      copy_sync(rows_dev_.data(), staged_rows_.data(), count * sizeof(std::int32_t), cudaMemcpyHostToDevice);
    }
    return rows_dev_.data();
  }
  // The interface passes bag indices and offsets in host memory; stage them on the device.
  void stage_bags(const std::int32_t* indices, const std::int32_t* offsets, int n) {
    const std::size_t nidx = static_cast<std::size_t>(offsets[n]);
    off_.ensure(static_cast<std::size_t>(n) + 1);
    idx_.ensure(std::max<std::size_t>(1, nidx));
    copy_sync(off_.data(), offsets, (static_cast<std::size_t>(n) + 1) * sizeof(std::int32_t), cudaMemcpyHostToDevice);
    copy_sync(idx_.data(), indices, nidx * sizeof(std::int32_t), cudaMemcpyHostToDevice);
  }

  int device_;
  std::unique_ptr<cuda::Stream> stream_;
  std::unique_ptr<cuda::CublasHandle> blas_;
  DeviceBuffer<int> flag_;
  DeviceBuffer<float> rows_;
  DeviceBuffer<float> plane_sums_, dw_parts_, dcols_;  // channel-bias and conv intermediates
  DeviceBuffer<double> partials_, totals_;            // sums of squares
  DeviceBuffer<ConstSpan> spans_dev_;
  std::vector<ConstSpan> staged_spans_;
  DeviceBuffer<std::int32_t> tok_count_, tok_start_, tok_rows_;  // the token embedding gradient's buckets
  DeviceBuffer<std::int32_t> ok_, idx_, off_, rows_dev_;
  std::vector<std::int32_t> staged_rows_;
  std::vector<float> host_rows_;
  std::vector<std::int32_t> host_ok_;
};

}  // namespace

cuda::BackendStream cuda::stream_of(Backend& be) {
  auto* c = dynamic_cast<CudaBackend*>(&be);
  if (!c) throw UsageError("device collectives need the CUDA backend, not '" + be.name() + "'");
  return {c->stream(), c->device()};
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  const int n = cuda_device_count();
  if (n == 0) throw CudaError("--device cuda: " + cuda_device_description(0));
  if (device < 0 || device >= n) throw CudaError("--device cuda: " + cuda_device_description(device));
  return std::make_unique<CudaBackend>(device);
}

}  // namespace resil::train

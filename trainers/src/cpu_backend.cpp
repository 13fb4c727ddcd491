// The CPU backend: resil's GEMM (gemm.hpp), plain loops (fixed order) for everything else, and
// resil::dmath wherever an elementary function is needed: nothing here depends on the CPU model.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <utility>
#include <vector>

#include "cpu/kernels.hpp"
#include "gemm.hpp"
#include "resil/core/dmath.hpp"
#include "resil/core/error.hpp"
#include "resil/train/backend.hpp"

namespace resil::train {

namespace {

/// The output columns x in [first, end) whose input column x * stride - pad + kj lies in [0, w).
std::pair<int, int> valid_x(const ConvGeom& g, int kj, int ow) {
  const int off = kj - g.pad;  // ix = x * stride + off
  int x0 = off >= 0 ? 0 : (-off + g.stride - 1) / g.stride;
  int x1 = off >= g.w ? 0 : (g.w - 1 - off) / g.stride + 1;
  x0 = std::min(x0, ow);
  x1 = std::clamp(x1, x0, ow);
  return {x0, x1};
}

/// Copies n floats of a row segment a few tens long (an image row in im2col). std::copy is a
/// library memmove call, whose call and size dispatch cost more than copying 10-28 floats; the
/// fixed-size memcpy calls below compile to vector moves.
inline void copy_short(float* dst, const float* src, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) std::memcpy(dst + i, src + i, 8 * sizeof(float));
  if (n - i >= 4) {
    std::memcpy(dst + i, src + i, 4 * sizeof(float));
    i += 4;
  }
  if (n - i >= 2) {
    std::memcpy(dst + i, src + i, 2 * sizeof(float));
    i += 2;
  }
  if (i < n) dst[i] = src[i];
}

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(int threads) : threads_(std::max(1, threads)), path_(gemm::select_path()) {}
  std::string name() const override { return "cpu"; }
  int threads() const override { return threads_; }
  NumericConfig numeric() const override {
    return {cpu_numeric_id, std::string(gemm::path_name(path_)) + (path_ == gemm::Path::avx2 ? " FMA, " : ", ") + std::to_string(threads_) +
                                (threads_ == 1 ? " thread" : " threads")};
  }

  float* alloc(std::size_t n) override {
    auto* p = static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{64}));
    std::memset(p, 0, n * sizeof(float));
    return p;
  }
  void release(float* p) noexcept override { ::operator delete[](p, std::align_val_t{64}); }
  std::int32_t* alloc_i32(std::size_t n) override { return new std::int32_t[n](); }
  void release_i32(std::int32_t* p) noexcept override { delete[] p; }
  void upload(float* dst, const float* host, std::size_t n) override { std::memcpy(dst, host, n * sizeof(float)); }
  void upload_i32(std::int32_t* dst, const std::int32_t* host, std::size_t n) override {
    std::memcpy(dst, host, n * sizeof(std::int32_t));
  }
  void download(float* host, const float* src, std::size_t n) override { std::memcpy(host, src, n * sizeof(float)); }
  void fill(float* x, std::size_t n, float v) override { std::fill(x, x + n, v); }
  void copy(float* dst, const float* src, std::size_t n) override { std::memmove(dst, src, n * sizeof(float)); }

  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb, float beta,
            float* c, int ldc) override {
    gemm::sgemm(path_, threads_, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void add_bias(float* y, const float* bias, int rows, int cols) override {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) y[static_cast<std::size_t>(r) * cols + c] += bias[c];
  }
  void accumulate_bias_grad(const float* dy, float* db, int rows, int cols) override {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) db[c] += dy[static_cast<std::size_t>(r) * cols + c];
  }
  void add_channel_bias(float* y, const float* bias, int n, int c, int plane) override {
    for (int i = 0; i < n; ++i)
      for (int ch = 0; ch < c; ++ch) {
        float* p = y + (static_cast<std::size_t>(i) * c + ch) * plane;
        for (int q = 0; q < plane; ++q) p[q] += bias[ch];
      }
  }
  void accumulate_channel_bias_grad(const float* dy, float* db, int n, int c, int plane) override {
    for (int i = 0; i < n; ++i)
      for (int ch = 0; ch < c; ++ch) {
        const float* p = dy + (static_cast<std::size_t>(i) * c + ch) * plane;
        float s = 0.0f;
        for (int q = 0; q < plane; ++q) s += p[q];
        db[ch] += s;
      }
  }
  void axpy(std::size_t n, float alpha, const float* x, float* y) override {
    for (std::size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
  }

  void relu_forward(const float* x, float* y, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  }
  void relu_backward(const float* y, const float* dy, float* dx, std::size_t n) override {
    // Both operands are read on every lane, so the select vectorises (a branch here mispredicts on
    // half the activations).
    for (std::size_t i = 0; i < n; ++i) {
      const float d = dy[i];
      dx[i] = y[i] > 0.0f ? d : 0.0f;
    }
  }
  bool all_finite(const float* x, std::size_t n) override {
    // NaN and Inf are exactly the values whose exponent bits are all ones.
    std::uint32_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t u;
      std::memcpy(&u, x + i, 4);
      bad |= static_cast<std::uint32_t>((u & 0x7f800000u) == 0x7f800000u);
    }
    return bad == 0;
  }

  // im2col and col2im walk the same (c, ki, kj, y) rows as the obvious per-element loops, but
  // compute each row's in-bounds x range once instead of testing every element: pure data
  // movement (im2col) and one addition per image element per (c, ki, kj) in the same order
  // (col2im), so the results are bit-identical to the per-element loops (tests/train/test_cpu_kernels.cpp).
  void im2col(const float* img, const ConvGeom& g, float* col) override {
    const int oh = g.oh(), ow = g.ow();
    for (int c = 0; c < g.c; ++c)
      for (int ki = 0; ki < g.kh; ++ki)
        for (int kj = 0; kj < g.kw; ++kj) {
          float* row = col + (static_cast<std::size_t>(c * g.kh + ki) * g.kw + kj) * oh * ow;
          const auto [x0, x1] = valid_x(g, kj, ow);
          for (int y = 0; y < oh; ++y) {
            float* out = row + static_cast<std::size_t>(y) * ow;
            const int iy = y * g.stride - g.pad + ki;
            if (iy < 0 || iy >= g.h || x0 >= x1) {
              std::fill(out, out + ow, 0.0f);
              continue;
            }
            const float* in = img + (static_cast<std::size_t>(c) * g.h + iy) * g.w;
            const int off = kj - g.pad;  // in[x * stride + off] >= in[0] for x >= x0
            std::fill(out, out + x0, 0.0f);
            if (g.stride == 1) {
              copy_short(out + x0, in + (x0 + off), x1 - x0);
            } else {
              for (int x = x0; x < x1; ++x) out[x] = in[x * g.stride + off];
            }
            std::fill(out + x1, out + ow, 0.0f);
          }
        }
  }
  void col2im(const float* col, const ConvGeom& g, float* img) override {
    const int oh = g.oh(), ow = g.ow();
    for (int c = 0; c < g.c; ++c)
      for (int ki = 0; ki < g.kh; ++ki)
        for (int kj = 0; kj < g.kw; ++kj) {
          const float* row = col + (static_cast<std::size_t>(c * g.kh + ki) * g.kw + kj) * oh * ow;
          const auto [x0, x1] = valid_x(g, kj, ow);
          for (int y = 0; y < oh; ++y) {
            const int iy = y * g.stride - g.pad + ki;
            if (iy < 0 || iy >= g.h) continue;
            const float* in = row + static_cast<std::size_t>(y) * ow;
            float* out = img + (static_cast<std::size_t>(c) * g.h + iy) * g.w;
            const int off = kj - g.pad;
            if (g.stride == 1) {
              float* o = out + off;  // contiguous: the loop vectorises
              for (int x = x0; x < x1; ++x) o[x] += in[x];
            } else {
              for (int x = x0; x < x1; ++x) out[x * g.stride + off] += in[x];
            }
          }
        }
  }
  void maxpool_forward(const float* x, float* y, std::int32_t* argmax, int n, int c, int h, int w, int k) override {
    // Each window is scanned row by row with a strict '>': the first maximum (and NaN never) wins.
    const int oh = h / k, ow = w / k;
    for (int p = 0; p < n * c; ++p) {
      const std::size_t base = static_cast<std::size_t>(p) * h * w;
      const float* xp = x + base;
      float* yp = y + static_cast<std::size_t>(p) * oh * ow;
      std::int32_t* ap = argmax + static_cast<std::size_t>(p) * oh * ow;
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j) {
          int best = i * k * w + j * k;
          float v = xp[best];
          for (int a = 0; a < k; ++a) {
            const int r = (i * k + a) * w + j * k;
            for (int b = 0; b < k; ++b) {
              const bool gt = xp[r + b] > v;  // branch-free: the select compiles to a blend
              v = gt ? xp[r + b] : v;
              best = gt ? r + b : best;
            }
          }
          yp[i * ow + j] = v;
          ap[i * ow + j] = static_cast<std::int32_t>(base + static_cast<std::size_t>(best));
        }
    }
  }
  void maxpool_backward(const float* dy, const std::int32_t* argmax, float* dx, std::size_t in_size, std::size_t out_size) override {
    std::fill(dx, dx + in_size, 0.0f);
    for (std::size_t o = 0; o < out_size; ++o) dx[argmax[o]] += dy[o];
  }

  double softmax_xent(const float* logits, const std::int32_t* labels, int n, int classes, float grad_scale, float* dlogits,
                      std::int64_t* correct) override {
    double total = 0.0;
    std::int64_t ok = 0;
    for (int i = 0; i < n; ++i) {
      const float* z = logits + static_cast<std::size_t>(i) * classes;
      float* dz = dlogits ? dlogits + static_cast<std::size_t>(i) * classes : nullptr;
      int arg = 0;
      float mx = z[0];
      for (int c = 1; c < classes; ++c)
        if (z[c] > mx) { mx = z[c]; arg = c; }
      // e^(z - max) once per class, into the gradient's row (or a scratch row when there is no
      // gradient): independent elements, so the loop vectorises; the sum then runs in class order.
      const int y = labels[i];
      const float zy = z[y] - mx;
      float* e = dz;
      if (!e) {
        thread_local std::vector<float> row;
        row.resize(static_cast<std::size_t>(classes));
        e = row.data();
      }
      for (int c = 0; c < classes; ++c) e[c] = dmath::exp(z[c] - mx);
      float sum = 0.0f;
      for (int c = 0; c < classes; ++c) sum += e[c];
      total += static_cast<double>(dmath::log(sum) - zy);
      ok += arg == y;
      if (dz) {
        const float inv = 1.0f / sum;
        for (int c = 0; c < classes; ++c) dz[c] = grad_scale * (e[c] * inv - (c == y ? 1.0f : 0.0f));
      }
    }
    if (correct) *correct += ok;
    return total;
  }
  double bce_logits(const float* logits, const float* targets, int n, float grad_scale, float* dlogits) override {
    double total = 0.0;
    for (int i = 0; i < n; ++i) {
      const float x = logits[i], t = targets[i];
      total += static_cast<double>(std::max(x, 0.0f) - x * t + dmath::log1p(dmath::exp(-std::fabs(x))));
      if (dlogits) dlogits[i] = grad_scale * (1.0f / (1.0f + dmath::exp(-x)) - t);
    }
    return total;
  }

  void dot_interaction_forward(const float* v, float* out, int n, int f, int d) override {
    const int width = d + f * (f - 1) / 2;
    for (int s = 0; s < n; ++s) {
      const float* vs = v + static_cast<std::size_t>(s) * f * d;
      float* o = out + static_cast<std::size_t>(s) * width;
      std::copy(vs, vs + d, o);
      int k = d;
      for (int i = 1; i < f; ++i)
        for (int j = 0; j < i; ++j) {
          float acc = 0.0f;
          for (int e = 0; e < d; ++e) acc += vs[i * d + e] * vs[j * d + e];
          o[k++] = acc;
        }
    }
  }
  void dot_interaction_backward(const float* v, const float* dout, float* dv, int n, int f, int d) override {
    const int width = d + f * (f - 1) / 2;
    for (int s = 0; s < n; ++s) {
      const float* vs = v + static_cast<std::size_t>(s) * f * d;
      const float* go = dout + static_cast<std::size_t>(s) * width;
      float* g = dv + static_cast<std::size_t>(s) * f * d;
      std::copy(go, go + d, g);
      std::fill(g + d, g + static_cast<std::size_t>(f) * d, 0.0f);
      int k = d;
      for (int i = 1; i < f; ++i)
        for (int j = 0; j < i; ++j) {
          const float gk = go[k++];
          for (int e = 0; e < d; ++e) {
            g[i * d + e] += gk * vs[j * d + e];
            g[j * d + e] += gk * vs[i * d + e];
          }
        }
    }
  }

  void embedding_bag_forward(const float* table, int dim, const std::int32_t* indices, const std::int32_t* offsets, int n,
                             float* out, int out_stride) override {
    for (int b = 0; b < n; ++b) {
      float* o = out + static_cast<std::size_t>(b) * out_stride;
      std::fill(o, o + dim, 0.0f);
      for (std::int32_t i = offsets[b]; i < offsets[b + 1]; ++i) {
        const float* row = table + static_cast<std::size_t>(indices[i]) * dim;
        for (int e = 0; e < dim; ++e) o[e] += row[e];
      }
    }
  }
  void embedding_bag_backward(const float* dout, int out_stride, const std::int32_t* indices, const std::int32_t* offsets,
                              int n, int dim, float* grad) override {
    for (int b = 0; b < n; ++b) {
      const float* g = dout + static_cast<std::size_t>(b) * out_stride;
      for (std::int32_t i = offsets[b]; i < offsets[b + 1]; ++i) {
        float* row = grad + static_cast<std::size_t>(indices[i]) * dim;
        for (int e = 0; e < dim; ++e) row[e] += g[e];
      }
    }
  }

  void gemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, std::ptrdiff_t stride_a, const float* b,
                    int ldb, std::ptrdiff_t stride_b, float beta, float* c, int ldc, std::ptrdiff_t stride_c, int batch) override {
    for (int i = 0; i < batch; ++i)
      gemm::sgemm(path_, threads_, ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c, ldc);
  }
  void embedding_forward(const std::int32_t* tokens, const float* wte, const float* wpe, float* out, int B, int T, int C) override {
    cpu::embedding_forward(tokens, wte, wpe, out, B, T, C);
  }
  void embedding_backward(const float* dout, const std::int32_t* tokens, float* dwte, float* dwpe, int B, int T, int C, int) override {
    cpu::embedding_backward(dout, tokens, dwte, dwpe, B, T, C);
  }
  void layernorm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, int rows, int C) override {
    cpu::layernorm_forward(x, w, b, y, mean, rstd, rows, C);
  }
  void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd, float* dx, float* dw,
                          float* db, int rows, int C) override {
    cpu::layernorm_backward(dy, x, w, mean, rstd, dx, dw, db, rows, C);
  }
  void gelu_forward(const float* x, float* y, std::size_t n) override { cpu::gelu_forward(x, y, n); }
  void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n) override { cpu::gelu_backward(x, dy, dx, n); }
  void causal_softmax_forward(const float* s, float* p, int mats, int T, float scale) override {
    cpu::causal_softmax_forward(s, p, mats, T, scale);
  }
  void causal_softmax_backward(const float* p, const float* dp, float* ds, int mats, int T, float scale) override {
    cpu::causal_softmax_backward(p, dp, ds, mats, T, scale);
  }
  void round_bf16(float* x, std::size_t n) override { cpu::round_bf16(x, n); }
  double sum_squares(const float* x, std::size_t n) override {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    return s;
  }
  void scale(float* x, std::size_t n, float a) override {
    for (std::size_t i = 0; i < n; ++i) x[i] *= a;
  }

  void sgd_update(float* w, const float* g, float* buf, std::size_t n, float lr, float momentum, float wd) override {
    for (std::size_t i = 0; i < n; ++i) {
      float gi = g[i] + wd * w[i];
      if (buf) gi = buf[i] = momentum * buf[i] + gi;
      w[i] -= lr * gi;
    }
  }
  void adam_update(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps, float wd,
                   std::int64_t step) override {
    const float c1 = 1.0f - static_cast<float>(dmath::powi(static_cast<double>(b1), step));
    const float c2 = 1.0f - static_cast<float>(dmath::powi(static_cast<double>(b2), step));
    for (std::size_t i = 0; i < n; ++i) {
      const float gi = g[i] + wd * w[i];
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
    }
  }
  void adagrad_update(float* w, const float* g, float* sum, std::size_t n, float lr, float eps, float wd) override {
    for (std::size_t i = 0; i < n; ++i) {
      const float gi = g[i] + wd * w[i];
      sum[i] += gi * gi;
      w[i] -= lr * gi / (std::sqrt(sum[i]) + eps);
    }
  }

  void adamw_update(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps, float wd,
                    std::int64_t step) override {
    cpu::adamw_update(w, g, m, v, n, lr, b1, b2, eps, wd, step);
  }

private:
  int threads_;
  gemm::Path path_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  if (threads < 1 || threads > 256) throw UsageError("--threads " + std::to_string(threads) + " is not in 1..256");
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace resil::train

// The compute boundary: every numeric kernel the models use, behind one interface, so the same
// layer and model code runs on the CPU backend (resil's GEMM) and the CUDA backend (cuBLAS).
// Pointers are backend memory (host memory for the CPU backend); host data crosses the boundary only
// through upload/download. All matrices are row-major.
//
// Determinism contract: every kernel gives bit-identical results for identical inputs and equal
// NumericConfig ids. The CPU backend's id does not depend on the CPU model, its instruction set or
// the thread count (docs/design/determinism.md); reductions run in a fixed order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace resil::train {

struct ConvGeom {
  int c = 1, h = 1, w = 1;   // input channels and size
  int kh = 1, kw = 1, stride = 1, pad = 0;
  int oh() const noexcept { return (h + 2 * pad - kh) / stride + 1; }
  int ow() const noexcept { return (w + 2 * pad - kw) / stride + 1; }
};

/// `size` floats at `data` in backend memory (a plain struct: the CUDA sources compile as C++17, without std::span).
struct ConstSpan {
  const float* data = nullptr;
  std::size_t size = 0;
};

/// What decides the bits of a backend's results besides its inputs, recorded in every checkpoint
/// and summary: equal ids give bit-identical results for equal inputs.
struct NumericConfig {
  std::string id;      // "cpu-fma-seqk-1": resil's GEMM order and math (any x86-64); "cuda-sm90-cublas-130100"
  std::string detail;  // how this process computes, not deciding the bits: "avx2 FMA, 1 thread"
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  /// Threads the backend computes with (CPU: GEMM threads; they do not change the bits).
  virtual int threads() const = 0;
  virtual NumericConfig numeric() const = 0;

  // ---- memory ----
  virtual float* alloc(std::size_t n) = 0;  // zero-filled
  virtual void release(float* p) noexcept = 0;
  virtual std::int32_t* alloc_i32(std::size_t n) = 0;
  virtual void release_i32(std::int32_t* p) noexcept = 0;
  virtual void upload(float* dst, const float* host, std::size_t n) = 0;
  virtual void upload_i32(std::int32_t* dst, const std::int32_t* host, std::size_t n) = 0;
  virtual void download(float* host, const float* src, std::size_t n) = 0;
  virtual void fill(float* x, std::size_t n, float v) = 0;
  virtual void copy(float* dst, const float* src, std::size_t n) = 0;

  // ---- dense algebra ----
  /// C = alpha * op(A) * op(B) + beta * C, op(A) is m x k, op(B) is k x n.
  virtual void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                    int ldb, float beta, float* c, int ldc) = 0;
  /// y[r, c] += bias[c] for an rows x cols matrix.
  virtual void add_bias(float* y, const float* bias, int rows, int cols) = 0;
  /// db[c] += sum_r dy[r, c], summed in row order.
  virtual void accumulate_bias_grad(const float* dy, float* db, int rows, int cols) = 0;
  /// y[n, c, p] += bias[c] (NCHW with p over the plane) and its gradient.
  virtual void add_channel_bias(float* y, const float* bias, int n, int c, int plane) = 0;
  virtual void accumulate_channel_bias_grad(const float* dy, float* db, int n, int c, int plane) = 0;
  /// y += alpha * x
  virtual void axpy(std::size_t n, float alpha, const float* x, float* y) = 0;

  // ---- elementwise ----
  virtual void relu_forward(const float* x, float* y, std::size_t n) = 0;
  virtual void relu_backward(const float* y, const float* dy, float* dx, std::size_t n) = 0;
  /// True when no element is NaN or Inf.
  virtual bool all_finite(const float* x, std::size_t n) = 0;

  // ---- convolution and pooling (one image, CHW) ----
  /// col is (c*kh*kw) x (oh*ow).
  virtual void im2col(const float* img, const ConvGeom& g, float* col) = 0;
  /// img += col2im(col) (img must be zeroed by the caller for a fresh gradient).
  virtual void col2im(const float* col, const ConvGeom& g, float* img) = 0;
  /// Max pooling with window k and stride k over an n x c x h x w batch; argmax is stored as the
  /// flat input offset of the max (first max wins on ties).
  virtual void maxpool_forward(const float* x, float* y, std::int32_t* argmax, int n, int c, int h, int w, int k) = 0;
  virtual void maxpool_backward(const float* dy, const std::int32_t* argmax, float* dx, std::size_t in_size,
                                std::size_t out_size) = 0;
  /// Rows of a row-major array of row_len floats, listed by `count` host indices `rows` (unique): dst gets
  /// them one after another (gather), or they get src's (scatter), or v (fill). The defaults copy row
  /// by row; a device backend does each in one launch.
  virtual void gather_rows(const float* src, std::size_t row_len, const std::int32_t* rows, std::size_t count, float* dst);
  virtual void scatter_rows(const float* src, std::size_t row_len, const std::int32_t* rows, std::size_t count, float* dst);
  virtual void fill_rows(float* x, std::size_t row_len, const std::int32_t* rows, std::size_t count, float v);
  /// Conv2d's forward over a batch of n images x (each c x h x w): cols[i] = im2col(x[i]) (cols: n
  /// matrices of kk x plane, kk = c*kh*kw, plane = oh*ow), y[i] = w cols[i] (w: c_out x kk; y: n x c_out
  /// x plane). The default runs im2col and gemm image after image; a backend may batch them.
  virtual void conv_forward(const float* x, const ConvGeom& g, int n, const float* w, int c_out, float* cols, float* y);
  /// Conv2d's backward over the batch of conv_forward: dw += dy[i] cols[i]^T summed over the images
  /// (the default: image after image, each GEMM accumulating into dw); when dx is not null,
  /// dx[i] += col2im(w^T dy[i]) with dcol (kk x plane) as scratch, dx zeroed by the caller.
  virtual void conv_backward(const float* dy, const ConvGeom& g, int n, const float* w, int c_out, const float* cols, float* dw, float* dx,
                             float* dcol);

  // ---- losses: return the summed loss (double, fixed order); write dlogits = grad_scale * dL/dlogits ----
  /// Softmax cross-entropy over rows of n x classes logits; `correct` counts argmax == label.
  virtual double softmax_xent(const float* logits, const std::int32_t* labels, int n, int classes, float grad_scale,
                              float* dlogits, std::int64_t* correct) = 0;
  /// Binary cross-entropy with logits over n scalars (targets in {0,1}).
  virtual double bce_logits(const float* logits, const float* targets, int n, float grad_scale, float* dlogits) = 0;

  // ---- DLRM dot interaction: for each sample, vectors v[0..f) of dim d (v0 = dense output,
  // v1.. = embeddings, stored n x f x d); out row = [v0, dot(v_i, v_j) for i > j in row-major order] ----
  virtual void dot_interaction_forward(const float* v, float* out, int n, int f, int d) = 0;
  virtual void dot_interaction_backward(const float* v, const float* dout, float* dv, int n, int f, int d) = 0;

  // ---- EmbeddingBag (sum): bags given as CSR (offsets has n+1 entries; indices are host arrays) ----
  virtual void embedding_bag_forward(const float* table, int dim, const std::int32_t* indices, const std::int32_t* offsets,
                                     int n, float* out, int out_stride) = 0;
  /// grad[row] += dout[bag] for every index of every bag, in bag order.
  virtual void embedding_bag_backward(const float* dout, int out_stride, const std::int32_t* indices,
                                      const std::int32_t* offsets, int n, int dim, float* grad) = 0;

  // ---- transformer (GPT): activations are row-major (B*T) x C, rows in (b, t) order ----
  /// C = alpha * op(A_i) op(B_i) + beta * C_i for i in [0, batch), A_i = a + i * stride_a (likewise B_i, C_i):
  /// `batch` GEMMs of the contract of gemm() (attention's per-sample products).
  virtual void gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, std::ptrdiff_t stride_a,
                            const float* b, int ldb, std::ptrdiff_t stride_b, float beta, float* c, int ldc, std::ptrdiff_t stride_c,
                            int batch) = 0;
  /// out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :] (tokens is B x T, in backend memory).
  virtual void embedding_forward(const std::int32_t* tokens, const float* wte, const float* wpe, float* out, int B, int T, int C) = 0;
  /// dwte[tokens[b, t], :] += dout[b, t, :] and dwpe[t, :] += dout[b, t, :], summed in (b, t) order;
  /// dwte has V rows and every token is in [0, V) (the caller checks).
  virtual void embedding_backward(const float* dout, const std::int32_t* tokens, float* dwte, float* dwpe, int B, int T, int C,
                                  int V) = 0;
  /// LayerNorm over each row of C: y = (x - mean) * rstd * w + b with rstd = 1 / sqrt(var + 1e-5)
  /// (biased variance); mean and rstd (one per row) are kept for the backward pass.
  virtual void layernorm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, int rows, int C) = 0;
  /// ACCUMULATES: dx += dL/dx, dw += dL/dw, db += dL/db (parameter gradients summed in row order).
  virtual void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd, float* dx,
                                  float* dw, float* db, int rows, int C) = 0;
  /// GELU, GPT-2's tanh form: y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  virtual void gelu_forward(const float* x, float* y, std::size_t n) = 0;
  /// dx = dy * gelu'(x) (overwrites dx).
  virtual void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n) = 0;
  /// For each of `mats` T x T score matrices s: p[i, j] = exp(scale s[i, j] - max) / sum over j' <= i,
  /// and p[i, j] = 0 for j > i (a position attends to itself and the past).
  virtual void causal_softmax_forward(const float* s, float* p, int mats, int T, float scale) = 0;
  /// ds[i, j] = scale * p[i, j] * (dp[i, j] - sum_j' p[i, j'] dp[i, j']) (0 above the diagonal).
  virtual void causal_softmax_backward(const float* p, const float* dp, float* ds, int mats, int T, float scale) = 0;

  /// x = x rounded to bfloat16 (to nearest, ties to even; NaN stays NaN), kept as a float: the
  /// storage of bf16 tensors in a mixed-precision computation (docs/design/gpt.md#bf16).
  virtual void round_bf16(float* x, std::size_t n) = 0;

  // ---- reductions and scaling over whole tensors ----
  /// sum of x[i]^2 in index order, in double (the gradient norm for clipping).
  virtual double sum_squares(const float* x, std::size_t n) = 0;
  /// sum_squares of each tensor of the list, each result the bits sum_squares gives it. The default
  /// calls sum_squares tensor after tensor; a device backend computes them all before one copy to the host.
  virtual std::vector<double> sum_squares_many(const std::vector<ConstSpan>& xs);
  /// x *= a
  virtual void scale(float* x, std::size_t n, float a) = 0;

  // ---- optimizer updates (dense, whole tensor) ----
  virtual void sgd_update(float* w, const float* g, float* momentum_buf, std::size_t n, float lr, float momentum,
                          float weight_decay) = 0;
  virtual void adam_update(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float beta1, float beta2,
                           float eps, float weight_decay, std::int64_t step) = 0;
  virtual void adagrad_update(float* w, const float* g, float* sum, std::size_t n, float lr, float eps, float weight_decay) = 0;
  /// AdamW (Loshchilov and Hutter), as torch.optim.AdamW computes it: w *= 1 - lr * weight_decay
  /// (decoupled; the caller passes 0 for parameters that are not decayed), then Adam's moments and
  /// w -= (lr / (1 - beta1^step)) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps).
  virtual void adamw_update(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float beta1, float beta2, float eps,
                            float weight_decay, std::int64_t step) = 0;
};

/// The CPU backend: resil's GEMM (a fixed FMA order per output element, trainers/src/gemm.hpp) on
/// `threads` threads, resil::dmath for exp and log, plain loops in a fixed order for the rest.
std::unique_ptr<Backend> make_cpu_backend(int threads = 1);

/// The CPU backend's NumericConfig id.
inline constexpr const char* cpu_numeric_id = "cpu-fma-seqk-1";

}  // namespace resil::train

// The CPU backend's kernels against the obvious per-element loops (the `_reference` functions
// below): convolution and pooling against the loops they replaced, kept verbatim, and the
// element-wise kernels against their own formulas kept out of the vectoriser. Results must be
// bit-identical, because every ckpt-train result (golden runs of the fault-injection campaigns)
// depends on them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "resil/core/dmath.hpp"
#include "resil/core/rng.hpp"
#include "resil/train/backend.hpp"
#include "cpu/kernels.hpp"

using namespace resil::train;

namespace {
std::vector<float> randv(std::size_t n, std::uint64_t stream) {
  resil::Rng rng(99, stream);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void im2col_reference(const float* img, const ConvGeom& g, float* col) {
  const int oh = g.oh(), ow = g.ow();
  for (int c = 0; c < g.c; ++c)
    for (int ki = 0; ki < g.kh; ++ki)
      for (int kj = 0; kj < g.kw; ++kj) {
        float* row = col + (static_cast<std::size_t>(c * g.kh + ki) * g.kw + kj) * oh * ow;
        for (int y = 0; y < oh; ++y) {
          const int iy = y * g.stride - g.pad + ki;
          for (int x = 0; x < ow; ++x) {
            const int ix = x * g.stride - g.pad + kj;
            row[y * ow + x] = (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) ? img[(static_cast<std::size_t>(c) * g.h + iy) * g.w + ix] : 0.0f;
          }
        }
      }
}

void col2im_reference(const float* col, const ConvGeom& g, float* img) {
  const int oh = g.oh(), ow = g.ow();
  for (int c = 0; c < g.c; ++c)
    for (int ki = 0; ki < g.kh; ++ki)
      for (int kj = 0; kj < g.kw; ++kj) {
        const float* row = col + (static_cast<std::size_t>(c * g.kh + ki) * g.kw + kj) * oh * ow;
        for (int y = 0; y < oh; ++y) {
          const int iy = y * g.stride - g.pad + ki;
          if (iy < 0 || iy >= g.h) continue;
          for (int x = 0; x < ow; ++x) {
            const int ix = x * g.stride - g.pad + kj;
            if (ix >= 0 && ix < g.w) img[(static_cast<std::size_t>(c) * g.h + iy) * g.w + ix] += row[y * ow + x];
          }
        }
      }
}

void maxpool_forward_reference(const float* x, float* y, std::int32_t* argmax, int n, int c, int h, int w, int k) {
  const int oh = h / k, ow = w / k;
  for (int p = 0; p < n * c; ++p) {
    const std::size_t base = static_cast<std::size_t>(p) * h * w;
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j) {
        std::size_t best = base + static_cast<std::size_t>(i * k) * w + j * k;
        for (int a = 0; a < k; ++a)
          for (int b = 0; b < k; ++b) {
            const std::size_t off = base + static_cast<std::size_t>(i * k + a) * w + (j * k + b);
            if (x[off] > x[best]) best = off;
          }
        const std::size_t o = (static_cast<std::size_t>(p) * oh + i) * ow + j;
        y[o] = x[best];
        argmax[o] = static_cast<std::int32_t>(best);
      }
  }
}
}  // namespace

TEST_CASE("cpu im2col and col2im are bit-identical to the per-element loops", "[train][unit]") {
  auto be = make_cpu_backend(1);
  // The two convolutions of the CNN, then strides, paddings larger than the kernel's reach,
  // kernels wider than the padded image's interior, non-square images.
  const ConvGeom geoms[] = {{1, 28, 28, 5, 5, 1, 2}, {6, 14, 14, 5, 5, 1, 0}, {2, 6, 5, 3, 3, 2, 1}, {3, 7, 9, 3, 2, 3, 2},
                            {1, 4, 4, 3, 3, 1, 3},   {2, 5, 3, 5, 3, 2, 0},   {1, 1, 1, 1, 1, 1, 0}, {2, 3, 8, 1, 4, 1, 4}};
  std::uint64_t stream = 0;
  for (const ConvGeom& g : geoms) {
    CAPTURE(g.c, g.h, g.w, g.kh, g.kw, g.stride, g.pad);
    const std::size_t img_n = static_cast<std::size_t>(g.c) * g.h * g.w;
    const std::size_t col_n = static_cast<std::size_t>(g.c) * g.kh * g.kw * g.oh() * g.ow();
    const auto img = randv(img_n, ++stream);
    std::vector<float> got(col_n, std::numeric_limits<float>::quiet_NaN()), want(col_n);
    be->im2col(img.data(), g, got.data());
    im2col_reference(img.data(), g, want.data());
    CHECK(same_bits(got, want));
    // col2im accumulates onto an existing image: start from a non-zero one.
    const auto col = randv(col_n, ++stream);
    auto acc_got = randv(img_n, ++stream), acc_want = acc_got;
    be->col2im(col.data(), g, acc_got.data());
    col2im_reference(col.data(), g, acc_want.data());
    CHECK(same_bits(acc_got, acc_want));
  }
}

TEST_CASE("cpu maxpool forward is bit-identical to the per-element loop, ties and NaN included", "[train][unit]") {
  auto be = make_cpu_backend(1);
  const int n = 2, c = 3, h = 7, w = 6;
  const int k = GENERATE(1, 2, 3);
  auto x = randv(static_cast<std::size_t>(n) * c * h * w, 40 + static_cast<std::uint64_t>(k));
  // Ties (the first maximum wins), NaN (never selected by '>'), -0 and +0.
  for (std::size_t i = 0; i < x.size(); i += 5) x[i] = 1.5f;
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[7] = -0.0f;
  x[8] = 0.0f;
  const std::size_t out_n = static_cast<std::size_t>(n) * c * (h / k) * (w / k);
  std::vector<float> y_got(out_n), y_want(out_n);
  std::vector<std::int32_t> a_got(out_n), a_want(out_n);
  be->maxpool_forward(x.data(), y_got.data(), a_got.data(), n, c, h, w, k);
  maxpool_forward_reference(x.data(), y_want.data(), a_want.data(), n, c, h, w, k);
  CHECK(same_bits(y_got, y_want));
  CHECK(a_got == a_want);
}

TEST_CASE("cpu sum_squares_many is sum_squares tensor after tensor, bit for bit", "[train][unit]") {
  auto be = make_cpu_backend(1);
  const std::vector<std::size_t> sizes = {0, 1, 255, 257, 3000};
  std::vector<std::vector<float>> xs;
  std::vector<ConstSpan> all;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    xs.push_back(randv(sizes[i], 40 + i));
    all.push_back({xs.back().data(), sizes[i]});
  }
  auto check = [&](const std::vector<ConstSpan>& list) {
    const auto sums = be->sum_squares_many(list);
    REQUIRE(sums.size() == list.size());
    for (std::size_t k = 0; k < list.size(); ++k) {
      const double one = be->sum_squares(list[k].data, list[k].size);
      CAPTURE(k, list[k].size);
      CHECK(std::memcmp(&sums[k], &one, sizeof(double)) == 0);
    }
  };
  check(all);
  check({all[2]});
  check({all[0]});
  check({});
  CHECK(be->sum_squares_many({all[0]}).at(0) == 0.0);
  CHECK(be->sum_squares_many({all[1]}).at(0) == static_cast<double>(xs[1][0]) * static_cast<double>(xs[1][0]));
}

// ---- element-wise kernels compiled to vector code ------------------------------------------
// The backend's element-wise files are built with -fno-trapping-math and -fno-math-errno so that
// loops with a select (ReLU's backward, exp_fast's clamps) or a square root (Adam) vectorise
// (trainers/CMakeLists.txt). The references below are the same formulas kept out of the
// vectoriser; every lane must give the scalar loop's bits for every kind of float: NaN of either
// sign and any payload, infinities, signed zeros, subnormals, the largest finite values, and the
// edges of exp_fast's clamp. Lengths leave vector tails.
namespace {
#if defined(__GNUC__) && !defined(__clang__)
#define RESIL_SCALAR [[gnu::noinline, gnu::optimize("no-tree-vectorize")]]
#else
#define RESIL_SCALAR [[gnu::noinline]]
#endif

// Bit-identical, except that any NaN equals any NaN: where two NaN operands meet, IEEE 754 leaves
// open which one's sign and payload the result carries, and x86 keeps the first operand's, so it
// follows the operand order the compiler picks for a commutative + or *, which vector and scalar
// code need not share. A NaN is a NaN to everything downstream (training stops on it).
bool same_values(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::isnan(a[i]) && std::isnan(b[i])) && std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  return true;
}

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Normal draws with every fourth element replaced by one of the special values in turn.
std::vector<float> hostile(std::size_t n, std::uint64_t stream) {
  const float special[] = {from_bits(0x7fc00000u), from_bits(0xffc00000u), from_bits(0x7fc01234u), from_bits(0xffa00001u),
                           std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 0.0f, -0.0f,
                           std::numeric_limits<float>::denorm_min(), -from_bits(0x007fffffu), std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max(), 88.0f, 88.5f, -87.0f, -87.5f, -104.0f, 1e-20f, -3.0e5f, 40.0f};
  auto v = randv(n, stream);
  std::size_t k = stream;
  for (std::size_t i = 0; i < n; i += 4) v[i] = special[k++ % std::size(special)];
  return v;
}

RESIL_SCALAR void relu_backward_reference(const float* y, const float* dy, float* dx, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}
RESIL_SCALAR void adam_reference(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps,
                                 float wd, std::int64_t step) {
  const float c1 = 1.0f - static_cast<float>(resil::dmath::powi(static_cast<double>(b1), step));
  const float c2 = 1.0f - static_cast<float>(resil::dmath::powi(static_cast<double>(b2), step));
  for (std::size_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * w[i];
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
  }
}
RESIL_SCALAR void adagrad_reference(float* w, const float* g, float* sum, std::size_t n, float lr, float eps, float wd) {
  for (std::size_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * w[i];
    sum[i] += gi * gi;
    w[i] -= lr * gi / (std::sqrt(sum[i]) + eps);
  }
}
RESIL_SCALAR void adamw_reference(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps,
                                  float wd, std::int64_t step) {
  const float bc1 = 1.0f - static_cast<float>(resil::dmath::powi(static_cast<double>(b1), step));
  const float bc2 = 1.0f - static_cast<float>(resil::dmath::powi(static_cast<double>(b2), step));
  const float step_size = lr / bc1;
  const float bc2_sqrt = std::sqrt(bc2);
  const float keep = 1.0f - lr * wd;
  for (std::size_t i = 0; i < n; ++i) {
    const float gi = g[i];
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    w[i] = w[i] * keep - step_size * (m[i] / denom);
  }
}
constexpr float gelu_k0 = 0.7978845608f, gelu_k1 = 0.044715f;
RESIL_SCALAR void gelu_forward_reference(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v / (1.0f + resil::dmath::exp_fast(-2.0f * gelu_k0 * (v + gelu_k1 * v * v * v)));
  }
}
RESIL_SCALAR void gelu_backward_reference(const float* x, const float* dy, float* dx, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = resil::dmath::exp_fast(-2.0f * gelu_k0 * (v + gelu_k1 * v * v * v));
    const float s = 1.0f / (1.0f + e);
    const float du = 2.0f * gelu_k0 * (1.0f + 3.0f * gelu_k1 * v * v);
    dx[i] = dy[i] * (s + v * du * (s * s * e));
  }
}
RESIL_SCALAR void causal_softmax_forward_reference(const float* s, float* p, int mats, int T, float scale) {
  for (int mtx = 0; mtx < mats; ++mtx)
    for (int i = 0; i < T; ++i) {
      const float* sr = s + (static_cast<std::size_t>(mtx) * T + i) * T;
      float* pr = p + (static_cast<std::size_t>(mtx) * T + i) * T;
      float mx = scale * sr[0];
      for (int j = 1; j <= i; ++j) mx = scale * sr[j] > mx ? scale * sr[j] : mx;
      float sum = 0.0f;
      for (int j = 0; j <= i; ++j) sum += pr[j] = resil::dmath::exp_fast(scale * sr[j] - mx);
      const float inv = 1.0f / sum;
      for (int j = 0; j <= i; ++j) pr[j] *= inv;
      for (int j = i + 1; j < T; ++j) pr[j] = 0.0f;
    }
}
RESIL_SCALAR double softmax_xent_reference(const float* logits, const std::int32_t* labels, int n, int classes, float grad_scale,
                                           float* dlogits) {
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    const float* z = logits + static_cast<std::size_t>(i) * classes;
    float mx = z[0];
    for (int c = 1; c < classes; ++c) mx = z[c] > mx ? z[c] : mx;
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) sum += resil::dmath::exp(z[c] - mx);
    total += static_cast<double>(resil::dmath::log(sum) - (z[labels[i]] - mx));
    for (int c = 0; c < classes; ++c)
      dlogits[static_cast<std::size_t>(i) * classes + c] =
          grad_scale * (resil::dmath::exp(z[c] - mx) * (1.0f / sum) - (c == labels[i] ? 1.0f : 0.0f));
  }
  return total;
}
}  // namespace

TEST_CASE("cpu element-wise kernels in vector code give the scalar loop's bits for every kind of float, any NaN for any NaN", "[train][unit]") {
  auto be = make_cpu_backend(1);
  const std::size_t n = GENERATE(std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{7}, std::size_t{1001});
  CAPTURE(n);
  const auto x = hostile(n, 1), g = hostile(n, 2), m0 = hostile(n, 3), w0 = hostile(n, 5);
  auto v0 = hostile(n, 4);  // second moments: mostly non-negative, some negative (a flipped sign bit)
  for (std::size_t i = 1; i < n; i += 3) v0[i] = std::fabs(v0[i]);

  std::vector<float> got(n), want(n);
  be->relu_backward(x.data(), g.data(), got.data(), n);
  relu_backward_reference(x.data(), g.data(), want.data(), n);
  CHECK(same_values(got, want));
  be->gelu_forward(x.data(), got.data(), n);
  gelu_forward_reference(x.data(), want.data(), n);
  CHECK(same_values(got, want));
  be->gelu_backward(x.data(), g.data(), got.data(), n);
  gelu_backward_reference(x.data(), g.data(), want.data(), n);
  CHECK(same_values(got, want));

  for (const std::int64_t step : {std::int64_t{1}, std::int64_t{157}}) {
    auto w1 = w0, m1 = m0, v1 = v0, w2 = w0, m2 = m0, v2 = v0;
    be->adam_update(w1.data(), g.data(), m1.data(), v1.data(), n, 3e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f, step);
    adam_reference(w2.data(), g.data(), m2.data(), v2.data(), n, 3e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f, step);
    CHECK((same_values(w1, w2) && same_values(m1, m2) && same_values(v1, v2)));
    w1 = w0, m1 = m0, v1 = v0, w2 = w0, m2 = m0, v2 = v0;
    be->adamw_update(w1.data(), g.data(), m1.data(), v1.data(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
    adamw_reference(w2.data(), g.data(), m2.data(), v2.data(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
    CHECK((same_values(w1, w2) && same_values(m1, m2) && same_values(v1, v2)));
  }
  auto w1 = w0, s1 = v0, w2 = w0, s2 = v0;
  be->adagrad_update(w1.data(), g.data(), s1.data(), n, 1e-2f, 1e-10f, 1e-4f);
  adagrad_reference(w2.data(), g.data(), s2.data(), n, 1e-2f, 1e-10f, 1e-4f);
  CHECK((same_values(w1, w2) && same_values(s1, s2)));

  // Row lengths 1..T of the causal softmax and classes of 1, 3, 10 in the cross entropy.
  const int T = static_cast<int>(std::min<std::size_t>(n, 37));
  const int mats = static_cast<int>(n / static_cast<std::size_t>(T * T)) + 1;
  auto scores = hostile(static_cast<std::size_t>(mats) * T * T, 6);
  std::vector<float> p_got(scores.size()), p_want(scores.size());
  be->causal_softmax_forward(scores.data(), p_got.data(), mats, T, 0.125f);
  causal_softmax_forward_reference(scores.data(), p_want.data(), mats, T, 0.125f);
  CHECK(same_values(p_got, p_want));
  for (const int classes : {1, 3, 10}) {
    const int rows = static_cast<int>(n / static_cast<std::size_t>(classes)) + 1;
    const auto logits = hostile(static_cast<std::size_t>(rows) * classes, 7 + static_cast<std::uint64_t>(classes));
    std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
    for (int r = 0; r < rows; ++r) labels[static_cast<std::size_t>(r)] = (r * 7) % classes;
    std::vector<float> d_got(logits.size()), d_want(logits.size());
    const double l_got = be->softmax_xent(logits.data(), labels.data(), rows, classes, 0.25f, d_got.data(), nullptr);
    const double l_want = softmax_xent_reference(logits.data(), labels.data(), rows, classes, 0.25f, d_want.data());
    CAPTURE(classes);
    CHECK(((std::isnan(l_got) && std::isnan(l_want)) || std::memcmp(&l_got, &l_want, sizeof(double)) == 0));
    CHECK(same_values(d_got, d_want));
  }
}

TEST_CASE("cpu GELU in vector code gives the scalar loop's bits across the whole float range", "[train][unit]") {
  // Every 4099th bit pattern: all exponents, both signs, NaN payloads, exp_fast's clamp on both sides.
  auto be = make_cpu_backend(1);
  std::vector<float> x;
  x.reserve((std::uint64_t{1} << 32) / 4099 + 1);
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 4099) x.push_back(from_bits(static_cast<std::uint32_t>(u)));
  std::vector<float> got(x.size()), want(x.size());
  be->gelu_forward(x.data(), got.data(), x.size());
  gelu_forward_reference(x.data(), want.data(), x.size());
  CHECK(same_values(got, want));
  be->gelu_backward(x.data(), x.data(), got.data(), x.size());
  gelu_backward_reference(x.data(), x.data(), want.data(), x.size());
  CHECK(same_values(got, want));
}

TEST_CASE("cpu element-wise kernels: the AVX2 build gives the baseline build's bits", "[train][unit]") {
  // The CPU backend runs the AVX2 build where the CPU has it, the baseline build elsewhere (and
  // under RESIL_GEMM_PATH=scalar): the two must not make a result depend on the machine.
  if (!__builtin_cpu_supports("avx2")) {
    WARN("no AVX2 on this CPU: only the baseline build runs here");
    return;
  }
  std::vector<float> x;
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 4099) x.push_back(from_bits(static_cast<std::uint32_t>(u)));
  const auto h = hostile(100003, 9);
  x.insert(x.end(), h.begin(), h.end());
  const std::size_t n = x.size();
  std::vector<float> a(n), b(n);
  namespace cpu = resil::train::cpu;
  cpu::isa_base::gelu_forward(x.data(), a.data(), n);
  cpu::isa_avx2::gelu_forward(x.data(), b.data(), n);
  CHECK(same_values(a, b));
  cpu::isa_base::gelu_backward(x.data(), h.data(), a.data(), h.size());
  cpu::isa_avx2::gelu_backward(x.data(), h.data(), b.data(), h.size());
  CHECK(same_values(a, b));
  a = x, b = x;
  cpu::isa_base::round_bf16(a.data(), n);
  cpu::isa_avx2::round_bf16(b.data(), n);
  CHECK(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);  // integer arithmetic: NaNs too
  for (const int T : {1, 7, 8, 9, 64}) {
    const int mats = static_cast<int>(h.size() / static_cast<std::size_t>(T * T));
    std::vector<float> pa(static_cast<std::size_t>(mats) * T * T), pb(pa.size());
    cpu::isa_base::causal_softmax_forward(h.data(), pa.data(), mats, T, 0.125f);
    cpu::isa_avx2::causal_softmax_forward(h.data(), pb.data(), mats, T, 0.125f);
    CAPTURE(T);
    CHECK(same_values(pa, pb));
  }
}

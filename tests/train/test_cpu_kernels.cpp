// The CPU backend's convolution and pooling kernels against the obvious per-element loops they
// replaced (the `_reference` functions below, kept verbatim): results must be bit-identical,
// because every ckpt-train result (golden runs of the fault-injection campaigns) depends on them.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

#include "resil/core/rng.hpp"
#include "resil/train/backend.hpp"

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

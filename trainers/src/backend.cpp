// The Backend interface's composite operations, written once over its primitives: the CPU backend
// uses them as they are (their order of operations is the one its pinned results depend on), a
// device backend may override them with batched forms.
#include "resil/train/backend.hpp"

namespace resil::train {

void Backend::gather_rows(const float* src, std::size_t row_len, const std::int32_t* rows, std::size_t count, float* dst) {
  for (std::size_t i = 0; i < count; ++i) copy(dst + i * row_len, src + static_cast<std::size_t>(rows[i]) * row_len, row_len);
}

void Backend::scatter_rows(const float* src, std::size_t row_len, const std::int32_t* rows, std::size_t count, float* dst) {
  for (std::size_t i = 0; i < count; ++i) copy(dst + static_cast<std::size_t>(rows[i]) * row_len, src + i * row_len, row_len);
}

void Backend::fill_rows(float* x, std::size_t row_len, const std::int32_t* rows, std::size_t count, float v) {
  for (std::size_t i = 0; i < count; ++i) fill(x + static_cast<std::size_t>(rows[i]) * row_len, row_len, v);
}

void Backend::conv_forward(const float* x, const ConvGeom& g, int n, const float* w, int c_out, float* cols, float* y) {
  const int kk = g.c * g.kh * g.kw, plane = g.oh() * g.ow();
  const std::size_t in_sz = static_cast<std::size_t>(g.c) * g.h * g.w;
  for (int i = 0; i < n; ++i) {
    float* col = cols + static_cast<std::size_t>(i) * kk * plane;
    im2col(x + i * in_sz, g, col);
    gemm(false, false, c_out, plane, kk, 1.0f, w, kk, col, plane, 0.0f, y + static_cast<std::size_t>(i) * c_out * plane, plane);
  }
}

void Backend::conv_backward(const float* dy, const ConvGeom& g, int n, const float* w, int c_out, const float* cols, float* dw, float* dx,
                            float* dcol) {
  const int kk = g.c * g.kh * g.kw, plane = g.oh() * g.ow();
  const std::size_t in_sz = static_cast<std::size_t>(g.c) * g.h * g.w;
  for (int i = 0; i < n; ++i) {
    const float* col = cols + static_cast<std::size_t>(i) * kk * plane;
    const float* dyi = dy + static_cast<std::size_t>(i) * c_out * plane;
    gemm(false, true, c_out, kk, plane, 1.0f, dyi, plane, col, plane, 1.0f, dw, kk);
    if (dx) {
      gemm(true, false, kk, plane, c_out, 1.0f, w, kk, dyi, plane, 0.0f, dcol, plane);
      col2im(dcol, g, dx + i * in_sz);
    }
  }
}

std::vector<double> Backend::sum_squares_many(const std::vector<ConstSpan>& xs) {
  std::vector<double> out;
  out.reserve(xs.size());
  for (const ConstSpan& x : xs) out.push_back(sum_squares(x.data, x.size));
  return out;
}

}  // namespace resil::train

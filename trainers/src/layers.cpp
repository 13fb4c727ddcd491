#include "resil/train/layers.hpp"

#include <cmath>

#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"

namespace resil::train {

namespace {
constexpr std::uint64_t init_purpose = 0x494E4954ull;  // "INIT"

std::uint64_t name_key(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a: a stable stream id per parameter name
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

void expect_rank(const Tensor& x, std::size_t rank, const std::string& layer) {
  if (x.dims().size() != rank)
    throw UsageError("layer " + layer + ": expected a rank-" + std::to_string(rank) + " input, got " + dims_string(x.dims()));
}
}  // namespace

std::string dims_string(const Dims& d) {
  std::string s = "(";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + ")";
}

void Tensor::from_host(const std::vector<float>& h) {
  if (h.size() != n_) throw UsageError("Tensor::from_host: " + std::to_string(h.size()) + " values for " + dims_string(dims_));
  if (n_) be_->upload(p_, h.data(), n_);
}

void init_uniform(Tensor& t, float bound, std::uint64_t seed, const std::string& param_name) {
  Rng rng(derive_seed(seed, init_purpose), name_key(param_name));
  std::vector<float> h(t.numel());
  for (auto& v : h) v = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
  t.from_host(h);
}

void init_normal(Tensor& t, float std, std::uint64_t seed, const std::string& param_name) {
  Rng rng(derive_seed(seed, init_purpose), name_key(param_name));
  std::vector<float> h(t.numel());
  for (auto& v : h) v = static_cast<float>(rng.normal() * std);
  t.from_host(h);
}

// ---------------------------------------------------------------- Linear
Linear::Linear(Backend& be, std::string name, int in, int out)
    : Layer(std::move(name)), be_(be), in_(in), out_(out), w_(be, {out, in}), b_(be, {out}), dw_(be, {out, in}), db_(be, {out}) {}

Dims Linear::out_dims(const Dims& in) const { return {in.at(0), out_}; }

void Linear::init(std::uint64_t seed) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  init_uniform(w_, bound, seed, name_ + ".weight");
  init_uniform(b_, bound, seed, name_ + ".bias");
}

std::vector<ParamRef> Linear::params() { return {{name_ + ".weight", &w_, &dw_}, {name_ + ".bias", &b_, &db_}}; }

const Tensor& Linear::forward(const Tensor& x) {
  expect_rank(x, 2, name_);
  if (x.dim(1) != in_) throw UsageError("layer " + name_ + ": input " + dims_string(x.dims()) + " has no " + std::to_string(in_) + " features");
  const int n = x.dim(0);
  x_ = &x;
  y_.ensure(be_, {n, out_});
  be_.gemm(false, true, n, out_, in_, 1.0f, x.data(), in_, w_.data(), in_, 0.0f, y_.data(), out_);
  if (reduce_output_) reduce_output_(y_);
  be_.add_bias(y_.data(), b_.data(), n, out_);
  if (bf16_) be_.round_bf16(y_.data(), y_.numel());
  return y_;
}

const Tensor& Linear::backward(const Tensor& dy, bool need_dx) {
  const int n = dy.dim(0);
  be_.gemm(true, false, out_, in_, n, 1.0f, dy.data(), out_, x_->data(), in_, 1.0f, dw_.data(), in_);
  be_.accumulate_bias_grad(dy.data(), db_.data(), n, out_);
  if (need_dx) {
    dx_.ensure(be_, {n, in_});
    be_.gemm(false, false, n, in_, out_, 1.0f, dy.data(), out_, w_.data(), in_, 0.0f, dx_.data(), in_);
    if (reduce_input_grad_) reduce_input_grad_(dx_);
    if (bf16_) be_.round_bf16(dx_.data(), dx_.numel());
  }
  return dx_;
}

// ---------------------------------------------------------------- ReLU
const Tensor& ReLU::forward(const Tensor& x) {
  y_.ensure(be_, x.dims());
  be_.relu_forward(x.data(), y_.data(), x.numel());
  return y_;
}

const Tensor& ReLU::backward(const Tensor& dy, bool need_dx) {
  if (need_dx) {
    dx_.ensure(be_, dy.dims());
    be_.relu_backward(y_.data(), dy.data(), dx_.data(), dy.numel());
  }
  return dx_;
}

// ---------------------------------------------------------------- Flatten
Dims Flatten::out_dims(const Dims& in) const {
  int f = 1;
  for (std::size_t i = 1; i < in.size(); ++i) f *= in[i];
  return {in.at(0), f};
}

const Tensor& Flatten::forward(const Tensor& x) {
  in_dims_ = x.dims();
  y_.ensure(be_, out_dims(x.dims()));
  be_.copy(y_.data(), x.data(), x.numel());
  return y_;
}

const Tensor& Flatten::backward(const Tensor& dy, bool need_dx) {
  if (need_dx) {
    dx_.ensure(be_, in_dims_);
    be_.copy(dx_.data(), dy.data(), dy.numel());
  }
  return dx_;
}

// ---------------------------------------------------------------- Conv2d
Conv2d::Conv2d(Backend& be, std::string name, int c_in, int c_out, int k, int stride, int pad)
    : Layer(std::move(name)), be_(be), c_in_(c_in), c_out_(c_out), k_(k), stride_(stride), pad_(pad),
      w_(be, {c_out, c_in, k, k}), b_(be, {c_out}), dw_(be, {c_out, c_in, k, k}), db_(be, {c_out}) {}

ConvGeom Conv2d::geom(const Dims& in) const { return ConvGeom{c_in_, in.at(2), in.at(3), k_, k_, stride_, pad_}; }

Dims Conv2d::out_dims(const Dims& in) const {
  const ConvGeom g = geom(in);
  return {in.at(0), c_out_, g.oh(), g.ow()};
}

void Conv2d::init(std::uint64_t seed) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(c_in_ * k_ * k_));
  init_uniform(w_, bound, seed, name_ + ".weight");
  init_uniform(b_, bound, seed, name_ + ".bias");
}

std::vector<ParamRef> Conv2d::params() { return {{name_ + ".weight", &w_, &dw_}, {name_ + ".bias", &b_, &db_}}; }

const Tensor& Conv2d::forward(const Tensor& x) {
  expect_rank(x, 4, name_);
  if (x.dim(1) != c_in_) throw UsageError("layer " + name_ + ": input " + dims_string(x.dims()) + " has no " + std::to_string(c_in_) + " channels");
  x_ = &x;
  const ConvGeom g = geom(x.dims());
  const int n = x.dim(0), kk = c_in_ * k_ * k_, plane = g.oh() * g.ow();
  y_.ensure(be_, out_dims(x.dims()));
  cols_.ensure(be_, {n, kk, plane});
  be_.conv_forward(x.data(), g, n, w_.data(), c_out_, cols_.data(), y_.data());
  be_.add_channel_bias(y_.data(), b_.data(), n, c_out_, plane);
  return y_;
}

const Tensor& Conv2d::backward(const Tensor& dy, bool need_dx) {
  const ConvGeom g = geom(x_->dims());
  const int n = dy.dim(0), kk = c_in_ * k_ * k_, plane = g.oh() * g.ow();
  be_.accumulate_channel_bias_grad(dy.data(), db_.data(), n, c_out_, plane);
  if (need_dx) {
    dx_.ensure(be_, x_->dims());
    dx_.zero();
    dcol_.ensure(be_, {kk, plane});
  }
  be_.conv_backward(dy.data(), g, n, w_.data(), c_out_, cols_.data(), dw_.data(), need_dx ? dx_.data() : nullptr,
                    need_dx ? dcol_.data() : nullptr);
  return dx_;
}

// ---------------------------------------------------------------- MaxPool2d
Dims MaxPool2d::out_dims(const Dims& in) const { return {in.at(0), in.at(1), in.at(2) / k_, in.at(3) / k_}; }

const Tensor& MaxPool2d::forward(const Tensor& x) {
  expect_rank(x, 4, name_);
  in_dims_ = x.dims();
  y_.ensure(be_, out_dims(x.dims()));
  argmax_.ensure(be_, y_.numel());
  be_.maxpool_forward(x.data(), y_.data(), argmax_.data(), x.dim(0), x.dim(1), x.dim(2), x.dim(3), k_);
  return y_;
}

const Tensor& MaxPool2d::backward(const Tensor& dy, bool need_dx) {
  if (need_dx) {
    dx_.ensure(be_, in_dims_);
    be_.maxpool_backward(dy.data(), argmax_.data(), dx_.data(), dx_.numel(), dy.numel());
  }
  return dx_;
}

}  // namespace resil::train

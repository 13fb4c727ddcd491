// LayerNorm: statistics per row kept from forward for backward.
#include "layers.hpp"

namespace resil::train::gpt {

LayerNorm::LayerNorm(Backend& be, std::string name, int C, bool bf16)
    : w(be, {C}), b(be, {C}), dw(be, {C}), db(be, {C}), be_(be), name_(std::move(name)), C_(C), bf16_(bf16) {}

std::vector<ParamRef> LayerNorm::params() { return {{name_ + ".weight", &w, &dw}, {name_ + ".bias", &b, &db}}; }

void LayerNorm::init() {
  be_.fill(w.data(), w.numel(), 1.0f);
  b.zero();
}

const Tensor& LayerNorm::forward(const Tensor& x) {
  const int rows = x.dim(0);
  x_ = &x;
  y_.ensure(be_, x.dims());
  mean_.ensure(be_, {rows});
  rstd_.ensure(be_, {rows});
  be_.layernorm_forward(x.data(), w.data(), b.data(), y_.data(), mean_.data(), rstd_.data(), rows, C_);
  round_if(be_, y_, bf16_);
  return y_;
}

void LayerNorm::backward(const Tensor& dy, Tensor& dx) {
  be_.layernorm_backward(dy.data(), x_->data(), w.data(), mean_.data(), rstd_.data(), dx.data(), dw.data(), db.data(), dy.dim(0), C_);
  round_if(be_, dx, bf16_);
}

}  // namespace resil::train::gpt

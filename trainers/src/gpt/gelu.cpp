// GELU: backward needs the forward's input, not its output.
#include "layers.hpp"

namespace resil::train::gpt {

const Tensor& Gelu::forward(const Tensor& x) {
  x_ = &x;
  y_.ensure(be_, x.dims());
  be_.gelu_forward(x.data(), y_.data(), x.numel());
  round_if(be_, y_, bf16_);
  return y_;
}

const Tensor& Gelu::backward(const Tensor& dy) {
  dx_.ensure(be_, dy.dims());
  be_.gelu_backward(x_->data(), dy.data(), dx_.data(), dy.numel());
  round_if(be_, dx_, bf16_);
  return dx_;
}

}  // namespace resil::train::gpt

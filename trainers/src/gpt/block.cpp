// One pre-LayerNorm block. The residual stream's gradient flows through the skip connections
// unchanged and each LayerNorm adds its input gradient into it.
#include <cmath>

#include "layers.hpp"

namespace resil::train::gpt {

Block::Block(Backend& be, int index, int heads, int C, bool bf16)
    : be_(be),
      bf16_(bf16),
      prefix_("h." + std::to_string(index) + "."),
      ln_1_(be, prefix_ + "ln_1", C, bf16),
      c_attn_(be, prefix_ + "attn.c_attn", C, 3 * C),
      attn_(be, heads, C, bf16),
      attn_proj_(be, prefix_ + "attn.c_proj", C, C),
      ln_2_(be, prefix_ + "ln_2", C, bf16),
      c_fc_(be, prefix_ + "mlp.c_fc", C, 4 * C),
      gelu_(be, bf16),
      mlp_proj_(be, prefix_ + "mlp.c_proj", 4 * C, C) {
  for (Linear* l : {&c_attn_, &attn_proj_, &c_fc_, &mlp_proj_}) l->set_bf16(bf16);
}

std::vector<ParamRef> Block::params() {
  std::vector<ParamRef> out;
  for (auto&& part : {ln_1_.params(), c_attn_.params(), attn_proj_.params(), ln_2_.params(), c_fc_.params(), mlp_proj_.params()})
    out.insert(out.end(), part.begin(), part.end());
  return out;
}

void Block::init(std::uint64_t seed, int layers) {
  const float sigma = 0.02f, residual_sigma = 0.02f / std::sqrt(2.0f * static_cast<float>(layers));
  ln_1_.init();
  ln_2_.init();
  for (Linear* l : {&c_attn_, &attn_proj_, &c_fc_, &mlp_proj_}) {
    auto ps = l->params();  // weight, bias
    init_normal(*ps[0].value, l == &attn_proj_ || l == &mlp_proj_ ? residual_sigma : sigma, seed, ps[0].name);
    ps[1].value->zero();
  }
}

const Tensor& Block::forward(const Tensor& x, int B, int T) {
  // attention branch
  const Tensor& a = attn_proj_.forward(attn_.forward(c_attn_.forward(ln_1_.forward(x)), B, T));
  mid_.ensure(be_, x.dims());
  be_.copy(mid_.data(), x.data(), x.numel());
  be_.axpy(x.numel(), 1.0f, a.data(), mid_.data());
  round_if(be_, mid_, bf16_);
  // MLP branch
  const Tensor& m = mlp_proj_.forward(gelu_.forward(c_fc_.forward(ln_2_.forward(mid_))));
  out_.ensure(be_, x.dims());
  be_.copy(out_.data(), mid_.data(), mid_.numel());
  be_.axpy(mid_.numel(), 1.0f, m.data(), out_.data());
  round_if(be_, out_, bf16_);
  return out_;
}

const Tensor& Block::backward(const Tensor& dy) {
  // MLP branch: dmid = dy (skip) + ln_2's input gradient
  dmid_.ensure(be_, dy.dims());
  be_.copy(dmid_.data(), dy.data(), dy.numel());
  ln_2_.backward(c_fc_.backward(gelu_.backward(mlp_proj_.backward(dy, true)), true), dmid_);
  // attention branch: dx = dmid (skip) + ln_1's input gradient
  dx_.ensure(be_, dy.dims());
  be_.copy(dx_.data(), dmid_.data(), dmid_.numel());
  ln_1_.backward(c_attn_.backward(attn_.backward(attn_proj_.backward(dmid_, true)), true), dx_);
  return dx_;
}

}  // namespace resil::train::gpt

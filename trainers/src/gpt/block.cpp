// One pre-LayerNorm block. The residual stream's gradient flows through the skip connections
// unchanged and each LayerNorm adds its input gradient into it.
#include <cmath>

#include "layers.hpp"

namespace resil::train::gpt {

// Under tensor parallelism over R ranks each rank holds C/R of the attention's width (heads/R
// heads) and 4C/R of the MLP's: c_attn's output and c_fc's are column slices, attn.c_proj's and
// mlp.c_proj's inputs the matching row slices (gpt.hpp).
Block::Block(Backend& be, int index, int heads, int C, bool bf16, const TensorParallel& tp)
    : be_(be),
      bf16_(bf16),
      C_(C),
      tp_(tp),
      prefix_("h." + std::to_string(index) + "."),
      ln_1_(be, prefix_ + "ln_1", C, bf16),
      c_attn_(be, prefix_ + "attn.c_attn", C, 3 * C / tp.size),
      attn_(be, heads / tp.size, C / tp.size, bf16),
      attn_proj_(be, prefix_ + "attn.c_proj", C / tp.size, C),
      ln_2_(be, prefix_ + "ln_2", C, bf16),
      c_fc_(be, prefix_ + "mlp.c_fc", C, 4 * C / tp.size),
      gelu_(be, bf16),
      mlp_proj_(be, prefix_ + "mlp.c_proj", 4 * C / tp.size, C) {
  for (Linear* l : {&c_attn_, &attn_proj_, &c_fc_, &mlp_proj_}) l->set_bf16(bf16);
  if (tp.size > 1) {
    attn_proj_.set_reduce_output(tp.sum);
    mlp_proj_.set_reduce_output(tp.sum);
    c_attn_.set_reduce_input_grad(tp.sum);
    c_fc_.set_reduce_input_grad(tp.sum);
  }
}

std::map<std::string, ckpt::TpSlice> Block::slices() const {
  std::map<std::string, ckpt::TpSlice> out;
  if (tp_.size == 1) return out;
  const auto C = static_cast<std::uint64_t>(C_), r = static_cast<std::uint64_t>(tp_.rank), part = C / static_cast<std::uint64_t>(tp_.size);
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> qkv = {{r * part, (r + 1) * part}, {C + r * part, C + (r + 1) * part},
                                                                    {2 * C + r * part, 2 * C + (r + 1) * part}},
                                                                   mlp = {{4 * r * part, 4 * (r + 1) * part}}, attn = {{r * part, (r + 1) * part}};
  out[prefix_ + "attn.c_attn.weight"] = {{3 * C, C}, 0, qkv};
  out[prefix_ + "attn.c_attn.bias"] = {{3 * C}, 0, qkv};
  out[prefix_ + "attn.c_proj.weight"] = {{C, C}, 1, attn};
  out[prefix_ + "mlp.c_fc.weight"] = {{4 * C, C}, 0, mlp};
  out[prefix_ + "mlp.c_fc.bias"] = {{4 * C}, 0, mlp};
  out[prefix_ + "mlp.c_proj.weight"] = {{C, 4 * C}, 1, mlp};
  return out;
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
  const auto sliced = slices();
  for (Linear* l : {&c_attn_, &attn_proj_, &c_fc_, &mlp_proj_}) {
    auto ps = l->params();  // weight, bias
    const float sd = l == &attn_proj_ || l == &mlp_proj_ ? residual_sigma : sigma;
    if (auto it = sliced.find(ps[0].name); it != sliced.end()) {
      // a slice of the global tensor's draw: the same values as one process's
      const ckpt::TpSlice& s = it->second;
      Tensor whole(be_, Dims(s.global_shape.begin(), s.global_shape.end()));
      init_normal(whole, sd, seed, ps[0].name);
      const std::vector<float> g = whole.to_host();
      std::vector<float> local(ps[0].value->numel());
      for (std::size_t i = 0; i < local.size(); ++i) local[i] = g[s.global_index(i)];
      ps[0].value->from_host(local);
    } else {
      init_normal(*ps[0].value, sd, seed, ps[0].name);
    }
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

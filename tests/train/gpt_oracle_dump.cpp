// Writes the GPT's layers and model on fixed inputs to an HDF5 file (as a resil checkpoint whose
// /model group holds every array) for gpt_torch_oracle.py, which recomputes them with PyTorch:
//   ln.*      LayerNorm: x, w, b -> y; dy -> dx, dw, db
//   gelu.*    GELU: x -> y; dy -> dx
//   attn.*    causal self-attention: qkv (B*T x 3C) -> out; dout -> dqkv (attn.B, attn.T, attn.heads)
//   gpt.*     a whole GPT: tokens (B x T+1), every parameter, the mean loss and every gradient
// usage: gpt_oracle_dump OUT.h5
#include <cstdio>
#include <exception>
#include <map>

#include "gpt/layers.hpp"
#include "resil/ckpt/checkpoint.hpp"
#include "resil/core/rng.hpp"
#include "resil/train/gpt.hpp"

using namespace resil::train;

namespace {

std::vector<float> randv(std::size_t n, std::uint64_t stream, float scale) {
  resil::Rng rng(99, stream);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal()) * scale;
  return v;
}

struct Out {
  resil::ckpt::Checkpoint c;
  void put(const std::string& name, const Tensor& t) { put(name, t.to_host(), t.dims()); }
  void put(const std::string& name, const std::vector<float>& v, const Dims& d) {
    c.model.emplace(name, resil::ckpt::Tensor::from<float>(resil::ckpt::Shape(d.begin(), d.end()), std::span<const float>(v)));
  }
  void put_i32(const std::string& name, const std::vector<std::int32_t>& v, const Dims& d) {
    c.model.emplace(name, resil::ckpt::Tensor::from<std::int32_t>(resil::ckpt::Shape(d.begin(), d.end()), std::span<const std::int32_t>(v)));
  }
};

void layernorm(Backend& be, Out& o) {
  const int rows = 6, C = 10;
  gpt::LayerNorm ln(be, "ln", C);
  Tensor x(be, {rows, C}), dy(be, {rows, C}), dx(be, {rows, C});
  x.from_host(randv(x.numel(), 1, 2.0f));
  ln.w.from_host(randv(C, 2, 1.0f));
  ln.b.from_host(randv(C, 3, 1.0f));
  dy.from_host(randv(dy.numel(), 4, 1.0f));
  o.put("ln.x", x);
  o.put("ln.w", ln.w);
  o.put("ln.b", ln.b);
  o.put("ln.y", ln.forward(x));
  ln.backward(dy, dx);
  o.put("ln.dy", dy);
  o.put("ln.dx", dx);
  o.put("ln.dw", ln.dw);
  o.put("ln.db", ln.db);
}

void gelu(Backend& be, Out& o) {
  gpt::Gelu g(be);
  Tensor x(be, {5, 40}), dy(be, {5, 40});
  x.from_host(randv(x.numel(), 5, 3.0f));
  dy.from_host(randv(dy.numel(), 6, 1.0f));
  o.put("gelu.x", x);
  o.put("gelu.y", g.forward(x));
  o.put("gelu.dy", dy);
  o.put("gelu.dx", g.backward(dy));
}

void attention(Backend& be, Out& o) {
  const int B = 2, T = 7, C = 12, heads = 3;
  gpt::CausalSelfAttention a(be, heads, C);
  Tensor qkv(be, {B * T, 3 * C}), dout(be, {B * T, C});
  qkv.from_host(randv(qkv.numel(), 7, 1.0f));
  dout.from_host(randv(dout.numel(), 8, 1.0f));
  o.put("attn.qkv", qkv);
  o.put("attn.out", a.forward(qkv, B, T));
  o.put("attn.dout", dout);
  o.put("attn.dqkv", a.backward(dout));
  o.put("attn.shape", {static_cast<float>(B), static_cast<float>(T), static_cast<float>(heads)}, {3});
}

void model(Backend& be, Out& o) {
  GptConfig cfg;
  cfg.vocab = 32;
  cfg.context = 8;
  cfg.layers = 2;
  cfg.heads = 2;
  cfg.width = 16;
  Gpt m(be, cfg);
  m.init(11);
  const int B = 3, T = 8;
  std::vector<std::int32_t> windows(static_cast<std::size_t>(B) * (T + 1));
  resil::Rng rng(99, 9);
  for (auto& t : windows) t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(cfg.vocab)));
  Batch b;
  b.n = B;
  b.seq = T;
  b.tokens = windows.data();
  m.zero_grad();
  const StepStats s = m.forward_backward(b, 1.0f / static_cast<float>(B));
  o.put_i32("gpt.tokens", windows, {B, T + 1});
  o.put("gpt.config", {static_cast<float>(cfg.vocab), static_cast<float>(cfg.context), static_cast<float>(cfg.layers),
                       static_cast<float>(cfg.heads), static_cast<float>(cfg.width)}, {5});
  o.put("gpt.loss", {static_cast<float>(s.loss_sum / static_cast<double>(s.samples))}, {1});
  for (const auto& p : m.params()) {
    o.put("gpt.param." + p.name, *p.value);
    o.put("gpt.grad." + p.name, *p.grad);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gpt_oracle_dump OUT.h5\n");
    return 2;
  }
  try {
    auto be = make_cpu_backend(1);
    Out o;
    o.c.meta.model = "gpt-oracle";
    o.c.meta.config = "{}";
    layernorm(*be, o);
    gelu(*be, o);
    attention(*be, o);
    model(*be, o);
    resil::ckpt::save(argv[1], o.c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_oracle_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}

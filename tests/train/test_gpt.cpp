// The GPT's layers and model against central finite differences, the causal mask, the refused
// configurations, AdamW's decay mask and the learning-rate schedule. Loss L = sum(y * r) for a
// fixed random r (so dL/dy = r) for single layers; the model's own summed cross-entropy for the
// whole GPT. Differences in float with h = 1e-2 on smooth functions, compared relatively.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "gpt/layers.hpp"
#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"
#include "resil/train/gpt.hpp"
#include "resil_test/gradcheck.hpp"

using namespace resil::train;

namespace {
std::vector<float> randv(std::size_t n, std::uint64_t stream, float scale = 1.0f) { return resil::test::randv(4321, n, stream, scale); }
using resil::test::dot;

/// Central differences against the analytic gradient, relative to max(1e-2, |numeric| + |analytic|) within 1e-2.
void check_grad(std::vector<float>& v, const std::vector<float>& g, const std::function<double()>& f, const std::string& what,
                std::size_t max_checks = 48) {
  resil::test::check_grad(v, g, f, what, {1e-2, 1e-2, max_checks});
}

/// Check every parameter of `params` against f, which re-runs the forward pass from the values.
void check_params(std::vector<ParamRef> params, const std::function<double()>& f) {
  for (auto& p : params) {
    auto ph = p.value->to_host();
    const auto gh = p.grad->to_host();
    check_grad(ph, gh, [&]() {
      p.value->from_host(ph);
      return f();
    }, p.name);
    p.value->from_host(ph);
  }
}

void randomize(std::vector<ParamRef> params, std::uint64_t stream, float scale) {
  for (auto& p : params) p.value->from_host(randv(p.value->numel(), stream++, scale));
}
}  // namespace

TEST_CASE("LayerNorm gradients (input, weight, bias)", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  const int rows = 6, C = 10;
  gpt::LayerNorm ln(*be, "ln", C);
  randomize(ln.params(), 10, 1.0f);
  Tensor x(*be, {rows, C});
  auto xh = randv(x.numel(), 1, 2.0f);
  const auto r = randv(x.numel(), 2);
  auto loss = [&]() {
    x.from_host(xh);
    return dot(ln.forward(x).to_host(), r);
  };
  loss();
  Tensor dy(*be, {rows, C}), dx(*be, {rows, C});
  dy.from_host(r);
  ln.dw.zero();
  ln.db.zero();
  ln.backward(dy, dx);
  check_grad(xh, dx.to_host(), loss, "ln dx");
  check_params(ln.params(), loss);
  // backward accumulates into dx (the residual stream's gradient)
  const auto once = dx.to_host();
  ln.backward(dy, dx);
  const auto twice = dx.to_host();
  for (std::size_t i = 0; i < once.size(); ++i) CHECK(twice[i] == Approx(2 * once[i]).margin(1e-6));
}

TEST_CASE("GELU gradient", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  gpt::Gelu g(*be);
  Tensor x(*be, {4, 25});
  auto xh = randv(x.numel(), 3, 2.0f);
  const auto r = randv(x.numel(), 4);
  auto loss = [&]() {
    x.from_host(xh);
    return dot(g.forward(x).to_host(), r);
  };
  loss();
  Tensor dy(*be, {4, 25});
  dy.from_host(r);
  check_grad(xh, g.backward(dy).to_host(), loss, "gelu dx", 100);
  // GELU(0) = 0, GELU(x) -> x for large x, -> 0 for very negative x
  x.from_host(std::vector<float>(100, 0.0f));
  CHECK(g.forward(x).to_host()[0] == 0.0f);
  std::vector<float> big(100, 30.0f);
  big[1] = -30.0f;
  x.from_host(big);
  const auto y = g.forward(x).to_host();
  CHECK(y[0] == 30.0f);
  CHECK(std::fabs(y[1]) < 1e-30f);
}

TEST_CASE("causal self-attention gradient", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  const int B = 2, T = 5, C = 8, heads = 2;
  gpt::CausalSelfAttention attn(*be, heads, C);
  Tensor qkv(*be, {B * T, 3 * C});
  auto xh = randv(qkv.numel(), 5);
  const auto r = randv(static_cast<std::size_t>(B) * T * C, 6);
  auto loss = [&]() {
    qkv.from_host(xh);
    return dot(attn.forward(qkv, B, T).to_host(), r);
  };
  loss();
  Tensor dy(*be, {B * T, C});
  dy.from_host(r);
  check_grad(xh, attn.backward(dy).to_host(), loss, "attention dqkv", 240);
}

TEST_CASE("attention at a position does not see later positions", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  const int B = 1, T = 6, C = 8, heads = 2;
  gpt::CausalSelfAttention attn(*be, heads, C);
  Tensor qkv(*be, {B * T, 3 * C});
  auto xh = randv(qkv.numel(), 7);
  qkv.from_host(xh);
  const auto a = attn.forward(qkv, B, T).to_host();
  for (int c = 0; c < 3 * C; ++c) xh[static_cast<std::size_t>(T - 1) * 3 * C + c] += 1.0f;  // change the last position
  qkv.from_host(xh);
  const auto b = attn.forward(qkv, B, T).to_host();
  // positions 0..T-2: the same bits; the last one changed
  CHECK(std::memcmp(a.data(), b.data(), static_cast<std::size_t>(T - 1) * C * sizeof(float)) == 0);
  CHECK(std::memcmp(a.data() + static_cast<std::size_t>(T - 1) * C, b.data() + static_cast<std::size_t>(T - 1) * C, C * sizeof(float)) != 0);
}

TEST_CASE("embedding gradients gather every occurrence of a token", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  const int V = 7, ctx = 6, C = 4, B = 2, T = 5;
  gpt::Embedding emb(*be, V, ctx, C);
  randomize(emb.params(), 20, 1.0f);
  const std::vector<std::int32_t> tok = {1, 3, 3, 0, 6, 3, 2, 1, 5, 0};  // token 3 three times
  IntBuffer tokens;
  tokens.ensure(*be, tok.size());
  be->upload_i32(tokens.data(), tok.data(), tok.size());
  const auto r = randv(static_cast<std::size_t>(B) * T * C, 8);
  auto loss = [&]() { return dot(emb.forward(tokens, B, T).to_host(), r); };
  loss();
  Tensor dy(*be, {B * T, C});
  dy.from_host(r);
  emb.dwte.zero();
  emb.dwpe.zero();
  emb.backward(dy);
  check_params(emb.params(), loss);
}

TEST_CASE("a block's gradients (input and every parameter)", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  const int B = 2, T = 4, C = 8, heads = 2;
  gpt::Block block(*be, 0, heads, C);
  randomize(block.params(), 30, 0.3f);
  Tensor x(*be, {B * T, C});
  auto xh = randv(x.numel(), 9);
  const auto r = randv(x.numel(), 10);
  auto loss = [&]() {
    x.from_host(xh);
    return dot(block.forward(x, B, T).to_host(), r);
  };
  loss();
  Tensor dy(*be, {B * T, C});
  dy.from_host(r);
  for (auto& p : block.params()) p.grad->zero();
  check_grad(xh, block.backward(dy).to_host(), loss, "block dx");
  check_params(block.params(), loss);
}

TEST_CASE("the whole GPT: gradients of the summed cross-entropy", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  GptConfig cfg;
  cfg.vocab = 11;
  cfg.context = 6;
  cfg.layers = 2;
  cfg.heads = 2;
  cfg.width = 8;
  Gpt model(*be, cfg);
  model.init(3);
  randomize(model.params(), 40, 0.3f);  // larger than GPT-2's init: gradients well above float noise
  const int B = 2, T = 5;
  const std::vector<std::int32_t> windows = {1, 4, 4, 9, 0, 10, 2, 3, 3, 7, 5, 1};  // 2 windows of T + 1
  Batch b;
  b.n = B;
  b.seq = T;
  b.tokens = windows.data();
  model.zero_grad();
  // grad_scale T: per-token scale 1, the gradient of the summed loss
  const StepStats s = model.forward_backward(b, static_cast<float>(T));
  CHECK(s.samples == B * T);
  CHECK(s.loss_sum == Approx(model.evaluate(b).loss_sum).epsilon(1e-12));
  check_params(model.params(), [&]() { return model.evaluate(b).loss_sum; });
}

TEST_CASE("logits at a position depend on the tokens up to it only", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  GptConfig cfg;
  cfg.vocab = 16;
  cfg.context = 8;
  cfg.layers = 2;
  cfg.heads = 2;
  cfg.width = 8;
  Gpt model(*be, cfg);
  model.init(5);
  const std::vector<std::int32_t> a = {3, 1, 4, 1, 5, 9, 2, 6}, b = {3, 1, 4, 1, 5, 9, 2, 7};
  // The next-token logits after the first k tokens are the same bits whatever follows them.
  const auto la = model.next_logits(std::span(a).first(5)), lb = model.next_logits(std::span(b).first(5));
  CHECK(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);
  CHECK(model.next_logits(a) != model.next_logits(b));
  CHECK(la.size() == 16u);
}

TEST_CASE("refused GPT configurations", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  GptConfig cfg;
  cfg.width = 130;
  cfg.heads = 4;
  CHECK_THROWS_AS(Gpt(*be, cfg), resil::UsageError);
  CHECK_THROWS_WITH(Gpt(*be, cfg), "--heads 4 does not divide --width 130");
  cfg = GptConfig{};
  cfg.layers = 0;
  CHECK_THROWS_WITH(Gpt(*be, cfg), Catch::Contains("--layers 0"));
  cfg = GptConfig{};
  cfg.context = 4;
  Gpt model(*be, cfg);
  const std::vector<std::int32_t> w(6, 1);
  Batch b;
  b.n = 1;
  b.seq = 5;
  b.tokens = w.data();
  CHECK_THROWS_WITH(model.evaluate(b), Catch::Contains("longer than the model's context of 4"));
}

TEST_CASE("parameter count", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  GptConfig cfg;
  cfg.layers = 3;
  cfg.width = 16;
  cfg.heads = 2;
  cfg.context = 9;
  Gpt model(*be, cfg);
  std::int64_t n = 0;
  for (auto& p : model.params()) n += static_cast<std::int64_t>(p.value->numel());
  CHECK(n == cfg.parameters());
}

TEST_CASE("AdamW decays matrices only", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  OptimizerConfig oc;
  oc.kind = OptimizerKind::adamw;
  oc.lr = 0.1f;
  oc.weight_decay = 0.5f;
  Optimizer opt(*be, oc);
  Tensor w(*be, {2, 2}), gw(*be, {2, 2}), b(*be, {2}), gb(*be, {2});
  w.from_host({1, 1, 1, 1});
  b.from_host({1, 1});
  const std::vector<ParamRef> ps = {{"w", &w, &gw}, {"b", &b, &gb}};
  opt.attach(ps);
  opt.begin_step();
  for (const auto& p : ps) opt.update(p);
  // zero gradients: only the decoupled decay moves a weight, w *= 1 - lr * wd
  CHECK(w.to_host()[0] == 1.0f - 0.1f * 0.5f);
  CHECK(b.to_host()[0] == 1.0f);
}

TEST_CASE("learning-rate schedule: warmup then cosine to the floor", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  OptimizerConfig oc;
  oc.kind = OptimizerKind::adamw;
  oc.lr = 1.0f;
  oc.warmup = 4;
  oc.decay_steps = 10;
  oc.min_lr_ratio = 0.1f;
  Optimizer opt(*be, oc);
  CHECK(opt.schedule(1) == 0.25);
  CHECK(opt.schedule(4) == 1.0);
  const double floor = 0.1f;  // the ratio is a float
  CHECK(opt.schedule(9) == Approx(floor + (1 - floor) * 0.5).epsilon(1e-15));  // halfway: cos(pi/2) = 0
  CHECK(opt.schedule(14) == Approx(floor).epsilon(1e-15));
  CHECK(opt.schedule(1000) == Approx(floor).epsilon(1e-15));
  opt.set_epoch(0);
  opt.begin_step();
  CHECK(opt.lr() == 0.25f);
  // Without a schedule the rate is the epoch's, exactly.
  oc.warmup = 0;
  oc.decay_steps = 0;
  oc.lr = 3e-3f;
  Optimizer plain(*be, oc);
  plain.set_epoch(0);
  plain.begin_step();
  CHECK(plain.lr() == 3e-3f);
}

// ---------------------------------------------------------------- mixed precision (bf16)
TEST_CASE("rounding to bfloat16: nearest, ties to even, NaN and overflow", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  auto f = [](std::uint32_t u) { return std::bit_cast<float>(u); };
  // kept half 0x3f80 (1.0): below half, exactly half with an even kept half, above half, half with an odd kept half
  std::vector<float> x = {f(0x3f807fffu), f(0x3f808000u), f(0x3f808001u), f(0x3f818000u), f(0x7f7fffffu), -0.0f,
                          std::numeric_limits<float>::infinity(), f(0x7f800001u), 1.5f, f(0x00000001u)};
  be->round_bf16(x.data(), x.size());
  CHECK(std::bit_cast<std::uint32_t>(x[0]) == 0x3f800000u);
  CHECK(std::bit_cast<std::uint32_t>(x[1]) == 0x3f800000u);  // tie: stays even
  CHECK(std::bit_cast<std::uint32_t>(x[2]) == 0x3f810000u);
  CHECK(std::bit_cast<std::uint32_t>(x[3]) == 0x3f820000u);  // tie: rounds to even
  CHECK(std::isinf(x[4]));                                    // beyond the largest bf16
  CHECK(std::bit_cast<std::uint32_t>(x[5]) == 0x80000000u);
  CHECK(std::isinf(x[6]));
  CHECK(std::isnan(x[7]));  // a NaN whose payload is in the dropped half stays NaN
  CHECK(x[8] == 1.5f);
  CHECK(x[9] == 0.0f);
}

TEST_CASE("a bf16 GPT: bf16 weights and activations, float gradients close to fp32's", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  GptConfig cfg;
  cfg.vocab = 32;
  cfg.context = 8;
  cfg.layers = 2;
  cfg.heads = 2;
  cfg.width = 16;
  Gpt full(*be, cfg), half(*be, cfg, true);
  full.init(4);
  half.init(4);
  // Both models compute with the same bf16 weights: only the activations' precision differs.
  for (auto& p : full.params()) be->round_bf16(p.value->data(), p.value->numel());
  for (auto& p : half.params()) be->round_bf16(p.value->data(), p.value->numel());
  std::vector<std::int32_t> windows(3 * 9);
  resil::Rng rng(5, 5);
  for (auto& t : windows) t = static_cast<std::int32_t>(rng.below(32));
  Batch b;
  b.n = 3;
  b.seq = 8;
  b.tokens = windows.data();
  full.zero_grad();
  half.zero_grad();
  const double lf = full.forward_backward(b, 1.0f / 3).loss_sum, lh = half.forward_backward(b, 1.0f / 3).loss_sum;
  // bf16 keeps 8 significant bits: relative rounding 2^-9 per value, a few of them along each path
  CHECK(lh == Approx(lf).epsilon(1e-2));
  const auto pf = full.params(), ph = half.params();
  for (std::size_t i = 0; i < pf.size(); ++i) {
    const auto gf = pf[i].grad->to_host(), gh = ph[i].grad->to_host();
    double scale = 0, err = 0;
    for (std::size_t j = 0; j < gf.size(); ++j) {
      scale = std::max(scale, static_cast<double>(std::fabs(gf[j])));
      err = std::max(err, static_cast<double>(std::fabs(gf[j] - gh[j])));
    }
    CAPTURE(pf[i].name, err, scale);
    CHECK(err <= 0.05 * scale);
  }
}

TEST_CASE("master weights: the optimizer steps the float master, the parameter is its bf16 rounding", "[gpt][unit]") {
  auto be = make_cpu_backend(1);
  OptimizerConfig oc;
  oc.kind = OptimizerKind::adamw;
  oc.lr = 1e-3f;
  oc.master_weights = true;
  Optimizer opt(*be, oc);
  Tensor w(*be, {3}), g(*be, {3});
  const std::vector<float> init = {1.00001f, -2.3456789f, 3e-3f};
  w.from_host(init);
  g.from_host({0.5f, -0.25f, 1.0f});
  const ParamRef p{"w", &w, &g};
  opt.attach({p});
  CHECK(opt.slot("w", "master").to_host() == init);  // the master starts as the float value
  for (int step = 0; step < 3; ++step) {
    opt.begin_step();
    opt.update(p);
  }
  auto master = opt.slot("w", "master").to_host();
  CHECK(master != init);
  be->round_bf16(master.data(), master.size());
  CHECK(w.to_host() == master);
}

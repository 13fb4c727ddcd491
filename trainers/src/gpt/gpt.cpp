// The GPT model: a training step top to bottom. Forward: embeddings, blocks, final LayerNorm,
// the tied LM head, cross-entropy. Backward in reverse; the LM head's gradient goes into wte's
// gradient first, the embedding's own part is added last.
#include "resil/train/gpt.hpp"

#include <algorithm>

#include "layers.hpp"
#include "resil/core/error.hpp"

namespace resil::train {

void GptConfig::validate() const {
  auto range = [](const char* flag, int v, int lo, int hi) {
    if (v < lo || v > hi)
      throw UsageError(std::string(flag) + " " + std::to_string(v) + " is not in " + std::to_string(lo) + ".." + std::to_string(hi));
  };
  range("--layers", layers, 1, 256);
  range("--heads", heads, 1, 1024);
  range("--width", width, 1, 16384);
  range("--context", context, 1, 65536);
  if (width % heads != 0)
    throw UsageError("--heads " + std::to_string(heads) + " does not divide --width " + std::to_string(width));
}

std::int64_t GptConfig::parameters() const {
  const std::int64_t C = width;
  const std::int64_t block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C);
  return static_cast<std::int64_t>(vocab) * C + static_cast<std::int64_t>(context) * C + layers * block + 2 * C;
}

struct Gpt::Net {
  Net(Backend& b, const GptConfig& c, bool bf16, const TensorParallel& tp)
      : be(b), emb(b, c.vocab, c.context, c.width, bf16), ln_f(b, "ln_f", c.width, bf16) {
    for (int l = 0; l < c.layers; ++l) blocks.push_back(std::make_unique<gpt::Block>(b, l, c.heads, c.width, bf16, tp));
  }
  Backend& be;
  gpt::Embedding emb;
  std::vector<std::unique_ptr<gpt::Block>> blocks;
  gpt::LayerNorm ln_f;
  IntBuffer tokens, targets;
  std::vector<std::int32_t> host_tokens, host_targets;
  Tensor logits, dlogits, dxf, dx;
  const Tensor* xf = nullptr;
  int B = 0, T = 0;
};

Gpt::Gpt(Backend& be, GptConfig cfg, bool bf16, TensorParallel tp) : cfg_(cfg), bf16_(bf16), tp_(std::move(tp)) {
  cfg_.validate();
  if (tp_.size < 1 || cfg_.heads % tp_.size != 0)
    throw UsageError("--heads " + std::to_string(cfg_.heads) + " is not divisible by the " + std::to_string(tp_.size) + " tp ranks");
  if (tp_.size > 1 && !tp_.sum) throw UsageError("gpt: tensor parallelism without a sum over its ranks");
  net_ = std::make_unique<Net>(be, cfg_, bf16_, tp_);
}

std::map<std::string, ckpt::TpSlice> Gpt::slices() const {
  std::map<std::string, ckpt::TpSlice> out;
  for (const auto& b : net_->blocks) out.merge(b->slices());
  return out;
}

Gpt::~Gpt() = default;

std::vector<ParamRef> Gpt::params() {
  std::vector<ParamRef> out = net_->emb.params();
  for (auto& b : net_->blocks)
    for (auto& p : b->params()) out.push_back(p);
  for (auto& p : net_->ln_f.params()) out.push_back(p);
  return out;
}

void Gpt::init(std::uint64_t seed) {
  init_normal(net_->emb.wte, 0.02f, seed, "wte.weight");
  init_normal(net_->emb.wpe, 0.02f, seed, "wpe.weight");
  for (auto& b : net_->blocks) b->init(seed, cfg_.layers);
  net_->ln_f.init();
}

void Gpt::zero_grad() {
  for (auto& p : params()) p.grad->zero();
}

const Tensor& Gpt::forward_logits() {
  Net& n = *net_;
  const Tensor* x = &blocks_forward(embed(), 0, cfg_.layers);
  n.xf = &n.ln_f.forward(*x);
  return logits_of(*n.xf);
}

const Tensor& Gpt::logits_of(const Tensor& xf) {
  Net& n = *net_;
  const GptConfig& cfg = cfg_;
  const int rows = n.B * n.T;
  n.logits.ensure(n.be, {rows, cfg.vocab});
  // logits = xf wte^T (the LM head is the token embedding)
  n.be.gemm(false, true, rows, cfg.vocab, cfg.width, 1.0f, xf.data(), cfg.width, n.emb.wte.data(), cfg.width, 0.0f, n.logits.data(), cfg.vocab);
  gpt::round_if(n.be, n.logits, bf16_);  // the loss is computed in float from the bf16 logits
  return n.logits;
}

const Tensor& Gpt::embed() { return net_->emb.forward(net_->tokens, net_->B, net_->T); }

const Tensor& Gpt::blocks_forward(const Tensor& x, int first, int end) {
  const Tensor* y = &x;
  for (int l = first; l < end; ++l) y = &net_->blocks[static_cast<std::size_t>(l)]->forward(*y, net_->B, net_->T);
  return *y;
}

const Tensor& Gpt::blocks_backward(const Tensor& dy, int first, int end) {
  const Tensor* d = &dy;
  for (int l = end - 1; l >= first; --l) d = &net_->blocks[static_cast<std::size_t>(l)]->backward(*d);
  return *d;
}

void Gpt::embed_backward(const Tensor& d) { net_->emb.backward(d); }

/// Stage a batch: inputs are each window's first seq tokens, targets the seq tokens after them.
void Gpt::stage(const Batch& b) {
  Net& n = *net_;
  const GptConfig& cfg = cfg_;
  if (!b.tokens || b.seq < 1) throw UsageError("gpt: the batch holds no token windows");
  if (b.seq > cfg.context)
    throw UsageError("a sequence of " + std::to_string(b.seq) + " tokens is longer than the model's context of " + std::to_string(cfg.context));
  n.B = b.n;
  n.T = b.seq;
  const std::size_t rows = static_cast<std::size_t>(b.n) * static_cast<std::size_t>(b.seq);
  n.host_tokens.resize(rows);
  n.host_targets.resize(rows);
  for (int i = 0; i < b.n; ++i) {
    const std::int32_t* w = b.tokens + static_cast<std::size_t>(i) * (b.seq + 1);
    std::copy(w, w + b.seq, n.host_tokens.begin() + static_cast<std::ptrdiff_t>(i) * b.seq);
    std::copy(w + 1, w + b.seq + 1, n.host_targets.begin() + static_cast<std::ptrdiff_t>(i) * b.seq);
  }
  for (std::size_t i = 0; i < rows; ++i)
    if (n.host_tokens[i] < 0 || n.host_tokens[i] >= cfg.vocab || n.host_targets[i] < 0 || n.host_targets[i] >= cfg.vocab)
      throw UsageError("gpt: token outside the vocabulary of " + std::to_string(cfg.vocab));
  n.tokens.ensure(n.be, rows);
  n.targets.ensure(n.be, rows);
  n.be.upload_i32(n.tokens.data(), n.host_tokens.data(), rows);
  n.be.upload_i32(n.targets.data(), n.host_targets.data(), rows);
}

StepStats Gpt::forward_backward(const Batch& b, float grad_scale) {
  stage(b);
  StepStats s;
  const Tensor& dx = head(blocks_forward(embed(), 0, cfg_.layers), grad_scale, s);
  embed_backward(blocks_backward(dx, 0, cfg_.layers));
  return s;
}

const Tensor& Gpt::head(const Tensor& x, float grad_scale, StepStats& s) {
  Net& n = *net_;
  Backend& be = n.be;
  const int C = cfg_.width, V = cfg_.vocab;
  const int rows = n.B * n.T;
  n.xf = &n.ln_f.forward(x);
  const Tensor& logits = logits_of(*n.xf);
  // loss: the mean over tokens, so the windows' scale is divided among their seq tokens
  n.dlogits.ensure(be, logits.dims());
  std::int64_t correct = 0;
  s.loss_sum += be.softmax_xent(logits.data(), n.targets.data(), rows, V, grad_scale / static_cast<float>(n.T), n.dlogits.data(), &correct);
  s.correct += correct;
  s.samples += rows;
  gpt::round_if(be, n.dlogits, bf16_);
  // backward: LM head (dwte += dlogits^T xf, dxf = dlogits wte), final LayerNorm
  be.gemm(true, false, V, C, rows, 1.0f, n.dlogits.data(), V, n.xf->data(), C, 1.0f, n.emb.dwte.data(), C);
  n.dxf.ensure(be, {rows, C});
  be.gemm(false, false, rows, C, V, 1.0f, n.dlogits.data(), V, n.emb.wte.data(), C, 0.0f, n.dxf.data(), C);
  gpt::round_if(be, n.dxf, bf16_);
  n.dx.ensure(be, {rows, C});
  n.dx.zero();
  n.ln_f.backward(n.dxf, n.dx);
  return n.dx;
}

StepStats Gpt::head_evaluate(const Tensor& x) {
  Net& n = *net_;
  n.xf = &n.ln_f.forward(x);
  const Tensor& logits = logits_of(*n.xf);
  StepStats s;
  s.samples = static_cast<std::int64_t>(n.B) * n.T;
  s.loss_sum = n.be.softmax_xent(logits.data(), n.targets.data(), n.B * n.T, cfg_.vocab, 0.0f, nullptr, &s.correct);
  return s;
}

std::vector<ParamRef> Gpt::stage_params(int first, int end, bool embeddings, bool head) {
  std::vector<ParamRef> out;
  if (embeddings) out = net_->emb.params();
  else if (head) out.push_back(net_->emb.params().front());  // wte: the LM head's weight
  for (int l = first; l < end; ++l)
    for (auto& p : net_->blocks[static_cast<std::size_t>(l)]->params()) out.push_back(p);
  if (head)
    for (auto& p : net_->ln_f.params()) out.push_back(p);
  return out;
}

StepStats Gpt::evaluate(const Batch& b, std::vector<float>* /*scores*/) {
  Net& n = *net_;
  stage(b);
  const Tensor& logits = forward_logits();
  StepStats s;
  s.samples = static_cast<std::int64_t>(n.B) * n.T;
  s.loss_sum = n.be.softmax_xent(logits.data(), n.targets.data(), n.B * n.T, cfg_.vocab, 0.0f, nullptr, &s.correct);
  return s;
}

void Gpt::apply_update(Optimizer& opt) {
  for (const auto& p : params()) opt.update(p);
}

std::vector<float> Gpt::next_logits(std::span<const std::int32_t> tokens) {
  if (tokens.empty()) throw UsageError("gpt: no tokens to continue");
  const std::size_t T = std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(cfg_.context));
  // One window of T inputs; its "targets" are never read (no loss is computed).
  std::vector<std::int32_t> window(tokens.end() - static_cast<std::ptrdiff_t>(T), tokens.end());
  window.push_back(0);
  Batch b;
  b.n = 1;
  b.seq = static_cast<int>(T);
  b.tokens = window.data();
  stage(b);
  const Tensor& logits = forward_logits();
  std::vector<float> all = logits.to_host();
  return std::vector<float>(all.end() - cfg_.vocab, all.end());
}

}  // namespace resil::train

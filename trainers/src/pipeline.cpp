#include "pipeline.hpp"

#include "resil/core/error.hpp"
#include "resil/train/gpt.hpp"

namespace resil::train {

namespace {
constexpr int tag_act = 1, tag_grad = 2;

Dims with_batch(int n, const Dims& per_sample) {
  Dims d = {n};
  d.insert(d.end(), per_sample.begin(), per_sample.end());
  return d;
}
}  // namespace

std::vector<std::pair<std::size_t, std::size_t>> partition_layers(Sequential& net, int stages) {
  const std::size_t L = net.size();
  if (stages < 1 || static_cast<std::size_t>(stages) > L)
    throw UsageError("cannot split " + std::to_string(L) + " layers into " + std::to_string(stages) + " pipeline stages");
  // Cost of a layer: its parameter count plus its per-sample output size (a proxy for its FLOPs).
  std::vector<double> cost(L);
  double total = 0;
  for (std::size_t l = 0; l < L; ++l) {
    double c = static_cast<double>(numel_of(net.dims_before(l + 1)));
    for (auto& p : net.layer(l).params()) c += static_cast<double>(p.value->numel());
    cost[l] = c;
    total += c;
  }
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t first = 0;
  double acc = 0;
  for (int s = 0; s < stages; ++s) {
    std::size_t end = first + 1;
    acc += cost[first];
    const std::size_t max_end = L - static_cast<std::size_t>(stages - 1 - s);  // leave a layer per later stage
    const double target = total * (s + 1) / stages;
    while (end < max_end && (s == stages - 1 || acc + cost[end] / 2 <= target)) acc += cost[end++];
    if (s == stages - 1) end = L;
    out.emplace_back(first, end);
    first = end;
  }
  return out;
}

PipelineStage::PipelineStage(Sequential& net, std::size_t first, std::size_t end, const Comm& comm, int micro_batches,
                             DeviceComm* dcomm)
    : net_(net), first_(first), end_(end), comm_(comm), micro_(micro_batches), dcomm_(dcomm) {
  if (micro_ < 1) throw UsageError("--micro-batches must be at least 1");
}

void PipelineStage::upload_input(const Batch& b, int offset, int n, Tensor& x) {
  Backend& be = net_.backend();
  x.ensure(be, with_batch(n, net_.input()));
  be.upload(x.data(), b.x + static_cast<std::size_t>(offset) * numel_of(net_.input()), x.numel());
}

void PipelineStage::send(const Tensor& t, int dest, int tag) {
  if (dcomm_) return dcomm_->send(t.data(), t.numel(), dest);  // NCCL matches messages by order, not tag
  host_.resize(t.numel());
  net_.backend().download(host_.data(), t.data(), t.numel());
  comm_.send(host_.data(), host_.size(), dest, tag);
}

void PipelineStage::recv(Tensor& t, int src, int tag) {
  if (dcomm_) return dcomm_->recv(t.data(), t.numel(), src);
  host_.resize(t.numel());
  comm_.recv(host_.data(), host_.size(), src, tag);
  net_.backend().upload(t.data(), host_.data(), t.numel());
}

StepStats PipelineStage::broadcast(StepStats s) const {
  std::vector<double> v = {s.loss_sum, static_cast<double>(s.correct), static_cast<double>(s.samples)};
  comm_.bcast(v, comm_.size() - 1);
  return {v[0], static_cast<std::int64_t>(v[1]), static_cast<std::int64_t>(v[2])};
}

StepStats PipelineStage::train_step(const Batch& g, float grad_scale) {
  if (g.n % micro_ != 0)
    throw UsageError("--batch " + std::to_string(g.n) + " is not divisible by --micro-batches " + std::to_string(micro_));
  Backend& be = net_.backend();
  const int mb = g.n / micro_;
  const int rank = comm_.rank();
  const bool first_stage = rank == 0, last_stage = rank == comm_.size() - 1;
  const Dims in_dims = with_batch(mb, net_.dims_before(first_)), out_dims = with_batch(mb, net_.dims_before(end_));
  inputs_.resize(static_cast<std::size_t>(micro_));
  dlogits_.resize(static_cast<std::size_t>(micro_));
  StepStats stats;
  // Forward: every micro-batch through this stage, outputs sent downstream.
  for (int m = 0; m < micro_; ++m) {
    Tensor& x = inputs_[static_cast<std::size_t>(m)];
    if (first_stage) {
      upload_input(g, m * mb, mb, x);
    } else {
      x.ensure(be, in_dims);
      recv(x, rank - 1, tag_act);
    }
    const Tensor& y = net_.forward(x, first_, end_);
    if (last_stage) {
      labels_.ensure(be, static_cast<std::size_t>(mb));
      be.upload_i32(labels_.data(), g.labels + m * mb, static_cast<std::size_t>(mb));
      Tensor& dl = dlogits_[static_cast<std::size_t>(m)];
      dl.ensure(be, y.dims());
      stats.loss_sum += be.softmax_xent(y.data(), labels_.data(), mb, y.dim(1), grad_scale, dl.data(), &stats.correct);
      stats.samples += mb;
    } else {
      send(y, rank + 1, tag_act);
    }
  }
  // Backward in reverse micro-batch order; parameter gradients accumulate across micro-batches.
  for (int m = micro_ - 1; m >= 0; --m) {
    const Tensor* dy = &dlogits_[static_cast<std::size_t>(m)];
    if (!last_stage) {
      dy_.ensure(be, out_dims);
      recv(dy_, rank + 1, tag_grad);
      dy = &dy_;
    }
    net_.forward(inputs_[static_cast<std::size_t>(m)], first_, end_);  // re-materialise this micro-batch
    const Tensor& dx = net_.backward(*dy, first_, end_, !first_stage);
    if (!first_stage) send(dx, rank - 1, tag_grad);
  }
  return broadcast(stats);
}

StepStats PipelineStage::eval_step(const Batch& g) {
  Backend& be = net_.backend();
  const int rank = comm_.rank();
  StepStats stats;
  Tensor& x = x_;
  if (rank == 0) {
    upload_input(g, 0, g.n, x);
  } else {
    x.ensure(be, with_batch(g.n, net_.dims_before(first_)));
    recv(x, rank - 1, tag_act);
  }
  const Tensor& y = net_.forward(x, first_, end_);
  if (rank == comm_.size() - 1) {
    labels_.ensure(be, static_cast<std::size_t>(g.n));
    be.upload_i32(labels_.data(), g.labels, static_cast<std::size_t>(g.n));
    stats.loss_sum = be.softmax_xent(y.data(), labels_.data(), g.n, y.dim(1), 0.0f, nullptr, &stats.correct);
    stats.samples = g.n;
  } else {
    send(y, rank + 1, tag_act);
  }
  return broadcast(stats);
}

}  // namespace resil::train

// ---------------------------------------------------------------- the gpt pipeline
namespace resil::train {

namespace {
constexpr int tag_wte = 3;
}

std::vector<std::pair<std::size_t, std::size_t>> partition_blocks(int layers, int stages) {
  if (stages < 1 || stages > layers)
    throw UsageError("cannot split " + std::to_string(layers) + " blocks (--layers) into " + std::to_string(stages) + " pipeline stages");
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t first = 0;
  for (int s = 0; s < stages; ++s) {
    // the first layers % stages stages take one block more
    const std::size_t n = static_cast<std::size_t>(layers / stages + (s < layers % stages ? 1 : 0));
    out.emplace_back(first, first + n);
    first += n;
  }
  return out;
}

GptPipelineStage::GptPipelineStage(Gpt& model, std::size_t first, std::size_t end, const Comm& comm, int micro_batches, DeviceComm* dcomm)
    : gpt_(model), first_(static_cast<int>(first)), end_(static_cast<int>(end)), comm_(comm), micro_(micro_batches), dcomm_(dcomm) {
  if (micro_ < 1) throw UsageError("--micro-batches must be at least 1");
}

std::vector<ParamRef> GptPipelineStage::params() {
  return gpt_.stage_params(first_, end_, comm_.rank() == 0, comm_.rank() == comm_.size() - 1);
}

bool GptPipelineStage::is_copy(const std::string& param) const {
  return comm_.rank() != 0 && comm_.rank() == comm_.size() - 1 && param == "wte.weight";
}

Batch GptPipelineStage::micro(const Batch& g, int m, int mb) const {
  Batch b = g;
  b.n = mb;
  b.tokens = g.tokens + static_cast<std::size_t>(m) * static_cast<std::size_t>(mb) * static_cast<std::size_t>(g.seq + 1);
  return b;
}

void GptPipelineStage::send(const Tensor& t, int dest, int tag) {
  if (dcomm_) return dcomm_->send(t.data(), t.numel(), dest);
  host_.resize(t.numel());
  t.backend()->download(host_.data(), t.data(), t.numel());
  comm_.send(host_.data(), host_.size(), dest, tag);
}

void GptPipelineStage::recv(Tensor& t, int src, int tag) {
  if (dcomm_) return dcomm_->recv(t.data(), t.numel(), src);
  host_.resize(t.numel());
  comm_.recv(host_.data(), host_.size(), src, tag);
  t.backend()->upload(t.data(), host_.data(), t.numel());
}

StepStats GptPipelineStage::broadcast(StepStats s) const {
  std::vector<double> v = {s.loss_sum, static_cast<double>(s.correct), static_cast<double>(s.samples)};
  comm_.bcast(v, comm_.size() - 1);
  return {v[0], static_cast<std::int64_t>(v[1]), static_cast<std::int64_t>(v[2])};
}

StepStats GptPipelineStage::train_step(const Batch& g, float grad_scale) {
  if (g.n % micro_ != 0)
    throw UsageError("--batch " + std::to_string(g.n) + " is not divisible by --micro-batches " + std::to_string(micro_));
  const int mb = g.n / micro_, rank = comm_.rank();
  const bool first_stage = rank == 0, last_stage = rank == comm_.size() - 1;
  Backend& be = *gpt_.params().front().value->backend();
  const Dims act = {mb * g.seq, gpt_.config().width};
  inputs_.resize(static_cast<std::size_t>(micro_));
  StepStats stats;
  // Forward: each micro-batch's input kept (received in micro-batch order), its output sent on.
  // The last stage computes nothing yet: its forward pass runs once, just before its backward.
  for (int m = 0; m < micro_; ++m) {
    gpt_.stage(micro(g, m, mb));
    Tensor& x = inputs_[static_cast<std::size_t>(m)];
    if (!first_stage) {
      x.ensure(be, act);
      recv(x, rank - 1, 1);
    }
    if (!last_stage) send(gpt_.blocks_forward(first_stage ? gpt_.embed() : x, first_, end_), rank + 1, 1);
  }
  // Backward in reverse micro-batch order, each recomputing its forward pass from its input.
  for (int m = micro_ - 1; m >= 0; --m) {
    gpt_.stage(micro(g, m, mb));
    const Tensor& x = inputs_[static_cast<std::size_t>(m)];
    const Tensor& y = gpt_.blocks_forward(first_stage ? gpt_.embed() : x, first_, end_);
    const Tensor* dy = nullptr;
    if (last_stage) {
      dy = &gpt_.head(y, grad_scale, stats);
    } else {
      dy_.ensure(be, act);
      recv(dy_, rank + 1, 2);
      dy = &dy_;
    }
    const Tensor& dx = gpt_.blocks_backward(*dy, first_, end_);
    if (first_stage) gpt_.embed_backward(dx);
    else send(dx, rank - 1, 2);
  }
  // The tied weight: the head's gradient (last stage) and the embedding's (first) summed on the
  // first stage, the sum sent back.
  if (comm_.size() > 1) {
    Tensor* dwte = params().front().grad;
    if (last_stage) {
      send(*dwte, 0, tag_wte);
      recv(*dwte, 0, tag_wte);
    } else if (first_stage) {
      wte_grad_.ensure(be, dwte->dims());
      recv(wte_grad_, comm_.size() - 1, tag_wte);
      be.axpy(dwte->numel(), 1.0f, wte_grad_.data(), dwte->data());
      send(*dwte, comm_.size() - 1, tag_wte);
    }
  }
  return broadcast(stats);
}

StepStats GptPipelineStage::eval_step(const Batch& g) {
  const int rank = comm_.rank();
  Backend& be = *gpt_.params().front().value->backend();
  StepStats stats;
  gpt_.stage(g);
  if (rank != 0) {
    x_.ensure(be, {g.n * g.seq, gpt_.config().width});
    recv(x_, rank - 1, 1);
  }
  const Tensor& y = gpt_.blocks_forward(rank == 0 ? gpt_.embed() : x_, first_, end_);
  if (rank == comm_.size() - 1) stats = gpt_.head_evaluate(y);
  else send(y, rank + 1, 1);
  return broadcast(stats);
}

}  // namespace resil::train

#include "resil/train/optimizer.hpp"

#include <algorithm>

#include "resil/core/dmath.hpp"
#include "resil/core/error.hpp"

namespace resil::train {

Optimizer::Optimizer(Backend& be, OptimizerConfig cfg) : be_(be), cfg_(std::move(cfg)) {
  if (!(cfg_.lr > 0.0f)) throw UsageError("--lr must be positive");
  if (cfg_.eps == 0.0f) cfg_.eps = cfg_.kind == OptimizerKind::adagrad ? 1e-10f : 1e-8f;
  if (!(cfg_.lr_decay > 0.0f && cfg_.lr_decay <= 1.0f)) throw UsageError("--lr-decay must be in (0, 1]");
  if (cfg_.warmup < 0 || cfg_.decay_steps < 0) throw UsageError("--warmup and --decay-steps must not be negative");
  if (!(cfg_.min_lr_ratio >= 0.0f && cfg_.min_lr_ratio <= 1.0f)) throw UsageError("--min-lr-ratio must be in [0, 1]");
  if (!(cfg_.clip >= 0.0f)) throw UsageError("--clip must not be negative");
  lr_ = epoch_lr_ = cfg_.lr;
}

void Optimizer::set_epoch(std::int64_t e) {
  // Computed in double from the epoch index alone, then rounded once: the same on every rank, run and machine.
  lr_ = epoch_lr_ = static_cast<float>(static_cast<double>(cfg_.lr) * dmath::powi(static_cast<double>(cfg_.lr_decay), e));
}

double Optimizer::schedule(std::int64_t t) const {
  if (t <= cfg_.warmup) return static_cast<double>(t) / static_cast<double>(cfg_.warmup);
  if (cfg_.decay_steps == 0) return 1.0;
  const double progress = std::min(1.0, static_cast<double>(t - cfg_.warmup) / static_cast<double>(cfg_.decay_steps));
  const double pi = 3.141592653589793;
  const double floor = static_cast<double>(cfg_.min_lr_ratio);
  return floor + 0.5 * (1.0 + dmath::cos(pi * progress)) * (1.0 - floor);
}

void Optimizer::begin_step() {
  ++t_;
  // Without a schedule the factor is exactly 1 and the rate is the epoch's, bit for bit.
  lr_ = cfg_.warmup == 0 && cfg_.decay_steps == 0 ? epoch_lr_ : static_cast<float>(static_cast<double>(epoch_lr_) * schedule(t_));
}

std::vector<std::string> Optimizer::slot_names() const {
  std::vector<std::string> s;
  if (cfg_.kind == OptimizerKind::adam || cfg_.kind == OptimizerKind::adamw) s = {"exp_avg", "exp_avg_sq"};
  else if (cfg_.kind == OptimizerKind::adagrad) s = {"sum"};
  else if (cfg_.momentum > 0.0f) s = {"momentum_buffer"};
  if (cfg_.master_weights) s.push_back("master");
  return s;
}

void Optimizer::attach(const std::vector<ParamRef>& params) {
  for (const auto& p : params) {
    auto& s = slots_[p.name];
    for (const auto& n : slot_names()) {
      if (s.count(n)) continue;
      Tensor& t = s.emplace(n, Tensor(be_, p.value->dims())).first->second;
      if (n == "master") {
        be_.copy(t.data(), p.value->data(), t.numel());
        be_.round_bf16(p.value->data(), p.value->numel());
      }
    }
  }
}

Tensor& Optimizer::slot(const std::string& param, const std::string& slot) {
  auto it = slots_.find(param);
  if (it == slots_.end() || !it->second.count(slot)) throw UsageError("optimizer has no slot " + param + "/" + slot);
  return it->second.at(slot);
}

template <class Slot>
void Optimizer::update_range(float* w, const float* g, Slot slot, std::size_t n, bool decay) {
  if (cfg_.kind == OptimizerKind::adamw) {
    be_.adamw_update(w, g, slot("exp_avg"), slot("exp_avg_sq"), n, lr_, cfg_.beta1, cfg_.beta2, cfg_.eps, decay ? cfg_.weight_decay : 0.0f, t_);
  } else if (cfg_.kind == OptimizerKind::adam) {
    be_.adam_update(w, g, slot("exp_avg"), slot("exp_avg_sq"), n, lr_, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay, t_);
  } else if (cfg_.kind == OptimizerKind::adagrad) {
    be_.adagrad_update(w, g, slot("sum"), n, lr_, cfg_.eps, cfg_.weight_decay);
  } else {
    float* buf = cfg_.momentum > 0.0f ? slot("momentum_buffer") : nullptr;
    be_.sgd_update(w, g, buf, n, lr_, cfg_.momentum, cfg_.weight_decay);
  }
}

float* Optimizer::row_scratch(const std::string& key, std::size_t n) {
  Tensor& t = row_scratch_[key];
  if (t.numel() < n) t = Tensor(be_, {static_cast<int>(n)});
  return t.data();
}

void Optimizer::update(const ParamRef& p) {
  if (t_ < 1) throw UsageError("Optimizer::update before begin_step");
  update_rows_of(p, 0, p.value->numel(), p.value->dims().size() >= 2);
}

void Optimizer::update_rows_of(const ParamRef& p, std::size_t off, std::size_t n, bool decay) {
  auto& slots = slots_.at(p.name);
  auto slot = [&](const char* name) { return slots.at(name).data() + off; };
  if (!cfg_.master_weights) {
    update_range(p.value->data() + off, p.grad->data() + off, slot, n, decay);
    return;
  }
  // The float master takes the step; the parameter becomes the master rounded to bfloat16.
  float* master = slot("master");
  update_range(master, p.grad->data() + off, slot, n, decay);
  be_.copy(p.value->data() + off, master, n);
  be_.round_bf16(p.value->data() + off, n);
}

void Optimizer::update_rows(const ParamRef& p, std::span<const std::int32_t> rows) {
  if (t_ < 1) throw UsageError("Optimizer::update_rows before begin_step");
  if (rows.empty()) return;
  // The listed rows of the gradient, the slots and the parameter (or its master) are gathered into
  // contiguous scratch, take one dense step there and are scattered back. The updates are elementwise,
  // so the bits are those of a step row by row, in a few calls instead of a few per row.
  const auto len = static_cast<std::size_t>(p.row_len);
  const std::size_t n = rows.size() * len;
  auto& slots = slots_.at(p.name);
  float* g = row_scratch("grad", n);
  be_.gather_rows(p.grad->data(), len, rows.data(), rows.size(), g);
  for (auto& [name, t] : slots) be_.gather_rows(t.data(), len, rows.data(), rows.size(), row_scratch(name, n));
  float* w = cfg_.master_weights ? row_scratch("master", n) : row_scratch("value", n);
  if (!cfg_.master_weights) be_.gather_rows(p.value->data(), len, rows.data(), rows.size(), w);
  update_range(w, g, [&](const char* name) { return row_scratch_.at(name).data(); }, n, true);
  for (auto& [name, t] : slots) be_.scatter_rows(row_scratch_.at(name).data(), len, rows.data(), rows.size(), t.data());
  if (cfg_.master_weights) {
    float* v = row_scratch("value", n);
    be_.copy(v, w, n);
    be_.round_bf16(v, n);
    w = v;
  }
  be_.scatter_rows(w, len, rows.data(), rows.size(), p.value->data());
}

}  // namespace resil::train

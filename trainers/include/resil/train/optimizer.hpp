// SGD (+momentum), Adam, AdamW and Adagrad. Their state ("slots", PyTorch's names) is part of the
// checkpoint: /optimizer/<param>/<slot>. The step counter t (Adam's bias correction) equals the
// number of optimizer steps taken, which the checkpoint stores as /meta step.
//
// The learning rate of step t (1-based) in epoch e is lr * lr_decay^e * schedule(t): schedule is 1
// unless a warmup or a cosine decay is asked for, and a pure function of t (no horizon taken from
// --epochs), so "train 1 epoch, resume to 2" stays bit-identical to "train 2" with either.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "resil/train/layers.hpp"

namespace resil::train {

enum class OptimizerKind { sgd, adam, adagrad, adamw };  // names: resil/train/options.hpp

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adam;
  float lr = 1e-3f;
  float momentum = 0.9f;      // sgd
  float beta1 = 0.9f, beta2 = 0.999f;  // adam
  float eps = 0.0f;           // 0: the kind's default (adam 1e-8, adagrad 1e-10)
  float weight_decay = 0.0f;
  /// Per-epoch exponential learning-rate decay: epoch e (0-based) runs at lr * lr_decay^e. A pure
  /// function of the epoch index (no horizon), so "train 1 epoch, resume to 2" equals "train 2".
  float lr_decay = 1.0f;
  /// Linear warmup over the first `warmup` steps: step t <= warmup runs at t / warmup of the rate.
  std::int64_t warmup = 0;
  /// Cosine decay over the `decay_steps` steps after the warmup, from the rate to min_lr_ratio times
  /// it, which later steps keep (0: no decay).
  std::int64_t decay_steps = 0;
  float min_lr_ratio = 0.1f;
  /// Gradient clipping by global norm (the L2 norm over every gradient of the model): when it
  /// exceeds clip, every gradient is scaled by clip / (norm + 1e-6) before the update (0: off).
  float clip = 0.0f;
  /// Mixed precision: the optimizer keeps each parameter's float master weights (slot "master"),
  /// updates them, and leaves the parameter itself the master rounded to bfloat16. Set from the
  /// run's precision (not stored in the optimizer's part of the config).
  bool master_weights = false;
};

class Optimizer {
public:
  Optimizer(Backend& be, OptimizerConfig cfg);
  const OptimizerConfig& config() const noexcept { return cfg_; }
  /// Slot names this optimizer keeps per parameter.
  std::vector<std::string> slot_names() const;
  /// Create zeroed slots for every parameter (idempotent per name); with master weights, the
  /// master is a copy of the parameter, which is then rounded to bfloat16.
  void attach(const std::vector<ParamRef>& params);
  /// Start optimizer step t+1 (call once per step before the updates): its learning rate.
  void begin_step();
  /// The schedule's factor for step t (1-based): warmup, then cosine decay (see OptimizerConfig).
  double schedule(std::int64_t t) const;
  /// Dense update of one parameter. AdamW decays matrices only (parameters of two or more
  /// dimensions: weights and embeddings), never biases or LayerNorm parameters.
  void update(const ParamRef& p);
  /// Row-sparse update: only the listed rows (sorted, unique) of a row-major parameter change.
  void update_rows(const ParamRef& p, std::span<const std::int32_t> rows);
  /// Use epoch e's learning rate (lr * lr_decay^e) from now on.
  void set_epoch(std::int64_t e);
  /// The learning rate the next updates use.
  float lr() const noexcept { return lr_; }
  std::int64_t step() const noexcept { return t_; }
  void set_step(std::int64_t t) noexcept { t_ = t; }
  /// slots()[param][slot]
  std::map<std::string, std::map<std::string, Tensor>>& slots() noexcept { return slots_; }
  Tensor& slot(const std::string& param, const std::string& slot);

private:
  /// One step over n elements of w with gradient g; slot(name) gives the slot's n elements.
  template <class Slot>
  void update_range(float* w, const float* g, Slot slot, std::size_t n, bool decay);
  /// A scratch buffer of at least n elements, kept between calls.
  float* row_scratch(const std::string& key, std::size_t n);
  /// Elements [offset, offset + n) of p, through the master weights when there are some.
  void update_rows_of(const ParamRef& p, std::size_t offset, std::size_t n, bool decay);
  Backend& be_;
  OptimizerConfig cfg_;
  std::int64_t t_ = 0;
  float lr_ = 0.0f, epoch_lr_ = 0.0f;
  std::map<std::string, std::map<std::string, Tensor>> slots_;
  std::map<std::string, Tensor> row_scratch_;  // update_rows' gathered rows: "value", "grad" and the slots' names
};

}  // namespace resil::train

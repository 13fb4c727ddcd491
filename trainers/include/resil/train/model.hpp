// Models. A Model turns a host batch into a loss and gradients; the trainer owns everything else
// (data order, reduction across ranks, optimizer step, checkpoints).
//   mlp : 784-256-128-10 with ReLU
//   cnn : LeNet-5 style: conv5x5(1->6,pad 2) relu pool2, conv5x5(6->16) relu pool2, 400-120-84-10
//   dlrm: see dlrm.hpp
//   gpt : see gpt.hpp
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "resil/train/layers.hpp"
#include "resil/train/optimizer.hpp"

namespace resil::train {

/// One local batch in host memory. Classification uses `labels`, click models `targets` + `sparse`.
struct Batch {
  int n = 0;
  const float* x = nullptr;               // n x x_dim (images or dense features)
  const std::int32_t* labels = nullptr;   // n
  const float* targets = nullptr;         // n (0/1)
  const std::int32_t* sparse = nullptr;   // n x num_sparse (one index per table and sample)
  const std::int32_t* tokens = nullptr;   // language models: n windows of seq + 1 tokens (inputs, then one more target)
  int seq = 0;
};

struct StepStats {
  double loss_sum = 0.0;      // summed (not averaged) per-sample loss (language models: per token)
  std::int64_t correct = 0;   // classification: argmax == label (language models: the next token)
  std::int64_t samples = 0;   // samples (language models: predicted tokens)
};

class Model {
public:
  virtual ~Model() = default;
  virtual std::string name() const = 0;
  /// Every parameter in a stable order; names are the checkpoint's /model/<name>.
  virtual std::vector<ParamRef> params() = 0;
  virtual void init(std::uint64_t seed) = 0;
  virtual void zero_grad() = 0;
  /// Forward + backward on a batch; gradients accumulate scaled by `grad_scale` (1/global batch).
  virtual StepStats forward_backward(const Batch& b, float grad_scale) = 0;
  /// Forward only; `scores` (when given) receives one score per sample (click probability logits).
  virtual StepStats evaluate(const Batch& b, std::vector<float>* scores = nullptr) = 0;
  /// Apply the optimizer to every parameter (row-sparse parameters only on touched rows).
  virtual void apply_update(Optimizer& opt) = 0;
  /// Row-sparse parameters' touched rows (sorted, unique) since the last zero_grad, by parameter name.
  virtual std::vector<std::pair<std::string, std::vector<std::int32_t>>> touched_rows() const { return {}; }
  /// Replace the touched rows (data-parallel runs make them the union over ranks).
  virtual void set_touched_rows(const std::string& /*param*/, std::vector<std::int32_t> /*rows*/) {}
};

/// A chain of layers; the pipeline (mp) runs contiguous ranges of it on different ranks.
class Sequential {
public:
  explicit Sequential(Backend& be, Dims input) : be_(be), input_(std::move(input)) {}
  void add(std::unique_ptr<Layer> l) { layers_.push_back(std::move(l)); }
  std::size_t size() const noexcept { return layers_.size(); }
  Layer& layer(std::size_t i) { return *layers_.at(i); }
  /// Per-sample input dims (without the batch dimension).
  const Dims& input() const noexcept { return input_; }
  /// Per-sample dims entering layer i (i == size(): the output).
  Dims dims_before(std::size_t i) const;
  /// Run layers [first, end) forward / backward.
  const Tensor& forward(const Tensor& x, std::size_t first, std::size_t end);
  const Tensor& backward(const Tensor& dy, std::size_t first, std::size_t end, bool need_dx);
  std::vector<ParamRef> params(std::size_t first, std::size_t end);
  std::vector<ParamRef> params() { return params(0, size()); }
  Backend& backend() noexcept { return be_; }

private:
  Backend& be_;
  Dims input_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

std::unique_ptr<Sequential> make_mlp(Backend& be);
std::unique_ptr<Sequential> make_cnn(Backend& be);
/// "mlp" or "cnn" (UsageError otherwise).
std::unique_ptr<Sequential> make_sequential(Backend& be, const std::string& name);

/// Softmax-cross-entropy classifier around a Sequential (mlp, cnn).
class Classifier final : public Model {
public:
  Classifier(Backend& be, std::string name);
  std::string name() const override { return name_; }
  std::vector<ParamRef> params() override { return net_->params(); }
  void init(std::uint64_t seed) override;
  void zero_grad() override;
  StepStats forward_backward(const Batch& b, float grad_scale) override;
  StepStats evaluate(const Batch& b, std::vector<float>* scores = nullptr) override;
  void apply_update(Optimizer& opt) override;
  Sequential& net() noexcept { return *net_; }

private:
  const Tensor& upload(const Batch& b);
  Backend& be_;
  std::string name_;
  std::unique_ptr<Sequential> net_;
  Tensor x_, dlogits_;
  IntBuffer labels_;
};

/// Build a model by name: mlp | cnn | dlrm (dlrm with default table sizes).
std::unique_ptr<Model> make_model(Backend& be, const std::string& name);

}  // namespace resil::train

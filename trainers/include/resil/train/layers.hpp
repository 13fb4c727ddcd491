// Layers: forward caches what backward needs; backward ACCUMULATES parameter gradients (+=), so
// gradients of several micro-batches (pipeline) or bags sum up until the trainer zeroes them,
// and returns dL/dx. Every kernel goes through the Backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "resil/train/tensor.hpp"

namespace resil::train {

/// A named parameter with its gradient (both in backend memory).
struct ParamRef {
  std::string name;
  Tensor* value = nullptr;
  Tensor* grad = nullptr;
  /// > 0 for row-sparse parameters (embedding tables): the row length; the model says which rows a step touched.
  int row_len = 0;
};

/// Move-only int32 buffer in backend memory (pooling argmax, labels).
class IntBuffer {
public:
  IntBuffer() = default;
  IntBuffer(const IntBuffer&) = delete;
  IntBuffer& operator=(const IntBuffer&) = delete;
  ~IntBuffer() { if (p_) be_->release_i32(p_); }
  void ensure(Backend& be, std::size_t n) {
    if (n == n_ && be_ == &be) return;
    if (p_) be_->release_i32(p_);
    be_ = &be; n_ = n; p_ = n ? be.alloc_i32(n) : nullptr;
  }
  std::int32_t* data() noexcept { return p_; }
  const std::int32_t* data() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }

private:
  Backend* be_ = nullptr;
  std::size_t n_ = 0;
  std::int32_t* p_ = nullptr;
};

class Layer {
public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  const std::string& name() const noexcept { return name_; }
  virtual std::string kind() const = 0;
  /// Output dims for input dims (batch first).
  virtual Dims out_dims(const Dims& in) const = 0;
  virtual const Tensor& forward(const Tensor& x) = 0;
  /// Requires a preceding forward on the same input. `need_dx` = false skips dL/dx (first layer).
  virtual const Tensor& backward(const Tensor& dy, bool need_dx) = 0;
  virtual std::vector<ParamRef> params() { return {}; }
  /// Deterministic initialisation from the run's seed (PyTorch's default bounds).
  virtual void init(std::uint64_t /*seed*/) {}

protected:
  std::string name_;
};

/// y = x W^T + b, W is out x in (PyTorch layout).
class Linear final : public Layer {
public:
  Linear(Backend& be, std::string name, int in, int out);
  std::string kind() const override { return "linear"; }
  Dims out_dims(const Dims& in) const override;
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::vector<ParamRef> params() override;
  void init(std::uint64_t seed) override;
  int in() const noexcept { return in_; }
  int out() const noexcept { return out_; }
  /// Mixed precision: round the output and the input gradient to bfloat16 (the weight and bias
  /// gradients stay float accumulations).
  void set_bf16(bool on) noexcept { bf16_ = on; }
  /// Tensor parallelism: `sum` adds a tensor over the ranks in place (every rank gets the same
  /// bits). A row-parallel Linear (this rank's input features) sums its output's partial products
  /// before adding the bias (reduce_output); a column-parallel one (this rank's output features)
  /// sums its input gradient's (reduce_input_grad). Both before the bf16 rounding.
  void set_reduce_output(std::function<void(Tensor&)> sum) { reduce_output_ = std::move(sum); }
  void set_reduce_input_grad(std::function<void(Tensor&)> sum) { reduce_input_grad_ = std::move(sum); }

private:
  Backend& be_;
  int in_, out_;
  bool bf16_ = false;
  std::function<void(Tensor&)> reduce_output_, reduce_input_grad_;
  Tensor w_, b_, dw_, db_, y_, dx_;
  const Tensor* x_ = nullptr;
};

class ReLU final : public Layer {
public:
  ReLU(Backend& be, std::string name) : Layer(std::move(name)), be_(be) {}
  std::string kind() const override { return "relu"; }
  Dims out_dims(const Dims& in) const override { return in; }
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;

private:
  Backend& be_;
  Tensor y_, dx_;
};

/// N x C x H x W -> N x (C*H*W) (a copy: tensors own their memory).
class Flatten final : public Layer {
public:
  Flatten(Backend& be, std::string name) : Layer(std::move(name)), be_(be) {}
  std::string kind() const override { return "flatten"; }
  Dims out_dims(const Dims& in) const override;
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;

private:
  Backend& be_;
  Tensor y_, dx_;
  Dims in_dims_;
};

/// 2-D convolution through im2col + gemm, one image at a time. W is Cout x C x kh x kw.
class Conv2d final : public Layer {
public:
  Conv2d(Backend& be, std::string name, int c_in, int c_out, int k, int stride = 1, int pad = 0);
  std::string kind() const override { return "conv2d"; }
  Dims out_dims(const Dims& in) const override;
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::vector<ParamRef> params() override;
  void init(std::uint64_t seed) override;

private:
  ConvGeom geom(const Dims& in) const;
  Backend& be_;
  int c_in_, c_out_, k_, stride_, pad_;
  Tensor w_, b_, dw_, db_, y_, dx_, cols_, dcol_;
  const Tensor* x_ = nullptr;
};

/// Non-overlapping k x k max pooling.
class MaxPool2d final : public Layer {
public:
  MaxPool2d(Backend& be, std::string name, int k) : Layer(std::move(name)), be_(be), k_(k) {}
  std::string kind() const override { return "maxpool2d"; }
  Dims out_dims(const Dims& in) const override;
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;

private:
  Backend& be_;
  int k_;
  Tensor y_, dx_;
  IntBuffer argmax_;
  Dims in_dims_;
};

/// Uniform init in [-bound, bound) drawn from the counter-based RNG keyed by (seed, parameter name).
void init_uniform(Tensor& t, float bound, std::uint64_t seed, const std::string& param_name);
/// Normal init N(0, std^2) from the same generator (GPT-2's initialisation).
void init_normal(Tensor& t, float std, std::uint64_t seed, const std::string& param_name);

}  // namespace resil::train

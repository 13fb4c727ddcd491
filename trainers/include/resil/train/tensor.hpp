// A move-only float tensor in backend memory (the RAII owner of a Backend allocation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "resil/train/backend.hpp"

namespace resil::train {

using Dims = std::vector<int>;

inline std::size_t numel_of(const Dims& d) noexcept {
  std::size_t n = 1;
  for (int x : d) n *= static_cast<std::size_t>(x);
  return n;
}
std::string dims_string(const Dims& d);

class Tensor {
public:
  Tensor() = default;
  Tensor(Backend& be, Dims dims) : be_(&be), dims_(std::move(dims)), n_(numel_of(dims_)), p_(n_ ? be.alloc(n_) : nullptr) {}
  Tensor(Tensor&& o) noexcept : be_(o.be_), dims_(std::move(o.dims_)), n_(o.n_), p_(o.p_) { o.p_ = nullptr; o.n_ = 0; }
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      reset();
      be_ = o.be_; dims_ = std::move(o.dims_); n_ = o.n_; p_ = o.p_;
      o.p_ = nullptr; o.n_ = 0;
    }
    return *this;
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor() { reset(); }

  /// Reallocate (zeroed) only when the shape changes; keeps the contents otherwise.
  void ensure(Backend& be, const Dims& dims) {
    if (be_ == &be && dims == dims_) return;
    *this = Tensor(be, dims);
  }

  float* data() noexcept { return p_; }
  const float* data() const noexcept { return p_; }
  const Dims& dims() const noexcept { return dims_; }
  int dim(std::size_t i) const { return dims_.at(i); }
  std::size_t numel() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  Backend* backend() const noexcept { return be_; }

  std::vector<float> to_host() const {
    std::vector<float> h(n_);
    if (n_) be_->download(h.data(), p_, n_);
    return h;
  }
  void from_host(const std::vector<float>& h);
  void zero() { if (n_) be_->fill(p_, n_, 0.0f); }

private:
  void reset() noexcept {
    if (p_) be_->release(p_);
    p_ = nullptr;
  }
  Backend* be_ = nullptr;
  Dims dims_;
  std::size_t n_ = 0;
  float* p_ = nullptr;
};

}  // namespace resil::train

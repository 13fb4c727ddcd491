// Test support: tensors of plausible values, reproducible from a seed.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "resil/ckpt/dtype.hpp"
#include "resil/ckpt/tensor.hpp"
#include "resil/core/rng.hpp"

namespace resil::test {

/// A tensor of `t` and `shape`: floats drawn from a normal, integers uniform in [0, int_values),
/// from Rng(seed, 0).
inline ckpt::Tensor filled(ckpt::DType t, ckpt::Shape shape, std::uint64_t seed, std::uint64_t int_values = 100) {
  ckpt::Tensor x(t, std::move(shape));
  Rng rng(seed, 0);
  auto bytes = x.bytes();
  const std::size_t sz = ckpt::dtype_size(t);
  for (std::size_t i = 0; i < x.numel(); ++i) {
    const double v = ckpt::dtype_is_float(t) ? rng.normal() : static_cast<double>(rng.below(int_values));
    const std::uint64_t w = ckpt::double_to_word(t, v);
    std::memcpy(bytes.data() + i * sz, &w, sz);
  }
  return x;
}

}  // namespace resil::test

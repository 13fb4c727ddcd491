// Finite-difference gradient checks shared by the trainer's unit tests: seeded normal vectors, a
// double dot product (the loss L = sum(y * r) of a layer output y, so dL/dy = r) and a comparison
// of an analytic gradient with central differences. Header-only; include after catch.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "resil/core/rng.hpp"

namespace resil::test {

/// n values of N(0, scale^2) from the counter-based generator (seed, stream).
inline std::vector<float> randv(std::uint64_t seed, std::size_t n, std::uint64_t stream, float scale = 1.0f) {
  resil::Rng rng(seed, stream);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal()) * scale;
  return v;
}

inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

/// How check_grad compares: |numeric - analytic| / max(floor, |numeric| + |analytic|) <= rel, at
/// about max_checks evenly spaced coordinates.
struct GradTolerance {
  double floor = 1e-2;
  double rel = 1e-2;
  std::size_t max_checks = 48;
};

/// Compare the analytic gradient `g` of f at `v` (changed and restored in place) with central
/// differences of step 1e-2 in float.
inline void check_grad(std::vector<float>& v, const std::vector<float>& g, const std::function<double()>& f, const std::string& what,
                       const GradTolerance& tol) {
  REQUIRE(g.size() == v.size());
  const std::size_t stride = std::max<std::size_t>(1, v.size() / tol.max_checks);
  int bad = 0;
  for (std::size_t i = 0; i < v.size(); i += stride) {
    const float old = v[i], h = 1e-2f;
    v[i] = old + h;
    const double fp = f();
    v[i] = old - h;
    const double fm = f();
    v[i] = old;
    const double num = (fp - fm) / (2.0 * h);
    const double err = std::fabs(num - g[i]) / std::max(tol.floor, std::fabs(num) + std::fabs(g[i]));
    if (err > tol.rel) {
      ++bad;
      UNSCOPED_INFO(what << "[" << i << "]: numeric " << num << " analytic " << g[i]);
    }
  }
  CHECK(bad == 0);
}

}  // namespace resil::test

#include <cmath>

#include "resil/core/dmath.hpp"
#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"
#include "resil/data/criteo.hpp"

namespace resil::data {

namespace {
constexpr std::uint64_t sample_purpose = 0x434C49434Bull;  // "CLICK"
constexpr std::uint64_t weight_purpose = 0x574549474854ull;  // "WEIGHT"
constexpr std::uint32_t vocab = 200;   // distinct raw categories per feature

/// Hidden weight in [-1, 1) of category `rank` of feature `j`: the planted signal.
double hidden_weight(std::uint64_t seed, std::uint64_t j, std::uint64_t rank) {
  return static_cast<double>(Rng::at(derive_seed(seed, weight_purpose), j, rank) >> 11) * 0x1.0p-52 - 1.0;
}
}  // namespace

std::vector<RawClick> synthetic_raw_clicks(std::size_t n, std::uint64_t seed, std::uint64_t first) {
  std::vector<RawClick> out(n);
  const std::uint64_t sseed = derive_seed(seed, sample_purpose);
  for (std::size_t i = 0; i < n; ++i) {
    Rng rng(sseed, first + i);
    RawClick& r = out[i];
    double logit = -1.0;
    for (std::size_t j = 0; j < criteo_num_dense; ++j) {
      // Heavy-tailed counts, occasionally negative like Criteo's I2.
      const double x = std::floor(dmath::exp(1.5 * rng.normal() + 1.0)) - (j == 1 ? 2.0 : 0.0);
      r.ints[j] = static_cast<std::int64_t>(x);
      const double lx = dmath::log1p(std::max(x, 0.0));
      logit += (j % 3 == 0 ? 0.25 : -0.1) * (lx - 1.5);
    }
    for (std::size_t j = 0; j < criteo_num_sparse; ++j) {
      const double u = rng.uniform();
      const auto rank = static_cast<std::uint32_t>(vocab * u * u);  // Zipf-like: small ranks are frequent
      r.cats[j] = (rank * 0x9E3779B1u) ^ static_cast<std::uint32_t>(j * 0x85EBCA6Bu);
      logit += 0.6 * hidden_weight(seed, j, rank);
    }
    r.label = rng.uniform() < 1.0 / (1.0 + dmath::exp(-logit)) ? 1 : 0;
  }
  return out;
}

ClickSet synthetic_clicks(std::size_t n, std::uint64_t seed, const std::vector<std::uint32_t>& table_sizes, std::uint64_t first) {
  if (table_sizes.size() != criteo_num_sparse) throw UsageError("Criteo needs 26 embedding table sizes");
  ClickSet s;
  s.table_sizes = table_sizes;
  s.dense.reserve(n * criteo_num_dense);
  s.sparse.reserve(n * criteo_num_sparse);
  for (const auto& r : synthetic_raw_clicks(n, seed, first)) append_preprocessed(s, r);
  return s;
}

}  // namespace resil::data

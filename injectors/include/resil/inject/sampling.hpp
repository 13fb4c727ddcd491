// inject::sample_sites: fault sites drawn uniformly over the selected stored bits (a dataset weighs
// numel x its selected bits), counter-based (resil::Rng): trial t of seed s is reproducible on its
// own. Also the sampling primitives over a space of `total` stored bits.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "resil/core/rng.hpp"
#include "resil/inject/fault_model.hpp"
#include "resil/inject/select.hpp"

namespace resil::inject {

/// Streams of derive_seed(seed, trial) used by planning (fixed: changing them changes every plan).
inline constexpr std::uint64_t stream_sites = 0, stream_model = 1, stream_strata = 2;
/// Upper bound on sites in one plan (memory guard).
inline constexpr std::uint64_t max_sites = 100'000'000;

/// Fault spaces are counted in 128 bits: a dataset of 2^62 f64 elements holds 2^68 stored bits.
/// Uniform integer in [0, n), n >= 1: rng.below(n) while n fits in 64 bits (so plans over smaller
/// spaces are what they always were), else rejection sampling on 128 random bits.
uint128_t below(Rng& rng, uint128_t n);
/// n distinct values of [0, total), sorted; each n-subset equally likely (Floyd).
std::vector<uint128_t> draw_without_replacement(uint128_t total, std::uint64_t n, Rng& rng);
/// Each value of [0, total) independently with probability p, sorted.
std::vector<uint128_t> draw_bernoulli(uint128_t total, double p, Rng& rng);

enum class Stratify { none, bits, dataset };
/// The names of Stratify on the command line.
inline constexpr std::pair<std::string_view, Stratify> stratify_names[] = {
    {"none", Stratify::none}, {"bits", Stratify::bits}, {"dataset", Stratify::dataset}};

struct PlanOptions {
  std::uint64_t seed = 0;
  std::uint64_t trial = 0;              // campaign trial: its own counter-based streams
  std::optional<std::uint64_t> flips;   // exact count, sites without replacement
  std::optional<double> ber;            // per stored bit
  Stratify stratify = Stratify::none;
  FaultModel model;
};

struct Site {
  std::uint32_t target = 0;
  std::uint64_t index = 0;  // flat element index
  unsigned bit = 0;
  auto operator<=>(const Site&) const = default;
};

/// Draw the fault sites (sorted by target, index, bit). Pure function of (targets, options).
std::vector<Site> sample_sites(std::span<const Target> targets, const PlanOptions& opt);

}  // namespace resil::inject

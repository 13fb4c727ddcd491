// Sampling primitives over a space of `total` stored bits, counter-based (resil::Rng).
#pragma once

#include <cstdint>
#include <vector>

#include "resil/core/rng.hpp"

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

}  // namespace resil::inject

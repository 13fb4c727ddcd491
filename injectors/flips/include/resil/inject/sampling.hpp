// inject::sample_sites: fault sites drawn uniformly over the selected stored bits (a dataset weighs
// numel x its selected bits), counter-based (resil::Rng): trial t of seed s is reproducible on its
// own. Also the sampling primitives over a space of `total` stored bits.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "resil/core/rng.hpp"
#include "resil/inject/fault_model.hpp"
#include "resil/inject/plan_options.hpp"
#include "resil/inject/select.hpp"
#include "resil/inject/storage.hpp"

namespace resil::inject {

/// Streams of derive_seed(seed, trial) used by planning (fixed: changing them changes every plan).
inline constexpr std::uint64_t stream_sites = 0, stream_model = 1, stream_strata = 2;
/// --finite: the order in which the first draw's sites are tested (finite.hpp).
inline constexpr std::uint64_t stream_finite = 3;
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

struct Site {
  std::uint32_t target = 0;
  std::uint64_t index = 0;  // flat element index
  unsigned bit = 0;
  auto operator<=>(const Site&) const = default;
};

/// Draw the fault sites (sorted by target, index, bit). Pure function of (targets, options).
/// opt.finite needs the file's words: UsageError here (use the overload with a WordReader).
std::vector<Site> sample_sites(std::span<const Target> targets, const PlanOptions& opt);

/// Current stored words of target `target` at `indices` (sorted, unique), handed to fn block by
/// block (Storage::edit's contract; fn only reads).
using WordReader =
    std::function<void(std::uint32_t target, std::vector<std::uint64_t> indices, const Storage::BlockFn& fn)>;
/// A WordReader over one open file (any access; nothing is written).
WordReader words_of(Storage& file, std::span<const Target> targets);

struct Sampled {
  std::vector<Site> sites;     // sorted by target, index, bit
  std::uint64_t rejected = 0;  // --finite: draws redrawn because their fault left a NaN or Inf
};
/// sample_sites, or with opt.finite the draw of finite.hpp (reads the candidates' words).
Sampled sample_sites(std::span<const Target> targets, const PlanOptions& opt, const WordReader& read);

/// The draw behind sample_sites, kept open for redraws (--finite): the fault space split into
/// strata (one, one per dataset, or one per bit position), each with its own random stream.
class SiteDraw {
public:
  SiteDraw(std::span<const Target> targets, const PlanOptions& opt);
  ~SiteDraw();
  SiteDraw(const SiteDraw&) = delete;
  SiteDraw& operator=(const SiteDraw&) = delete;

  /// sample_sites' sites (sorted); call once, first.
  std::vector<Site> first();
  std::size_t strata() const noexcept;
  std::size_t stratum_of(const Site& s) const;
  /// Sites of stratum s not drawn yet (drawn: returned by first() or more(), not put back).
  uint128_t undrawn(std::size_t s) const;
  /// k more sites of stratum s (k <= undrawn(s)), one after another, each uniform over the sites
  /// not drawn yet: a uniformly random sequence without repetition, continuing the stratum's stream.
  std::vector<Site> more(std::size_t s, std::uint64_t k);
  /// The last `count` sites of the latest more(s, ...) were not looked at: they are undrawn again.
  void put_back(std::size_t s, std::uint64_t count);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace resil::inject

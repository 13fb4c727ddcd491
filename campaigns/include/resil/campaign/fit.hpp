// Two-level SDC/DUE rates (Hari et al., "Estimating Silent Data Corruption Rates Using a Two-Level
// Model", arXiv 2005.01445): a low-level fault model (raw upset rate, exposure, ECC coverage and the
// distribution of manifestation patterns) combined with campaign estimates of P(outcome | pattern).
// Two kinds of uncertainty come out: conservative bounds (interval arithmetic) and a seeded Monte
// Carlo propagation of the posteriors (docs/reference/fault-models.md, docs/design/campaigns.md).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/core/rng.hpp"
#include "resil/campaign/stats.hpp"

namespace resil::inject {

/// JSON (docs/reference/fault-models.md, examples/fault-models/):
/// {"name", "source", "illustrative": bool, "assumptions": ["..."],
///  "raw_fit_per_mbit": X, "raw_fit_per_mbit_range": [lo, hi],
///  "raw_fit_distribution": "log-uniform" (default) | "uniform",
///  "mbit": M (optional; default: the campaign's fault space), "exposure": fraction of time resident,
///  "patterns": [{"name", "p", "count" (optional), "ecc_corrected", "ecc_detected", "campaign_model"}]}
/// "count" on every pattern (observed events per pattern) makes the mix uncertain: Dirichlet(count + 1/2);
/// "p" may then be left out (count / total).
struct FitPattern {
  std::string name;
  double p = 0;               // probability that an upset manifests as this pattern
  std::optional<double> count;  // observed events of this pattern (Dirichlet pseudo-count)
  double ecc_corrected = 0;   // fraction ECC corrects silently (masked)
  double ecc_detected = 0;    // fraction ECC detects but cannot correct (a DUE)
  std::string campaign_model; // the campaign fault model that emulates it ("flip", "adjacent:2", ...)
};

enum class RawRateDistribution : std::uint8_t { log_uniform, uniform };

struct FitModel {
  std::string name, source;
  bool illustrative = false;
  std::vector<std::string> assumptions;
  double raw_fit_per_mbit = 0, raw_lo = 0, raw_hi = 0;
  RawRateDistribution raw_distribution = RawRateDistribution::log_uniform;
  std::optional<double> mbit;  // 2^20 bits
  double exposure = 1;
  std::vector<FitPattern> patterns;
  bool has_counts() const noexcept { return !patterns.empty() && patterns.front().count.has_value(); }
  static FitModel parse(std::string_view json_text, const std::string& source);  // throws UsageError
};

/// The campaign's evidence for one pattern: trials and counts.
struct PatternEvidence {
  std::uint64_t n = 0, sdc = 0, critical_sdc = 0, due = 0;
  bool measured() const noexcept { return n > 0; }
};

/// Summary of a Monte Carlo sample of one FIT value.
struct FitDistribution {
  double mean = 0, median = 0, p2_5 = 0, p97_5 = 0;
};

/// A FIT value with conservative bounds (interval arithmetic over the raw-rate range and every
/// pattern's Clopper-Pearson interval; unmeasured patterns contribute [0, 1]) and, when a Monte
/// Carlo propagation ran, the distribution of its draws.
struct FitValue {
  double value = 0, lo = 0, hi = 0;
  bool complete = true;  // false: some needed pattern was not measured (value uses 0 for it)
  std::optional<FitDistribution> mc;
};

/// Monte Carlo propagation: draws == 0 switches it off. Draw i uses the stream Rng(seed, i) only,
/// so a result is a pure function of (model, evidence, draws, seed).
struct FitMonteCarlo {
  std::uint64_t draws = 0, seed = 0;
};

struct FitResult {
  double mbit = 0, raw_fit = 0;  // raw upsets in FIT for the exposed bits
  FitValue sdc, critical_sdc, due;
  FitValue sdc_low_level_only;    // every upset ECC lets through is an SDC (no program-level masking)
  FitValue sdc_injection_only;    // the single-bit campaign's P(SDC) times the raw rate (no patterns, no ECC)
  FitMonteCarlo monte_carlo;
  bool dirichlet_mix = false;     // the pattern mix was sampled (counts given)
  RawRateDistribution raw_distribution = RawRateDistribution::log_uniform;
  nlohmann::json per_pattern;
  nlohmann::json to_json() const;
};

/// `evidence[i]` belongs to `model.patterns[i]`; `single_bit` is the evidence of the single-bit campaign.
/// Patterns with the same campaign_model and evidence share one posterior draw per Monte Carlo draw.
FitResult compute_fit(const FitModel& model, const std::vector<PatternEvidence>& evidence, const PatternEvidence& single_bit,
                      double default_mbit, double confidence, FitMonteCarlo mc = {});

// Random variates on top of the counter-based Rng (deterministic given the stream).
/// Gamma(shape, 1), shape > 0: Marsaglia and Tsang, ACM TOMS 26(3), 2000; shape < 1 via
/// Gamma(shape + 1) * U^(1/shape).
double sample_gamma(double shape, Rng& rng);
/// Beta(a, b) = Ga / (Ga + Gb).
double sample_beta(double a, double b, Rng& rng);
/// Dirichlet(alpha) into `out` (same size): normalised independent Gammas.
void sample_dirichlet(std::span<const double> alpha, std::span<double> out, Rng& rng);
/// Jeffreys posterior of a binomial proportion: Beta(x + 1/2, n - x + 1/2).
inline double sample_jeffreys(double x, double n, Rng& rng) { return sample_beta(x + 0.5, n - x + 0.5, rng); }
/// Summary (mean, median and the 2.5/97.5 percentiles, linear interpolation between order
/// statistics) of `draws`, which is sorted in place.
FitDistribution summarize_draws(std::vector<double>& draws);

}  // namespace resil::inject

// Two-level SDC/DUE rates (Hari et al., "Estimating Silent Data Corruption Rates Using a Two-Level
// Model", arXiv 2005.01445): a low-level fault model (raw upset rate, exposure, ECC coverage and the
// distribution of manifestation patterns) combined with campaign estimates of P(outcome | pattern).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/inject/stats.hpp"

namespace resil::inject {

/// JSON (docs/campaigns.md, examples/fault-models/):
/// {"name", "source", "illustrative": bool, "raw_fit_per_mbit": X, "raw_fit_per_mbit_range": [lo, hi],
///  "mbit": M (optional; default: the campaign's fault space), "exposure": fraction of time resident,
///  "patterns": [{"name", "p", "ecc_corrected", "ecc_detected", "campaign_model"}]}
struct FitPattern {
  std::string name;
  double p = 0;               // probability that an upset manifests as this pattern
  double ecc_corrected = 0;   // fraction ECC corrects silently (masked)
  double ecc_detected = 0;    // fraction ECC detects but cannot correct (a DUE)
  std::string campaign_model; // the campaign fault model that emulates it ("flip", "adjacent:2", ...)
};

struct FitModel {
  std::string name, source;
  bool illustrative = false;
  double raw_fit_per_mbit = 0, raw_lo = 0, raw_hi = 0;
  std::optional<double> mbit;  // 2^20 bits
  double exposure = 1;
  std::vector<FitPattern> patterns;
  static FitModel parse(std::string_view json_text, const std::string& source);  // throws UsageError
};

/// The campaign's evidence for one pattern: trials and counts.
struct PatternEvidence {
  std::uint64_t n = 0, sdc = 0, critical_sdc = 0, due = 0;
  bool measured() const noexcept { return n > 0; }
};

/// A FIT value with conservative bounds (interval arithmetic over the raw-rate range and every
/// pattern's Clopper-Pearson interval; unmeasured patterns contribute [0, 1]).
struct FitValue {
  double value = 0, lo = 0, hi = 0;
  bool complete = true;  // false: some needed pattern was not measured (value uses 0 for it)
};

struct FitResult {
  double mbit = 0, raw_fit = 0;  // raw upsets in FIT for the exposed bits
  FitValue sdc, critical_sdc, due;
  FitValue sdc_low_level_only;    // every upset ECC lets through is an SDC (no program-level masking)
  FitValue sdc_injection_only;    // the single-bit campaign's P(SDC) times the raw rate (no patterns, no ECC)
  nlohmann::json per_pattern;
  nlohmann::json to_json() const;
};

/// `evidence[i]` belongs to `model.patterns[i]`; `single_bit` is the evidence of the single-bit campaign.
FitResult compute_fit(const FitModel& model, const std::vector<PatternEvidence>& evidence, const PatternEvidence& single_bit,
                      double default_mbit, double confidence);

}  // namespace resil::inject

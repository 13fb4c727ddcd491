// Statistics for fault-injection campaigns: binomial confidence intervals (Wilson, Clopper-Pearson),
// the Leveugle et al. (DATE 2009) sample size, and stratified estimates reweighted to the whole
// fault space. Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <span>

namespace resil::inject {

struct Interval {
  double lo = 0, hi = 1;
};

/// Inverse of the standard normal CDF (Acklam's rational approximation + one Halley step on erfc:
/// |error| < 1e-13 on (0, 1)). Throws UsageError outside (0, 1).
double normal_quantile(double p);
/// z of a two-sided interval: normal_quantile(1 - (1 - confidence) / 2). confidence in (0, 1).
double z_two_sided(double confidence);

/// Regularized incomplete beta I_x(a, b) (continued fraction, modified Lentz), a, b > 0, x in [0, 1].
double incomplete_beta(double a, double b, double x);
/// x with I_x(a, b) = p, by bisection on incomplete_beta (monotone in x): |error| < 1e-14.
double inverse_incomplete_beta(double a, double b, double p);

/// Wilson score interval for x successes in n trials (n == 0: [0, 1]).
Interval wilson_interval(double x, double n, double confidence);
/// Clopper-Pearson ("exact") interval: Beta quantiles; x == 0 gives lo 0, x == n gives hi 1.
/// Non-integer x/n (effective counts of stratified estimates) are accepted.
Interval clopper_pearson_interval(double x, double n, double confidence);

/// Leveugle et al., "Statistical fault injection: quantified error and confidence", DATE 2009:
/// n = N / (1 + e^2 (N - 1) / (t^2 p (1 - p))) for a population of N faults, margin e, the
/// confidence's z (t) and the expected proportion p (0.5 is the worst case). Not rounded.
double leveugle_sample_size(double population, double margin, double confidence, double p = 0.5);

/// A rate with both intervals.
struct Rate {
  std::uint64_t x = 0, n = 0;
  double p = 0;  // x / n (0 when n == 0)
  Interval wilson, clopper_pearson;
};
Rate rate(std::uint64_t x, std::uint64_t n, double confidence);

/// One stratum of a stratified sample: its size in the fault space (stored bits) and the counts.
struct StratumCount {
  double size = 0;
  std::uint64_t x = 0, n = 0;
};

/// Stratified estimate of a proportion over the whole fault space: p = sum W_h x_h / n_h with
/// W_h = size_h / sum size over the *sampled* strata (n_h > 0); var = sum W_h^2 p_h (1 - p_h) / n_h.
/// Intervals use the effective sample size n_eff = p (1 - p) / var (Korn & Graubard 1998) with
/// x_eff = p n_eff, so they reduce to the plain intervals for proportional allocation; when var == 0
/// (all strata 0 or all 1) n_eff is the total sample. `coverage` is the fraction of the fault space
/// in sampled strata (< 1: the estimate speaks for the covered part only).
struct StratifiedRate {
  double p = 0, variance = 0, n_eff = 0, coverage = 0;
  std::uint64_t n = 0;
  Interval wilson, clopper_pearson;
};
StratifiedRate stratified_rate(std::span<const StratumCount> strata, double confidence);

}  // namespace resil::inject

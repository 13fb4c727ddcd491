#include "resil/campaign/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "resil/core/error.hpp"

namespace resil::inject {

double normal_quantile(double p) {
  if (!(p > 0 && p < 1)) throw UsageError("normal quantile of " + std::to_string(p) + ": must be in (0, 1)");
  // Acklam (2003) coefficients.
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01,  -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double lo = 0.02425, hi = 1 - lo;
  double x;
  if (p < lo) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= hi) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // One Halley step against the exact CDF brings the relative error to machine precision.
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

double z_two_sided(double confidence) {
  if (!(confidence > 0 && confidence < 1)) throw UsageError("confidence " + std::to_string(confidence) + " must be in (0, 1)");
  return normal_quantile(1 - (1 - confidence) / 2);
}

namespace {

/// Continued fraction of the incomplete beta (Numerical Recipes' betacf, modified Lentz).
double beta_cf(double a, double b, double x) {
  constexpr double tiny = 1e-300, eps = 1e-16;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < tiny) d = tiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < eps) break;
  }
  return h;
}

}  // namespace

double incomplete_beta(double a, double b, double x) {
  if (!(a > 0 && b > 0)) throw UsageError("incomplete beta needs a, b > 0");
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  // The fraction converges fast for x < (a + 1) / (a + b + 2); use the symmetry otherwise.
  if (x < (a + 1) / (a + b + 2)) return front * beta_cf(a, b, x) / a;
  return 1 - front * beta_cf(b, a, 1 - x) / b;
}

double inverse_incomplete_beta(double a, double b, double p) {
  if (p <= 0) return 0;
  if (p >= 1) return 1;
  double lo = 0, hi = 1;
  for (int i = 0; i < 200 && hi - lo > 1e-15; ++i) {
    const double mid = 0.5 * (lo + hi);
    (incomplete_beta(a, b, mid) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

Interval wilson_interval(double x, double n, double confidence) {
  if (n <= 0) return {0, 1};
  const double z = z_two_sided(confidence), z2 = z * z;
  const double p = x / n;
  const double denom = 1 + z2 / n;
  const double centre = (p + z2 / (2 * n)) / denom;
  const double half = z / denom * std::sqrt(std::max(0.0, p * (1 - p) / n + z2 / (4 * n * n)));
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

Interval clopper_pearson_interval(double x, double n, double confidence) {
  if (n <= 0) return {0, 1};
  const double alpha = 1 - confidence;
  (void)z_two_sided(confidence);  // validates the confidence
  x = std::clamp(x, 0.0, n);
  const double lo = x <= 0 ? 0.0 : inverse_incomplete_beta(x, n - x + 1, alpha / 2);
  const double hi = x >= n ? 1.0 : inverse_incomplete_beta(x + 1, n - x, 1 - alpha / 2);
  return {lo, hi};
}

double leveugle_sample_size(double population, double margin, double confidence, double p) {
  if (!(population >= 1)) throw UsageError("sample size: the fault space is empty");
  if (!(margin > 0 && margin < 1)) throw UsageError("sample size: margin " + std::to_string(margin) + " must be in (0, 1)");
  if (!(p > 0 && p < 1)) throw UsageError("sample size: expected proportion " + std::to_string(p) + " must be in (0, 1)");
  const double t = z_two_sided(confidence);
  return population / (1 + margin * margin * (population - 1) / (t * t * p * (1 - p)));
}

Rate rate(std::uint64_t x, std::uint64_t n, double confidence) {
  Rate r;
  r.x = x;
  r.n = n;
  r.p = n ? static_cast<double>(x) / static_cast<double>(n) : 0.0;
  r.wilson = wilson_interval(static_cast<double>(x), static_cast<double>(n), confidence);
  r.clopper_pearson = clopper_pearson_interval(static_cast<double>(x), static_cast<double>(n), confidence);
  return r;
}

StratifiedRate stratified_rate(std::span<const StratumCount> strata, double confidence) {
  StratifiedRate s;
  double all = 0, sampled = 0;
  for (const auto& h : strata) {
    all += h.size;
    if (h.n > 0) sampled += h.size;
    s.n += h.n;
  }
  s.coverage = all > 0 ? sampled / all : 0;
  if (sampled <= 0) return s;
  for (const auto& h : strata) {
    if (h.n == 0) continue;
    const double w = h.size / sampled, n = static_cast<double>(h.n), ph = static_cast<double>(h.x) / n;
    s.p += w * ph;
    s.variance += w * w * ph * (1 - ph) / n;
  }
  s.n_eff = s.variance > 0 ? std::min(static_cast<double>(s.n), s.p * (1 - s.p) / s.variance) : static_cast<double>(s.n);
  if (s.variance > 0 && s.n_eff < 1) s.n_eff = 1;
  s.wilson = wilson_interval(s.p * s.n_eff, s.n_eff, confidence);
  s.clopper_pearson = clopper_pearson_interval(s.p * s.n_eff, s.n_eff, confidence);
  return s;
}

}  // namespace resil::inject

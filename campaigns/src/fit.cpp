#include "resil/campaign/fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "resil/core/error.hpp"

#include "json_fields.hpp"

namespace resil::inject {

using nlohmann::json;

using detail::JsonFields;

FitModel FitModel::parse(std::string_view text, const std::string& source) {
  FitModel m;
  const json j = detail::parse_object(text, source, "a fault model");
  // Bounds far beyond any real memory keep every product (rate x Mbit x ...) finite.
  constexpr double max_rate = 1e12, max_count = 1e15;
  const JsonFields f{j, "", source};
  m.name = "fault model";
  f.string("name", m.name);
  f.string("source", m.source);
  if (j.contains("illustrative")) {
    if (!j.at("illustrative").is_boolean()) f.bad("illustrative", "true or false", j.at("illustrative"));
    m.illustrative = j.at("illustrative").get<bool>();
  }
  if (j.contains("assumptions")) {
    const auto& a = j.at("assumptions");
    if (a.is_string()) m.assumptions.push_back(a.get<std::string>());
    else if (a.is_array() && std::all_of(a.begin(), a.end(), [](const json& e) { return e.is_string(); })) m.assumptions = a.get<std::vector<std::string>>();
    else f.bad("assumptions", "a string or an array of strings", a);
  }
  std::string dist = "log-uniform";
  f.string("raw_fit_distribution", dist);
  if (dist == "log-uniform") m.raw_distribution = RawRateDistribution::log_uniform;
  else if (dist == "uniform") m.raw_distribution = RawRateDistribution::uniform;
  else throw UsageError(source + ": raw_fit_distribution must be \"log-uniform\" or \"uniform\", not \"" + dist + "\"");
  m.raw_fit_per_mbit = *f.number_in("raw_fit_per_mbit", 0, max_rate, true);
  m.raw_lo = m.raw_hi = m.raw_fit_per_mbit;
  if (j.contains("raw_fit_per_mbit_range")) {
    const auto& r = j.at("raw_fit_per_mbit_range");
    if (!r.is_array() || r.size() != 2) f.bad("raw_fit_per_mbit_range", "[lo, hi]", r);
    const json pair = {{"lo", r.at(0)}, {"hi", r.at(1)}};
    const JsonFields rf{pair, "raw_fit_per_mbit_range.", source};
    m.raw_lo = *rf.number_in("lo", 0, max_rate);
    m.raw_hi = *rf.number_in("hi", 0, max_rate);
  }
  if (j.contains("mbit") && !j.at("mbit").is_null()) m.mbit = f.number_in("mbit", 0, 1e15);  // null: the campaign's fault space
  m.exposure = f.number_in("exposure", 0, 1).value_or(1.0);
  if (!j.contains("patterns") || !j.at("patterns").is_array()) f.bad("patterns", "an array of patterns", j.value("patterns", json()));
  for (const auto& p : j.at("patterns")) {
    if (!p.is_object()) f.bad("patterns", "an array of objects", p);
    FitPattern fp;
    const JsonFields pf{p, "patterns[" + std::to_string(m.patterns.size()) + "].", source};
    if (!p.contains("name") || !p.at("name").is_string()) pf.bad("name", "a string", p.value("name", json()));
    fp.name = p.at("name").get<std::string>();
    fp.count = pf.number_in("count", 0, max_count);
    // With counts, "p" is optional (count / total, filled in below).
    fp.p = fp.count && !p.contains("p") ? -1.0 : *pf.number_in("p", 0, 1, true);
    fp.ecc_corrected = pf.number_in("ecc_corrected", 0, 1).value_or(0.0);
    fp.ecc_detected = pf.number_in("ecc_detected", 0, 1).value_or(0.0);
    pf.string("campaign_model", fp.campaign_model);
    m.patterns.push_back(fp);
  }
  if (m.source.empty()) throw UsageError(source + ": \"source\" is required (where the numbers come from, or that they are illustrative)");
  if (!(m.raw_fit_per_mbit >= 0) || !(m.raw_lo <= m.raw_fit_per_mbit && m.raw_fit_per_mbit <= m.raw_hi))
    throw UsageError(source + ": raw_fit_per_mbit must be >= 0 and inside raw_fit_per_mbit_range");
  if (!(m.exposure >= 0 && m.exposure <= 1)) throw UsageError(source + ": exposure must be in [0, 1]");
  if (m.patterns.empty()) throw UsageError(source + ": \"patterns\" is empty");
  if (m.raw_distribution == RawRateDistribution::log_uniform && m.raw_lo < m.raw_hi && !(m.raw_lo > 0))
    throw UsageError(source + ": a log-uniform raw rate needs raw_fit_per_mbit_range[0] > 0 (or \"raw_fit_distribution\": \"uniform\")");
  if (m.has_counts()) {
    double total = 0;
    for (const auto& p : m.patterns) {
      if (!p.count) throw UsageError(source + ": pattern " + p.name + " has no \"count\" (give counts for every pattern or for none)");
      if (!(*p.count >= 0)) throw UsageError(source + ": pattern " + p.name + ": count must be >= 0");
      total += *p.count;
    }
    if (!(total > 0)) throw UsageError(source + ": pattern counts sum to 0");
    for (auto& p : m.patterns) {
      const double from_counts = *p.count / total;
      // A stated p may be rounded; it must still be the same mix.
      if (p.p >= 0 && std::fabs(p.p - from_counts) > 0.005)
        throw UsageError(source + ": pattern " + p.name + ": p " + std::to_string(p.p) + " disagrees with count / total " + std::to_string(from_counts));
      p.p = from_counts;
    }
  } else {
    for (const auto& p : m.patterns)
      if (p.count) throw UsageError(source + ": pattern " + m.patterns.front().name + " has no \"count\" (give counts for every pattern or for none)");
  }
  double sum = 0;
  for (const auto& p : m.patterns) {
    if (!(p.p >= 0) || !(p.ecc_corrected >= 0) || !(p.ecc_detected >= 0) || p.ecc_corrected + p.ecc_detected > 1 + 1e-12)
      throw UsageError(source + ": pattern " + p.name + ": probabilities must be >= 0 and ecc_corrected + ecc_detected <= 1");
    sum += p.p;
  }
  if (std::fabs(sum - 1) > 1e-6) throw UsageError(source + ": pattern probabilities sum to " + std::to_string(sum) + ", not 1");
  return m;
}

json FitResult::to_json() const {
  auto v = [](const FitValue& f) {
    json o{{"fit", f.value}, {"lo", f.lo}, {"hi", f.hi}, {"complete", f.complete}};
    if (f.mc) o["mc"] = {{"mean", f.mc->mean}, {"median", f.mc->median}, {"p2_5", f.mc->p2_5}, {"p97_5", f.mc->p97_5}};
    return o;
  };
  json j{{"mbit", mbit}, {"raw_fit", raw_fit}, {"sdc", v(sdc)}, {"critical_sdc", v(critical_sdc)}, {"due", v(due)},
         {"sdc_low_level_only", v(sdc_low_level_only)}, {"sdc_injection_only", v(sdc_injection_only)}, {"per_pattern", per_pattern},
         {"bounds", "conservative: interval arithmetic over the raw-rate range and each pattern's Clopper-Pearson interval"}};
  if (monte_carlo.draws > 0)
    j["monte_carlo"] = {{"draws", monte_carlo.draws}, {"seed", monte_carlo.seed},
                        {"raw_rate", raw_distribution == RawRateDistribution::log_uniform ? "log-uniform over raw_fit_per_mbit_range" : "uniform over raw_fit_per_mbit_range"},
                        {"pattern_mix", dirichlet_mix ? "Dirichlet(count + 1/2)" : "fixed"},
                        {"p_outcome_given_pattern", "Jeffreys posterior Beta(x + 1/2, n - x + 1/2)"},
                        {"summary", "mean, median, 2.5 and 97.5 percentiles (linear interpolation)"}};
  return j;
}

double sample_gamma(double shape, Rng& rng) {
  if (!(shape > 0) || !std::isfinite(shape)) throw UsageError("sample_gamma: shape must be finite and > 0, not " + std::to_string(shape));
  if (shape < 1) {
    // Gamma(a) = Gamma(a + 1) U^(1/a) (Marsaglia and Tsang, section 6); U in (0, 1].
    const double g = sample_gamma(shape + 1, rng);
    return g * std::pow(1.0 - rng.uniform(), 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = 0, v = 0;
    do {
      x = rng.normal();
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = rng.uniform();
    const double x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2) return d * v;  // squeeze: accepts ~98% without a log
    if (std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v))) return d * v;
  }
}

double sample_beta(double a, double b, Rng& rng) {
  const double x = sample_gamma(a, rng), y = sample_gamma(b, rng);
  // Both underflow to 0 only for tiny shapes; split the mass evenly rather than divide 0 by 0.
  return x + y > 0 ? x / (x + y) : 0.5;
}

void sample_dirichlet(std::span<const double> alpha, std::span<double> out, Rng& rng) {
  if (alpha.size() != out.size()) throw UsageError("sample_dirichlet: alpha and out differ in size");
  double sum = 0;
  for (std::size_t i = 0; i < alpha.size(); ++i) sum += out[i] = sample_gamma(alpha[i], rng);
  for (auto& o : out) o = sum > 0 ? o / sum : 1.0 / static_cast<double>(out.size());
}

FitDistribution summarize_draws(std::vector<double>& draws) {
  if (draws.empty()) return {};
  std::sort(draws.begin(), draws.end());
  auto quantile = [&](double q) {
    const double h = q * static_cast<double>(draws.size() - 1);
    const auto i = static_cast<std::size_t>(h);
    if (i + 1 >= draws.size()) return draws.back();
    return draws[i] + (h - static_cast<double>(i)) * (draws[i + 1] - draws[i]);
  };
  double sum = 0;
  for (double d : draws) sum += d;
  return {sum / static_cast<double>(draws.size()), quantile(0.5), quantile(0.025), quantile(0.975)};
}

namespace {

double sample_raw(const FitModel& m, Rng& rng) {
  if (!(m.raw_lo < m.raw_hi)) return m.raw_fit_per_mbit;
  const double u = rng.uniform();
  if (m.raw_distribution == RawRateDistribution::uniform) return m.raw_lo + u * (m.raw_hi - m.raw_lo);
  // Log-uniform: the range spans a factor, and we know the order of magnitude better than the value.
  return m.raw_lo * std::exp(u * std::log(m.raw_hi / m.raw_lo));
}

/// Monte Carlo over the raw rate, the pattern mix and P(outcome | pattern); fills r's mc fields.
void propagate(const FitModel& m, const std::vector<PatternEvidence>& ev, const PatternEvidence& single, double scale,
               FitMonteCarlo mc, FitResult& r) {
  const std::size_t np = m.patterns.size();
  // Patterns measured by the same campaign (same campaign_model and counts) share one posterior
  // draw: it is one unknown quantity, not several independent ones.
  std::vector<std::size_t> group(np);
  std::vector<std::size_t> group_rep;  // a pattern index per group
  using Key = std::tuple<std::string, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t>;
  std::map<Key, std::size_t> by_model;
  for (std::size_t k = 0; k < np; ++k) {
    const auto& cm = m.patterns[k].campaign_model;
    const Key key{cm, ev[k].n, ev[k].sdc, ev[k].critical_sdc, ev[k].due};
    const auto it = cm.empty() ? by_model.end() : by_model.find(key);
    if (it != by_model.end()) {
      group[k] = it->second;
      continue;
    }
    group[k] = group_rep.size();
    if (!cm.empty()) by_model.emplace(key, group_rep.size());
    group_rep.push_back(k);
  }
  std::vector<double> alpha(np), mix(np), q_sdc(group_rep.size()), q_crit(group_rep.size()), q_due(group_rep.size());
  for (std::size_t k = 0; k < np; ++k) {
    alpha[k] = m.patterns[k].count.value_or(0) + 0.5;
    mix[k] = m.patterns[k].p;
  }
  const auto n = static_cast<std::size_t>(mc.draws);
  std::vector<double> sdc(n), crit(n), due(n), low(n), inj(n);
  for (std::size_t i = 0; i < n; ++i) {
    Rng rng(mc.seed, i);
    const double raw = sample_raw(m, rng) * scale;
    if (r.dirichlet_mix) sample_dirichlet(alpha, mix, rng);
    for (std::size_t g = 0; g < group_rep.size(); ++g) {
      const auto& e = ev[group_rep[g]];
      const auto nn = static_cast<double>(e.n);
      q_sdc[g] = sample_jeffreys(static_cast<double>(e.sdc), nn, rng);
      q_crit[g] = sample_jeffreys(static_cast<double>(e.critical_sdc), nn, rng);
      q_due[g] = sample_jeffreys(static_cast<double>(e.due), nn, rng);
    }
    const double q_single = sample_jeffreys(static_cast<double>(single.sdc), static_cast<double>(single.n), rng);
    double s = 0, c = 0, d = 0, esc = 0;
    for (std::size_t k = 0; k < np; ++k) {
      const auto& p = m.patterns[k];
      const double escape = 1 - p.ecc_corrected - p.ecc_detected;
      esc += mix[k] * escape;
      s += mix[k] * escape * q_sdc[group[k]];
      c += mix[k] * escape * q_crit[group[k]];
      d += mix[k] * (p.ecc_detected + escape * q_due[group[k]]);
    }
    sdc[i] = raw * s;
    crit[i] = raw * c;
    due[i] = raw * d;
    low[i] = raw * esc;
    inj[i] = raw * q_single;
  }
  r.sdc.mc = summarize_draws(sdc);
  r.critical_sdc.mc = summarize_draws(crit);
  r.due.mc = summarize_draws(due);
  r.sdc_low_level_only.mc = summarize_draws(low);
  r.sdc_injection_only.mc = summarize_draws(inj);
}

}  // namespace

FitResult compute_fit(const FitModel& m, const std::vector<PatternEvidence>& ev, const PatternEvidence& single, double default_mbit,
                      double confidence, FitMonteCarlo mc) {
  if (ev.size() != m.patterns.size()) throw UsageError("fit: evidence for " + std::to_string(ev.size()) + " of " + std::to_string(m.patterns.size()) + " patterns");
  FitResult r;
  r.mbit = m.mbit ? *m.mbit : default_mbit;
  r.monte_carlo = mc;
  r.dirichlet_mix = m.has_counts();
  r.raw_distribution = m.raw_distribution;
  const double scale = r.mbit * m.exposure;  // FIT = upsets per 1e9 device-hours
  r.raw_fit = m.raw_fit_per_mbit * scale;
  const double raw_lo = m.raw_lo * scale, raw_hi = m.raw_hi * scale;
  r.per_pattern = json::array();
  // Each FIT is raw x sum_k P_k (escape_k P(outcome | k) [+ detected_k]); monotone in every factor,
  // so plugging in the interval ends gives conservative bounds. With counts the mix is uncertain too:
  // the bounds then also let each P_k range over its Clopper-Pearson interval (not renormalised, so
  // still conservative).
  double sdc = 0, sdc_lo = 0, sdc_hi = 0, crit = 0, crit_lo = 0, crit_hi = 0, due = 0, due_lo = 0, due_hi = 0, esc = 0, esc_lo = 0, esc_hi = 0;
  double total_count = 0;
  for (const auto& p : m.patterns) total_count += p.count.value_or(0);
  bool complete = true;
  for (std::size_t k = 0; k < m.patterns.size(); ++k) {
    const auto& p = m.patterns[k];
    double pl = p.p, ph = p.p;
    if (p.count) {
      const auto iv = clopper_pearson_interval(*p.count, total_count, confidence);
      pl = iv.lo;
      ph = iv.hi;
    }
    const double escape = 1 - p.ecc_corrected - p.ecc_detected;
    esc += p.p * escape;
    esc_lo += pl * escape;
    esc_hi += ph * escape;
    const auto s = rate(ev[k].sdc, ev[k].n, confidence), c = rate(ev[k].critical_sdc, ev[k].n, confidence), d = rate(ev[k].due, ev[k].n, confidence);
    if (!ev[k].measured() && p.p * escape > 0) complete = false;
    sdc += p.p * escape * s.p;
    sdc_lo += pl * escape * s.clopper_pearson.lo;
    sdc_hi += ph * escape * s.clopper_pearson.hi;
    crit += p.p * escape * c.p;
    crit_lo += pl * escape * c.clopper_pearson.lo;
    crit_hi += ph * escape * c.clopper_pearson.hi;
    due += p.p * (p.ecc_detected + escape * d.p);
    due_lo += pl * (p.ecc_detected + escape * d.clopper_pearson.lo);
    due_hi += ph * (p.ecc_detected + escape * d.clopper_pearson.hi);
    json pp{{"name", p.name}, {"p", p.p}, {"ecc_corrected", p.ecc_corrected}, {"ecc_detected", p.ecc_detected},
            {"campaign_model", p.campaign_model}, {"trials", ev[k].n}, {"measured", ev[k].measured()},
            {"p_sdc", s.p}, {"p_sdc_cp", {s.clopper_pearson.lo, s.clopper_pearson.hi}},
            {"p_critical_sdc", c.p}, {"p_due", d.p}, {"p_due_cp", {d.clopper_pearson.lo, d.clopper_pearson.hi}},
            {"sdc_fit", r.raw_fit * p.p * escape * s.p}};
    if (p.count) pp["count"] = *p.count;
    r.per_pattern.push_back(std::move(pp));
  }
  r.sdc = {r.raw_fit * sdc, raw_lo * sdc_lo, raw_hi * sdc_hi, complete, {}};
  r.critical_sdc = {r.raw_fit * crit, raw_lo * crit_lo, raw_hi * crit_hi, complete, {}};
  r.due = {r.raw_fit * due, raw_lo * due_lo, raw_hi * due_hi, complete, {}};
  r.sdc_low_level_only = {r.raw_fit * esc, raw_lo * esc_lo, raw_hi * esc_hi, true, {}};
  const auto s1 = rate(single.sdc, single.n, confidence);
  r.sdc_injection_only = {r.raw_fit * s1.p, raw_lo * s1.clopper_pearson.lo, raw_hi * s1.clopper_pearson.hi, single.measured(), {}};
  if (mc.draws > 0) propagate(m, ev, single, scale, mc, r);
  return r;
}

}  // namespace resil::inject

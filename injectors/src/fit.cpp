#include "resil/inject/fit.hpp"

#include <cmath>

#include "resil/core/error.hpp"

namespace resil::inject {

using nlohmann::json;

FitModel FitModel::parse(std::string_view text, const std::string& source) {
  FitModel m;
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    throw UsageError(source + ": not valid JSON: " + e.what());
  }
  try {
    m.name = j.value("name", std::string("fault model"));
    m.source = j.value("source", std::string());
    m.illustrative = j.value("illustrative", false);
    m.raw_fit_per_mbit = j.at("raw_fit_per_mbit").get<double>();
    m.raw_lo = m.raw_hi = m.raw_fit_per_mbit;
    if (j.contains("raw_fit_per_mbit_range")) {
      m.raw_lo = j.at("raw_fit_per_mbit_range").at(0).get<double>();
      m.raw_hi = j.at("raw_fit_per_mbit_range").at(1).get<double>();
    }
    if (j.contains("mbit") && !j.at("mbit").is_null()) m.mbit = j.at("mbit").get<double>();
    m.exposure = j.value("exposure", 1.0);
    for (const auto& p : j.at("patterns")) {
      FitPattern fp;
      fp.name = p.at("name").get<std::string>();
      fp.p = p.at("p").get<double>();
      fp.ecc_corrected = p.value("ecc_corrected", 0.0);
      fp.ecc_detected = p.value("ecc_detected", 0.0);
      fp.campaign_model = p.value("campaign_model", std::string());
      m.patterns.push_back(fp);
    }
  } catch (const json::exception& e) {
    throw UsageError(source + ": bad fault model: " + e.what());
  }
  if (m.source.empty()) throw UsageError(source + ": \"source\" is required (where the numbers come from, or that they are illustrative)");
  if (!(m.raw_fit_per_mbit >= 0) || !(m.raw_lo <= m.raw_fit_per_mbit && m.raw_fit_per_mbit <= m.raw_hi))
    throw UsageError(source + ": raw_fit_per_mbit must be >= 0 and inside raw_fit_per_mbit_range");
  if (!(m.exposure >= 0 && m.exposure <= 1)) throw UsageError(source + ": exposure must be in [0, 1]");
  if (m.patterns.empty()) throw UsageError(source + ": \"patterns\" is empty");
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
  auto v = [](const FitValue& f) { return json{{"fit", f.value}, {"lo", f.lo}, {"hi", f.hi}, {"complete", f.complete}}; };
  return {{"mbit", mbit}, {"raw_fit", raw_fit}, {"sdc", v(sdc)}, {"critical_sdc", v(critical_sdc)}, {"due", v(due)},
          {"sdc_low_level_only", v(sdc_low_level_only)}, {"sdc_injection_only", v(sdc_injection_only)}, {"per_pattern", per_pattern}};
}

FitResult compute_fit(const FitModel& m, const std::vector<PatternEvidence>& ev, const PatternEvidence& single, double default_mbit,
                      double confidence) {
  if (ev.size() != m.patterns.size()) throw UsageError("fit: evidence for " + std::to_string(ev.size()) + " of " + std::to_string(m.patterns.size()) + " patterns");
  FitResult r;
  r.mbit = m.mbit ? *m.mbit : default_mbit;
  const double scale = r.mbit * m.exposure;  // FIT = upsets per 1e9 device-hours
  r.raw_fit = m.raw_fit_per_mbit * scale;
  const double raw_lo = m.raw_lo * scale, raw_hi = m.raw_hi * scale;
  r.per_pattern = json::array();
  // Each FIT is raw x sum_k P_k (escape_k P(outcome | k) [+ detected_k]); monotone in every factor,
  // so plugging in the interval ends gives conservative bounds.
  double sdc = 0, sdc_lo = 0, sdc_hi = 0, crit = 0, crit_lo = 0, crit_hi = 0, due = 0, due_lo = 0, due_hi = 0, esc = 0;
  bool complete = true;
  for (std::size_t k = 0; k < m.patterns.size(); ++k) {
    const auto& p = m.patterns[k];
    const double escape = 1 - p.ecc_corrected - p.ecc_detected;
    esc += p.p * escape;
    const auto s = rate(ev[k].sdc, ev[k].n, confidence), c = rate(ev[k].critical_sdc, ev[k].n, confidence), d = rate(ev[k].due, ev[k].n, confidence);
    if (!ev[k].measured() && p.p * escape > 0) complete = false;
    sdc += p.p * escape * s.p;
    sdc_lo += p.p * escape * s.clopper_pearson.lo;
    sdc_hi += p.p * escape * s.clopper_pearson.hi;
    crit += p.p * escape * c.p;
    crit_lo += p.p * escape * c.clopper_pearson.lo;
    crit_hi += p.p * escape * c.clopper_pearson.hi;
    due += p.p * (p.ecc_detected + escape * d.p);
    due_lo += p.p * (p.ecc_detected + escape * d.clopper_pearson.lo);
    due_hi += p.p * (p.ecc_detected + escape * d.clopper_pearson.hi);
    r.per_pattern.push_back({{"name", p.name}, {"p", p.p}, {"ecc_corrected", p.ecc_corrected}, {"ecc_detected", p.ecc_detected},
                             {"campaign_model", p.campaign_model}, {"trials", ev[k].n}, {"measured", ev[k].measured()},
                             {"p_sdc", s.p}, {"p_sdc_cp", {s.clopper_pearson.lo, s.clopper_pearson.hi}},
                             {"p_critical_sdc", c.p}, {"p_due", d.p}, {"p_due_cp", {d.clopper_pearson.lo, d.clopper_pearson.hi}},
                             {"sdc_fit", r.raw_fit * p.p * escape * s.p}});
  }
  r.sdc = {r.raw_fit * sdc, raw_lo * sdc_lo, raw_hi * sdc_hi, complete};
  r.critical_sdc = {r.raw_fit * crit, raw_lo * crit_lo, raw_hi * crit_hi, complete};
  r.due = {r.raw_fit * due, raw_lo * due_lo, raw_hi * due_hi, complete};
  r.sdc_low_level_only = {r.raw_fit * esc, raw_lo * esc, raw_hi * esc, true};
  const auto s1 = rate(single.sdc, single.n, confidence);
  r.sdc_injection_only = {r.raw_fit * s1.p, raw_lo * s1.clopper_pearson.lo, raw_hi * s1.clopper_pearson.hi, single.measured()};
  return r;
}

}  // namespace resil::inject

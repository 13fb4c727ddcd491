#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "resil/app/main.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"
#include "resil/inject/campaign.hpp"
#include "resil/inject/campaign_report.hpp"
#include "resil/inject/fit.hpp"

namespace resil::flip {

CLI::App* setup_fit(CLI::App& app, FitOptions& o) {
  auto* c = app.add_subcommand("fit", "Two-level SDC/DUE FIT rates (Hari et al., arXiv 2005.01445): a fault model x campaign P(outcome | pattern).");
  c->footer(
      "Examples:\n"
      "  ckpt-flip fit --fault-model examples/fault-models/dram-illustrative.json --results res-flip --results res-adj2\n"
      "  ckpt-flip fit --fault-model examples/fault-models/dram-field-secded.json --results res-flip --results res-adj2 --seed 1\n"
      "  ckpt-flip fit --fault-model fm.json --results res --mbit 1024 --draws 100000 --json fit.json\n"
      "Each pattern's \"campaign_model\" (e.g. flip, adjacent:2) picks the --results campaign run with that fault model;\n"
      "unmeasured patterns give [0, 1] bounds. Output next to it: what the low-level model alone and the single-bit\n"
      "campaign alone would say. Uncertainty: conservative bounds (interval arithmetic) and a seeded Monte Carlo\n"
      "propagation (raw rate log-uniform over its range, Jeffreys posteriors of P(outcome | pattern), Dirichlet\n"
      "pattern mix when the model gives counts): median and 2.5/97.5 percentiles. See docs/fault-models.md.");
  c->add_option("--fault-model", o.fault_model, "fault model JSON (raw FIT/Mbit, exposure, ECC, patterns)")->required();
  c->add_option("--results", o.results, "campaign directory (repeatable; one per pattern's fault model)")->required()->check(CLI::ExistingDirectory);
  c->add_option("--mbit", o.mbit, "exposed memory in Mbit (2^20 bits); default: the fault model's, else the campaign's fault space")->check(CLI::Range(0.0, 1e15));
  c->add_option("--draws", o.draws, "Monte Carlo draws for the propagated uncertainty (0: conservative bounds only)")->check(CLI::Range(std::uint64_t{0}, std::uint64_t{100000000}));
  c->add_option("--seed", o.seed, "Monte Carlo seed (default: drawn once and printed)")->check(app::uint64_value());
  c->add_option("--json", o.json, "write the result as JSON");
  return c;
}

namespace {

// Columns: point, conservative bounds, then (with a Monte Carlo run) median, 95% interval and mean.
std::string fit_text(const inject::FitValue& v) {
  auto cell = [](std::size_t width, const char* fmt, auto... x) {
    char b[128];
    const int n = std::snprintf(b, sizeof b, fmt, x...);
    std::string c(b, static_cast<std::size_t>(std::clamp(n, 0, static_cast<int>(sizeof b) - 1)));
    c.resize(std::max(c.size() + (width > 0 ? 1 : 0), width), ' ');
    return c;
  };
  std::string out = cell(11, "%.4g", v.value) + cell(26, "[%.4g, %.4g]", v.lo, v.hi);
  if (v.mc) out += cell(11, "%.4g", v.mc->median) + cell(26, "[%.4g, %.4g]", v.mc->p2_5, v.mc->p97_5) + cell(0, "%.4g", v.mc->mean);
  if (!v.complete) out += "  (incomplete: unmeasured patterns)";
  return out;
}

}  // namespace

int run_fit(const FitOptions& o) {
  const auto fm = inject::FitModel::parse(ckpt::fs::read_file(o.fault_model), o.fault_model);
  // Evidence per campaign fault model.
  std::map<std::string, inject::PatternEvidence> ev;
  double space_bits = 0, confidence = 0.95;
  for (const auto& dir : o.results) {
    const auto meta = nlohmann::json::parse(ckpt::fs::read_file(std::filesystem::path(dir) / "campaign.json"));
    const std::string model = meta.at("config").at("inject").at("model").get<std::string>();
    if (meta.at("config").at("inject").value("flips", 1) != 1)
      std::cerr << "ckpt-flip: warning: " << dir << " injects " << meta.at("config").at("inject").at("flips") << " faults per trial; the fit assumes one\n";
    space_bits = std::max(space_bits, meta.at("space").at("total_bits").get<double>());
    confidence = meta.at("config").value("confidence", 0.95);
    auto& e = ev[model];
    const std::string strata = meta.at("config").at("inject").value("strata", std::string("none"));
    if (strata != "none") {
      // Stratified (unevenly allocated) campaign: use the estimate reweighted to the whole fault
      // space, as effective counts (n_eff, p n_eff) of the report.
      const auto rep = inject::build_report(dir);
      const auto& rw = rep.at("reweighted").at(strata);
      auto eff = [&](const nlohmann::json& r, std::uint64_t& x) {
        e.n = static_cast<std::uint64_t>(std::llround(r.at("n_eff").get<double>()));
        x = static_cast<std::uint64_t>(std::llround(r.at("p").get<double>() * r.at("n_eff").get<double>()));
      };
      std::uint64_t n_sdc = 0;
      eff(rw.at("classes").at("critical_sdc"), e.critical_sdc);
      const auto n_crit = e.n;
      eff(rw.at("groups").at("due"), e.due);
      const auto n_due = e.n;
      eff(rw.at("groups").at("sdc"), n_sdc);
      e.sdc = n_sdc;
      // One n for all three (the smallest effective size: the widest intervals).
      e.n = std::min({e.n, n_crit, n_due});
      e.sdc = std::min(e.sdc, e.n);
      e.critical_sdc = std::min(e.critical_sdc, e.n);
      e.due = std::min(e.due, e.n);
      std::cout << dir << ": stratified by " << strata << "; using the reweighted estimates (effective n " << e.n << ")\n";
      continue;
    }
    for (const auto& [t, r] : inject::read_results(dir)) {
      const std::string cls = r.at("class").get<std::string>();
      ++e.n;
      if (cls == "critical_sdc") ++e.critical_sdc;
      if (cls == "critical_sdc" || cls == "tolerable_sdc") ++e.sdc;
      if (cls == "load_failure" || cls == "hang" || cls == "crash" || cls == "nan_at_load" || cls == "nan_later") ++e.due;
    }
  }
  std::vector<inject::PatternEvidence> per;
  for (const auto& p : fm.patterns) per.push_back(ev.count(p.campaign_model) ? ev[p.campaign_model] : inject::PatternEvidence{});
  const inject::PatternEvidence single = ev.count("flip") ? ev["flip"] : inject::PatternEvidence{};
  const double mbit = o.mbit ? *o.mbit : space_bits / 1048576.0;
  auto model = fm;
  if (o.mbit) model.mbit = o.mbit;
  inject::FitMonteCarlo mc{o.draws, o.seed ? *o.seed : resil::draw_seed()};
  const auto r = inject::compute_fit(model, per, single, mbit, confidence, mc);
  std::cout << "fault model: " << fm.name << (fm.illustrative ? " (ILLUSTRATIVE values)" : "") << "\n  source: " << fm.source << "\n";
  for (const auto& a : fm.assumptions) std::cout << "  assumption: " << a << "\n";
  std::cout << "exposed memory: " << r.mbit << " Mbit, exposure " << fm.exposure << "; raw upsets " << r.raw_fit << " FIT (range ["
            << fm.raw_lo * r.mbit * fm.exposure << ", " << fm.raw_hi * r.mbit * fm.exposure << "])\n\n";
  std::cout << "pattern            P      ECC corr  ECC det  trials  P(SDC | pattern) [CP]       P(DUE | pattern)\n";
  for (const auto& p : r.per_pattern) {
    char b[256];
    std::snprintf(b, sizeof b, "%-18s %-6.3g %-9.3g %-8.3g %-7llu %s\n", p["name"].get<std::string>().c_str(), p["p"].get<double>(),
                  p["ecc_corrected"].get<double>(), p["ecc_detected"].get<double>(), static_cast<unsigned long long>(p["trials"].get<std::uint64_t>()),
                  p["measured"].get<bool>()
                      ? (std::to_string(p["p_sdc"].get<double>()) + " [" + std::to_string(p["p_sdc_cp"][0].get<double>()) + ", " +
                         std::to_string(p["p_sdc_cp"][1].get<double>()) + "]   " + std::to_string(p["p_due"].get<double>()))
                            .c_str()
                      : ("not measured (no --results with model " + p["campaign_model"].get<std::string>() + ")").c_str());
    std::cout << b;
  }
  const char* head = mc.draws > 0 ? "FIT        conservative bounds           MC median  MC 95% interval           MC mean\n"
                                   : "FIT        conservative bounds\n";
  std::cout << "\ntwo-level (fault model x campaign):                 " << head
            << "  SDC (any)                                         " << fit_text(r.sdc) << "\n"
            << "  SDC (critical)                                    " << fit_text(r.critical_sdc) << "\n"
            << "  DUE                                               " << fit_text(r.due) << "\n"
            << "single-level, for comparison (SDC):\n"
            << "  low-level only (every upset past ECC is an SDC)   " << fit_text(r.sdc_low_level_only) << "\n"
            << "  injection only (single-bit P(SDC) x raw rate)     " << fit_text(r.sdc_injection_only) << "\n"
            << "conservative bounds: interval arithmetic over the raw-rate range and each pattern's Clopper-Pearson interval ("
            << confidence * 100 << "%)\n";
  if (mc.draws > 0)
    std::cout << "Monte Carlo: " << mc.draws << " draws, seed " << mc.seed << (o.seed ? "" : " (drawn; pass --seed to repeat)") << "; raw rate "
              << (fm.raw_distribution == inject::RawRateDistribution::log_uniform ? "log-uniform" : "uniform") << " over its range, pattern mix "
              << (r.dirichlet_mix ? "Dirichlet(count + 1/2)" : "fixed") << ", P(outcome | pattern) from Jeffreys Beta(x + 1/2, n - x + 1/2)\n";
  if (!o.json.empty()) {
    auto j = r.to_json();
    j["fault_model"] = {{"name", fm.name}, {"source", fm.source}, {"illustrative", fm.illustrative}, {"assumptions", fm.assumptions}, {"file", o.fault_model}};
    ckpt::fs::write_file_atomic(o.json, j.dump(2) + "\n");
    std::cout << "JSON: " << o.json << "\n";
  }
  return 0;
}

}  // namespace resil::flip

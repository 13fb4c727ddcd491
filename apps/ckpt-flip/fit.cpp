#include <algorithm>
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "resil/app/validators.hpp"
#include "resil/app/main.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"
#include "resil/campaign/campaign.hpp"
#include "resil/campaign/report.hpp"
#include "resil/campaign/fit.hpp"

namespace resil::app::ckpt_flip {


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
      "pattern mix when the model gives counts): median and 2.5/97.5 percentiles. See docs/reference/fault-models.md.");
  c->add_option("--fault-model", o.fault_model, "fault model JSON (raw FIT/Mbit, exposure, ECC, patterns)")->required();
  c->add_option("--results", o.results, "campaign directory (repeatable; one per pattern's fault model)")->required()->check(app::NonEmptyPath());
  c->add_option("--mbit", o.mbit, "exposed memory in Mbit (2^20 bits); default: the fault model's, else the campaign's fault space")->check(app::Real(0.0, 1e15));
  c->add_option("--draws", o.draws, "Monte Carlo draws for the propagated uncertainty (0: conservative bounds only)")->transform(app::Decimal(0, 100000000));
  c->add_option("--seed", o.seed, "Monte Carlo seed (default: drawn once and printed)")->transform(app::Uint64());
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
  require_report_outputs_apart({{"--fault-model", o.fault_model, false}, {"--json", o.json, true}}, o.results);
  const auto fm = inject::FitModel::parse(ckpt::fs::read_file(o.fault_model), o.fault_model);
  // Evidence per campaign fault model.
  const auto evidence = inject::campaign_evidence(o.results);
  for (const auto& w : evidence.warnings) std::cerr << "ckpt-flip: warning: " << w << "\n";
  for (const auto& n : evidence.notes) std::cout << n << "\n";
  auto ev = evidence.per_model;
  const double space_bits = evidence.space_bits, confidence = evidence.confidence;
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

}  // namespace resil::app::ckpt_flip

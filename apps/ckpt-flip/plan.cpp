#include <cmath>
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "resil/app/choice.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/io.hpp"
#include "resil/campaign/campaign.hpp"
#include "resil/inject/counts.hpp"
#include "resil/inject/plan.hpp"
#include "resil/campaign/stats.hpp"

namespace resil::app::ckpt_flip {

CLI::App* setup_plan(CLI::App& app, PlanOptions& o) {
  auto* c = app.add_subcommand("plan", "Campaign size: Leveugle et al. (DATE 2009) sample size for a fault space, margin and confidence.");
  c->footer(
      "Examples:\n"
      "  ckpt-flip plan ckpt.h5                                   # 1% margin, 95% confidence, p = 0.5\n"
      "  ckpt-flip plan ckpt.h5 --margin 0.05 --confidence 0.99 --role model --bits exponent\n"
      "  ckpt-flip plan study.json --margin 0.02                  # the selection of a campaign config\n"
      "  ckpt-flip plan model.pt --role model                     # a torch.save file (any format ckpt-flip reads)\n"
      "n = N / (1 + e^2 (N - 1) / (t^2 p (1 - p))); N = selected stored bits x distinct fault patterns per site\n"
      "(1 for flip/adjacent/stuck-at/zero, the table size for pattern:FILE; random models count sites).");
  c->add_option("FILE", o.input, "checkpoint (HDF5, torch.save, safetensors, .npy/.npz, or an mp manifest) or campaign configuration (.json)")
      ->required();
  c->add_option("--margin", o.margin, "error margin e (absolute)")->check(CLI::Range(1e-6, 0.5));
  c->add_option("--confidence", o.confidence, "confidence level")->check(CLI::Range(0.5, 0.999999));
  c->add_option("--p", o.p, "expected proportion (0.5: worst case)")->check(CLI::Range(1e-6, 1 - 1e-6));
  c->add_option("--include", o.include, "glob on dataset paths to include (repeatable)");
  c->add_option("--exclude", o.exclude, "glob on dataset paths to exclude (repeatable)");
  app::add_choice(*c, "--role", o.role, inject::role_names, "model, master, optimizer or all");
  add_bits_option(*c, o.bits, "bits that may be hit");
  c->add_option("--model", o.model, "fault model (for the number of patterns per site)");
  app::add_choice(*c, "--as", o.as, inject::as_names, "treat unsigned 16-bit datasets as this dtype (bf16: bfloat16, f16: IEEE half)");
  add_format_option(*c, o.format);
  c->add_flag("--json", o.json, "JSON output");
  return c;
}

namespace {
// Bit counts of the fault space arrive as doubles (inject::FaultSpace) and may exceed 64 bits
// (2^62 f64 elements: 2^68 bits): printed as whole numbers, in JSON like inject::count_json.
std::string bits_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}
nlohmann::json bits_json(double v) {
  if (v <= static_cast<double>(inject::json_exact_max)) return static_cast<std::uint64_t>(v);
  return bits_text(v);
}
}  // namespace

int run_plan(const PlanOptions& o) {
  inject::CampaignConfig cfg;
  const bool is_config = o.input.ends_with(".json") && !o.input.ends_with(".manifest.json");
  if (is_config) {
    cfg = inject::CampaignConfig::load(o.input);
    if (cfg.kind == inject::TrialKind::ec_train)
      throw UsageError(o.input + ": a campaign of kind ec-train flips a running job's memory, which plan does not enumerate; it sizes checkpoint campaigns");
  } else {
    cfg.checkpoint = o.input;
    cfg.include = o.include;
    cfg.exclude = o.exclude;
    cfg.role = o.role;
    cfg.bits = o.bits;
    cfg.model = o.model;
    cfg.as = o.as;
  }
  if (o.format != inject::Format::automatic) cfg.format = o.format;
  const auto fm = inject::FaultModel::parse(cfg.model);
  double patterns = 1;
  if (fm.kind() == inject::FaultModel::Kind::pattern) {
    const auto spec = cfg.model.substr(cfg.model.find(':') + 1);
    patterns = static_cast<double>(inject::parse_pattern_table(ckpt::fs::read_file(spec), spec).entries.size());
  }
  const auto space = inject::fault_space(cfg);
  const double N = space.total * patterns;
  const double n = inject::leveugle_sample_size(N, o.margin, o.confidence, o.p);
  const auto trials = static_cast<std::uint64_t>(std::ceil(n));
  nlohmann::json j = {{"checkpoint", cfg.checkpoint}, {"selected_bits", bits_json(space.total)}, {"patterns_per_site", patterns}, {"population", N},
                      {"margin", o.margin}, {"confidence", o.confidence}, {"p", o.p}, {"trials", trials}, {"by", nlohmann::json::object()}};
  for (const auto& [dim, m] : space.by) {
    if (dim == "tensor" || dim == "bit") continue;
    for (const auto& [k, bits] : m) {
      const double nk = inject::leveugle_sample_size(std::max(1.0, bits * patterns), o.margin, o.confidence, o.p);
      j["by"][dim][k] = {{"bits", bits_json(bits)}, {"share", bits / space.total}, {"trials_for_own_margin", static_cast<std::uint64_t>(std::ceil(nk))}};
    }
  }
  if (o.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "fault space: " << bits_text(space.total) << " selected stored bits x " << patterns << " pattern(s) = " << N
            << " faults\n"
            << "Leveugle et al. (DATE 2009): margin " << o.margin << ", confidence " << o.confidence << ", p " << o.p << " -> " << trials
            << " trials\n";
  for (const auto& [dim, m] : j["by"].items()) {
    std::cout << "per " << dim << " stratum (trials for the same margin within the stratum):\n";
    for (const auto& [k, v] : m.items())
      std::cout << "  " << k << ": " << (v["bits"].is_string() ? v["bits"].get<std::string>() : bits_text(v["bits"].get<double>())) << " bits ("
                << 100 * v["share"].get<double>()
                << "%), " << v["trials_for_own_margin"] << " trials\n";
  }
  return 0;
}

}  // namespace resil::app::ckpt_flip

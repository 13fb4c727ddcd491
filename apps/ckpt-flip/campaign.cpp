#include <algorithm>
#include <iostream>
#include <memory>
#include <utility>

#include "commands.hpp"
#include "resil/app/main.hpp"
#include "resil/app/validators.hpp"
#include "resil/core/cpus.hpp"
#include "resil/campaign/campaign.hpp"

namespace resil::app::ckpt_flip {

CLI::App* setup_campaign(CLI::App& app, CampaignOptions& o) {
  auto* c = app.add_subcommand("campaign", "Run (or continue) a fault-injection campaign: golden run, then per trial inject -> run -> classify -> record.");
  c->footer(
      "Examples:\n"
      "  ckpt-flip campaign examples/campaigns/eval-mlp.json --out res\n"
      "  ckpt-flip campaign study.json --shard 3/8 --out res          # one Slurm array task (trial id mod 8 == 3)\n"
      "  ckpt-flip campaign study.json --out res --max-trials 10      # a slice now; a re-run skips finished trials\n"
      "  ckpt-flip campaign study.json --out res --jobs 1             # one trial at a time (default: one per allocated CPU,\n"
      "                                                                # or per K of them for an `mpiexec -n K` command)\n"
      "  ckpt-flip report res --json res/report.json --markdown res/report.md\n"
      "Config (JSON, docs/reference/campaign.md): checkpoint (HDF5, torch.save, safetensors, .npy/.npz, mp manifest), format, keep_crc,\n"
      "command with {ckpt} {out} {dir} {trial} {seed}, trials, seed,\n"
      "timeout_s, inject{flips, model, role, bits, include, exclude, strata}, metric, tolerance, restore revert|copy,\n"
      "mode command|worker (worker: a resident `ckpt-train serve` or resil.trial Python worker per job forks each trial; same results, less overhead).\n"
      "kind ec-train: no checkpoint; each trial runs the ec-train command with in-memory flips (--inject) drawn from its seed:\n"
      "  inject{targets row|parity|stripe|mlp|opt, steps [FIRST, LAST], flips, bits, model}, metric final_loss, detected_codes [8]\n"
      "  ckpt-flip campaign examples/campaigns/ec-train-scrub.json --out res --jobs 1\n"
      "Classes: load_failure hang crash unreadable_summary nan_at_load nan_later critical_sdc tolerable_sdc masked bit_masked detected.\n"
      "SIGINT/SIGTERM: the trials in flight are dropped, the recorded ones kept; exit 75, and the same command continues.");
  c->add_option("CONFIG", o.config, "campaign configuration (JSON)")->required();
  c->add_option("--out", o.out, "campaign directory (results/, campaign.json, golden.json)")->required();
  c->add_option("--shard", o.shard, "this process's part i/n of the trial ids (trial mod n == i)");
  c->add_option("--max-trials", o.max_trials, "run at most this many new trials now")->transform(app::Decimal(1, std::uint64_t{1} << 40));
  c->add_option("--jobs", o.jobs, "trials at once, each on its own checkpoint copy (default: the CPUs this process may run on, as nproc counts them, divided by the ranks of an `mpiexec -n K` command); records as a serial run's")
      ->transform(app::Decimal(1, inject::max_jobs));
  add_format_option(*c, o.format);  // other than auto: replaces the config's "format" (recorded in campaign.json)
  c->add_flag("--keep-work", o.keep_work, "keep OUT/work/ (the private checkpoint copy and the last trial's log)");
  c->add_flag("-q,--quiet", o.quiet, "no per-trial lines");
  return c;
}

int run_campaign(const CampaignOptions& o) {
  // ^C or a scheduler's SIGTERM: the recorded trials stay, one line says how far it got, exit 75. Installed
  // before the first line is printed, so a signal after that line always stops the campaign that way.
  inject::install_stop_handlers();
  inject::RunOptions ro;
  ro.shard = inject::ShardSpec::parse(o.shard);  // a usage error before any file is read
  auto cfg = inject::CampaignConfig::load(o.config);
  if (o.format != inject::Format::automatic) cfg.format = o.format;
  ro.out = o.out;
  ro.config = o.config;  // an input: never inside what the campaign writes
  ro.max_trials = o.max_trials;
  ro.keep_work = o.keep_work;
  // The allocation's CPUs (not the node's), shared out so that the ranks of the trials at once fit them.
  ro.jobs = o.jobs ? o.jobs : std::max(1u, usable_cpus() / cfg.processes_per_trial());
  ro.note = [](const std::string& line) { std::cout << "note: " << line << std::endl; };
  std::string targets;  // kind ec-train: where its flips go
  for (const auto& t : cfg.targets) targets += (targets.empty() ? " in " : ",") + t;
  std::cout << "campaign " << cfg.name << ": " << cfg.trials << " trials (shard " << o.shard << "), seed " << cfg.seed << ", model "
            << cfg.model << " x" << cfg.flips << (cfg.kind == inject::TrialKind::ec_train ? " in ec-train's memory" + targets : std::string()) << ", timeout " << cfg.timeout_s << " s, " << ro.jobs
            << (ro.jobs == 1 ? " job" : " jobs") << (cfg.mode == inject::TrialMode::worker ? " (trial workers)" : "") << " -> " << o.out << std::endl;
  const std::uint64_t planned = ro.shard.trials_of(cfg.trials);
  auto bar = std::make_unique<app::Progress>("trials", planned);
  auto counts_text = [](const std::map<std::string, std::uint64_t>& counts) {
    std::string s;
    for (const auto& [k, v] : counts) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
    return s;
  };
  inject::RunSummary rs;
  std::string last_counts;
  bool first_now = true;
  try {
    rs = inject::run_campaign(cfg, ro, [&](const nlohmann::json& rec, std::uint64_t done, std::uint64_t total,
                                           const std::map<std::string, std::uint64_t>& counts) {
      if (!o.quiet && !app::stderr_is_tty())
        std::cout << "trial " << rec.at("trial") << ": " << rec.at("class").get<std::string>() << " (" << done << "/" << total << ")" << std::endl;
      last_counts = counts_text(counts);
      // The first trial recorded now (one call per trial): those before it were resumed from the records.
      if (std::exchange(first_now, false)) bar->done_before(done - 1);
      bar->update(done, last_counts);
    });
  } catch (const StoppedError& e) {
    bar->finish(last_counts);  // ends the progress line before the message
    std::cout.flush();
    std::cerr << "ckpt-flip: " << e.what() << std::endl;
    return exit_code_of(e);
  }
  if (rs.ran > 0) bar->finish(counts_text(rs.counts));
  if (!rs.replaced.empty())
    std::cout << "note: " << o.out << " held another configuration (" << rs.replaced << ") with no trial recorded; it was replaced by this one\n";
  std::cout << "shard " << o.shard << ": " << rs.planned << " trials, " << rs.skipped << " already done, " << rs.ran << " run now; "
            << counts_text(rs.counts) << "\nresults: " << rs.results.string() << "\nreport:  ckpt-flip report " << o.out << std::endl;
  return 0;
}

}  // namespace resil::app::ckpt_flip

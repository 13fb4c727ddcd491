// One trial: sample, plan, inject, run, classify, restore, record (campaign_trial.hpp).
#include "campaign_trial.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/config.hpp"
#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"
#include "resil/inject/apply.hpp"
#include "resil/inject/names.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/storage.hpp"
#include "resil/inject/transaction.hpp"

namespace resil::inject::detail {

using nlohmann::json;
namespace stdfs = std::filesystem;

namespace {

json flip_json(const FlipRecord& r, const std::string& file) {
  const bool fl = ckpt::dtype_is_float(r.dtype);
  json j = {{"index", r.index}, {"nd", r.nd}, {"dtype", ckpt::dtype_name(r.dtype)}, {"bit", r.anchor},
            {"mask", hex_bits(r.mask(), r.width)}, {"old", hex_bits(r.old_bits, r.width)}, {"new", hex_bits(r.new_bits, r.width)}};
  if (fl) {
    j["old_value"] = value_json(ckpt::word_to_double(r.dtype, r.old_bits));
    j["new_value"] = value_json(ckpt::word_to_double(r.dtype, r.new_bits));
  }
  if (!file.empty()) j["file"] = file;
  put_name(j, "dataset", r.dataset);  // names that are not UTF-8: escaped and flagged (names.hpp)
  return j;
}

}  // namespace

void TrialContext::prepare() {
  for (const auto& f : work.files) work_ids.push_back(file_id(f));
  if (c.mode == TrialMode::worker)
    worker = std::make_unique<TrialWorker>(std::vector<std::string>(c.command.begin(), c.command.begin() + static_cast<std::ptrdiff_t>(trial_subcommand_at(c.command))),
                                           golden_files.entry.string(), wdir / "worker.log", std::max(c.timeout_s, 60.0));
}

json TrialContext::run(std::uint64_t t) {
  if (auto rec = attempt(t, !worker)) return *rec;
  worker->restart();
  return *attempt(t, true);
}

std::optional<json> TrialContext::attempt(std::uint64_t t, bool last) {
  const stdfs::path scratch = wdir / "scratch", sum_path = wdir / "summary.json", tlog = wdir / "trial.log";
  const Stratum& st = strata[t % strata.size()];
  PlanOptions popt;
  popt.seed = c.seed;
  popt.trial = t;
  popt.flips = c.flips;
  popt.model = fmodel;
  popt.finite = c.finite;
  // --finite reads the candidates' words from this job's copy (still the golden bytes here).
  std::map<std::size_t, std::unique_ptr<Storage>> readers;
  const auto sampled = sample_sites(st.sel.targets, popt, [&](std::uint32_t tg, std::vector<std::uint64_t> idx, const Storage::BlockFn& fn) {
    auto& r = readers[st.sel.file[tg]];
    if (!r) r = open_storage(work.files[st.sel.file[tg]].string(), Access::read, c.format);
    r->edit(st.sel.targets[tg].info.path, std::move(idx), fn);
  });
  readers.clear();
  const auto& sites = sampled.sites;
  // Plan per file: the sites of each file against that file's targets.
  std::map<std::size_t, std::vector<FlipRecord>> recs;
  {
    std::map<std::size_t, std::pair<std::vector<Target>, std::vector<Site>>> per;
    std::map<std::uint32_t, std::uint32_t> remap;
    for (const auto& s : sites) {
      const std::size_t f = st.sel.file[s.target];
      auto& [tg, ss] = per[f];
      if (!remap.count(s.target)) {
        remap[s.target] = static_cast<std::uint32_t>(tg.size());
        tg.push_back(st.sel.targets[s.target]);
      }
      ss.push_back({remap[s.target], s.index, s.bit});
    }
    for (auto& [f, ts] : per) recs[f] = plan(work.files[f].string(), ts.first, ts.second, popt, c.format);
  }
  CkptFiles trial_files = work;
  if (c.copies) {
    stdfs::remove_all(wdir / "copy");
    trial_files = copy_checkpoint(golden_files, wdir / "copy");
  }
  // Per file, the injection transaction: its log is durable before the file changes (revert works after a kill).
  json flips = json::array();
  bool nonfinite = false;
  std::set<std::pair<std::size_t, std::string>> touched;
  std::map<std::string, std::string> labels;
  // The role label of a flipped tensor: its target's (the format adapter's role).
  auto role_label = [&](std::size_t f, const std::string& dataset) {
    for (std::size_t i = 0; i < st.sel.targets.size(); ++i)
      if (st.sel.file[i] == f && st.sel.targets[i].info.path == dataset) return st.sel.role[i];
    return role_of(dataset);
  };
  for (const auto& [f, rv] : recs) {
    LogHeader h;
    h.tool_version = resil::version;
    h.seed = c.seed;
    h.trial = t;
    h.model = fmodel.name();
    h.input = h.output = trial_files.files[f].string();
    h.in_place = true;
    h.planned = rv.size();
    h.finite = c.finite;
    h.rejected = sampled.rejected;  // the trial's, in each of its files' logs
    h.file_format = std::string(format_name(resolve_format(trial_files.files[f].string(), c.format)));
    h.keep_crc = c.keep_crc;
    for (const auto& r : rv) {
      flips.push_back(flip_json(r, golden_files.files.size() > 1 ? golden_files.rel[f] : ""));
      touched.insert({f, r.dataset});
      if (ckpt::dtype_is_float(r.dtype) && !std::isfinite(ckpt::word_to_double(r.dtype, r.new_bits))) nonfinite = true;
      if (labels.empty()) {
        const std::string dt(ckpt::dtype_name(r.dtype));
        labels = {{"field", field_of(dt, r.anchor)}, {"bit", std::to_string(r.anchor)}, {"role", role_label(f, r.dataset)}, {"dtype", dt},
                  {"tensor", display_name(r.dataset) + (golden_files.files.size() > 1 ? "@" + golden_files.rel[f] : "")}};
      }
    }
    const stdfs::path pending = wdir / ("pending-" + std::to_string(f) + ".jsonl");
    stdfs::remove_all(pending);  // never write through whatever an earlier command left there
    apply_logged(pending, h, rv, trial_files.files[f].string(), {.sync = true, .hash_output = false, .format = c.format});
  }
  stdfs::remove_all(scratch);
  stdfs::create_directories(scratch);
  stdfs::remove(sum_path);
  const auto argv = substitute(c.command, {{"ckpt", trial_files.entry.string()}, {"out", sum_path.string()}, {"dir", scratch.string()},
                                           {"trial", std::to_string(t)}, {"seed", std::to_string(derive_seed(c.seed, t))}});
  std::optional<CommandResult> ran;
  if (worker) {
    // The worker forks the trial with the argv from its subcommand on: the request carries the whole argv.
    ran = worker->run(argv, c.timeout_s, tlog);
  } else {
    ran = run_command(argv, c.timeout_s, tlog);
  }
  const bool worker_died = !ran;
  CommandResult r = ran ? *ran : CommandResult{};
  Classified k;
  if (worker_died) {
    r.output_tail = tail_of(tlog, 400);
    k.outcome = Outcome::crash;
    k.note = "the trial worker died twice without a result";
  } else {
    auto sf = read_summary(sum_path);
    r.summary = std::move(sf.json);
    r.summary_problem = std::move(sf.problem);
    k = classify(c, golden, r, nonfinite, std::nullopt);
    if (k.outcome == Outcome::masked && golden.final_weights && r.summary)
      if (const auto fw = final_weights_of(*r.summary)) k = classify(c, golden, r, nonfinite, fw);
  }
  // Restore: exact revert from the log, verified against the golden checksums. The command may
  // have rewritten, truncated, deleted or replaced {ckpt}: then the file is copied again from
  // golden and the trial recorded like any other (never an abort: a re-run would stop there again).
  std::string restore = "copy";
  bool damaged = false;
  if (c.copies) {
    stdfs::remove_all(wdir / "copy");
  } else {
    restore = "reverted";
    for (std::size_t f = 0; f < work.files.size(); ++f) {
      bool ok = file_id(work.files[f]) == work_ids[f];
      if (ok) {
        try {
          if (const auto it = recs.find(f); it != recs.end())
            apply(work.files[f].string(), it->second, Direction::revert, true, true, true, c.format);
          const auto stored = open_storage(work.files[f].string(), Access::read, c.format);
          for (const auto& [key, sum] : gsum) {
            if (key.first != f || (c.verify == Verify::touched && !touched.count(key))) continue;
            if (stored->checksum(key.second) != sum) ok = false;
          }
        } catch (const Error&) {
          ok = false;
          damaged = true;
        }
      } else {
        damaged = true;
      }
      if (!ok) {  // the command altered the file itself (or a revert failed): start again from golden
        copy_with_marker(golden_files.files[f], work.files[f]);
        work_ids[f] = file_id(work.files[f]);
        restore = "recopied";
      }
      const stdfs::path marker = golden_files.files[f].string() + ".done", work_marker = work.files[f].string() + ".done";
      const bool marker_ok = stdfs::exists(marker) ? same_small_file(marker, work_marker) : !stdfs::exists(stdfs::symlink_status(work_marker));
      if (!marker_ok) {
        copy_with_marker(golden_files.files[f], work.files[f]);
        work_ids[f] = file_id(work.files[f]);
        restore = "recopied";
        damaged = true;
      }
    }
    if (work.entry != work.files[0] && !same_small_file(golden_files.entry, work.entry)) {  // the mp manifest
      replace_with_copy(golden_files.entry, work.entry);
      restore = "recopied";
      damaged = true;
    }
  }
  if (damaged) k.note += std::string(k.note.empty() ? "" : "; ") + "the command deleted, replaced or damaged {ckpt}: copied again from golden";
  for (const auto& [f, rv] : recs) stdfs::remove(wdir / ("pending-" + std::to_string(f) + ".jsonl"));
  stdfs::remove_all(scratch);
  if (worker_died && !last) return std::nullopt;
  if (r.summary) check_numeric(c, golden, *r.summary, t);  // after the restore: the work copy is golden again

  json rec = {{"trial", t},
              {"shard", std::to_string(shard.index) + "/" + std::to_string(shard.count)},
              {"seed", c.seed},
              {"campaign", campaign},
              {"trial_seed", derive_seed(c.seed, t)},
              {"stratum", st.label},
              {"class", outcome_name(k.outcome)},
              {"note", k.note},
              {"exit_code", r.timed_out || worker_died ? json(nullptr) : json(r.exit_code)},
              {"signal", r.signal ? json(r.signal) : json(nullptr)},
              {"metric", k.metric ? json(*k.metric) : json(nullptr)},
              {"golden_metric", golden.metric},
              {"delta", k.delta ? json(*k.delta) : json(nullptr)},
              {"n_flips", flips.size()},
              {"flips", flips},
              {"strata", labels},
              {"injected_nonfinite", nonfinite},
              {"restore", restore},
              {"wall_seconds", r.wall_seconds}};
  if (!k.metrics.empty()) rec["metrics"] = k.metrics;  // several metrics: each one's value, golden, delta, verdict
  if (r.summary)
    if (const auto id = numeric_id_of(*r.summary)) rec["numeric"] = *id;
  if (r.summary && r.summary->is_object()) {
    json s;
    for (const char* key : {"final_loss", "test_loss", "test_accuracy", "test_auc", "nan_detected", "nan_step", "steps", "error", "loss_curve",
                            "replica_divergence"})
      if (r.summary->contains(key)) s[key] = r.summary->at(key);
    for (const auto& m : c.more_metrics)
      if (r.summary->contains(m.name)) s[m.name] = r.summary->at(m.name);
    rec["summary"] = s;
  }
  if (k.outcome == Outcome::crash || k.outcome == Outcome::load_failure || k.outcome == Outcome::hang) rec["output_tail"] = r.output_tail;
  return rec;
}

}  // namespace resil::inject::detail

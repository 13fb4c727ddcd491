// One trial: sample, plan, inject, run, classify, restore, record (trial.hpp).
#include "trial.hpp"

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
#include "ec_train.hpp"

namespace resil::inject::detail {

using nlohmann::json;
namespace stdfs = std::filesystem;

namespace {

// The last line of a command's output that says "error:" (else its last line), for a message.
std::string error_line(const std::string& tail) {
  std::string last, error;
  std::size_t at = 0;
  while (at < tail.size()) {
    const std::size_t end = std::min(tail.find('\n', at), tail.size());
    if (end > at) {
      last = tail.substr(at, end - at);
      if (last.find("error:") != std::string::npos) error = last;
    }
    at = end + 1;
  }
  return error.empty() ? last : error;
}

json flip_json(const FlipRecord& r, const std::string& file) {
  const bool fl = ckpt::dtype_is_float(r.dtype);
  json j = {{"index", r.index}, {"nd", r.nd}, {"dtype", ckpt::dtype_name(r.dtype)}, {"bit", r.anchor},
            {"mask", hex_bits(r.mask(), r.width)}, {"old", hex_bits(r.old_bits, r.width)}, {"new", hex_bits(r.new_bits, r.width)}};
  if (fl) {
    j["old_value"] = value_json(ckpt::word_to_double(r.dtype, r.old_bits));
    j["new_value"] = value_json(ckpt::word_to_double(r.dtype, r.new_bits));
  }
  if (!file.empty()) j["file"] = file;
  if (r.global) {  // a tp shard's element in its global tensor, as the flip log names it
    j["global_index"] = r.global->index;
    j["global_nd"] = r.global->nd;
    j["global_shape"] = r.global->shape;
  }
  if (!r.location.empty()) j["location"] = json::parse(r.location.str());  // a set's shard, a distributed checkpoint's chunk
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
  Attempt a{.t = t, .st = strata[t % strata.size()]};
  if (c.kind == TrialKind::ec_train) {
    run_ec_train(a);
    // ec-train's usage error: the options the campaign adds do not fit the command's job (--inject
    // parity of a job without --ft ec), in every trial alike; no fault in memory exits 2.
    if (!a.r.timed_out && a.r.signal == 0 && a.r.exit_code == static_cast<int>(ExitCode::usage))
      throw UsageError("campaign " + c.name + ": trial " + std::to_string(t) + ": ec-train refused the command with --inject " +
                       a.ec_train.value("inject", "") + " (exit 2): " + error_line(a.r.output_tail));
    if (a.r.summary) check_numeric(c, golden, *a.r.summary, t);
    return record_of(a);
  }
  draw_sites(a);
  plan_files(a);
  inject_flips(a);
  execute(a);
  classify_run(a);
  restore_files(a);
  if (a.worker_died && !last) return std::nullopt;
  if (a.r.summary) check_numeric(c, golden, *a.r.summary, t);  // after the restore: the work copy is golden again
  return record_of(a);
}

void TrialContext::draw_sites(Attempt& a) {
  const Stratum& st = a.st;
  PlanOptions& popt = a.popt;
  popt.seed = c.seed;
  popt.trial = a.t;
  popt.flips = c.flips;
  popt.model = fmodel;
  popt.finite = c.finite;
  // --finite reads the candidates' words from this job's copy (still the golden bytes here).
  std::map<std::size_t, std::unique_ptr<Storage>> readers;
  a.sampled = sample_sites(st.sel.targets, popt, [&](std::uint32_t tg, std::vector<std::uint64_t> idx, const Storage::BlockFn& fn) {
    auto& r = readers[st.sel.file[tg]];
    if (!r) r = open_storage(work.files[st.sel.file[tg]].string(), Access::read, c.format);
    r->edit(st.sel.targets[tg].info.path, std::move(idx), fn);
  });
  readers.clear();
}

void TrialContext::plan_files(Attempt& a) {
  const Stratum& st = a.st;
  const auto& sites = a.sampled.sites;
  // Plan per file: the sites of each file against that file's targets.
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
  // One model stream for the trial, continued from file to file (each file's plan drew from its
  // start before, so a random-value or burst fault repeated the same draws in every shard).
  std::uint64_t model_draws = 0;
  PlanOptions popt = a.popt;
  popt.model_draws = &model_draws;
  for (auto& [f, ts] : per) a.recs[f] = plan(work.files[f].string(), ts.first, ts.second, popt, c.format);
}

void TrialContext::inject_flips(Attempt& a) {
  const Stratum& st = a.st;
  CkptFiles& trial_files = a.trial_files;
  trial_files = work;
  if (c.copies) {
    stdfs::remove_all(wdir / "copy");
    trial_files = copy_checkpoint(golden_files, wdir / "copy");
  }
  // Per file, the injection transaction: its log is durable before the file changes (revert works after a kill).
  // The role label of a flipped tensor: its target's (the format adapter's role).
  auto role_label = [&](std::size_t f, const std::string& dataset) {
    for (std::size_t i = 0; i < st.sel.targets.size(); ++i)
      if (st.sel.file[i] == f && st.sel.targets[i].info.path == dataset) return st.sel.role[i];
    return role_of(dataset);
  };
  for (const auto& [f, rv] : a.recs) {
    LogHeader h;
    h.tool_version = resil::version;
    h.seed = c.seed;
    h.trial = a.t;
    h.model = fmodel.name();
    h.input = h.output = trial_files.files[f].string();
    h.in_place = true;
    h.planned = rv.size();
    h.finite = c.finite;
    h.rejected = a.sampled.rejected;  // the trial's, in each of its files' logs
    h.file_format = std::string(format_name(resolve_format(trial_files.files[f].string(), c.format)));
    h.keep_crc = c.keep_crc;
    for (const auto& r : rv) {
      a.flips.push_back(flip_json(r, golden_files.files.size() > 1 ? golden_files.rel[f] : ""));
      a.touched.insert({f, r.dataset});
      if (ckpt::dtype_is_float(r.dtype) && !std::isfinite(ckpt::word_to_double(r.dtype, r.new_bits))) a.nonfinite = true;
      if (a.labels.empty()) {
        const std::string dt(ckpt::dtype_name(r.dtype));
        a.labels = {{"field", field_of(dt, r.anchor)}, {"bit", std::to_string(r.anchor)}, {"role", role_label(f, r.dataset)}, {"dtype", dt},
                    {"tensor", display_name(r.dataset) + (golden_files.files.size() > 1 ? "@" + golden_files.rel[f] : "")}};
      }
    }
    const stdfs::path pending = wdir / ("pending-" + std::to_string(f) + ".jsonl");
    stdfs::remove_all(pending);  // never write through whatever an earlier command left there
    apply_logged(pending, h, rv, trial_files.files[f].string(), {.sync = true, .hash_output = false, .format = c.format});
    // An edit that stages a copy and renames it over the file (gzip-chunked HDF5) leaves another
    // inode: that one is what the command must leave in place.
    if (!c.copies) work_ids[f] = file_id(trial_files.files[f]);
  }
}

void TrialContext::execute(Attempt& a) {
  const stdfs::path scratch = wdir / "scratch", sum_path = wdir / "summary.json", tlog = wdir / "trial.log";
  stdfs::remove_all(scratch);
  stdfs::create_directories(scratch);
  stdfs::remove(sum_path);
  const auto argv = substitute(c.command, {{"ckpt", a.trial_files.entry.string()}, {"out", sum_path.string()}, {"dir", scratch.string()},
                                           {"trial", std::to_string(a.t)}, {"seed", std::to_string(derive_seed(c.seed, a.t))}});
  std::optional<CommandResult> ran;
  if (worker) {
    // The worker forks the trial with the argv from its subcommand on: the request carries the whole argv.
    ran = worker->run(argv, c.timeout_s, tlog);
  } else {
    ran = run_command(argv, c.timeout_s, tlog);
  }
  a.worker_died = !ran;
  a.r = ran ? *ran : CommandResult{};
  if (a.worker_died) a.r.output_tail = tail_of(tlog, 400);
}

void TrialContext::classify_run(Attempt& a) {
  const stdfs::path sum_path = wdir / "summary.json";
  CommandResult& r = a.r;
  Classified& k = a.k;
  if (a.worker_died) {
    k.outcome = Outcome::crash;
    k.note = "the trial worker died twice without a result";
  } else {
    auto sf = read_summary(sum_path);
    r.summary = std::move(sf.json);
    r.summary_problem = std::move(sf.problem);
    k = classify(c, golden, r, a.nonfinite, std::nullopt);
    if (k.outcome == Outcome::masked && golden.final_weights && r.summary)
      if (const auto fw = final_weights_of(*r.summary)) k = classify(c, golden, r, a.nonfinite, fw);
  }
}

void TrialContext::restore_files(Attempt& a) {
  // Restore: exact revert from the log, verified against the golden checksums. The command may
  // have rewritten, truncated, deleted or replaced {ckpt}: then the file is copied again from
  // golden and the trial recorded like any other (never an abort: a re-run would stop there again).
  std::string& restore = a.restore;
  bool damaged = false;
  if (c.copies) {
    stdfs::remove_all(wdir / "copy");
  } else {
    restore = "reverted";
    for (std::size_t f = 0; f < work.files.size(); ++f) {
      bool ok = file_id(work.files[f]) == work_ids[f];
      if (ok) {
        try {
          if (const auto it = a.recs.find(f); it != a.recs.end())
            apply(work.files[f].string(), it->second, Direction::revert, true, true, true, c.format);
          work_ids[f] = file_id(work.files[f]);  // a staged revert renames a copy over the file
          const auto stored = open_storage(work.files[f].string(), Access::read, c.format);
          for (const auto& [key, sum] : gsum) {
            if (key.first != f || (c.verify == Verify::touched && !a.touched.count(key))) continue;
            if (stored->checksum(key.second) != sum) ok = false;
          }
          // HDF5 places a rewritten compressed chunk anew and cannot reuse the space it left: the
          // reverted file holds the golden data in a larger file, which would grow with every trial.
          if (ok && stdfs::is_regular_file(work.files[f]) && stdfs::is_regular_file(golden_files.files[f]) &&
              stdfs::file_size(work.files[f]) != stdfs::file_size(golden_files.files[f]))
            ok = false;
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
  if (damaged) a.k.note += std::string(a.k.note.empty() ? "" : "; ") + "the command deleted, replaced or damaged {ckpt}: copied again from golden";
  for (const auto& [f, rv] : a.recs) stdfs::remove(wdir / ("pending-" + std::to_string(f) + ".jsonl"));
  stdfs::remove_all(wdir / "scratch");
}

void TrialContext::run_ec_train(Attempt& a) {
  const EcInjection inj = draw_ec_injection(c, a.t, ec_steps);
  const stdfs::path scratch = wdir / "scratch", sum_path = wdir / "summary.json", tlog = wdir / "trial.log", flog = wdir / "flips.jsonl";
  stdfs::remove_all(scratch);
  stdfs::create_directories(scratch);
  stdfs::remove(sum_path);
  stdfs::remove_all(flog);  // ec-train appends to its --inject-log: each trial starts a new one
  auto argv = substitute(c.command, {{"out", sum_path.string()}, {"dir", scratch.string()}, {"trial", std::to_string(a.t)},
                                     {"seed", std::to_string(derive_seed(c.seed, a.t))}});
  const std::string job = ec_job_id(wdir, std::to_string(a.t));
  const auto extra = ec_trial_args(c, inj, job, flog);
  argv.insert(argv.end(), extra.begin(), extra.end());
  try {
    a.r = run_command(argv, c.timeout_s, tlog);
  } catch (const Error&) {  // stopped by SIGINT/SIGTERM (the trial dropped), or it could not start
    remove_ec_segments(job);
    throw;
  }
  // Exit 1, exit 8, a crash or a timeout leaves the job's segments for a relaunch: none comes.
  const std::size_t removed = remove_ec_segments(job);
  EcFlips fl = read_ec_flip_log(flog);
  a.flips = std::move(fl.flips);
  a.nonfinite = fl.nonfinite;
  a.labels = fl.labels.empty() ? std::map<std::string, std::string>{{"role", inj.target}} : std::move(fl.labels);  // no flip applied yet
  auto sf = read_summary(sum_path);
  a.r.summary = std::move(sf.json);
  a.r.summary_problem = std::move(sf.problem);
  std::optional<std::string> state;
  if (a.r.summary && a.r.summary->is_object() && a.r.summary->contains("state_hash") && a.r.summary->at("state_hash").is_string())
    state = a.r.summary->at("state_hash").get<std::string>();
  a.k = classify(c, golden, a.r, a.nonfinite, state);
  a.restore = "none";  // nothing to restore: the faults lived in the run's memory
  a.ec_train = ec_train_fields(a.r.summary ? *a.r.summary : json(), golden);
  a.ec_train["inject"] = inj.items();
  a.ec_train["segments_removed"] = removed;
  stdfs::remove_all(scratch);
  stdfs::remove(flog);
}

json TrialContext::record_of(const Attempt& a) const {
  const std::uint64_t t = a.t;
  const CommandResult& r = a.r;
  const Classified& k = a.k;
  json rec = {{"trial", t},
              {"shard", std::to_string(shard.index) + "/" + std::to_string(shard.count)},
              {"seed", c.seed},
              {"campaign", campaign},
              {"trial_seed", derive_seed(c.seed, t)},
              {"stratum", a.st.label},
              {"class", outcome_name(k.outcome)},
              {"note", k.note},
              {"exit_code", r.timed_out || a.worker_died ? json(nullptr) : json(r.exit_code)},
              {"signal", r.signal ? json(r.signal) : json(nullptr)},
              {"metric", k.metric ? json(*k.metric) : json(nullptr)},
              {"golden_metric", golden.metric},
              {"delta", k.delta ? json(*k.delta) : json(nullptr)},
              {"n_flips", a.flips.size()},
              {"flips", a.flips},
              {"strata", a.labels},
              {"injected_nonfinite", a.nonfinite},
              {"restore", a.restore},
              {"wall_seconds", r.wall_seconds}};
  if (r.cpu_seconds) rec["cpu_seconds"] = *r.cpu_seconds;
  if (!k.metrics.empty()) rec["metrics"] = k.metrics;  // several metrics: each one's value, golden, delta, verdict
  if (r.summary)
    if (const auto id = numeric_id_of(*r.summary)) rec["numeric"] = *id;
  if (r.summary && r.summary->is_object()) {
    json s;
    for (const char* key : {"final_loss", "test_loss", "test_accuracy", "test_auc", "test_bpb", "nan_detected", "nan_step", "steps", "error", "loss_curve",
                            "replica_divergence"})
      if (r.summary->contains(key)) s[key] = r.summary->at(key);
    for (const auto& m : c.more_metrics)
      if (r.summary->contains(m.name)) s[m.name] = r.summary->at(m.name);
    rec["summary"] = s;
  }
  if (!a.ec_train.is_null()) rec["ec_train"] = a.ec_train;
  if (k.outcome == Outcome::crash || k.outcome == Outcome::load_failure || k.outcome == Outcome::hang || k.outcome == Outcome::detected)
    rec["output_tail"] = r.output_tail;
  return rec;
}

}  // namespace resil::inject::detail

// The campaign engine's job loop: check the inputs, agree on campaign.json, get the golden
// reference, then hand the trial ids of this shard not yet recorded to one job or to N job
// processes, appending each record as it comes. One trial is trial.cpp.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/config.hpp"
#include "resil/core/error.hpp"
#include "resil/campaign/campaign.hpp"
#include "resil/inject/file_set.hpp"
#include "files.hpp"
#include "golden.hpp"
#include "ec_train.hpp"
#include "targets.hpp"
#include "trial.hpp"
#include "worker.hpp"

namespace resil::inject {

using nlohmann::json;
namespace stdfs = std::filesystem;
using detail::CkptFiles;
using detail::ckpt_files;
using detail::copy_checkpoint;
using detail::golden_checksums;
using detail::golden_reference;
using detail::make_strata;
using detail::read_json_file;
using detail::require_regular_or_absent;
using detail::select_all;
using detail::CampaignTargets;
using detail::space_of;

namespace {

inline constexpr const char* campaign_format = "resil-campaign/1";

std::string shard_name(const ShardSpec& s) { return "shard-" + std::to_string(s.index) + "-of-" + std::to_string(s.count); }

/// The campaign writes OUT/campaign.json, OUT/golden.json and OUT/golden.log and deletes and rewrites
/// OUT/work/ and OUT/results/: an input there (the configuration file, the golden checkpoint, its
/// summary) would be lost, or read back as something else (records, the golden record).
void refuse_inputs_inside_outputs(const CampaignConfig& c, const CkptFiles& golden, const RunOptions& opt) {
  const stdfs::path& out = opt.out;
  std::error_code ec;
  if (stdfs::exists(out, ec) && !stdfs::is_directory(out, ec)) throw UsageError("--out " + out.string() + ": exists and is not a directory");
  auto canon = [](const stdfs::path& p) {
    std::error_code e;
    const auto canonical = stdfs::weakly_canonical(stdfs::absolute(p, e), e);
    return e ? stdfs::absolute(p).lexically_normal() : canonical;
  };
  const stdfs::path o = canon(out);
  std::vector<stdfs::path> inputs;  // an ec-train campaign has no checkpoint
  if (!golden.entry.empty()) inputs.push_back(golden.entry);
  if (!opt.config.empty()) inputs.push_back(opt.config);
  for (const auto& f : golden.files) {
    inputs.push_back(f);
    inputs.push_back(f.string() + ".done");
  }
  if (!c.golden_summary.empty()) inputs.push_back(c.golden_summary);
  if (!c.golden_final_checkpoint.empty()) inputs.push_back(c.golden_final_checkpoint);
  for (const auto& in : inputs) {
    const stdfs::path p = canon(in);
    auto inside = [&](const stdfs::path& d) {
      auto [a, b] = std::mismatch(d.begin(), d.end(), p.begin(), p.end());
      return a == d.end();
    };
    for (const char* owned : {"work", "results", "campaign.json", "golden.json", "golden.log"})
      if (inside(o / owned))
        throw UsageError(in.string() + ": an input of the campaign lies in " + (o / owned).string() + ", which the campaign writes or deletes; use another --out");
  }
}

/// The golden checkpoint's bytes as campaign.json records them: file name (a manifest's shards by
/// their path relative to it) -> XXH64. A campaign continued on other bytes would mix trials drawn
/// from two checkpoints under one golden result.
json golden_identity(const CkptFiles& g) {
  json j = json::object();
  if (is_file_set(g.entry.string())) {  // a sharded set: each of its files by name
    const FileSet set = file_set(g.entry.string());
    for (const auto& n : set.all()) j[n] = ckpt::hex_u64(ckpt::xxh64_file(set.dir / n));
    return j;
  }
  j[g.entry.filename().string()] = ckpt::hex_u64(ckpt::xxh64_file(g.entry));
  for (std::size_t i = 0; i < g.files.size(); ++i)
    if (!g.rel[i].empty()) j[g.rel[i]] = ckpt::hex_u64(ckpt::xxh64_file(g.files[i]));
  return j;
}

/// The configuration `old_cfg` (OUT/campaign.json's) with each path that names the same file as
/// `new_cfg`'s spelled as there: the same file through another working directory or a link is the
/// same configuration. A relative path (a campaign.json that records paths relative to the
/// working directory of its run) is tried from this one's and from the configuration file's
/// directory (`config_dir`, where a campaign is most often started).
json with_paths_of(json old_cfg, const json& new_cfg, const stdfs::path& config_dir) {
  if (!old_cfg.is_object()) return old_cfg;
  for (const char* key : {"/checkpoint", "/golden/summary", "/golden/final_checkpoint"}) {
    const json::json_pointer ptr(key);
    if (!old_cfg.contains(ptr) || !new_cfg.contains(ptr) || !old_cfg.at(ptr).is_string() || !new_cfg.at(ptr).is_string()) continue;
    const std::string was = old_cfg.at(ptr).get<std::string>(), now = new_cfg.at(ptr).get<std::string>();
    if (was == now || was.empty() || now.empty()) continue;
    const bool same = ckpt::fs::same_file(was, now) ||
                      (stdfs::path(was).is_relative() && !config_dir.empty() && ckpt::fs::same_file(config_dir / was, now));
    if (same) old_cfg[ptr] = now;
  }
  return old_cfg;
}

/// A configuration that leaves inject.role to its default continues a campaign directory under the
/// role it recorded: the default of an evaluation trial is "model", and a campaign begun under
/// "all" (the default before) stays one campaign. Only when OUT holds trials of it; true when kept.
bool keep_recorded_role(CampaignConfig& c, const RunOptions& o) {
  if (!c.role_defaulted) return false;
  const auto old = read_json_file(o.out / "campaign.json");
  if (!old || !old->is_object() || !old->contains("config") || !old->at("config").is_object()) return false;
  const json& cfg = old->at("config");
  if (!cfg.contains("inject") || !cfg.at("inject").is_object() || !cfg.at("inject").contains("role") || !cfg.at("inject").at("role").is_string())
    return false;
  const std::string name = cfg.at("inject").at("role").get<std::string>();
  for (const auto& [n, r] : role_names)
    if (n == name && r != c.role && !read_results(o.out).empty()) {
      c.role = r;
      if (o.note)
        o.note("inject.role " + name + ", as " + (o.out / "campaign.json").string() + " recorded it (the configuration leaves the role to its default)");
      return true;
    }
  return false;
}

/// The selection of the configuration over its checkpoint. A role left to its default for a trial
/// that only evaluates (model) becomes all, in `c`, when the checkpoint has no tensor in the model
/// role: nothing there is known to be optimizer state, and "model" would select nothing. True then.
bool select_with_default_role(CampaignConfig& c, const CkptFiles& files, CampaignTargets& out) {
  try {
    out = select_all(c, files);
    return false;
  } catch (const NothingSelectedError&) {
    if (!c.role_defaulted || c.role != Role::model) throw;
  }
  c.role = Role::all;
  out = select_all(c, files);
  return true;
}

/// What the campaign says about a role the configuration left to its default.
void note_default_role(const CampaignConfig& c, const FaultSpace& space, bool model_role_empty, const RunOptions& o) {
  if (!c.role_defaulted || !o.note) return;
  if (model_role_empty) {
    o.note("inject.role all: the default for a trial that only evaluates is model, but " + c.checkpoint +
           " has no tensor in the model role, so no state is known to be the optimizer's");
    return;
  }
  if (c.role == Role::model) {
    o.note("inject.role model: the default for a trial that only evaluates, which never reads the optimizer state (\"role\": \"all\" includes it)");
    return;
  }
  if (trial_subcommand_at(c.command) != 0) return;  // a resume trial reads it all
  const auto by = space.by.find("role");
  // The optimizer state: its moments and, under mixed precision, the fp32 master weights.
  double opt = 0;
  if (by != space.by.end())
    for (const char* r : {"optimizer", "master"})
      if (by->second.count(r)) opt += by->second.at(r);
  if (opt > 0 && space.total > 0) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.0f %%", 100 * opt / space.total);
    o.note(std::string("inject.role all (the default): ") + pct + " of the fault space is optimizer state, which a trial that only evaluates "
           "never reads; give \"role\": \"model\" for such a trial (or \"all\", which also silences this note)");
  }
}

/// The steps an ec-train trial's faults are drawn from: inject.steps, else 1 to the golden run's
/// last step (its report's "steps"); a range past that step would inject nothing.
std::pair<std::uint64_t, std::uint64_t> detail_ec_steps(const CampaignConfig& c, const Golden& g) {
  const json& s = g.summary;
  const bool known = s.is_object() && s.contains("steps") && s.at("steps").is_number_unsigned() && s.at("steps").get<std::uint64_t>() >= 1;
  if (!known && !c.steps)
    throw UsageError("campaign " + c.name + ": the golden report has no \"steps\" to draw the injection steps from; give inject.steps [FIRST, LAST]");
  if (!c.steps) return {1, s.at("steps").get<std::uint64_t>()};
  if (known && c.steps->second > s.at("steps").get<std::uint64_t>())
    throw UsageError("campaign " + c.name + ": inject.steps [" + std::to_string(c.steps->first) + ", " + std::to_string(c.steps->second) +
                     "] goes past the golden run's last step " + s.at("steps").dump() + ": such a fault would never be injected");
  return *c.steps;
}

}  // namespace

FaultSpace fault_space(const CampaignConfig& config) {
  // An ec-train job's memory is not enumerated: its trials are counted per target (the strata).
  if (config.kind == TrialKind::ec_train) return {};
  CampaignConfig c = config;
  const auto files = ckpt_files(c.checkpoint);
  CampaignTargets s;
  select_with_default_role(c, files, s);
  return space_of(s, files);
}

RunSummary run_campaign(const CampaignConfig& config, const RunOptions& o, const TrialCallback& on_trial) {
  if (o.out.empty()) throw UsageError("campaign: --out DIR is required");
  CampaignConfig c = config;
  const bool kept_role = keep_recorded_role(c, o);
  c.validate("campaign " + c.name);
  if (o.jobs < 1 || o.jobs > max_jobs) throw UsageError("campaign: --jobs " + std::to_string(o.jobs) + ": need 1 to " + std::to_string(max_jobs));
  if (o.shard.count == 0 || o.shard.index >= o.shard.count) throw UsageError("campaign: shard " + shard_name(o.shard) + ": need 0 <= i < n");
  const bool in_memory = c.kind == TrialKind::ec_train;  // trials flip a job's memory: no checkpoint, no work copy to restore
  const auto golden_files = in_memory ? CkptFiles{} : ckpt_files(c.checkpoint);
  for (const auto& f : golden_files.files) {
    std::error_code ec;
    if (!stdfs::exists(f, ec)) throw IoError(f.string() + ": golden checkpoint file not found");
    if (!stdfs::is_regular_file(f, ec) && !is_file_set(f.string()))
      throw IoError(f.string() + ": the golden checkpoint is not a regular file, a shard index or a checkpoint directory");
  }
  refuse_inputs_inside_outputs(c, golden_files, o);
  // keep_crc is process-wide (storage.hpp: a staged edit opens its copy anew); the job processes
  // fork from here and inherit it. Restored on return: run_campaign is a library call.
  struct KeepCrc {
    bool before = keep_crc();
    explicit KeepCrc(bool keep) { set_keep_crc(keep); }
    ~KeepCrc() { set_keep_crc(before); }
    KeepCrc(const KeepCrc&) = delete;
    KeepCrc& operator=(const KeepCrc&) = delete;
  } keep_crc_scope(c.keep_crc);
  const FaultModel fmodel = FaultModel::parse(c.model);
  CampaignTargets base;
  std::vector<detail::Stratum> strata;
  FaultSpace space;
  if (in_memory) {
    for (const auto& t : c.targets) strata.push_back({t, {}});  // trial t injects into targets[t mod n]
  } else {
    const bool model_role_empty = select_with_default_role(c, golden_files, base);
    strata = make_strata(c, base, golden_files);
    space = space_of(base, golden_files);
    if (!kept_role) note_default_role(c, space, model_role_empty, o);
  }

  // A string command's placeholders are checked before OUT is touched (substitute refuses values
  // the shell would interpret; the golden run would find them only after OUT/work was made), with
  // the values the first command run receives, so that a refusal names a path it would get: the
  // golden run's (OUT/work/<shard>/ckpt/...), or with a golden summary given the first trial's.
  const stdfs::path wdir = o.out / "work" / shard_name(o.shard);
  const bool golden_run = c.golden_summary.empty();
  const stdfs::path first = golden_run || o.jobs <= 1 ? wdir : wdir / "job-0";
  if (!in_memory)
    substitute(c.command, {{"ckpt", (first / (golden_run || !c.copies ? "ckpt" : "copy") / golden_files.entry.filename()).string()},
                         {"out", (first / "summary.json").string()}, {"dir", (first / "scratch").string()},
                         {"trial", golden_run ? "golden" : "0"}, {"seed", std::to_string(c.seed)}});

  stdfs::create_directories(o.out / "results");
  // One process per shard at a time: a second one would wipe the first's work copy under it.
  RunSummary rs;
  rs.results = o.out / "results" / (shard_name(o.shard) + ".jsonl");
  ResultsFile results(rs.results, "shard " + std::to_string(o.shard.index) + "/" + std::to_string(o.shard.count));
  // campaign.json: the configuration and fault space every shard and the report agree on.
  const json meta = {{"format", campaign_format}, {"tool_version", resil::version}, {"config", c.to_json()}, {"space", space.to_json()},
                     {"strata", json::array()}};
  json meta_full = meta;
  for (const auto& s : strata) meta_full["strata"].push_back({{"label", s.label}, {"bits", s.sel.bits()}});
  if (!in_memory) meta_full["golden_xxh64"] = golden_identity(golden_files);
  require_regular_or_absent(o.out / "campaign.json");
  // The identity every record carries is that of the configuration campaign.json holds, as it holds
  // it (read_results checks records against it): a campaign.json kept below may spell the paths as
  // another run did (another working directory, or relative paths).
  json recorded_cfg = meta_full["config"];
  if (auto old = read_json_file(o.out / "campaign.json")) {
    json new_cfg = meta_full["config"];
    json old_cfg = with_paths_of(old->is_object() ? old->value("config", json()) : json(), new_cfg, o.config.parent_path());
    // How trials run ("mode") is not part of what they compute: a campaign may continue in another mode.
    if (old_cfg.is_object()) old_cfg.erase("mode");
    new_cfg.erase("mode");
    const std::string old_name = old_cfg.is_object() && old_cfg.contains("name") ? old_cfg.at("name").dump() : std::string("?");
    const bool other_bytes = old->contains("golden_xxh64") && old->at("golden_xxh64") != meta_full["golden_xxh64"];
    const bool recorded = (old_cfg != new_cfg || other_bytes) && !read_results(o.out).empty();
    if (old_cfg != new_cfg && recorded) {
      std::string diff;  // the settings that differ, with both values
      for (const auto& [k, v] : new_cfg.items())
        if (!old_cfg.is_object() || !old_cfg.contains(k) || old_cfg.at(k) != v)
          diff += (diff.empty() ? "" : ", ") + k + " " + (old_cfg.is_object() && old_cfg.contains(k) ? old_cfg.at(k).dump() : "(none)") +
                  " (this run: " + v.dump() + ")";
      throw UsageError(o.out.string() + " already holds campaign " + old_name + " with another configuration: " + diff + "; use another --out");
    }
    if (old_cfg != new_cfg || (other_bytes && !recorded)) {
      // Nothing was recorded under the old configuration or checkpoint (it failed before its first
      // trial, e.g. on a command that did not run): it is replaced, with its golden result, rather
      // than leaving OUT unusable for the corrected one.
      std::error_code ec;
      stdfs::remove(o.out / "golden.json", ec);
      stdfs::remove(o.out / "golden.log", ec);
      ckpt::fs::write_file_atomic(o.out / "campaign.json", meta_full.dump(2) + "\n");
      rs.replaced = old_name;
    } else {
      recorded_cfg = old->at("config");  // the same configuration: campaign.json is kept as it is
      if (!in_memory && !old->contains("golden_xxh64")) {
        // A campaign.json from before the golden bytes were recorded: recorded now, from here on.
        json updated = *old;
        updated["golden_xxh64"] = meta_full["golden_xxh64"];
        ckpt::fs::write_file_atomic(o.out / "campaign.json", updated.dump(2) + "\n");
      } else if (other_bytes) {
        std::string changed;  // the files whose bytes differ
        for (const auto& [f, h] : meta_full["golden_xxh64"].items())
          if (old->at("golden_xxh64").value(f, json()) != h) changed += (changed.empty() ? "" : ", ") + f;
        throw MismatchError(c.checkpoint + ": the golden checkpoint's bytes differ from those " + (o.out / "campaign.json").string() +
                            " recorded (changed: " + changed + "): its trials were drawn from another checkpoint; restore that one, or use another --out");
      }
    }
  } else {
    // No campaign.json (or one that is not JSON) beside recorded trials: another configuration
    // would adopt them as its own.
    if (!read_results(o.out).empty())
      throw UsageError(o.out.string() + " holds trial records but no readable campaign.json: they belong to an unknown configuration; use another --out");
    ckpt::fs::write_file_atomic(o.out / "campaign.json", meta_full.dump(2) + "\n");
  }

  // Trial ids are visited lazily (t = i, i + n, ...): nothing is allocated per planned trial, so
  // 1e15 planned trials cost no memory; only the records already written are held.
  const auto done_before = read_results(o.out);
  rs.planned = o.shard.trials_of(c.trials);
  for (const auto& [t, r] : done_before) {
    if (t % o.shard.count != o.shard.index) continue;
    ++rs.skipped;
    ++rs.counts[r.at("class").get<std::string>()];
  }
  const std::uint64_t left = rs.planned - rs.skipped;
  const std::uint64_t to_run = o.max_trials ? std::min(left, *o.max_trials) : left;

  auto cleanup = [&] {
    if (o.keep_work) return;
    std::error_code ec;
    stdfs::remove_all(wdir, ec);
    stdfs::remove(o.out / "work", ec);  // only when no other shard is working there
  };
  // Everything from the work copy to the last record. SIGINT/SIGTERM (install_stop_handlers)
  // throw StoppedError where a trial is waited for (its processes killed, the trial not recorded):
  // the records stay, the work copies go, and the message says how far the campaign got.
  auto trials = [&] {
    // The segments of the job a campaign killed with SIGKILL was running: ec-train would attach
    // them as a relaunch of that trial (or of the golden run) when it runs again under the same id.
    if (in_memory) detail::remove_ec_campaign_segments(wdir, max_jobs);
    // A private copy of the golden checkpoint for this shard; never the user's file.
    stdfs::remove_all(wdir);
    stdfs::create_directories(wdir);
    CkptFiles work = in_memory ? CkptFiles{} : copy_checkpoint(golden_files, wdir / "ckpt");
    bool golden_ran = false;
    const Golden golden = golden_reference(c, o, work, wdir, golden_ran);
    const auto ec_steps = in_memory ? detail_ec_steps(c, golden) : std::pair<std::uint64_t, std::uint64_t>{1, 1};
    if (golden_ran && !in_memory) {  // the command has had the work copy: start the trials from golden bytes again
      stdfs::remove_all(wdir / "ckpt");
      work = copy_checkpoint(golden_files, wdir / "ckpt");
    }
    if (to_run == 0) return;
    const auto gsum = in_memory ? detail::GoldenSums{} : golden_checksums(golden_files, c.format);
    auto make_context = [&](const stdfs::path& dir) {
      return std::make_unique<detail::TrialContext>(
          detail::TrialContext{c, golden, fmodel, strata, golden_files, gsum, o.shard, campaign_id(recorded_cfg), dir, {}, {}, {}, ec_steps});
    };
    // Trial ids in order, skipping those already recorded, until to_run have been handed out.
    std::uint64_t next_t = o.shard.index, handed = 0;
    auto next = [&]() -> std::optional<std::uint64_t> {
      detail::throw_if_stopped();
      if (handed == to_run) return std::nullopt;
      while (done_before.count(next_t)) next_t += o.shard.count;
      const std::uint64_t t = next_t;
      next_t += o.shard.count;
      ++handed;
      return t;
    };
    std::uint64_t done = rs.skipped;
    auto record = [&](const json& rec) {
      results.append(rec.dump());
      ++rs.ran;
      ++rs.counts[rec.at("class").get<std::string>()];
      ++done;
      if (on_trial) on_trial(rec, done, rs.planned, rs.counts);
    };
    const unsigned jobs = static_cast<unsigned>(std::min<std::uint64_t>(o.jobs, to_run));
    if (jobs <= 1) {
      auto ctx = make_context(wdir);
      ctx->work = work;
      ctx->prepare();
      while (const auto t = next()) record(ctx->run(*t));
    } else {
      // Each job process works in OUT/work/<shard>/job-<k>/ on its own copy of the golden checkpoint;
      // only this process appends records (one writer, one lock, one fsync per record).
      std::unique_ptr<detail::TrialContext> ctx;
      detail::run_jobs(
          jobs, next,
          [&](unsigned k) -> detail::TrialRunner {
            const stdfs::path dir = wdir / ("job-" + std::to_string(k));
            stdfs::remove_all(dir);
            stdfs::create_directories(dir);
            ctx = make_context(dir);
            if (!in_memory) ctx->work = copy_checkpoint(golden_files, dir / "ckpt");
            ctx->prepare();
            return [&](std::uint64_t t) { return ctx->run(t); };
          },
          record, [&] { results.close(); });
    }
  };
  try {
    trials();
  } catch (const StoppedError& e) {
    cleanup();
    throw StoppedError("campaign " + c.name + " " + e.what() + ": " + std::to_string(rs.ran) + " trial(s) recorded by this run, " +
                       std::to_string(rs.skipped + rs.ran) + " of " + std::to_string(rs.planned) + " in " + rs.results.string() +
                       " (the trials in flight were dropped); run the same command again to continue");
  }
  cleanup();
  return rs;
}

}  // namespace resil::inject

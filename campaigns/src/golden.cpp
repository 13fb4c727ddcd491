// The golden reference and the golden checksums (golden.hpp).
#include "golden.hpp"

#include <cmath>

#include "ec_train.hpp"
#include "targets.hpp"

#include "resil/ckpt/fs.hpp"
#include "resil/core/error.hpp"

namespace resil::inject::detail {

using nlohmann::json;
namespace stdfs = std::filesystem;

GoldenSums golden_checksums(const CkptFiles& f, Format format) {
  GoldenSums m;
  for (std::size_t i = 0; i < f.files.size(); ++i)
    for_each_checksum(f.files[i].string(), format, [&](const Tensor& t, std::uint64_t sum) { m[{i, t.info.path}] = sum; });
  return m;
}

std::optional<std::string> final_weights_of(const json& summary) {
  if (!summary.is_object() || !summary.contains("last_checkpoint") || !summary.at("last_checkpoint").is_string()) return std::nullopt;
  const std::string last = summary.at("last_checkpoint").get<std::string>();
  std::error_code ec;
  if (last.empty() || !stdfs::is_regular_file(last, ec)) return std::nullopt;
  try {
    return model_weights_hash(last);
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::optional<std::string> numeric_id_of(const json& summary) {
  if (!summary.is_object() || !summary.contains("numeric")) return std::nullopt;
  const json& n = summary.at("numeric");
  if (!n.is_object() || !n.contains("id") || !n.at("id").is_string()) return std::nullopt;
  // Empty: the run stopped before it computed anything (a checkpoint it refused to load, exit 7),
  // so no configuration to compare; the trial is classified by its exit code.
  if (n.at("id").get<std::string>().empty()) return std::nullopt;
  return n.at("id").get<std::string>();
}

void check_numeric(const CampaignConfig& c, const Golden& g, const json& trial_summary, std::uint64_t t) {
  if (c.allow_numeric_mismatch) return;
  const auto want = numeric_id_of(g.summary), got = numeric_id_of(trial_summary);
  if (want && got && *want != *got)
    throw MismatchError("campaign " + c.name + ": trial " + std::to_string(t) + " computed under numeric configuration " + *got +
                        ", the golden run under " + *want + ": its outcome would include differences no fault caused (run the golden "
                        "run under " + *got + " with another --out, or set \"allow_numeric_mismatch\": true)");
}

namespace {

/// Every metric's golden value, by name, when the campaign has more than one (none otherwise:
/// golden.json as it was); each must be a finite number (UsageError naming `what` and the metric).
std::map<std::string, double> golden_metrics(const CampaignConfig& c, const json& summary, const std::string& what) {
  std::map<std::string, double> m;
  if (c.more_metrics.empty()) return m;
  for (const auto& spec : c.metrics()) {
    const auto it = summary.find(spec.name);
    if (it == summary.end() || !it->is_number() || !std::isfinite(it->get<double>()))
      throw UsageError(what + " has no finite number \"" + spec.name + "\" (" + (it == summary.end() ? std::string("missing") : it->dump()) + ")");
    m[spec.name] = it->get<double>();
  }
  return m;
}

}  // namespace

Golden golden_reference(const CampaignConfig& c, const RunOptions& o, const CkptFiles& work, const stdfs::path& wdir, bool& ran) {
  ran = false;
  const stdfs::path gpath = o.out / "golden.json";
  require_regular_or_absent(gpath);
  if (auto j = read_json_file(gpath)) {
    Golden g;
    try {
      g = Golden::from_json(*j);
    } catch (const json::exception& e) {
      throw CorruptInputError(gpath.string() + ": not a golden record: " + e.what());
    }
    for (const auto& m : c.more_metrics)
      if (!g.metrics.count(m.name)) throw CorruptInputError(gpath.string() + ": not a golden record of this campaign: no golden value of metric " + m.name);
    return g;
  }
  Golden g;
  if (!c.golden_summary.empty()) {
    require_regular_or_absent(c.golden_summary);
    const auto sf = read_summary(c.golden_summary);
    const auto& s = sf.json;
    if (!s || !s->is_object())
      throw IoError(c.golden_summary + ": cannot read the golden summary JSON (" + (s ? std::string("not a JSON object") : sf.problem) + ")");
    if (!s->contains(c.metric) || !s->at(c.metric).is_number() || !std::isfinite(s->at(c.metric).get<double>()))
      throw UsageError(c.golden_summary + ": golden summary has no finite number \"" + c.metric + "\"");
    g.summary = *s;
    g.metric = s->at(c.metric).get<double>();
    g.metrics = golden_metrics(c, *s, c.golden_summary);
    if (!c.golden_final_checkpoint.empty()) g.final_weights = model_weights_hash(c.golden_final_checkpoint);
    if (c.kind == TrialKind::ec_train) g.final_weights = ec_golden_state(*s, c.golden_summary);
  } else {
    // The golden run: the trial command on the unaltered private copy.
    const stdfs::path scratch = wdir / "scratch", out = wdir / "summary.json";
    stdfs::remove_all(scratch);
    stdfs::create_directories(scratch);
    stdfs::remove(out);
    auto argv = substitute(c.command, {{"ckpt", work.entry.string()}, {"out", out.string()}, {"dir", scratch.string()},
                                       {"trial", "golden"}, {"seed", std::to_string(c.seed)}});
    const bool ec = c.kind == TrialKind::ec_train;  // the fault-free job, under a job id of its own
    const std::string job = ec ? ec_job_id(wdir, "golden") : std::string();
    if (ec) argv.insert(argv.end(), {"--job-id", job});
    CommandResult r;
    try {
      r = run_command(argv, c.timeout_s, o.out / "golden.log");
    } catch (const Error&) {  // stopped by SIGINT/SIGTERM, or it could not start
      if (ec) remove_ec_segments(job);
      throw;
    }
    if (ec) remove_ec_segments(job);
    ran = true;
    if (r.timed_out || r.signal || r.exit_code != 0)
      throw UsageError("campaign " + c.name + ": the golden run failed (" +
                       (r.timed_out ? std::string("timeout") : r.signal ? "signal " + std::to_string(r.signal) : "exit " + std::to_string(r.exit_code)) +
                       "); see " + (o.out / "golden.log").string());
    const auto sf = read_summary(out);
    const auto& s = sf.json;
    if (!s || !s->is_object() || !s->contains(c.metric) || !s->at(c.metric).is_number() || !std::isfinite(s->at(c.metric).get<double>()))
      throw UsageError("campaign " + c.name + ": the golden run wrote no summary with a finite number \"" + c.metric + "\" to {out} (" +
                       (!s ? sf.problem : !s->is_object() ? std::string("not a JSON object") : "its \"" + c.metric + "\" is " + (s->contains(c.metric) ? s->at(c.metric).dump() : std::string("missing"))) + ")");
    g.summary = *s;
    g.metric = s->at(c.metric).get<double>();
    g.metrics = golden_metrics(c, *s, "campaign " + c.name + ": the golden run's summary");
    g.wall_seconds = r.wall_seconds;
    g.final_weights = ec ? ec_golden_state(*s, "campaign " + c.name + ": the golden run's {out}") : final_weights_of(*s);
    stdfs::remove_all(scratch);
  }
  ckpt::fs::write_file_atomic(gpath, g.to_json().dump(2) + "\n");
  return g;
}

}  // namespace resil::inject::detail

// The ec-train trial kind: its configuration checks and record, the faults a trial draws, the
// arguments it adds to the command, its flip log, and the state segments it leaves (ec_train.hpp).
#include "ec_train.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <span>
#include <string_view>

#include "resil/ckpt/hash.hpp"
#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"
#include "resil/inject/fault_model.hpp"
#include "resil/inject/select_expr.hpp"

#include "json_fields.hpp"

namespace resil::inject {

using nlohmann::json;
namespace stdfs = std::filesystem;

namespace {

// Options the campaign gives every run itself: a command that gave them too would have two values.
constexpr const char* campaign_options[] = {"--job-id", "--inject", "--inject-seed", "--inject-bits", "--inject-model", "--inject-log"};

}  // namespace

void CampaignConfig::validate_ec_train(const std::string& source) const {
  auto fail = [&](const std::string& what) { throw UsageError(source + ": " + what); };
  if (!checkpoint.empty()) fail("\"checkpoint\": a campaign of kind ec-train flips the job's memory, not a checkpoint file");
  if (!golden_final_checkpoint.empty()) fail("golden.final_checkpoint: a campaign of kind ec-train compares the report's state_hash");
  if (mode != TrialMode::command) fail("mode \"worker\": an ec-train trial is an MPI job started per trial; use \"mode\": \"command\"");
  if (command.size() < 2)
    fail("\"command\" of kind ec-train must be an argv array (the campaign appends --inject and --job-id to it), e.g. "
         "[\"mpiexec\", \"-n\", \"4\", \"ec-train\", \"--scrub\", \"--report\", \"{out}\"]");
  bool out = false;
  for (const auto& a : command) {
    if (a.find("{ckpt}") != std::string::npos) fail("\"command\" names {ckpt}: a campaign of kind ec-train has no checkpoint to give it");
    out = out || a.find("{out}") != std::string::npos;
    for (const char* opt : campaign_options)
      if (a == opt || a.starts_with(std::string(opt) + "="))
        fail("\"command\" gives " + std::string(opt) + ", which the campaign sets for every run (inject.targets, inject.steps, inject.bits, inject.model)");
  }
  if (!out) fail("\"command\" must write the ec-train report to {out} (--report {out}): the trial is classified from it");
  if (targets.empty()) fail("inject.targets must name at least one of row, parity, stripe, mlp, opt");
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (std::find(std::begin(ec_train_targets), std::end(ec_train_targets), targets[i]) == std::end(ec_train_targets))
      fail("inject.targets: \"" + targets[i] + "\" is not an ec-train target (row, parity, stripe, mlp, opt)");
    if (std::find(targets.begin(), targets.begin() + static_cast<std::ptrdiff_t>(i), targets[i]) != targets.begin() + static_cast<std::ptrdiff_t>(i))
      fail("inject.targets: \"" + targets[i] + "\" is listed twice");
  }
  if (flips == 0 || flips > ec_train_max_flips) fail("inject.flips of kind ec-train must be in [1, " + std::to_string(ec_train_max_flips) + "]");
  if (steps && (steps->first < 1 || steps->first > steps->second)) fail("inject.steps must be [FIRST, LAST] with 1 <= FIRST <= LAST");
  // As ec-train reads them (a word of 32 bits), so that a bad value stops here, not in every trial.
  std::uint64_t mask = 0;
  try {
    mask = BitSpec::parse(bits).mask_for(ckpt::DType::f32);
  } catch (const UsageError& e) {
    fail(std::string("inject.bits: ") + e.what());
  }
  if (mask == 0) fail("inject.bits \"" + bits + "\" selects no bit of a 32-bit word");
}

json CampaignConfig::ec_train_json() const {
  json j = {{"name", name}, {"kind", "ec-train"}, {"command", command}, {"timeout_s", timeout_s}, {"trials", trials}, {"seed", seed},
            {"inject", {{"flips", flips}, {"model", model}, {"bits", bits}, {"targets", targets}}},
            {"metric", metric}, {"higher_is_better", higher_is_better}, {"tolerance", tolerance},
            {"load_failure_codes", load_failure_codes}, {"nan_codes", nan_codes}, {"detected_codes", detected_codes},
            {"confidence", confidence}, {"mode", detail::name_of(trial_mode_names, mode)}};
  if (steps) j["inject"]["steps"] = {steps->first, steps->second};
  if (!golden_summary.empty()) {
    std::error_code ec;
    const stdfs::path a = stdfs::absolute(golden_summary, ec);
    j["golden"] = {{"summary", ec ? golden_summary : a.lexically_normal().string()}};
  }
  if (allow_numeric_mismatch) j["allow_numeric_mismatch"] = true;
  if (!more_metrics.empty()) {
    for (const char* k : {"metric", "higher_is_better", "tolerance"}) j.erase(k);
    j["metrics"] = json::array();
    for (const auto& m : metrics()) j["metrics"].push_back({{"name", m.name}, {"higher_is_better", m.higher_is_better}, {"tolerance", m.tolerance}});
  }
  return j;
}

namespace detail {

std::string ec_job_id(const stdfs::path& wdir, const std::string& trial) {
  std::error_code ec;
  const std::string where = stdfs::weakly_canonical(stdfs::absolute(wdir, ec), ec).string();
  return "campaign-" + ckpt::hex_u64(ckpt::xxh64(std::as_bytes(std::span(where.data(), where.size())))) + "-" + trial;
}

std::string EcInjection::items() const {
  std::string s;
  for (const auto step : steps) s += (s.empty() ? "" : ",") + target + "@" + std::to_string(step);
  return s;
}

EcInjection draw_ec_injection(const CampaignConfig& c, std::uint64_t t, std::pair<std::uint64_t, std::uint64_t> steps) {
  EcInjection inj;
  inj.target = c.targets[t % c.targets.size()];
  inj.seed = derive_seed(c.seed, t);
  // The steps from a stream of the trial's seed apart from those ec-train draws from the same seed.
  Rng rng(inj.seed, 0x5fe95ull);
  for (std::uint64_t i = 0; i < c.flips; ++i) inj.steps.push_back(steps.first + rng.below(steps.second - steps.first + 1));
  return inj;
}

std::vector<std::string> ec_trial_args(const CampaignConfig& c, const EcInjection& inj, const std::string& job, const stdfs::path& log) {
  return {"--job-id", job, "--inject", inj.items(), "--inject-seed", std::to_string(inj.seed), "--inject-bits", c.bits, "--inject-model", c.model,
          "--inject-log", log.string()};
}

namespace {

bool all_digits(std::string_view s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos; }

// Remove the segments /dev/shm/resil-ec-<job>-<rank> (ec-train's names, docs/reference/ec-train.md,
// "State segments") owned by this user whose job id `job_of` accepts.
template <class JobOf>
std::size_t remove_segments_if(JobOf job_of) {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : stdfs::directory_iterator("/dev/shm", ec)) {
    const std::string name = e.path().filename().string();
    const auto dash = name.rfind('-');
    if (!name.starts_with("resil-ec-") || dash == std::string::npos || !all_digits(std::string_view(name).substr(dash + 1))) continue;
    if (!job_of(std::string_view(name).substr(9, dash - 9))) continue;
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (::unlink(e.path().c_str()) == 0) ++n;
  }
  return n;
}

}  // namespace

std::size_t remove_ec_segments(const std::string& job) {
  return remove_segments_if([&](std::string_view j) { return j == job; });
}

std::size_t remove_ec_campaign_segments(const stdfs::path& wdir, unsigned jobs) {
  // A run's job id is ec_job_id(dir, trial): the directory's part, then the trial id or "golden".
  std::set<std::string, std::less<>> dirs = {ec_job_id(wdir, "")};
  for (unsigned k = 0; k < jobs; ++k) dirs.insert(ec_job_id(wdir / ("job-" + std::to_string(k)), ""));
  const std::size_t len = dirs.begin()->size();
  return remove_segments_if([&](std::string_view j) {
    return j.size() > len && dirs.contains(j.substr(0, len)) && (j.substr(len) == "golden" || all_digits(j.substr(len)));
  });
}

EcFlips read_ec_flip_log(const stdfs::path& log) {
  EcFlips out;
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    const json j = json::parse(line, nullptr, false);
    // A run killed while rank 0 wrote its log may leave a cut last line: that flip was not applied.
    if (j.is_discarded() || !j.is_object() || j.value("type", "") != "flip") continue;
    json f = json::object();
    for (const char* k : {"dataset", "index", "nd", "dtype", "mask", "old", "new", "old_value", "new_value", "step", "rank", "target", "stripe", "member",
                          "member_row", "padding", "model"})
      if (j.contains(k)) f[k] = j.at(k);
    if (j.contains("anchor")) f["bit"] = j.at("anchor");
    const std::string dtype = j.value("dtype", "");
    const json& nv = j.contains("new_value") ? j.at("new_value") : json();
    if (dtype == "f32" && (nv.is_string() || (nv.is_number() && !std::isfinite(nv.get<double>())))) out.nonfinite = true;
    if (out.labels.empty() && j.contains("anchor") && j.at("anchor").is_number_unsigned()) {
      const auto bit = j.at("anchor").get<unsigned>();
      out.labels = {{"field", field_of(dtype, bit)}, {"bit", std::to_string(bit)}, {"role", j.value("target", "")}, {"dtype", dtype},
                    {"tensor", j.value("dataset", "")}};
    }
    out.flips.push_back(std::move(f));
  }
  return out;
}

json ec_train_fields(const json& report, const Golden& g) {
  auto at = [&](const char* k) { return report.is_object() && report.contains(k) ? report.at(k) : json(); };
  json e = {{"state_hash", at("state_hash")}, {"golden_state_hash", g.final_weights ? json(*g.final_weights) : json()}};
  const json reps = at("replicas");
  e["replicas_diverged"] = reps.is_object() && reps.contains("diverged") ? reps.at("diverged") : json();
  e["replicas_xxh64"] = reps.is_object() && reps.contains("xxh64") ? reps.at("xxh64") : json();  // per rank, rank order
  json inj = json::array();
  if (const json list = at("injections"); list.is_array())
    for (const auto& i : list) {
      if (!i.is_object()) continue;
      json x = json::object();
      for (const char* k : {"inject", "step", "rank", "target", "dataset", "stripe", "member", "member_row", "repaired_step", "flip_to_repair_s"})
        if (i.contains(k)) x[k] = i.at(k);
      inj.push_back(std::move(x));
    }
  e["injections"] = inj;
  const json scrub = at("scrub");
  e["repaired"] = scrub.is_object() && scrub.contains("repaired") ? scrub.at("repaired") : json();
  // What the scrub found and repaired, row by row (step, stripe, member, row, rank, kind, t); a trial's
  // faults are few, so the first 100 say it all.
  json repairs = json::array();
  if (scrub.is_object() && scrub.contains("repairs") && scrub.at("repairs").is_array())
    for (const auto& r : scrub.at("repairs"))
      if (repairs.size() < 100) repairs.push_back(r);
  e["repairs"] = scrub.is_object() ? repairs : json();
  e["unrepairable"] = scrub.is_object() && scrub.contains("unrepairable") ? scrub.at("unrepairable") : json();
  return e;
}

std::string ec_golden_state(const json& report, const std::string& what) {
  if (!report.is_object() || !report.contains("state_hash") || !report.at("state_hash").is_string())
    throw UsageError(what + " has no \"state_hash\": not an ec-train report (the command must write ec-train's --report to {out})");
  return report.at("state_hash").get<std::string>();
}

}  // namespace detail
}  // namespace resil::inject

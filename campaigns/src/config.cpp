// Campaign configuration (JSON), outcome names, golden record, fault-space bookkeeping, classification.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

#include "resil/ckpt/fs.hpp"
#include "resil/core/error.hpp"
#include "resil/campaign/campaign.hpp"
#include "resil/inject/fault_model.hpp"

#include "json_fields.hpp"

namespace resil::inject {

using nlohmann::json;
namespace stdfs = std::filesystem;

std::string_view outcome_name(Outcome o) noexcept {
  switch (o) {
    case Outcome::load_failure: return "load_failure";
    case Outcome::hang: return "hang";
    case Outcome::crash: return "crash";
    case Outcome::unreadable_summary: return "unreadable_summary";
    case Outcome::nan_at_load: return "nan_at_load";
    case Outcome::nan_later: return "nan_later";
    case Outcome::critical_sdc: return "critical_sdc";
    case Outcome::tolerable_sdc: return "tolerable_sdc";
    case Outcome::masked: return "masked";
    case Outcome::bit_masked: return "bit_masked";
    case Outcome::detected: return "detected";
  }
  return "?";
}

std::optional<Outcome> outcome_from_name(std::string_view s) noexcept {
  for (auto o : all_outcomes)
    if (outcome_name(o) == s) return o;
  return std::nullopt;
}

const std::vector<OutcomeGroup>& outcome_groups() {
  static const std::vector<OutcomeGroup> g = {
      {"sdc", {Outcome::critical_sdc, Outcome::tolerable_sdc}},
      {"due", {Outcome::load_failure, Outcome::hang, Outcome::crash, Outcome::nan_at_load, Outcome::nan_later, Outcome::detected}},
      {"masked_any", {Outcome::masked, Outcome::bit_masked}},
      {"unknown", {Outcome::unreadable_summary}},
  };
  return g;
}

bool in_outcome_group(std::string_view group, Outcome o) noexcept {
  for (const auto& g : outcome_groups())
    if (g.name == group) return std::find(g.members.begin(), g.members.end(), o) != g.members.end();
  return false;
}

unsigned CampaignConfig::processes_per_trial() const {
  if (command.size() < 2) return 1;
  const std::string launcher = stdfs::path(command[0]).filename().string();
  if (launcher != "mpiexec" && launcher != "mpirun" && launcher != "mpiexec.hydra" && launcher != "srun") return 1;
  auto count = [](std::string_view v) -> unsigned {
    unsigned n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    return ec == std::errc() && end == v.data() + v.size() && n > 0 ? n : 0;
  };
  // The launcher's own options come before the program: a word that is neither an option nor the
  // value an option before it may take is the program, where the scan stops.
  for (std::size_t i = 1; i < command.size(); ++i) {
    const std::string_view a = command[i];
    if (!a.starts_with("-")) {
      const std::string_view prev = command[i - 1];
      if (i == 1 || !prev.starts_with("-") || prev.find('=') != std::string_view::npos) break;
      continue;
    }
    for (std::string_view opt : {"-n", "-np", "--np", "--ntasks"}) {
      if (a == opt && i + 1 < command.size()) {
        if (const unsigned n = count(command[i + 1])) return n;
      } else if (a.size() > opt.size() && a.starts_with(opt) && (a[opt.size()] == '=' || opt == "-n")) {
        if (const unsigned n = count(a.substr(opt.size() + (a[opt.size()] == '=' ? 1 : 0)))) return n;
      }
    }
  }
  return 1;
}

namespace {

// Largest count a config may ask for in one trial (as `ckpt-flip inject --flips`).
inline constexpr std::uint64_t max_flips = 100'000'000;

std::string resolve(const std::string& p, const stdfs::path& base) {
  if (p.empty() || stdfs::path(p).is_absolute()) return p;
  return (base / p).lexically_normal().string();
}

// A path as campaign.json records it: absolute (from this process's working directory, which the
// relative ones are relative to), so another working directory gives the same record.
std::string absolute_path(const std::string& p) {
  std::error_code ec;
  const stdfs::path a = p.empty() ? stdfs::path() : stdfs::absolute(p, ec);
  return p.empty() || ec ? p : a.lexically_normal().string();
}

using Fields = detail::JsonFields;

}  // namespace

CampaignConfig CampaignConfig::parse(std::string_view text, const std::string& source) {
  CampaignConfig c;
  const json j = detail::parse_object(text, source, "a campaign configuration");
  const Fields f(j, "", source);
  f.choice("kind", c.kind, trial_kind_names);
  const bool ec = c.kind == TrialKind::ec_train;
  // An ec-train trial flips the job's memory: the checkpoint keys (and how a file is restored) have
  // nothing to act on, and are refused rather than ignored.
  if (ec) {
    f.only({"name", "kind", "checkpoint", "golden", "command", "timeout_s", "trials", "seed", "inject", "metric", "higher_is_better", "tolerance", "metrics",
            "load_failure_codes", "nan_codes", "detected_codes", "confidence", "mode", "allow_numeric_mismatch", "comment"});
    c.metric = "final_loss";  // the ec-train report's; a lower loss is better
    c.higher_is_better = false;
    c.detected_codes = {static_cast<int>(ExitCode::data_loss)};
    c.targets = {"row", "parity", "mlp", "opt"};
  } else {
    f.only({"name", "kind", "checkpoint", "format", "keep_crc", "golden", "command", "timeout_s", "trials", "seed", "inject", "metric", "higher_is_better", "tolerance",
            "metrics", "load_failure_codes", "nan_codes", "detected_codes", "restore", "verify", "confidence", "mode", "allow_numeric_mismatch", "comment"});
  }
  f.string("name", c.name);
  f.string("checkpoint", c.checkpoint);
  f.choice("format", c.format, format_names);
  f.boolean("keep_crc", c.keep_crc);
  const Fields g = f.object("golden");
  g.only({"summary", "final_checkpoint"});  // kind ec-train refuses final_checkpoint by name (validate)
  g.string("summary", c.golden_summary);
  g.string("final_checkpoint", c.golden_final_checkpoint);
  if (const json* cmd = f.find("command")) {
    if (cmd->is_string()) c.command = {cmd->get<std::string>()};
    else f.strings("command", c.command);
  }
  f.number("timeout_s", c.timeout_s, [](double x) { return x > 0; }, "a number of seconds > 0");
  f.integer("trials", c.trials, 1, std::numeric_limits<std::uint64_t>::max());
  f.integer("seed", c.seed, 0, std::numeric_limits<std::uint64_t>::max());
  const Fields in = f.object("inject");
  if (ec) {
    in.only({"flips", "model", "bits", "targets", "steps"});
    in.strings("targets", c.targets);
    if (const json* st = in.find("steps")) {
      const std::string want = "an array [FIRST, LAST] of steps with 1 <= FIRST <= LAST";
      if (!st->is_array() || st->size() != 2) in.bad("steps", want, *st);
      std::uint64_t a = 0, b = 0;
      const json ends = {{"first", (*st)[0]}, {"last", (*st)[1]}};  // Fields keeps a reference: a named object
      const Fields pair(ends, "inject.steps.", source);
      pair.integer("first", a, 1, std::uint64_t{1} << 40);
      pair.integer("last", b, 1, std::uint64_t{1} << 40);
      if (a > b) in.bad("steps", want, *st);
      c.steps = {a, b};
    }
    if (!in.find("bits")) c.bits = "all";
  } else {
    in.only({"flips", "model", "role", "bits", "include", "exclude", "as", "strata", "finite"});
  }
  in.integer("flips", c.flips, 1, ec ? ec_train_max_flips : max_flips);
  in.boolean("finite", c.finite);
  in.string("model", c.model);
  in.choice("role", c.role, role_names);
  c.role_defaulted = in.find("role") == nullptr;
  in.string("bits", c.bits);
  in.strings("include", c.include);
  in.strings("exclude", c.exclude);
  in.choice("as", c.as, as_names);
  in.choice("strata", c.strata, strata_names);
  f.string("metric", c.metric);
  f.boolean("higher_is_better", c.higher_is_better);
  f.number("tolerance", c.tolerance, [](double x) { return x >= 0; }, "a number >= 0");
  if (const json* ms = f.find("metrics")) {
    // Several metrics: each with its own direction and tolerance; the three single-metric keys would
    // say the same thing twice (and could disagree).
    for (const char* k : {"metric", "higher_is_better", "tolerance"})
      if (f.find(k)) throw UsageError(source + ": \"metrics\" lists every metric with its tolerance and direction: give it or \"" + k + "\", not both");
    const std::string want = "a non-empty array of objects {\"name\", \"tolerance\", \"higher_is_better\"}";
    if (!ms->is_array() || ms->empty() || std::any_of(ms->begin(), ms->end(), [](const json& e) { return !e.is_object(); })) f.bad("metrics", want, *ms);
    std::vector<MetricSpec> all;
    for (std::size_t i = 0; i < ms->size(); ++i) {
      const Fields m((*ms)[i], "metrics[" + std::to_string(i) + "].", source);
      m.only({"name", "higher_is_better", "tolerance"});
      if (!m.find("name")) throw UsageError(source + ": metrics[" + std::to_string(i) + "].name is required");
      MetricSpec spec;
      m.string("name", spec.name);
      m.boolean("higher_is_better", spec.higher_is_better);
      m.number("tolerance", spec.tolerance, [](double x) { return x >= 0; }, "a number >= 0");
      all.push_back(spec);
    }
    c.metric = all[0].name;
    c.higher_is_better = all[0].higher_is_better;
    c.tolerance = all[0].tolerance;
    c.more_metrics.assign(all.begin() + 1, all.end());
  }
  f.boolean("allow_numeric_mismatch", c.allow_numeric_mismatch);
  f.exit_codes("load_failure_codes", c.load_failure_codes);
  f.exit_codes("nan_codes", c.nan_codes);
  f.exit_codes("detected_codes", c.detected_codes);
  f.choice("restore", c.copies, restore_names);
  f.choice("verify", c.verify, verify_names);
  f.number("confidence", c.confidence, [](double x) { return x > 0 && x < 1; }, "a number in (0, 1)");
  f.choice("mode", c.mode, trial_mode_names);
  c.validate(source);
  // A trial that only evaluates never reads optimizer state: flips there would be masked by
  // construction, a third to two thirds of an Adam checkpoint's trials spent on nothing.
  if (c.role_defaulted && trial_only_evaluates(c.command)) c.role = Role::model;
  const stdfs::path base = stdfs::path(source).parent_path();
  c.checkpoint = resolve(c.checkpoint, base);
  c.golden_summary = resolve(c.golden_summary, base);
  c.golden_final_checkpoint = resolve(c.golden_final_checkpoint, base);
  return c;
}

void CampaignConfig::validate(const std::string& source) const {
  auto fail = [&](const std::string& what) { throw UsageError(source + ": " + what); };
  if (kind == TrialKind::ec_train) validate_ec_train(source);
  else if (checkpoint.empty()) fail("\"checkpoint\" (the golden checkpoint) is required");
  if (command.empty() || command[0].empty()) fail("\"command\" is required (e.g. [\"ckpt-train\", \"eval\", \"--from\", \"{ckpt}\", \"--summary\", \"{out}\"])");
  if (!(timeout_s > 0) || !std::isfinite(timeout_s)) fail("timeout_s must be a number of seconds > 0");
  if (trials == 0) fail("trials must be >= 1");
  if (flips == 0 || flips > max_flips) fail("inject.flips must be in [1, " + std::to_string(max_flips) + "]");
  // The fault model's own refusal names the command-line option it was written for.
  try {
    (void)FaultModel::parse(model);
  } catch (const UsageError& e) {
    std::string what = e.what();
    if (what.starts_with("--model ")) what.erase(0, 8);
    fail("inject.model " + what);
  }
  if (!(tolerance >= 0) || !std::isfinite(tolerance)) fail("tolerance must be a number >= 0");
  const auto all = metrics();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].name.empty()) fail("a metric's name must not be empty");
    if (!(all[i].tolerance >= 0) || !std::isfinite(all[i].tolerance)) fail("the tolerance of metric " + all[i].name + " must be a number >= 0");
    for (std::size_t k = 0; k < i; ++k)
      if (all[k].name == all[i].name) fail("metric " + all[i].name + " is listed twice in \"metrics\"");
  }
  if (!(confidence > 0 && confidence < 1)) fail("confidence must be in (0, 1)");
  for (const auto* codes : {&load_failure_codes, &nan_codes, &detected_codes})
    for (int x : *codes)
      if (x < 1 || x > 255) fail("exit codes in load_failure_codes, nan_codes and detected_codes must be in 1..255, not " + std::to_string(x));
  if (!golden_final_checkpoint.empty() && golden_summary.empty()) fail("golden.final_checkpoint needs golden.summary");
  if (mode == TrialMode::worker && (command.size() < 2 || trial_subcommand_at(command) == 0))
    fail("mode \"worker\" needs an argv command of a program that serves trials: ckpt-train eval or resume ([\"ckpt-train\", \"eval\", ...]), "
         "or a resil.trial Python module ([\"python3\", \"trial.py\", \"eval\", ...]); use \"mode\": \"command\" for anything else");
}

std::vector<MetricSpec> CampaignConfig::metrics() const {
  std::vector<MetricSpec> all{{metric, higher_is_better, tolerance}};
  all.insert(all.end(), more_metrics.begin(), more_metrics.end());
  return all;
}

std::size_t trial_subcommand_at(const std::vector<std::string>& command) {
  auto subcommand = [&](std::size_t i) { return command.size() > i && (command[i] == "eval" || command[i] == "resume"); };
  if (command.size() < 2) return 0;  // a string command (sh -c) names none
  if (subcommand(1)) return 1;
  // An interpreter by its name: python, python3, python3.11 (a path or not).
  const std::string prog = stdfs::path(command[0]).filename().string();
  const bool python = prog.starts_with("python") && std::all_of(prog.begin() + 6, prog.end(), [](char ch) { return (ch >= '0' && ch <= '9') || ch == '.'; });
  return python && subcommand(2) ? 2 : 0;
}

bool trial_only_evaluates(const std::vector<std::string>& command) {
  const std::size_t i = trial_subcommand_at(command);
  return i != 0 && command[i] == "eval";
}

CampaignConfig CampaignConfig::load(const stdfs::path& p) {
  std::string text;
  try {
    text = ckpt::fs::read_file(p);
  } catch (const Error&) {
    throw IoError(p.string() + ": cannot read the campaign configuration");
  }
  return parse(text, p.string());
}

json CampaignConfig::to_json() const {
  if (kind == TrialKind::ec_train) return ec_train_json();
  json j = {{"name", name}, {"checkpoint", absolute_path(checkpoint)}, {"command", command}, {"timeout_s", timeout_s}, {"trials", trials},
            {"seed", seed},
            {"inject", {{"flips", flips}, {"model", model}, {"role", detail::name_of(role_names, role)}, {"bits", bits}, {"include", include},
                        {"exclude", exclude}, {"as", detail::name_of(as_names, as)}, {"strata", detail::name_of(strata_names, strata)}}},
            {"metric", metric}, {"higher_is_better", higher_is_better}, {"tolerance", tolerance},
            {"load_failure_codes", load_failure_codes}, {"nan_codes", nan_codes}, {"restore", detail::name_of(restore_names, copies)},
            {"verify", detail::name_of(verify_names, verify)}, {"confidence", confidence}, {"mode", detail::name_of(trial_mode_names, mode)}};
  // Written only when set: the campaign.json of a configuration without them stays as it was (a
  // campaign started before these keys existed continues).
  if (format != Format::automatic) j["format"] = detail::name_of(format_names, format);
  if (keep_crc) j["keep_crc"] = true;
  if (!golden_summary.empty()) j["golden"] = {{"summary", absolute_path(golden_summary)}, {"final_checkpoint", absolute_path(golden_final_checkpoint)}};
  if (finite) j["inject"]["finite"] = true;  // absent when false: campaign.json of older runs compares equal
  if (allow_numeric_mismatch) j["allow_numeric_mismatch"] = true;
  if (!detected_codes.empty()) j["detected_codes"] = detected_codes;  // absent when empty: older campaign.json compares equal
  if (!more_metrics.empty()) {  // as the configuration gives them: "metrics" instead of the first metric's three keys
    for (const char* k : {"metric", "higher_is_better", "tolerance"}) j.erase(k);
    j["metrics"] = json::array();
    for (const auto& m : metrics()) j["metrics"].push_back({{"name", m.name}, {"higher_is_better", m.higher_is_better}, {"tolerance", m.tolerance}});
  }
  return j;
}

json Golden::to_json() const {
  json j = {{"metric", metric}, {"final_weights_xxh64", final_weights ? json(*final_weights) : json(nullptr)}, {"summary", summary},
            {"wall_seconds", wall_seconds}};
  if (!metrics.empty()) j["metrics"] = metrics;  // absent for one metric: golden.json as it always was
  return j;
}

double Golden::value_of(const std::string& name) const {
  const auto it = metrics.find(name);
  return it == metrics.end() ? metric : it->second;
}

Golden Golden::from_json(const json& j) {
  Golden g;
  g.metric = j.at("metric").get<double>();
  if (j.contains("final_weights_xxh64") && j.at("final_weights_xxh64").is_string()) g.final_weights = j.at("final_weights_xxh64").get<std::string>();
  if (j.contains("summary")) g.summary = j.at("summary");
  if (j.contains("wall_seconds")) g.wall_seconds = j.at("wall_seconds").get<double>();
  if (j.contains("metrics")) g.metrics = j.at("metrics").get<std::map<std::string, double>>();
  return g;
}

json FaultSpace::to_json() const { return {{"total_bits", total}, {"by", by}}; }

FaultSpace FaultSpace::from_json(const json& j) {
  FaultSpace s;
  s.total = j.at("total_bits").get<double>();
  s.by = j.at("by").get<std::map<std::string, std::map<std::string, double>>>();
  return s;
}

std::string field_of(std::string_view dtype, unsigned bit) {
  const auto t = ckpt::dtype_from_name(dtype);
  const auto fl = t ? ckpt::float_layout(*t) : std::nullopt;  // fp8 too (safetensors F8_E4M3, F8_E5M2)
  if (!fl) return "integer";
  if (bit == ckpt::dtype_bits(*t) - 1) return "sign";
  return bit >= fl->mantissa_bits ? "exponent" : "mantissa";
}

std::string role_of(std::string_view dataset) { return role_of(schema_role(dataset)); }

std::string role_of(TensorRole role) { return role_name(role); }

Classified classify(const CampaignConfig& c, const Golden& g, const CommandResult& r, bool injected_nonfinite,
                    const std::optional<std::string>& final_weights) {
  Classified k;
  auto has = [](const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  if (r.timed_out) {
    k.outcome = Outcome::hang;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", c.timeout_s);  // 1, 0.5, 1800: not to_string's 1.000000
    k.note = std::string("no exit within ") + secs + " s; process group killed";
    return k;
  }
  if (r.signal != 0) {
    k.outcome = Outcome::crash;
    k.note = "killed by signal " + std::to_string(r.signal);
    return k;
  }
  if (has(c.load_failure_codes, r.exit_code)) {
    k.outcome = Outcome::load_failure;
    k.note = "exit " + std::to_string(r.exit_code);
    return k;
  }
  if (has(c.detected_codes, r.exit_code)) {
    k.outcome = Outcome::detected;
    k.note = "exit " + std::to_string(r.exit_code);
    return k;
  }
  // Only a boolean true counts: a summary is the command's output, not something to trust the type of.
  const bool nan_flag = r.summary && r.summary->is_object() && r.summary->contains("nan_detected") &&
                        r.summary->at("nan_detected").is_boolean() && r.summary->at("nan_detected").get<bool>();
  if (has(c.nan_codes, r.exit_code) || nan_flag) {
    k.outcome = injected_nonfinite ? Outcome::nan_at_load : Outcome::nan_later;
    k.note = "exit " + std::to_string(r.exit_code) + (nan_flag ? ", nan_detected" : "");
    return k;
  }
  if (r.exit_code != 0) {
    k.outcome = Outcome::crash;
    k.note = "exit " + std::to_string(r.exit_code);
    return k;
  }
  // Exit 0: the result is in the summary. One the campaign cannot read is its own class, never a
  // crash: the command ran to its end, and the note says what was wrong with what it wrote.
  if (!r.summary || !r.summary->is_object()) {
    k.outcome = Outcome::unreadable_summary;
    k.note = !r.summary ? (r.summary_problem.empty() ? std::string("no summary at {out}") : r.summary_problem) : "the summary is not a JSON object";
    return k;
  }
  // Every metric first read: one missing or of another type leaves the outcome unseen.
  const auto specs = c.metrics();
  for (const auto& m : specs) {
    const auto it = r.summary->find(m.name);
    if (it == r.summary->end()) {
      k.outcome = Outcome::unreadable_summary;
      k.note = "the summary has no \"" + m.name + "\"";
      return k;
    }
    if (!it->is_null() && !it->is_number()) {
      k.outcome = Outcome::unreadable_summary;
      k.note = "\"" + m.name + "\" is " + std::string(it->type_name()) + ", not a number";
      return k;
    }
  }
  const json& first = r.summary->at(c.metric);
  if (first.is_number()) {
    k.metric = first.get<double>();
    k.delta = *k.metric - g.metric;
  }
  // Then each metric against golden's: null (ckpt-train writes non-finite values as null) and NaN,
  // Infinity, -Infinity (as Python's json writes them, parse_summary) are non-finite.
  const bool several = specs.size() > 1;
  std::string nonfinite;
  std::vector<std::string> critical, changed;  // "name +delta (tolerance t)" of the metrics that moved
  for (const auto& m : specs) {
    const json& v = r.summary->at(m.name);
    const double gv = g.value_of(m.name);
    const double x = v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
    std::string verdict = "masked";
    if (!std::isfinite(x)) {
      verdict = "nonfinite";
      if (nonfinite.empty()) nonfinite = m.name + " is " + (v.is_null() ? std::string("not a finite number") : std::isnan(x) ? "NaN" : x > 0 ? "Infinity" : "-Infinity");
    } else if (x != gv) {
      const double worse = m.higher_is_better ? gv - x : x - gv;
      verdict = worse > m.tolerance ? "critical" : "tolerable";
      char b[96];
      std::snprintf(b, sizeof b, " %+.6g (tolerance %g)", x - gv, m.tolerance);
      (worse > m.tolerance ? critical : changed).push_back(m.name + b);
    }
    if (several)
      k.metrics[m.name] = {{"value", std::isfinite(x) ? json(x) : json(nullptr)}, {"golden", gv},
                           {"delta", std::isfinite(x) ? json(x - gv) : json(nullptr)}, {"verdict", verdict}};
  }
  if (!nonfinite.empty()) {
    k.outcome = injected_nonfinite ? Outcome::nan_at_load : Outcome::nan_later;
    k.note = nonfinite;
    return k;
  }
  if (!critical.empty()) k.outcome = Outcome::critical_sdc;
  else if (!changed.empty()) k.outcome = Outcome::tolerable_sdc;
  else k.outcome = final_weights && g.final_weights && *final_weights == *g.final_weights ? Outcome::bit_masked : Outcome::masked;
  // Which metrics moved, when there are several (one metric's delta is the record's own).
  if (several) {
    for (const auto* list : {&critical, &changed})
      for (const auto& moved : *list) k.note += (k.note.empty() ? "" : "; ") + moved;
  }
  return k;
}

ShardSpec ShardSpec::parse(std::string_view text) {
  // Decimal digits only: stoull would accept "-1" (as 2^64 - 1), " 1" and "+1".
  auto number = [&](std::string_view d, std::uint64_t& v) {
    const auto [p, ec] = std::from_chars(d.data(), d.data() + d.size(), v);
    return !d.empty() && std::all_of(d.begin(), d.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) && ec == std::errc() &&
           p == d.data() + d.size();
  };
  ShardSpec s;
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || !number(text.substr(0, slash), s.index) || !number(text.substr(slash + 1), s.count))
    throw UsageError("--shard " + std::string(text) + ": expected i/n with decimal numbers, e.g. 0/4");
  if (s.count == 0 || s.index >= s.count) throw UsageError("--shard " + std::string(text) + ": need 0 <= i < n");
  return s;
}

}  // namespace resil::inject

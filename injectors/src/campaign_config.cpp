// Campaign configuration (JSON), outcome names, golden record, fault-space bookkeeping, classification.
#include <algorithm>
#include <cmath>

#include "resil/ckpt/fs.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/campaign.hpp"

namespace resil::inject {

using nlohmann::json;
namespace stdfs = std::filesystem;

std::string_view outcome_name(Outcome o) noexcept {
  switch (o) {
    case Outcome::load_failure: return "load_failure";
    case Outcome::hang: return "hang";
    case Outcome::crash: return "crash";
    case Outcome::nan_at_load: return "nan_at_load";
    case Outcome::nan_later: return "nan_later";
    case Outcome::critical_sdc: return "critical_sdc";
    case Outcome::tolerable_sdc: return "tolerable_sdc";
    case Outcome::masked: return "masked";
    case Outcome::bit_masked: return "bit_masked";
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
      {"due", {Outcome::load_failure, Outcome::hang, Outcome::crash, Outcome::nan_at_load, Outcome::nan_later}},
      {"masked_any", {Outcome::masked, Outcome::bit_masked}},
  };
  return g;
}

namespace {

template <class T>
void get_opt(const json& j, const char* key, T& v) {
  if (j.contains(key) && !j.at(key).is_null()) v = j.at(key).get<T>();
}

const char* known_keys[] = {"name",   "checkpoint", "golden", "command", "timeout_s", "trials", "seed",   "inject",
                            "metric", "higher_is_better", "tolerance", "load_failure_codes", "nan_codes", "restore",
                            "verify", "confidence", "comment"};

std::string resolve(const std::string& p, const stdfs::path& base) {
  if (p.empty() || stdfs::path(p).is_absolute()) return p;
  return (base / p).lexically_normal().string();
}

}  // namespace

CampaignConfig CampaignConfig::parse(std::string_view text, const std::string& source) {
  CampaignConfig c;
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    throw UsageError(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw UsageError(source + ": a campaign configuration is a JSON object");
  for (const auto& [k, v] : j.items())
    if (std::find_if(std::begin(known_keys), std::end(known_keys), [&](const char* n) { return k == n; }) == std::end(known_keys))
      throw UsageError(source + ": unknown key '" + k + "' (see docs/campaigns.md)");
  const stdfs::path base = stdfs::path(source).parent_path();
  try {
    get_opt(j, "name", c.name);
    get_opt(j, "checkpoint", c.checkpoint);
    if (j.contains("golden")) {
      const json& g = j.at("golden");
      get_opt(g, "summary", c.golden_summary);
      get_opt(g, "final_checkpoint", c.golden_final_checkpoint);
    }
    if (j.contains("command")) {
      const json& cmd = j.at("command");
      if (cmd.is_string()) c.command = {cmd.get<std::string>()};
      else c.command = cmd.get<std::vector<std::string>>();
    }
    get_opt(j, "timeout_s", c.timeout_s);
    get_opt(j, "trials", c.trials);
    get_opt(j, "seed", c.seed);
    if (j.contains("inject")) {
      const json& in = j.at("inject");
      get_opt(in, "flips", c.flips);
      get_opt(in, "model", c.model);
      get_opt(in, "role", c.role);
      get_opt(in, "bits", c.bits);
      get_opt(in, "include", c.include);
      get_opt(in, "exclude", c.exclude);
      get_opt(in, "as", c.as);
      get_opt(in, "strata", c.strata);
    }
    get_opt(j, "metric", c.metric);
    get_opt(j, "higher_is_better", c.higher_is_better);
    get_opt(j, "tolerance", c.tolerance);
    get_opt(j, "load_failure_codes", c.load_failure_codes);
    get_opt(j, "nan_codes", c.nan_codes);
    std::string restore = "revert";
    get_opt(j, "restore", restore);
    if (restore != "revert" && restore != "copy") throw UsageError(source + ": restore must be \"revert\" or \"copy\", not \"" + restore + "\"");
    c.copies = restore == "copy";
    get_opt(j, "verify", c.verify);
    get_opt(j, "confidence", c.confidence);
  } catch (const json::exception& e) {
    throw UsageError(source + ": bad value: " + e.what());
  }
  if (c.checkpoint.empty()) throw UsageError(source + ": \"checkpoint\" (the golden checkpoint) is required");
  if (c.command.empty() || c.command[0].empty()) throw UsageError(source + ": \"command\" is required (e.g. [\"ckpt-train\", \"eval\", \"--from\", \"{ckpt}\", \"--summary\", \"{out}\"])");
  if (!(c.timeout_s > 0)) throw UsageError(source + ": timeout_s must be > 0");
  if (c.trials == 0) throw UsageError(source + ": trials must be >= 1");
  if (c.flips == 0) throw UsageError(source + ": inject.flips must be >= 1");
  if (c.role != "all" && c.role != "model" && c.role != "optimizer") throw UsageError(source + ": inject.role must be all, model or optimizer");
  if (c.strata != "none" && std::find_if(std::begin(stratum_dims), std::end(stratum_dims), [&](const char* d) { return c.strata == d; }) == std::end(stratum_dims))
    throw UsageError(source + ": inject.strata must be none, field, bit, role, dtype or tensor");
  if (c.verify != "touched" && c.verify != "all") throw UsageError(source + ": verify must be \"touched\" or \"all\"");
  if (!(c.tolerance >= 0)) throw UsageError(source + ": tolerance must be >= 0");
  if (!(c.confidence > 0 && c.confidence < 1)) throw UsageError(source + ": confidence must be in (0, 1)");
  c.checkpoint = resolve(c.checkpoint, base);
  c.golden_summary = resolve(c.golden_summary, base);
  c.golden_final_checkpoint = resolve(c.golden_final_checkpoint, base);
  return c;
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
  json j = {{"name", name}, {"checkpoint", checkpoint}, {"command", command}, {"timeout_s", timeout_s}, {"trials", trials},
            {"seed", seed},
            {"inject", {{"flips", flips}, {"model", model}, {"role", role}, {"bits", bits}, {"include", include},
                        {"exclude", exclude}, {"as", as}, {"strata", strata}}},
            {"metric", metric}, {"higher_is_better", higher_is_better}, {"tolerance", tolerance},
            {"load_failure_codes", load_failure_codes}, {"nan_codes", nan_codes}, {"restore", copies ? "copy" : "revert"},
            {"verify", verify}, {"confidence", confidence}};
  if (!golden_summary.empty()) j["golden"] = {{"summary", golden_summary}, {"final_checkpoint", golden_final_checkpoint}};
  return j;
}

json Golden::to_json() const {
  return {{"metric", metric}, {"final_weights_xxh64", final_weights ? json(*final_weights) : json(nullptr)}, {"summary", summary},
          {"wall_seconds", wall_seconds}};
}

Golden Golden::from_json(const json& j) {
  Golden g;
  g.metric = j.at("metric").get<double>();
  if (j.contains("final_weights_xxh64") && j.at("final_weights_xxh64").is_string()) g.final_weights = j.at("final_weights_xxh64").get<std::string>();
  if (j.contains("summary")) g.summary = j.at("summary");
  if (j.contains("wall_seconds")) g.wall_seconds = j.at("wall_seconds").get<double>();
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
  unsigned width = 0, mant = 0;
  if (dtype == "f64") width = 64, mant = 52;
  else if (dtype == "f32") width = 32, mant = 23;
  else if (dtype == "f16") width = 16, mant = 10;
  else if (dtype == "bf16") width = 16, mant = 7;
  if (width == 0) return "integer";
  if (bit == width - 1) return "sign";
  return bit >= mant ? "exponent" : "mantissa";
}

std::string role_of(std::string_view dataset) {
  if (dataset.starts_with("/model/")) return "model";
  if (dataset.starts_with("/optimizer/")) return "optimizer";
  return "other";
}

Classified classify(const CampaignConfig& c, const Golden& g, const CommandResult& r, bool injected_nonfinite,
                    const std::optional<std::string>& final_weights) {
  Classified k;
  auto has = [](const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  if (r.timed_out) {
    k.outcome = Outcome::hang;
    k.note = "no exit within " + std::to_string(c.timeout_s) + " s; process group killed";
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
  const bool nan_flag = r.summary && r.summary->is_object() && r.summary->value("nan_detected", false);
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
  if (!r.summary || !r.summary->is_object()) {
    k.outcome = Outcome::crash;
    k.note = "exit 0 but no readable summary";
    return k;
  }
  const auto it = r.summary->find(c.metric);
  if (it == r.summary->end()) {
    k.outcome = Outcome::crash;
    k.note = "summary has no \"" + c.metric + "\"";
    return k;
  }
  if (!it->is_number()) {  // null: ckpt-train writes non-finite values as null
    k.outcome = injected_nonfinite ? Outcome::nan_at_load : Outcome::nan_later;
    k.note = c.metric + " is not a finite number";
    return k;
  }
  const double m = it->get<double>();
  k.metric = m;
  k.delta = m - g.metric;
  if (!std::isfinite(m)) {
    k.outcome = injected_nonfinite ? Outcome::nan_at_load : Outcome::nan_later;
    return k;
  }
  if (m == g.metric) {
    k.outcome = final_weights && g.final_weights && *final_weights == *g.final_weights ? Outcome::bit_masked : Outcome::masked;
    return k;
  }
  const double worse = c.higher_is_better ? g.metric - m : m - g.metric;
  k.outcome = worse > c.tolerance ? Outcome::critical_sdc : Outcome::tolerable_sdc;
  return k;
}

ShardSpec ShardSpec::parse(std::string_view text) {
  ShardSpec s;
  const auto slash = text.find('/');
  try {
    if (slash == std::string_view::npos) throw std::invalid_argument("no '/'");
    std::size_t used = 0;
    const std::string a(text.substr(0, slash)), b(text.substr(slash + 1));
    s.index = std::stoull(a, &used);
    if (used != a.size()) throw std::invalid_argument("index");
    s.count = std::stoull(b, &used);
    if (used != b.size()) throw std::invalid_argument("count");
  } catch (const std::exception&) {
    throw UsageError("--shard " + std::string(text) + ": expected i/n, e.g. 0/4");
  }
  if (s.count == 0 || s.index >= s.count) throw UsageError("--shard " + std::string(text) + ": need 0 <= i < n");
  return s;
}

}  // namespace resil::inject

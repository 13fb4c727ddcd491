#include "resil/campaign/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "resil/ckpt/fs.hpp"
#include "resil/core/error.hpp"
#include "resil/campaign/campaign.hpp"
#include "resil/campaign/stats.hpp"
#include "golden.hpp"

namespace resil::inject {

using nlohmann::json;
namespace stdfs = std::filesystem;

namespace {

json interval_json(const Interval& i) { return json::array({i.lo, i.hi}); }

json rate_json(const Rate& r) {
  return {{"x", r.x}, {"n", r.n}, {"p", r.p}, {"wilson", interval_json(r.wilson)}, {"clopper_pearson", interval_json(r.clopper_pearson)}};
}

json strat_json(const StratifiedRate& s) {
  return {{"p", s.p},        {"variance", s.variance}, {"n", s.n}, {"n_eff", s.n_eff}, {"coverage", s.coverage},
          {"wilson", interval_json(s.wilson)}, {"clopper_pearson", interval_json(s.clopper_pearson)}};
}

bool in_group(const OutcomeGroup& g, const std::string& cls) {
  for (auto o : g.members)
    if (outcome_name(o) == cls) return true;
  return false;
}

std::string pct(double p) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f%%", 100 * p);
  return b;
}

std::string ci(const json& iv) {
  char b[64];
  std::snprintf(b, sizeof b, "[%.2f, %.2f]%%", 100 * iv.at(0).get<double>(), 100 * iv.at(1).get<double>());
  return b;
}

/// Keys of a per-dimension table in display order (bit positions numerically).
std::vector<std::string> ordered_keys(const json& d, const std::string& dim) {
  std::vector<std::string> k;
  for (const auto& [key, v] : d.items()) k.push_back(key);
  if (dim == "bit") std::sort(k.begin(), k.end(), [](const std::string& a, const std::string& b) { return std::stoi(a) < std::stoi(b); });
  return k;
}

// s left-aligned in a column of w characters, and at least one space after it (a longer cell does
// not run into the next).
std::string pad(std::string s, std::size_t w) {
  s += std::string(s.size() < w ? w - s.size() : 1, ' ');
  return s;
}

}  // namespace

std::vector<stdfs::path> report_inputs(const stdfs::path& out) {
  std::vector<stdfs::path> v{out / "campaign.json", out / "golden.json"};
  std::error_code ec;
  if (stdfs::is_directory(out / "results", ec))
    for (const auto& e : stdfs::directory_iterator(out / "results", ec))
      if (e.path().extension() == ".jsonl") v.push_back(e.path());
  return v;
}

std::vector<json> merged_records(const stdfs::path& out) {
  std::vector<json> v;
  for (auto& [t, r] : read_results(out)) v.push_back(std::move(r));
  return v;
}

json build_report(const stdfs::path& out) {
  json meta, golden;
  std::error_code ec;
  if (!stdfs::exists(out / "campaign.json", ec))
    throw IoError((out / "campaign.json").string() + ": not a campaign directory (run `ckpt-flip campaign CONFIG --out DIR` first)");
  const std::string meta_text = ckpt::fs::read_file(out / "campaign.json");  // IoError: not a regular file, unreadable
  try {
    meta = json::parse(meta_text);
  } catch (const std::exception& e) {
    throw CorruptInputError((out / "campaign.json").string() + ": not JSON: " + e.what());
  }
  double golden_seconds = 0;
  // No golden.json yet (the golden run has not finished): a report without it. One that is there
  // but is no golden record (hand-edited, `{}`) is named, not taken for absent or left to fail later.
  if (stdfs::exists(out / "golden.json", ec)) {
    const std::string text = ckpt::fs::read_file(out / "golden.json");
    try {
      golden = json::parse(text);
      if (!golden.is_object()) throw std::runtime_error("not a JSON object");
      golden_seconds = Golden::from_json(golden).wall_seconds;
    } catch (const std::exception& e) {
      throw CorruptInputError((out / "golden.json").string() + ": not a golden record: " + e.what());
    }
    // Wall times are not results: they go to "timing", so merged shards equal a single run.
    golden.erase("wall_seconds");
    if (golden.contains("summary") && golden["summary"].is_object()) golden["summary"].erase("wall_seconds");
  }
  // A hand-edited or foreign campaign.json: one line naming it, not an internal error.
  FaultSpace space;
  double conf = 0.95;
  std::string strata;
  try {
    if (!meta.is_object() || !meta.at("config").is_object() || !meta.at("config").at("trials").is_number_unsigned() ||
        !meta.at("config").at("inject").is_object())
      throw std::runtime_error("\"config\" with \"trials\" and \"inject\" expected");
    space = FaultSpace::from_json(meta.at("space"));
    conf = meta.at("config").value("confidence", 0.95);
    strata = meta.at("config").at("inject").value("strata", std::string("none"));
  } catch (const std::exception& e) {
    throw CorruptInputError((out / "campaign.json").string() + ": not a valid campaign description: " + e.what());
  }
  const json& cfg = meta.at("config");
  const auto records = merged_records(out);
  const std::uint64_t n = records.size();

  json rep = {{"format", "resil-campaign-report/1"}, {"campaign", cfg}, {"golden", golden}, {"space", space.to_json()},
              {"confidence", conf}, {"sampling_strata", strata}};
  rep["trials"] = {{"planned", cfg.at("trials")}, {"done", n}, {"missing", cfg.at("trials").get<std::uint64_t>() - std::min<std::uint64_t>(n, cfg.at("trials").get<std::uint64_t>())}};

  std::map<std::string, std::uint64_t> counts;
  double wall = 0, cpu = 0;
  std::uint64_t timed = 0;  // records with cpu_seconds (command mode)
  for (const auto& r : records) {
    ++counts[r.at("class").get<std::string>()];
    wall += r.value("wall_seconds", 0.0);
    if (r.contains("cpu_seconds")) {
      cpu += r.at("cpu_seconds").get<double>();
      ++timed;
    }
  }
  json overall = {{"classes", json::object()}, {"groups", json::object()}};
  for (auto o : all_outcomes) overall["classes"][std::string(outcome_name(o))] = rate_json(rate(counts[std::string(outcome_name(o))], n, conf));
  for (const auto& g : outcome_groups()) {
    std::uint64_t x = 0;
    for (auto o : g.members) x += counts[std::string(outcome_name(o))];
    overall["groups"][std::string(g.name)] = rate_json(rate(x, n, conf));
  }
  rep["overall"] = overall;
  // Trials whose outcome the campaign could not read (class unreadable_summary), by what was wrong
  // with the summary: a script that writes something the campaign cannot read shows here, not as
  // crashes.
  json unreadable = json::object();
  for (const auto& r : records)
    if (r.at("class") == outcome_name(Outcome::unreadable_summary)) {
      const std::string why = r.contains("note") && r.at("note").is_string() ? r.at("note").get<std::string>() : std::string();
      unreadable[why.empty() ? "(no note)" : why].push_back(r.at("trial"));
    }
  rep["unreadable_summaries"] = unreadable;
  // Several metrics: for each, in how many trials it held, moved within its tolerance, moved
  // beyond it, or was non-finite (the class is decided by all of them: masked when every one held).
  if (cfg.contains("metrics") && cfg.at("metrics").is_array()) {
    json per = json::array();
    for (const auto& m : cfg.at("metrics")) {
      const std::string name = m.value("name", std::string());
      json e = {{"name", name}, {"higher_is_better", m.value("higher_is_better", true)}, {"tolerance", m.value("tolerance", 0.0)},
                {"golden", golden.is_object() && golden.contains("metrics") ? golden.at("metrics").value(name, json()) : json()},
                {"verdicts", {{"masked", 0}, {"tolerable", 0}, {"critical", 0}, {"nonfinite", 0}}}};
      for (const auto& r : records)
        if (r.contains("metrics") && r.at("metrics").is_object() && r.at("metrics").contains(name)) {
          const std::string v = r.at("metrics").at(name).value("verdict", std::string());
          if (e["verdicts"].contains(v)) e["verdicts"][v] = e["verdicts"][v].get<std::uint64_t>() + 1;
        }
      per.push_back(e);
    }
    rep["metrics"] = per;
  }

  // Per stratum of every dimension, and the estimate reweighted by stratum size in the fault space.
  json by = json::object(), rew = json::object();
  for (const char* dim : stratum_dims) {
    std::map<std::string, std::map<std::string, std::uint64_t>> cnt;  // stratum -> class -> count
    std::map<std::string, std::uint64_t> tot;
    for (const auto& r : records) {
      if (!r.contains("strata") || !r.at("strata").contains(dim)) continue;
      const std::string s = r.at("strata").at(dim).get<std::string>();
      ++cnt[s][r.at("class").get<std::string>()];
      ++tot[s];
    }
    const auto it = space.by.find(dim);
    std::map<std::string, double> sizes = it == space.by.end() ? std::map<std::string, double>{} : it->second;
    json d = json::object();
    std::vector<std::string> keys;
    for (const auto& [k, v] : sizes) keys.push_back(k);
    for (const auto& [k, v] : tot)
      if (!sizes.count(k)) keys.push_back(k);
    for (const auto& k : keys) {
      json e = {{"n", tot[k]}, {"space_bits", sizes.count(k) ? sizes[k] : 0.0}, {"classes", cnt[k]}, {"groups", json::object()}};
      for (const auto& g : outcome_groups()) {
        std::uint64_t x = 0;
        for (auto o : g.members) x += cnt[k][std::string(outcome_name(o))];
        e["groups"][std::string(g.name)] = rate_json(rate(x, tot[k], conf));
      }
      e["groups"]["critical_sdc"] = rate_json(rate(cnt[k]["critical_sdc"], tot[k], conf));
      d[k] = e;
    }
    by[dim] = d;
    json rw = {{"groups", json::object()}, {"classes", json::object()}};
    auto strat_for = [&](const std::function<bool(const std::string&)>& pred) {
      std::vector<StratumCount> sc;
      for (const auto& k : keys) {
        std::uint64_t x = 0;
        for (const auto& [cls, c] : cnt[k])
          if (pred(cls)) x += c;
        sc.push_back({sizes.count(k) ? sizes[k] : 0.0, x, tot[k]});
      }
      return strat_json(stratified_rate(sc, conf));
    };
    for (const auto& g : outcome_groups()) rw["groups"][std::string(g.name)] = strat_for([&](const std::string& cls) { return in_group(g, cls); });
    for (auto o : all_outcomes) {
      const std::string name(outcome_name(o));
      rw["classes"][name] = strat_for([&](const std::string& cls) { return cls == name; });
    }
    rw["coverage"] = rw["groups"]["sdc"]["coverage"];
    rew[dim] = rw;
  }
  rep["by"] = by;
  rep["reweighted"] = rew;
  rep["timing"] = {{"trial_seconds_total", wall}, {"trial_seconds_mean", n ? wall / static_cast<double>(n) : 0.0},
                   {"golden_seconds", golden_seconds}};
  // CPU time is what a trial costs on any load (wall time grows with the machine's other work).
  if (timed) rep["timing"].update({{"trial_cpu_seconds_total", cpu}, {"trial_cpu_seconds_mean", cpu / static_cast<double>(timed)}, {"trials_cpu_timed", timed}});
  return rep;
}

namespace {
/// ", numeric configuration ID" when the golden run's summary names one (docs/design/determinism.md).
std::string golden_numeric_text(const json& golden) {
  if (!golden.contains("summary")) return "";
  const auto id = detail::numeric_id_of(golden.at("summary"));
  return id ? ", numeric configuration " + *id : "";
}

std::string shortest(double x) {  // 0.01, 1e-05: as a person wrote it
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

/// "test_accuracy = 0.81, test_loss = 0.52" for the golden line: every metric with its golden value.
std::string metrics_text(const json& rep, const std::string& eq) {
  std::ostringstream o;
  if (rep.contains("metrics")) {
    for (std::size_t i = 0; i < rep.at("metrics").size(); ++i) {
      const json& m = rep.at("metrics").at(i);
      o << (i ? ", " : "") << m.at("name").get<std::string>() << eq << (m.at("golden").is_number() ? shortest(m.at("golden").get<double>()) : "?");
    }
  } else {
    o << rep.at("campaign").value("metric", std::string()) << eq << rep.at("golden").at("metric").get<double>();
  }
  return o.str();
}

/// The reasons of the unreadable summaries, one line each with its trials (the first ten), or "".
std::string unreadable_text(const json& rep, const std::string& bullet) {
  if (!rep.contains("unreadable_summaries") || rep.at("unreadable_summaries").empty()) return "";
  std::ostringstream o;
  std::uint64_t n = 0;
  for (const auto& [why, trials] : rep.at("unreadable_summaries").items()) n += trials.size();
  o << "\n" << n << " trial(s) wrote no summary the campaign could read (class unreadable_summary, group unknown):\n";
  for (const auto& [why, trials] : rep.at("unreadable_summaries").items()) {
    o << bullet << "  " << why << ": " << trials.size() << (trials.size() == 1 ? " trial (" : " trials (");
    for (std::size_t i = 0; i < trials.size() && i < 10; ++i) o << (i ? ", " : "") << trials.at(i).dump();
    o << (trials.size() > 10 ? ", ...)" : ")") << "\n";
  }
  return o.str();
}

/// The targets of a campaign of kind ec-train, as "row, mlp".
std::string in_memory_targets(const json& cfg) {
  std::string t;
  if (cfg.at("inject").contains("targets") && cfg.at("inject").at("targets").is_array())
    for (const auto& x : cfg.at("inject").at("targets"))
      if (x.is_string()) t += (t.empty() ? "" : ", ") + x.get<std::string>();
  return t;
}

}  // namespace

std::string report_text(const json& rep) {
  std::ostringstream o;
  const json& cfg = rep.at("campaign");
  const auto n = rep.at("trials").at("done").get<std::uint64_t>();
  o << "campaign " << cfg.value("name", std::string()) << ": " << n << "/" << rep.at("trials").at("planned") << " trials, model "
    << cfg.at("inject").value("model", std::string()) << " x" << cfg.at("inject").value("flips", 1);
  if (cfg.value("kind", std::string()) == "ec-train") o << ", in ec-train's memory (" << in_memory_targets(cfg) << ")";
  else o << ", fault space " << std::llround(rep.at("space").at("total_bits").get<double>()) << " bits";
  o << ", confidence " << rep.at("confidence").get<double>() << "\n";
  if (rep.at("golden").is_object())
    o << "golden " << metrics_text(rep, " = ")
      << (rep.at("golden").at("final_weights_xxh64").is_string() ? " (final weights known: bit-masked detectable)" : "")
      << golden_numeric_text(rep.at("golden")) << "\n";
  o << "\n" << pad("class", 16) << pad("count", 8) << pad("rate", 10) << pad("Wilson", 20) << "Clopper-Pearson\n";
  auto row = [&](const std::string& name, const json& r) {
    o << pad(name, 16) << pad(std::to_string(r.at("x").get<std::uint64_t>()), 8) << pad(pct(r.at("p").get<double>()), 10)
      << pad(ci(r.at("wilson")), 20) << ci(r.at("clopper_pearson")) << "\n";
  };
  for (const auto& [k, v] : rep.at("overall").at("classes").items())
    if (v.at("x").get<std::uint64_t>() > 0) row(k, v);
  o << "groups:\n";
  for (const auto& [k, v] : rep.at("overall").at("groups").items()) row(k, v);
  o << unreadable_text(rep, "");
  if (rep.contains("metrics")) {
    o << "\nby metric (trials in which it held, moved within its tolerance, beyond it, was non-finite):\n"
      << pad("metric", 20) << pad("tolerance", 20) << pad("held", 8) << pad("within", 8) << pad("beyond", 8) << "non-finite\n";
    for (const auto& m : rep.at("metrics")) {
      const json& v = m.at("verdicts");
      o << pad(m.at("name").get<std::string>(), 20)
        << pad(shortest(m.at("tolerance").get<double>()) + (m.at("higher_is_better").get<bool>() ? " (higher better)" : " (lower better)"), 20)
        << pad(v.at("masked").dump(), 8) << pad(v.at("tolerable").dump(), 8) << pad(v.at("critical").dump(), 8) << v.at("nonfinite").dump() << "\n";
    }
  }
  for (const char* dim : {"field", "role", "dtype", "bit"}) {
    const json& d = rep.at("by").at(dim);
    if (d.empty()) continue;
    o << "\nby " << dim << ":\n" << pad(dim, 12) << pad("n", 6) << pad("SDC", 10) << pad("SDC CP", 20) << pad("DUE", 10) << pad("DUE CP", 20)
      << "share of space\n";
    for (const auto& k : ordered_keys(d, dim)) {
      const json& v = d.at(k);
      if (v.at("n").get<std::uint64_t>() == 0 && std::string(dim) == "bit") continue;
      const double share = rep.at("space").at("total_bits").get<double>() > 0 ? v.at("space_bits").get<double>() / rep.at("space").at("total_bits").get<double>() : 0;
      o << pad(k, 12) << pad(std::to_string(v.at("n").get<std::uint64_t>()), 6) << pad(pct(v.at("groups").at("sdc").at("p").get<double>()), 10)
        << pad(ci(v.at("groups").at("sdc").at("clopper_pearson")), 20) << pad(pct(v.at("groups").at("due").at("p").get<double>()), 10)
        << pad(ci(v.at("groups").at("due").at("clopper_pearson")), 20) << pct(share) << "\n";
    }
  }
  const std::string sdim = rep.value("sampling_strata", std::string("none"));
  const std::string rdim = sdim == "none" ? "field" : sdim;
  const json& rw = rep.at("reweighted").at(rdim);
  o << "\nreweighted to the fault space by " << rdim << (sdim == "none" ? " (post-stratified)" : " (sampling strata)") << ", coverage "
    << pct(rw.at("coverage").get<double>()) << ":\n";
  for (const auto& [k, v] : rw.at("groups").items())
    o << "  " << pad(k, 12) << pad(pct(v.at("p").get<double>()), 10) << "Wilson " << pad(ci(v.at("wilson")), 20) << "CP " << ci(v.at("clopper_pearson"))
      << "  (n_eff " << std::llround(v.at("n_eff").get<double>()) << ")\n";
  return o.str();
}

std::string report_markdown(const json& rep, const std::vector<std::string>& plots) {
  std::ostringstream o;
  const json& cfg = rep.at("campaign");
  o << "# Campaign report: " << cfg.value("name", std::string()) << "\n\n";
  o << "- trials: " << rep.at("trials").at("done") << " of " << rep.at("trials").at("planned") << " planned\n";
  o << "- fault model: `" << cfg.at("inject").value("model", std::string()) << "`, " << cfg.at("inject").value("flips", 1)
    << " fault(s) per trial, role `" << cfg.at("inject").value("role", std::string()) << "`, bits `"
    << (cfg.at("inject").value("bits", std::string()).empty() ? "all" : cfg.at("inject").value("bits", std::string())) << "`, sampling strata `"
    << rep.value("sampling_strata", std::string("none")) << "`\n";
  if (cfg.value("kind", std::string()) == "ec-train")
    o << "- fault space: the memory of a running ec-train job, targets " << in_memory_targets(cfg) << " (not enumerated: no reweighting)\n";
  else
    o << "- fault space: " << std::llround(rep.at("space").at("total_bits").get<double>()) << " stored bits of `" << cfg.value("checkpoint", std::string()) << "`\n";
  if (rep.at("golden").is_object()) o << "- golden " << metrics_text(rep, ": ") << "\n";
  if (rep.contains("metrics")) {
    o << "- critical SDC: any metric worse than golden's by more than its tolerance (";
    for (std::size_t i = 0; i < rep.at("metrics").size(); ++i) {
      const json& m = rep.at("metrics").at(i);
      o << (i ? ", " : "") << m.at("name").get<std::string>() << " " << shortest(m.at("tolerance").get<double>())
        << (m.at("higher_is_better").get<bool>() ? ", higher is better" : ", lower is better");
    }
    o << "); masked: every metric equal to golden's\n";
  } else {
    o << "- critical SDC: " << cfg.value("metric", std::string()) << " worse than golden by more than " << cfg.value("tolerance", 0.0) << "\n";
  }
  o << "- intervals: " << 100 * rep.at("confidence").get<double>() << "% Wilson and Clopper-Pearson\n\n";
  o << "## Outcomes\n\n| class | count | rate | Wilson | Clopper-Pearson |\n|---|---:|---:|---|---|\n";
  for (const auto& [k, v] : rep.at("overall").at("classes").items())
    o << "| " << k << " | " << v.at("x") << " | " << pct(v.at("p").get<double>()) << " | " << ci(v.at("wilson")) << " | " << ci(v.at("clopper_pearson")) << " |\n";
  for (const auto& [k, v] : rep.at("overall").at("groups").items())
    o << "| **" << k << "** | " << v.at("x") << " | " << pct(v.at("p").get<double>()) << " | " << ci(v.at("wilson")) << " | " << ci(v.at("clopper_pearson")) << " |\n";
  if (const std::string u = unreadable_text(rep, "-"); !u.empty()) o << "\n## Unreadable summaries\n" << u;
  if (rep.contains("metrics")) {
    o << "\n## By metric\n\n| metric | tolerance | held | moved within | moved beyond | non-finite |\n|---|---|---:|---:|---:|---:|\n";
    for (const auto& m : rep.at("metrics")) {
      const json& v = m.at("verdicts");
      o << "| " << m.at("name").get<std::string>() << " | " << shortest(m.at("tolerance").get<double>())
        << (m.at("higher_is_better").get<bool>() ? " (higher is better)" : " (lower is better)") << " | " << v.at("masked") << " | "
        << v.at("tolerable") << " | " << v.at("critical") << " | " << v.at("nonfinite") << " |\n";
    }
  }
  o << "\n## Reweighted to the whole fault space\n\nStratified estimates (weights = stratum share of the stored bits; intervals from the "
       "effective sample size).\n\n| by | coverage | SDC | SDC CP | DUE | DUE CP |\n|---|---:|---:|---|---:|---|\n";
  for (const auto& [dim, rw] : rep.at("reweighted").items()) {
    const json& s = rw.at("groups").at("sdc");
    const json& d = rw.at("groups").at("due");
    o << "| " << dim << " | " << pct(rw.at("coverage").get<double>()) << " | " << pct(s.at("p").get<double>()) << " | " << ci(s.at("clopper_pearson"))
      << " | " << pct(d.at("p").get<double>()) << " | " << ci(d.at("clopper_pearson")) << " |\n";
  }
  for (const char* dim : {"field", "role", "dtype", "bit", "tensor"}) {
    const json& d = rep.at("by").at(dim);
    if (d.empty()) continue;
    o << "\n## By " << dim << "\n\n| " << dim << " | n | share of space | SDC | SDC CP | critical SDC | DUE | DUE CP |\n|---|---:|---:|---:|---|---:|---:|---|\n";
    for (const auto& k : ordered_keys(d, dim)) {
      const json& v = d.at(k);
      if (v.at("n").get<std::uint64_t>() == 0) continue;
      const double tot = rep.at("space").at("total_bits").get<double>();
      o << "| " << k << " | " << v.at("n") << " | " << pct(tot > 0 ? v.at("space_bits").get<double>() / tot : 0) << " | "
        << pct(v.at("groups").at("sdc").at("p").get<double>()) << " | " << ci(v.at("groups").at("sdc").at("clopper_pearson")) << " | "
        << pct(v.at("groups").at("critical_sdc").at("p").get<double>()) << " | " << pct(v.at("groups").at("due").at("p").get<double>()) << " | "
        << ci(v.at("groups").at("due").at("clopper_pearson")) << " |\n";
    }
  }
  if (!plots.empty()) {
    o << "\n## Plots\n\n";
    for (const auto& p : plots) o << "![" << p << "](" << p << ")\n\n";
  }
  return o.str();
}

CampaignEvidence campaign_evidence(const std::vector<std::string>& campaign_dirs) {
  CampaignEvidence out;
  std::vector<std::pair<std::string, nlohmann::json>> seen;  // directory, configuration
  for (const auto& dir : campaign_dirs) {
    const auto meta_path = stdfs::path(dir) / "campaign.json";
    nlohmann::json meta;
    std::string model, strata;
    std::uint64_t flips = 1;
    try {
      meta = nlohmann::json::parse(ckpt::fs::read_file(meta_path));
      const auto& inj = meta.at("config").at("inject");
      model = inj.at("model").get<std::string>();
      flips = inj.value("flips", std::uint64_t{1});
      strata = inj.value("strata", std::string("none"));
      out.space_bits = std::max(out.space_bits, meta.at("space").at("total_bits").get<double>());
      out.confidence = meta.at("config").value("confidence", 0.95);
    } catch (const nlohmann::json::exception& e) {
      throw CorruptInputError(meta_path.string() + ": not a campaign description: " + e.what());
    }
    if (flips != 1)
      out.warnings.push_back(dir + " injects " + std::to_string(flips) + " faults per trial; the fit assumes one");
    // Two campaigns of one fault model are pooled (their counts add); the same directory twice
    // would count its trials twice.
    for (const auto& other : campaign_dirs) {
      if (&other == &dir) break;
      std::error_code ec;
      if (stdfs::equivalent(other, dir, ec)) throw UsageError("--results " + dir + " is the same campaign as --results " + other + " (give it once)");
    }
    // Two campaigns that draw the same fault sites hold the same trials (a copy, a re-run, or the
    // same campaign under another name, trial count or command): the seed, the injection settings
    // and the golden checkpoint's bytes (its path as given, for a campaign.json older than them).
    const nlohmann::json identity = {{"seed", meta.at("config").value("seed", nlohmann::json())},
                                     {"inject", meta.at("config").at("inject")},
                                     {"golden", meta.contains("golden_xxh64") ? meta.at("golden_xxh64") : meta.at("config").value("checkpoint", nlohmann::json())}};
    for (const auto& [other, id] : seen)
      if (id == identity)
        throw UsageError("--results " + dir + " draws the same fault sites as --results " + other +
                         " (same seed, injection settings and golden checkpoint): the same trials; give one of them");
    seen.emplace_back(dir, identity);
    auto& pooled = out.per_model[model];
    const bool pooling = pooled.n > 0;
    PatternEvidence e;
    auto pool = [&] {
      pooled.n += e.n;
      pooled.sdc += e.sdc;
      pooled.critical_sdc += e.critical_sdc;
      pooled.due += e.due;
      if (pooling) out.notes.push_back(dir + ": pooled with the earlier --results of model " + model + " (" + std::to_string(pooled.n) + " trials in all)");
    };
    if (strata != "none") {
      // Stratified (unevenly allocated) campaign: the estimates reweighted to the whole fault space,
      // as effective counts (n_eff, p n_eff) of the report; one n for all three (the smallest
      // effective size: the widest intervals).
      const auto rep = build_report(dir);
      const auto& rw = rep.at("reweighted").at(strata);
      std::uint64_t n_crit = 0, n_due = 0, n_sdc = 0;
      auto eff = [](const nlohmann::json& r, std::uint64_t& n, std::uint64_t& x) {
        n = static_cast<std::uint64_t>(std::llround(r.at("n_eff").get<double>()));
        x = static_cast<std::uint64_t>(std::llround(r.at("p").get<double>() * r.at("n_eff").get<double>()));
      };
      eff(rw.at("classes").at("critical_sdc"), n_crit, e.critical_sdc);
      eff(rw.at("groups").at("due"), n_due, e.due);
      eff(rw.at("groups").at("sdc"), e.n, n_sdc);
      e.n = std::min({e.n, n_crit, n_due});
      e.sdc = std::min(n_sdc, e.n);
      e.critical_sdc = std::min(e.critical_sdc, e.n);
      e.due = std::min(e.due, e.n);
      out.notes.push_back(dir + ": stratified by " + strata + "; using the reweighted estimates (effective n " +
                          std::to_string(e.n) + ")");
      if (const auto u = rep.at("overall").at("groups").at("unknown").at("x").get<std::uint64_t>())
        out.warnings.push_back(dir + ": " + std::to_string(u) + " trial(s) wrote no summary the campaign could read (unreadable_summary): counted among the trials, in neither SDC nor DUE");
      pool();
      continue;
    }
    std::uint64_t unknown = 0;
    for (const auto& [t, r] : read_results(dir)) {
      // read_results refuses records whose class is not one of the outcome names.
      const auto o = outcome_from_name(r.at("class").get<std::string>());
      if (o && in_outcome_group("unknown", *o)) ++unknown;
      ++e.n;
      if (o == Outcome::critical_sdc) ++e.critical_sdc;
      if (o && in_outcome_group("sdc", *o)) ++e.sdc;
      if (o && in_outcome_group("due", *o)) ++e.due;
    }
    if (unknown)
      out.warnings.push_back(dir + ": " + std::to_string(unknown) + " trial(s) wrote no summary the campaign could read (unreadable_summary): counted among the trials, in neither SDC nor DUE");
    pool();
  }
  return out;
}

}  // namespace resil::inject

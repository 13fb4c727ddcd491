#include "resil/ecrm/config.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "resil/core/error.hpp"

namespace resil::ecrm {

std::string_view ft_name(Ft ft) noexcept {
  switch (ft) {
    case Ft::none: return "none";
    case Ft::ckpt: return "ckpt";
    default: return "ec";
  }
}

std::string_view commit_name(Commit c) noexcept { return c == Commit::in_step ? "in-step" : "next-step"; }

namespace {
// Decimal digits only: std::stoi would take "+5", " 5" and "0x5"-like prefixes.
template <class T>
bool decimal(std::string_view s, T& v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && s[0] >= '0' && s[0] <= '9' && ec == std::errc() && p == s.data() + s.size();
}
// "a,b," -> {"a", "b", ""}: an empty item is an error of the caller's, not skipped; "" -> {}.
std::vector<std::string> items(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; !text.empty();) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    out.push_back(text.substr(pos, comma - pos));
    if (comma == text.size()) break;
    pos = comma + 1;
  }
  return out;
}
}  // namespace

std::vector<FailSpec> parse_failures(const std::string& text) {
  std::vector<FailSpec> out;
  for (const auto& item : items(text)) {
    if (item.empty()) throw UsageError("--fail: an empty item in '" + text + "' (a stray comma?)");
    const auto at = item.find('@');
    FailSpec f;
    if (at == std::string::npos || !decimal(std::string_view(item).substr(0, at), f.rank) ||
        !decimal(std::string_view(item).substr(at + 1), f.step) || f.step < 1)
      throw UsageError("--fail: '" + item + "' is not RANK@STEP (rank >= 0, step >= 1, decimal digits)");
    for (const auto& g : out)
      if (g.rank == f.rank && g.step == f.step) throw UsageError("--fail: '" + item + "' is listed twice");
    out.push_back(f);
  }
  return out;
}

std::vector<KillSpec> parse_kills(const std::string& text) {
  std::vector<KillSpec> out;
  for (const auto& item : items(text)) {
    if (item.empty()) throw UsageError("--kill: an empty item in '" + text + "' (a stray comma?)");
    std::string spec = item;
    KillSpec k;
    if (const auto colon = spec.find(':'); colon != std::string::npos) {
      const std::string what = spec.substr(colon + 1);
      if (what != "node" && what != "scrub") throw UsageError("--kill: '" + item + "' is not RANK@STEP[:node|:scrub]");
      k.node = what == "node";
      k.in_repair = what == "scrub";
      spec.resize(colon);
    }
    std::vector<FailSpec> f;
    try {
      f = parse_failures(spec.empty() ? std::string("x") : spec);
    } catch (const UsageError&) {
    }
    if (f.size() != 1) throw UsageError("--kill: '" + item + "' is not RANK@STEP[:node|:scrub] (rank >= 0, step >= 1, decimal digits)");
    k.rank = f[0].rank;
    k.step = f[0].step;
    for (const auto& g : out)
      if (g.rank == k.rank && g.step == k.step) throw UsageError("--kill: '" + item + "' is listed twice");
    out.push_back(k);
  }
  if (out.size() > 64) throw UsageError("--kill: at most 64 items");
  return out;
}

std::string_view inject_target_name(InjectTarget t) noexcept {
  switch (t) {
    case InjectTarget::parity: return "parity";
    case InjectTarget::stripe: return "stripe";
    case InjectTarget::mlp: return "mlp";
    case InjectTarget::opt: return "opt";
    default: return "row";
  }
}

std::vector<InjectSpec> parse_injects(const std::string& text) {
  std::vector<InjectSpec> out;
  const char* form = "TARGET@STEP[:rank=R][:stripe=S][:members=J][:member=M][:row=W][:bits=B][:at=start|delta] (TARGET row|parity|stripe|mlp|opt)";
  for (const auto& item : items(text)) {
    if (item.empty()) throw UsageError("--inject: an empty item in '" + text + "' (a stray comma?)");
    const auto bad = [&](const std::string& why) { return UsageError("--inject: '" + item + "': " + why); };
    InjectSpec f;
    f.text = item;
    std::vector<std::string> parts;
    for (std::size_t pos = 0;;) {
      const auto c = item.find(':', pos);
      parts.push_back(item.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
      if (c == std::string::npos) break;
      pos = c + 1;
    }
    const auto at = parts[0].find('@');
    if (at == std::string::npos) throw bad(std::string("not ") + form);
    const std::string target = parts[0].substr(0, at);
    bool known = false;
    for (auto t : {InjectTarget::row, InjectTarget::parity, InjectTarget::stripe, InjectTarget::mlp, InjectTarget::opt})
      if (target == inject_target_name(t)) f.target = t, known = true;
    if (!known) throw bad("unknown target '" + target + "' (row, parity, stripe, mlp, opt)");
    if (!decimal(std::string_view(parts[0]).substr(at + 1), f.step) || f.step < 1) throw bad("the step must be decimal digits, >= 1");
    for (std::size_t i = 1; i < parts.size(); ++i) {
      const auto eq = parts[i].find('=');
      const std::string key = parts[i].substr(0, eq), val = eq == std::string::npos ? "" : parts[i].substr(eq + 1);
      bool ok = eq != std::string::npos;
      if (key == "rank") ok = ok && decimal(std::string_view(val), f.rank);
      else if (key == "stripe" && f.target == InjectTarget::stripe) ok = ok && decimal(std::string_view(val), f.stripe);
      else if (key == "members" && f.target == InjectTarget::stripe) ok = ok && decimal(std::string_view(val), f.members) && f.members >= 1;
      else if (key == "member" && f.target == InjectTarget::stripe) ok = ok && decimal(std::string_view(val), f.member);
      else if (key == "row" && f.target == InjectTarget::stripe) ok = ok && decimal(std::string_view(val), f.row);
      else if (key == "bits") ok = ok && decimal(std::string_view(val), f.bits) && f.bits >= 1 && f.bits <= 32;
      else if (key == "at" && f.target == InjectTarget::row) ok = ok && (val == "start" || val == "delta"), f.at_delta = val == "delta";
      else throw bad("'" + key + "' is not a key of target " + target + " (" + form + ")");
      if (!ok) throw bad("'" + parts[i] + "' is not a valid value (" + form + ")");
    }
    if (f.target == InjectTarget::stripe && f.rank >= 0) throw bad("target stripe flips the members' holders: give stripe=S, not rank=R");
    out.push_back(f);
  }
  return out;
}

std::vector<int> parse_mlp(const std::string& text, const std::string& option) {
  std::vector<int> out;
  for (const auto& item : items(text)) {
    int v = 0;
    if (!decimal(std::string_view(item), v) || v < 1 || v > max_mlp_width)
      throw UsageError(option + ": '" + item + "' in '" + text + "' is not a layer width in 1.." + std::to_string(max_mlp_width));
    out.push_back(v);
  }
  if (out.empty() || out.size() > 8) throw UsageError(option + ": '" + text + "' must list 1 to 8 hidden layer widths, like 512,256,64");
  return out;
}

std::string mlp_text(const std::vector<int>& sizes) {
  std::string s;
  for (int v : sizes) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

std::string Config::computation_json(int world) const {
  std::ostringstream o;
  o << "{\"world\":" << world << ",\"k\":" << k << ",\"m\":" << m << ",\"seed\":" << seed << ",\"tables\":" << tables
    << ",\"rows\":" << rows << ",\"dim\":" << dim << ",\"batch\":" << batch << ",\"rows_per_fragment\":" << rows_per_fragment
    << ",\"lr\":" << lr << ",\"mlp_lr\":" << mlp_lr << ",\"data\":" << nlohmann::json(data).dump();
  // Only when not the default: the checkpoints and segments of runs before these options match.
  if (!default_mlps())
    o << ",\"bottom_mlp\":" << nlohmann::json(bottom_mlp).dump() << ",\"top_mlp\":" << nlohmann::json(top_mlp).dump();
  o << "}";
  return o.str();
}

void Config::validate(int world) const {
  for (const auto& f : fail) {
    const std::string item = "--fail " + std::to_string(f.rank) + "@" + std::to_string(f.step);
    if (f.rank >= world) throw UsageError(item + ": there are only " + std::to_string(world) + " ranks (0.." + std::to_string(world - 1) + ")");
    // A failure after the last step would never happen: the run would pass for a recovery test.
    if (f.step > steps) throw UsageError(item + ": step " + std::to_string(f.step) + " is beyond --steps " + std::to_string(steps));
  }
  for (const auto& f : kill) {
    const std::string item = "--kill " + std::to_string(f.rank) + "@" + std::to_string(f.step);
    if (f.rank >= world) throw UsageError(item + ": there are only " + std::to_string(world) + " ranks (0.." + std::to_string(world - 1) + ")");
    if (f.step > steps) throw UsageError(item + ": step " + std::to_string(f.step) + " is beyond --steps " + std::to_string(steps));
    if (f.in_repair && !scrub) throw UsageError(item + ":scrub: a kill inside a scrub repair needs --scrub");
  }
  if (kill.size() + inject.size() > 64) throw UsageError("--kill and --inject: at most 64 items together");
  for (const auto& f : inject) {
    const std::string item = "--inject " + f.text;
    if (f.rank >= world) throw UsageError(item + ": there are only " + std::to_string(world) + " ranks (0.." + std::to_string(world - 1) + ")");
    if (f.step > steps) throw UsageError(item + ": step " + std::to_string(f.step) + " is beyond --steps " + std::to_string(steps));
    if ((f.target == InjectTarget::parity || f.target == InjectTarget::stripe) && ft != Ft::ec)
      throw UsageError(item + ": only --ft ec keeps parity");
    if (f.target == InjectTarget::stripe && (f.members > k + m || f.member >= k + m))
      throw UsageError(item + ": a stripe has k + m = " + std::to_string(k + m) + " members");
    if (f.bits > std::popcount(inject_allowed))
      throw UsageError(item + ": bits=" + std::to_string(f.bits) + " needs as many selected bits, and --inject-bits " + inject_bits + " selects " +
                       std::to_string(std::popcount(inject_allowed)));
    if (f.bits > 1 && inject_fault) throw UsageError(item + ": bits=" + std::to_string(f.bits) + " is a fault model of its own (random-bits:" +
                                                     std::to_string(f.bits) + "); drop it or --inject-model " + inject_model);
    if (f.row >= static_cast<int>(rows_per_fragment)) throw UsageError(item + ": a fragment has --rows-per-fragment " + std::to_string(rows_per_fragment) + " rows");
  }
  if (signal_at > steps)
    throw UsageError("--signal-at " + std::to_string(signal_at) + ": step " + std::to_string(signal_at) + " is beyond --steps " + std::to_string(steps));
  if (!kill.empty() && job_id.empty()) throw UsageError("--kill needs a --job-id (state segments) to be survived");
  if (k + m > world)
    throw UsageError("--k " + std::to_string(k) + " --m " + std::to_string(m) + " needs at least k + m = " + std::to_string(k + m) +
                     " ranks; this job has " + std::to_string(world));
  if (fallback_ckpt && ft != Ft::ec) throw UsageError("--fallback-ckpt goes with --ft ec");
  if (commit == Commit::in_step && ft != Ft::ec) throw UsageError("--commit in-step goes with --ft ec (only ec has parity deltas to commit)");
  if (scrub && ft != Ft::ec) throw UsageError("--scrub goes with --ft ec (it repairs with the parity)");
  if (!scrub && (scrub_sweep > 0 || !scrub_touched)) throw UsageError("--scrub-sweep and --scrub-cadence go with --scrub");
  if (scrub && !scrub_touched && scrub_sweep == 0) throw UsageError("--scrub-cadence sweep needs --scrub-sweep N > 0 (stripes per step)");
}

}  // namespace resil::ecrm

#include "resil/ecrm/config.hpp"

#include <algorithm>
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
      if (spec.substr(colon + 1) != "node") throw UsageError("--kill: '" + item + "' is not RANK@STEP[:node]");
      k.node = true;
      spec.resize(colon);
    }
    std::vector<FailSpec> f;
    try {
      f = parse_failures(spec.empty() ? std::string("x") : spec);
    } catch (const UsageError&) {
    }
    if (f.size() != 1) throw UsageError("--kill: '" + item + "' is not RANK@STEP[:node] (rank >= 0, step >= 1, decimal digits)");
    k.rank = f[0].rank;
    k.step = f[0].step;
    for (const auto& g : out)
      if (g.rank == k.rank && g.step == k.step) throw UsageError("--kill: '" + item + "' is listed twice");
    out.push_back(k);
  }
  if (out.size() > 64) throw UsageError("--kill: at most 64 items");
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
  }
  if (signal_at > steps)
    throw UsageError("--signal-at " + std::to_string(signal_at) + ": step " + std::to_string(signal_at) + " is beyond --steps " + std::to_string(steps));
  if (!kill.empty() && job_id.empty()) throw UsageError("--kill needs a --job-id (state segments) to be survived");
  if (k + m > world)
    throw UsageError("--k " + std::to_string(k) + " --m " + std::to_string(m) + " needs at least k + m = " + std::to_string(k + m) +
                     " ranks; this job has " + std::to_string(world));
  if (fallback_ckpt && ft != Ft::ec) throw UsageError("--fallback-ckpt goes with --ft ec");
  if (commit == Commit::in_step && ft != Ft::ec) throw UsageError("--commit in-step goes with --ft ec (only ec has parity deltas to commit)");
}

}  // namespace resil::ecrm

#include "resil/ecrm/config.hpp"

#include <sstream>
#include <stdexcept>

#include "resil/core/error.hpp"

namespace resil::ecrm {

std::string_view ft_name(Ft ft) noexcept {
  switch (ft) {
    case Ft::none: return "none";
    case Ft::ckpt: return "ckpt";
    default: return "ec";
  }
}

std::vector<FailSpec> parse_failures(const std::string& text) {
  std::vector<FailSpec> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto at = item.find('@');
    try {
      if (at == std::string::npos) throw std::invalid_argument("no @");
      std::size_t used = 0;
      FailSpec f;
      f.rank = std::stoi(item.substr(0, at), &used);
      if (used != at) throw std::invalid_argument("rank");
      f.step = std::stoll(item.substr(at + 1), &used);
      if (used != item.size() - at - 1) throw std::invalid_argument("step");
      if (f.rank < 0 || f.step < 1) throw std::invalid_argument("range");
      out.push_back(f);
    } catch (const std::logic_error&) {
      throw UsageError("--fail: '" + item + "' is not RANK@STEP (rank >= 0, step >= 1)");
    }
  }
  return out;
}

std::vector<KillSpec> parse_kills(const std::string& text) {
  std::vector<KillSpec> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
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
    if (f.size() != 1) throw UsageError("--kill: '" + item + "' is not RANK@STEP[:node] (rank >= 0, step >= 1)");
    k.rank = f[0].rank;
    k.step = f[0].step;
    out.push_back(k);
  }
  if (out.size() > 64) throw UsageError("--kill: at most 64 items");
  return out;
}

std::string Config::computation_json(int world) const {
  std::ostringstream o;
  o << "{\"world\":" << world << ",\"k\":" << k << ",\"m\":" << m << ",\"seed\":" << seed << ",\"tables\":" << tables
    << ",\"rows\":" << rows << ",\"dim\":" << dim << ",\"batch\":" << batch << ",\"rows_per_fragment\":" << rows_per_fragment
    << ",\"lr\":" << lr << ",\"mlp_lr\":" << mlp_lr << ",\"data\":\"" << data << "\"}";
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
  if (!kill.empty() && job_id.empty()) throw UsageError("--kill needs a --job-id (state segments) to be survived");
  if (k + m > world)
    throw UsageError("--k " + std::to_string(k) + " --m " + std::to_string(m) + " needs at least k + m = " + std::to_string(k + m) +
                     " ranks; this job has " + std::to_string(world));
  if (fallback_ckpt && ft != Ft::ec) throw UsageError("--fallback-ckpt goes with --ft ec");
}

}  // namespace resil::ecrm

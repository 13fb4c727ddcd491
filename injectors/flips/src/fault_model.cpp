#include "resil/inject/fault_model.hpp"

#include <bit>
#include <charconv>
#include <cmath>

#include <nlohmann/json.hpp>

#include "resil/ckpt/fs.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/select_expr.hpp"

namespace resil::inject {

namespace {

unsigned parse_k(std::string_view s, std::string_view spec, unsigned max) {
  unsigned v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v < 1 || v > max)
    throw UsageError("--model '" + std::string(spec) + "': K must be an integer in 1.." + std::to_string(max));
  return v;
}

std::uint64_t parse_hex_mask(const std::string& s, const std::string& source) {
  std::string_view v = s;
  if (v.starts_with("0x") || v.starts_with("0X")) v.remove_prefix(2);
  std::uint64_t m = 0;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), m, 16);
  if (v.empty() || ec != std::errc() || ptr != v.data() + v.size())
    throw CorruptInputError(source + ": mask '" + s + "' is not a 64-bit hex number");
  return m;
}

}  // namespace

PatternTable parse_pattern_table(std::string_view text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw CorruptInputError(source + ": not valid JSON: " + e.what());
  }
  PatternTable t;
  try {
    if (!j.is_object()) throw CorruptInputError(source + ": expected a JSON object with \"patterns\"");
    if (j.contains("anchor")) {
      const auto a = j.at("anchor").get<std::string>();
      if (a == "bit") t.anchored = true;
      else if (a == "word") t.anchored = false;
      else throw CorruptInputError(source + ": \"anchor\" must be \"bit\" or \"word\", not \"" + a + "\"");
    }
    const auto& pats = j.at("patterns");
    if (!pats.is_array() || pats.empty()) throw CorruptInputError(source + ": \"patterns\" must be a non-empty array");
    if (pats.size() > 65536) throw CorruptInputError(source + ": more than 65536 patterns");
    double total = 0;
    for (const auto& p : pats) {
      if (!p.is_object()) throw CorruptInputError(source + ": each pattern must be an object");
      PatternTable::Entry e;
      if (p.contains("mask")) {
        e.mask = parse_hex_mask(p.at("mask").get<std::string>(), source);
      } else if (p.contains("bits")) {
        for (const auto& b : p.at("bits")) {
          if (!b.is_number_integer()) throw CorruptInputError(source + ": bits must be integers 0..63");
          const auto bit = b.get<std::int64_t>();
          if (bit < 0 || bit > 63) throw CorruptInputError(source + ": bit " + std::to_string(bit) + " outside 0..63");
          e.mask |= std::uint64_t{1} << bit;
        }
      } else {
        throw CorruptInputError(source + ": a pattern needs \"mask\" or \"bits\"");
      }
      if (e.mask == 0) throw CorruptInputError(source + ": a pattern has an empty mask");
      const auto& w = p.contains("p") ? p.at("p") : p.contains("weight") ? p.at("weight") : nlohmann::json(1.0);
      // get<double> would read true as 1: a weight is a JSON number.
      if (!w.is_number()) throw CorruptInputError(source + ": pattern probabilities must be numbers, not " + w.dump());
      e.p = w.get<double>();
      if (!std::isfinite(e.p) || e.p < 0) throw CorruptInputError(source + ": pattern probabilities must be finite and >= 0");
      total += e.p;
      t.entries.push_back(e);
    }
    if (!(total > 0) || !std::isfinite(total)) throw CorruptInputError(source + ": pattern probabilities sum to zero or overflow");
    for (auto& e : t.entries) e.p /= total;
  } catch (const nlohmann::json::exception& e) {
    throw CorruptInputError(source + ": malformed pattern table: " + e.what());
  }
  return t;
}

FaultModel FaultModel::from_table(PatternTable t, std::string name) {
  FaultModel m;
  m.kind_ = Kind::pattern;
  m.table_ = std::move(t);
  m.name_ = std::move(name);
  return m;
}

FaultModel FaultModel::parse(std::string_view spec) {
  FaultModel m;
  const auto colon = spec.find(':');
  const std::string_view head = spec.substr(0, colon);
  const std::string_view arg = colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
  const bool has_arg = colon != std::string_view::npos;
  auto no_arg = [&] {
    if (has_arg) throw UsageError("--model '" + std::string(spec) + "': takes no argument");
  };
  if (head == "flip" || head == "bit-flip") {
    no_arg();
    m.kind_ = Kind::flip;
  } else if (head == "adjacent") {
    m.kind_ = Kind::adjacent;
    m.k_ = has_arg ? parse_k(arg, spec, 64) : 2;
  } else if (head == "random-bits") {
    m.kind_ = Kind::random_bits;
    m.k_ = has_arg ? parse_k(arg, spec, 64) : 2;
  } else if (head == "burst") {
    m.kind_ = Kind::burst;
    m.k_ = has_arg ? parse_k(arg, spec, 8) : 1;
  } else if (head == "stuck-at-0" || head == "stuck0") {
    no_arg();
    m.kind_ = Kind::stuck0;
  } else if (head == "stuck-at-1" || head == "stuck1") {
    no_arg();
    m.kind_ = Kind::stuck1;
  } else if (head == "random-value") {
    no_arg();
    m.kind_ = Kind::random_value;
  } else if (head == "zero") {
    no_arg();
    m.kind_ = Kind::zero;
  } else if (head == "pattern") {
    if (arg.empty()) throw UsageError("--model pattern:FILE.json needs a file name");
    const std::string file(arg);
    // An input like any other: a FIFO would block the read forever, /dev/zero never ends, a
    // directory or /dev/null is no table (exit 3 naming the path, not 4 "not valid JSON").
    ckpt::fs::require_input_file(file, "--model");
    return from_table(parse_pattern_table(ckpt::fs::read_file(file), file), std::string(spec));
  } else {
    throw UsageError("--model '" + std::string(spec) +
                     "': unknown fault model (flip, adjacent:K, random-bits:K, burst[:K], stuck-at-0, stuck-at-1, "
                     "random-value, zero, pattern:FILE.json)");
  }
  const bool takes_k = m.kind_ == Kind::adjacent || m.kind_ == Kind::random_bits || m.kind_ == Kind::burst;
  m.name_ = std::string(head == "bit-flip" ? "flip" : head == "stuck0" ? "stuck-at-0" : head == "stuck1" ? "stuck-at-1" : head);
  if (takes_k) m.name_ += ":" + std::to_string(m.k_);
  return m;
}

std::uint64_t FaultModel::apply(std::uint64_t old, unsigned width, unsigned anchor, std::uint64_t allowed, Rng& rng) const {
  const std::uint64_t wm = width_mask(width);
  const std::uint64_t bit = std::uint64_t{1} << anchor;
  switch (kind_) {
    case Kind::flip: return (old ^ bit) & wm;
    case Kind::adjacent: {
      // k bits upward from the anchor; near the top of the word the run slides down to fit.
      const unsigned k = std::min(k_, width);
      const unsigned start = std::min(anchor, width - k);
      return (old ^ (width_mask(k) << start)) & wm;
    }
    case Kind::random_bits: {
      // The anchor plus k-1 other distinct bits, drawn from the selected bits (all bits if too few).
      std::uint64_t pool = (allowed & wm) & ~bit;
      const unsigned k = std::min(k_, width);
      if (static_cast<unsigned>(std::popcount(pool)) < k - 1) pool = wm & ~bit;
      std::uint64_t mask = bit;
      for (unsigned i = 1; i < k; ++i) {
        const auto n = static_cast<std::uint64_t>(std::popcount(pool));
        auto pick = rng.below(n);
        std::uint64_t rest = pool;
        while (pick--) rest &= rest - 1;
        const std::uint64_t chosen = rest & (~rest + 1);
        mask |= chosen;
        pool &= ~chosen;
      }
      return (old ^ mask) & wm;
    }
    case Kind::burst: {
      // k consecutive bytes from the anchor's byte, each XORed with a random non-zero byte.
      std::uint64_t mask = 0;
      for (unsigned b = anchor / 8; b < anchor / 8 + k_ && b < width / 8; ++b)
        mask |= (rng.below(255) + 1) << (8 * b);
      return (old ^ mask) & wm;
    }
    case Kind::stuck0: return old & ~bit & wm;
    case Kind::stuck1: return (old | bit) & wm;
    case Kind::random_value: return rng() & wm;
    case Kind::zero: return 0;
    case Kind::pattern: {
      const double u = rng.uniform();
      double acc = 0;
      std::uint64_t mask = table_.entries.back().mask;
      for (const auto& e : table_.entries) {
        acc += e.p;
        if (u < acc) {
          mask = e.mask;
          break;
        }
      }
      if (table_.anchored) mask = anchor >= 64 ? 0 : mask << anchor;
      return (old ^ mask) & wm;
    }
  }
  return old;
}

}  // namespace resil::inject

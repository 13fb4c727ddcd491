// Site sampling: uniform over the selected stored bits, exact counts without replacement (Floyd),
// or an independent Bernoulli trial per stored bit (geometric gaps, cost proportional to hits).
#include <algorithm>
#include <bit>
#include <cmath>
#include <unordered_set>

#include "resil/inject/counts.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/sampling.hpp"

namespace resil::inject {

uint128_t below(Rng& rng, uint128_t n) {
  if (n <= (uint128_t{1} << 64)) return n == (uint128_t{1} << 64) ? rng() : rng.below(static_cast<std::uint64_t>(n));
  // n > 2^64: 128 random bits masked to the bit length of n - 1, rejected until below n (on
  // average fewer than 2 tries).
  const uint128_t top = n - 1;
  const int bits = 128 - std::countl_zero(static_cast<std::uint64_t>(top >> 64));
  const uint128_t mask = bits >= 128 ? ~uint128_t{0} : (uint128_t{1} << bits) - 1;
  for (;;) {
    const uint128_t hi = rng(), lo = rng();
    const uint128_t x = ((hi << 64) | lo) & mask;
    if (x < n) return x;
  }
}

namespace {
struct Hash128 {
  std::size_t operator()(uint128_t v) const noexcept {
    return std::hash<std::uint64_t>{}(static_cast<std::uint64_t>(v) ^ (static_cast<std::uint64_t>(v >> 64) * 0x9E3779B97F4A7C15ull));
  }
};
}  // namespace

std::vector<uint128_t> draw_without_replacement(uint128_t total, std::uint64_t n, Rng& rng) {
  if (n > total) throw UsageError("cannot draw " + std::to_string(n) + " distinct sites from " + count_string(total));
  if (n > max_sites) throw UsageError(std::to_string(n) + " sites exceed the limit of " + std::to_string(max_sites));
  // Floyd's algorithm: exactly n distinct values, each n-subset equally likely, O(n) draws.
  std::unordered_set<uint128_t, Hash128> chosen;
  chosen.reserve(n * 2);
  std::vector<uint128_t> out;
  out.reserve(n);
  for (uint128_t j = total - n; j < total; ++j) {
    const uint128_t t = below(rng, j + 1);
    const uint128_t v = chosen.insert(t).second ? t : (chosen.insert(j), j);
    out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint128_t> draw_bernoulli(uint128_t total, double p, Rng& rng) {
  if (!(p >= 0.0 && p <= 1.0)) throw UsageError("--ber must lie in [0, 1]");
  if (static_cast<double>(total) * p > static_cast<double>(max_sites))
    throw UsageError("--ber " + std::to_string(p) + " over " + count_string(total) + " bits expects more than " +
                     std::to_string(max_sites) + " flips");
  std::vector<uint128_t> out;
  if (p <= 0.0 || total == 0) return out;
  if (p >= 1.0) {
    for (uint128_t i = 0; i < total; ++i) out.push_back(i);
    return out;
  }
  // Gaps between successes of independent Bernoulli(p) trials are geometric: jump from hit to hit.
  const double log_q = std::log1p(-p);
  uint128_t pos = 0;
  for (;;) {
    double u = rng.uniform();
    while (u <= 0.0) u = rng.uniform();
    const double gap = std::floor(std::log(u) / log_q);
    if (gap >= static_cast<double>(total - pos)) break;
    pos += static_cast<uint128_t>(gap);
    out.push_back(pos);
    if (++pos >= total) break;
  }
  return out;
}

namespace {

// A sampling space: the union of (target, bit set) segments, each weighing numel x |bits|.
struct Segment {
  std::uint32_t target;
  std::vector<unsigned> bits;
  std::uint64_t numel;
  uint128_t weight() const noexcept { return static_cast<uint128_t>(numel) * bits.size(); }
};

std::vector<unsigned> bit_list(std::uint64_t m) {
  std::vector<unsigned> b;
  for (unsigned i = 0; i < 64; ++i)
    if ((m >> i) & 1) b.push_back(i);
  return b;
}

// Cannot overflow: at most 2^32 segments of at most (2^63 - 1) x 64 bits each.
uint128_t space_weight(const std::vector<Segment>& s) {
  uint128_t w = 0;
  for (const auto& g : s) w += g.weight();
  return w;
}

void map_sites(const std::vector<Segment>& space, const std::vector<uint128_t>& draws, std::vector<Site>& out) {
  std::size_t seg = 0;
  uint128_t base = 0;
  for (const uint128_t x : draws) {  // draws are sorted: walk the segments once
    while (x - base >= space[seg].weight()) {
      base += space[seg].weight();
      ++seg;
    }
    const uint128_t local = x - base;
    const auto nb = space[seg].bits.size();
    out.push_back({space[seg].target, static_cast<std::uint64_t>(local / nb), space[seg].bits[static_cast<std::size_t>(local % nb)]});
  }
}

}  // namespace

std::vector<Site> sample_sites(std::span<const Target> targets, const PlanOptions& opt) {
  if (opt.flips.has_value() == opt.ber.has_value()) throw UsageError("give exactly one of --flips N and --ber RATE");
  const std::uint64_t key = derive_seed(opt.seed, opt.trial);
  Rng rng(key, stream_sites);
  std::vector<std::vector<Segment>> strata;
  switch (opt.stratify) {
    case Stratify::none: {
      std::vector<Segment> all;
      for (std::uint32_t t = 0; t < targets.size(); ++t) all.push_back({t, bit_list(targets[t].allowed), targets[t].info.numel()});
      strata.push_back(std::move(all));
      break;
    }
    case Stratify::dataset:
      for (std::uint32_t t = 0; t < targets.size(); ++t)
        strata.push_back({{t, bit_list(targets[t].allowed), targets[t].info.numel()}});
      break;
    case Stratify::bits:
      for (unsigned b = 0; b < 64; ++b) {
        std::vector<Segment> s;
        for (std::uint32_t t = 0; t < targets.size(); ++t)
          if ((targets[t].allowed >> b) & 1) s.push_back({t, {b}, targets[t].info.numel()});
        if (!s.empty()) strata.push_back(std::move(s));
      }
      break;
  }
  std::vector<Site> sites;
  if (opt.ber) {
    if (opt.stratify != Stratify::none) throw UsageError("--stratify applies to --flips, not --ber");
    map_sites(strata[0], draw_bernoulli(space_weight(strata[0]), *opt.ber, rng), sites);
  } else {
    // Equal shares per stratum; the remainder goes to strata picked at random.
    const std::uint64_t n = *opt.flips, s = strata.size();
    Rng pick(key, stream_strata);
    const auto extra = draw_without_replacement(s, n % s, pick);
    for (std::uint64_t i = 0; i < s; ++i) {
      const std::uint64_t share = n / s + (std::binary_search(extra.begin(), extra.end(), i) ? 1 : 0);
      const uint128_t w = space_weight(strata[i]);
      if (share > w)
        throw UsageError("--flips " + std::to_string(n) + ": a stratum has only " + count_string(w) +
                         " selected stored bits (asked for " + std::to_string(share) + ")");
      Rng r(key, stream_sites + 16 + i);
      map_sites(strata[i], draw_without_replacement(w, share, s == 1 ? rng : r), sites);
    }
  }
  std::sort(sites.begin(), sites.end());
  return sites;
}

}  // namespace resil::inject
